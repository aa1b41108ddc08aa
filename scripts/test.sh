#!/usr/bin/env bash
# The README's test command: set up a fresh Debian machine, build, and run the
# whole test suite over simverbs (make check), then the extra checks
# (make check-extra: fuzz pass, ThreadSanitizer, valgrind).
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$top/scripts/setup.sh"
cd "${NV_BUILD_DIR:-$top/build}"

# One closing line over every automake test log of this run.
summary() {
	local logs
	logs=$(find . -name '*.trs' -newer config.status 2>/dev/null || true)
	[ -n "$logs" ] || { echo "tests: 0 passed, 0 failed"; return; }
	# shellcheck disable=SC2086
	awk '/^:test-result:/ { r[$2]++ }
	     END { printf "tests: %d passed, %d failed, %d skipped\n",
	           r["PASS"] + r["XFAIL"], r["FAIL"] + r["ERROR"] + r["XPASS"], r["SKIP"] }' $logs
}

status=0
make -j"$(nproc)" check || status=$?
if [ $status -eq 0 ]; then
	make -j"$(nproc)" check-extra || status=$?
fi
if [ $status -ne 0 ]; then
	for f in $(find . -name '*.log' -newer config.status | xargs grep -l '^FAIL\|^ERROR' 2>/dev/null); do
		echo "==== $f"; tail -n 60 "$f"
	done
fi
summary
exit $status
