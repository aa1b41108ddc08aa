#!/usr/bin/env bash
# cpu-cost.sh - instructions the plugin's own object executes per message,
# counted by valgrind's callgrind, for our plugin and (when libnccl.so.2 is
# there and not stripped) for NCCL's built-in IB transport, with the ratios.
#
# Patterns (each run at two iteration counts N1 < N2 and differenced, so
# set-up and teardown cancel out; per message = difference / messages):
#   loopback  one process, a loopback send/recv pair on one device, rounds of
#             irecv + isend + test until both are done (nccl-net-bench --self):
#             on simverbs, which completes loopback work inside ibv_post_send,
#             every round makes the same calls, so this count does not depend
#             on load and repeats to the instruction
#   latency   two processes, the 8-byte-style ping-pong of nccl-net-bench -t
#             latency (2 messages per iteration, both ranks counted)
#   sendrecv  two processes, one direction (1 message per iteration)
# The two-process counts move with how often test() polls while waiting,
# which depends on load. Sizes: 8 B and 512 KiB.
#
# Environment: NV_BUILD_DIR (default build/), CC_N1/CC_N2 (loopback rounds,
# default 200/400), CC_P1/CC_P2 (two-process iterations, default 100/300),
# CC_REPS (two-process pairs, median reported; default 3),
# CC_PATTERNS (default "loopback latency sendrecv"), CC_SIZES (default
# "8 524288"), NCCL_NET_BENCH_NCCL_LIB (NCCL library; default the CUDA
# toolkit's). Prints a table; exits non-zero when a run fails.
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=$(cd "${NV_BUILD_DIR:-$top/build}" && pwd)
BENCH=$B/nccl-net-bench
PLUGIN=$B/.libs/libnccl-net-verbs.so
for f in "$BENCH" "$PLUGIN"; do
	[ -e "$f" ] || { echo "cpu-cost: $f was not built" >&2; exit 1; }
done
command -v valgrind >/dev/null || { echo "cpu-cost: valgrind is not installed" >&2; exit 1; }
if [ -z "$(ls -A /sys/class/infiniband 2>/dev/null)" ]; then
	export LD_LIBRARY_PATH="$B/test/simverbs/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	export SIMVERBS_FABRIC="nvcost-$$-$(date +%s)"
	fabric=simverbs
else
	fabric=real
fi
unset SIMVERBS_LEAK_CHECK
n1=${CC_N1:-200} n2=${CC_N2:-400} p1=${CC_P1:-100} p2=${CC_P2:-300} nrep=${CC_REPS:-3}
patterns=${CC_PATTERNS:-loopback latency sendrecv}
sizes=${CC_SIZES:-8 524288}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpucost.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

plugins=("$PLUGIN")
labels=(Verbs)
nccl=${NCCL_NET_BENCH_NCCL_LIB:-}
for f in /usr/local/cuda/lib64/libnccl.so.2 /usr/local/cuda/lib/libnccl.so.2; do
	[ -z "$nccl" ] && [ -r "$f" ] && nccl=$f
done
if [ -n "$nccl" ] && [ -r "$nccl" ] && "$BENCH" -p "nccl-ib:$nccl" -l >"$tmp/l" 2>&1; then
	plugins+=("nccl-ib:$nccl")
	labels+=(NCCL-IB)
else
	echo "# cpu-cost: NCCL's IB transport skipped: $(tail -n 1 "$tmp/l" 2>/dev/null ||
		echo "no libnccl.so.2")"
fi

# Self instructions of one object (path matching $2) summed over callgrind files $1*.
obj_ir() {
	awk -v want="$2" '
	function obname(s,   id, rest) {
		if (match(s, /^\([0-9]+\)/)) {
			id = substr(s, 1, RLENGTH); rest = substr(s, RLENGTH + 2)
			if (rest != "") name[id] = rest
			return name[id]
		}
		return s
	}
	FNR == 1 { delete name; ob = "" }
	/^ob=/ { ob = obname(substr($0, 4)); next }
	/^cob=/ { obname(substr($0, 5)); next }
	/^calls=/ { skip = 1; next }
	/^[0-9+*-]/ { if (skip) { skip = 0; next } if (index(ob, want)) sum += $NF; next }
	{ skip = 0 }
	END { printf "%.0f\n", sum }' "$1"*
}

# Calls of function $2 (the plugin's test()) summed over callgrind files $1*.
fn_calls() {
	awk -v want="$2" '
	FNR == 1 { delete fname }
	/^c?fn=/ { s = substr($0, index($0, "=") + 1)
		if (match(s, /^\([0-9]+\)/)) { id = substr(s, 1, RLENGTH); rest = substr(s, RLENGTH + 2)
			if (rest != "") fname[id] = rest; s = fname[id] }
		cur = (substr($0, 1, 1) == "c") ? s : ""; next }
	/^calls=/ { if (cur == want) { split(substr($0, 7), t, " "); n += t[1] } next }
	END { printf "%.0f\n", n }' "$1"*
}

# run PATTERN PLUGIN SIZE N OUT: one callgrind run, files OUT.*
run() {
	local vg=(valgrind --tool=callgrind --callgrind-out-file="$5.%p")
	case $1 in
	loopback) "${vg[@]}" "$BENCH" --self -p "$2" -b "$3" -n "$4" -w 10 ;;
	latency | sendrecv)
		"${vg[@]}" "$BENCH" -p "$2" -t "$1" -b "$3" -e "$3" -n "$4" -w 5 -c 0 \
			--timeout 600 ;;
	esac >"$5.log" 2>&1 || { echo "cpu-cost: $1 $3 B with $2 failed:" >&2; tail -n 20 "$5.log" >&2; exit 1; }
}

# per_msg PATTERN PLUGIN SIZE OBJ TESTFN: instructions per message; for the
# two-process patterns (median over CC_REPS differenced pairs, as their polls
# vary) followed by "/T": the test() calls per message behind that figure
per_msg() {
	local a b ta tb lo hi msgs reps=1 two=1 k vals=()
	case $1 in loopback) lo=$n1 hi=$n2 msgs=1 two=0 ;; latency) lo=$p1 hi=$p2 msgs=2 reps=$nrep ;; *) lo=$p1 hi=$p2 msgs=1 reps=$nrep ;; esac
	for k in $(seq 1 "$reps"); do
		run "$1" "$2" "$3" "$lo" "$tmp/a"
		run "$1" "$2" "$3" "$hi" "$tmp/b"
		a=$(obj_ir "$tmp/a." "$4"); ta=$(fn_calls "$tmp/a." "$5")
		b=$(obj_ir "$tmp/b." "$4"); tb=$(fn_calls "$tmp/b." "$5")
		rm -f "$tmp"/a.* "$tmp"/b.*
		vals+=("$(awk -v a="$a" -v b="$b" -v ta="$ta" -v tb="$tb" -v n=$((hi - lo)) -v m=$msgs \
			'BEGIN { printf "%.0f %.1f", (b - a) / n / m, (tb - ta) / n / m }')")
	done
	printf '%s\n' "${vals[@]}" | sort -n | awk -v two=$two '{ v[NR] = $1; t[NR] = $2 }
		END { k = int((NR + 1) / 2); if (two) printf "%s/%s\n", v[k], t[k]; else print v[k] }'
}

echo "# cpu-cost on $fabric: instructions of the plugin's own object per message (callgrind)"
echo "# two-process rows: instructions/test() calls per message (polls while waiting included)"
printf "%-9s %8s" pattern size
for l in "${labels[@]}"; do printf " %13s" "$l"; done
[ ${#plugins[@]} -gt 1 ] && printf " %7s" ratio
echo
for pat in $patterns; do
	for s in $sizes; do
		printf "%-9s %8s" "$pat" "$s"
		vals=()
		for i in "${!plugins[@]}"; do
			obj=libnccl-net-verbs.so testfn=nv_test
			[ "${labels[$i]}" = NCCL-IB ] && obj=$(basename "$nccl") testfn="ncclIbTest(void*, int*, int*)"
			v=$(per_msg "$pat" "${plugins[$i]}" "$s" "$obj" "$testfn")
			vals+=("${v%%/*}")
			printf " %13s" "$v"
		done
		[ ${#vals[@]} -gt 1 ] &&
			awk -v a="${vals[0]}" -v b="${vals[1]}" 'BEGIN { printf " %7.2f", (b > 0 ? a / b : 0) }'
		echo
	done
done
