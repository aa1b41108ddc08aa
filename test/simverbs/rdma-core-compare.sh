#!/usr/bin/env bash
# rdma-core-compare.sh: compares two runs of rdma-core's pyverbs suite, test by test, from the
# DEV.outcomes files test/simverbs/rdma-core-tests.sh writes (e.g. simverbs' simroce0 and the
# kernel's rxe0, run with `rdma-core-tests.sh installed system` in a VM: docs/rxe.md).
#
#   test/simverbs/rdma-core-compare.sh A.outcomes B.outcomes
#
# Prints the number of tests in both, how many had the same outcome (ok, skip, fail or error;
# the skip reasons may differ), and each test whose outcome differs, with both outcomes and
# reasons; tests in only one file are listed too. Exit status 0 (a report, not a verdict).
set -u
[ $# -eq 2 ] && [ -r "$1" ] && [ -r "$2" ] || { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
awk -F'\t' -v an="$(basename "$1" .outcomes)" -v bn="$(basename "$2" .outcomes)" '
	FNR == NR { a[$1] = $2; ar[$1] = $3; next }
	{ b[$1] = $2; br[$1] = $3 }
	END {
		for (t in a) if (t in b) { n++; if (a[t] == b[t]) same++; else diff[t] = 1 }
		for (t in a) if (!(t in b)) onlya++
		for (t in b) if (!(t in a)) onlyb++
		printf "%d tests in both: %d same outcome, %d differ; %d only in %s, %d only in %s\n",
			n, same, n - same, onlya, an, onlyb, bn
		k = 0
		for (t in diff) list[++k] = t
		for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (list[j] < list[i]) { x = list[i]; list[i] = list[j]; list[j] = x }
		for (i = 1; i <= k; i++) {
			t = list[i]
			printf "%s\n    %s: %s %s\n    %s: %s %s\n", t, an, a[t], substr(ar[t], 1, 150), bn, b[t], substr(br[t], 1, 150)
		}
		for (t in a) if (!(t in b)) printf "only in %s: %s %s\n", an, t, a[t]
		for (t in b) if (!(t in a)) printf "only in %s: %s %s\n", bn, t, b[t]
	}' "$1" "$2"
