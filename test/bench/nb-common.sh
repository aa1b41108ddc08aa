# Shared helpers for the nccl-net-bench tests (sourced, not run).
# The test environment (Makefile.am AM_TESTS_ENVIRONMENT) provides
# NV_TOP_BUILDDIR, NV_TEST_PLUGIN, SIMVERBS_FABRIC and LD_LIBRARY_PATH.
set -u
: "${NV_TOP_BUILDDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
BENCH="$NV_TOP_BUILDDIR/nccl-net-bench"
FAKE="$NV_TOP_BUILDDIR/test/bench/.libs/libnccl-net-nbfake.so"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/nbtest.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

fail() { echo "FAIL: $*"; exit 1; }

[ -x "$BENCH" ] || fail "$BENCH not built"

# run_bench NAME ARGS...: runs the benchmark under a hard timeout, output in
# $TMP/NAME.out, exit status in $rc, wall seconds in $secs.
run_bench() {
	local name=$1 t0 t1
	shift
	t0=$(date +%s.%N)
	timeout -k 5 90 "$BENCH" "$@" >"$TMP/$name.out" 2>&1
	rc=$?
	t1=$(date +%s.%N)
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	echo "== $name: rc=$rc ${secs}s: $BENCH $*"
}

show() { sed 's/^/    | /' "$TMP/$1.out" | tail -n "${2:-40}"; }

expect_ok() {
	[ "$rc" -eq 0 ] || { show "$1"; fail "$1 exited with $rc"; }
	if grep -q 'FAILED' "$TMP/$1.out"; then show "$1"; fail "$1 reported wrong values"; fi
}

# expect_fail NAME MAXSECS PATTERN: non-zero, prompt, and the message names the cause.
expect_fail() {
	[ "$rc" -ne 0 ] || { show "$1"; fail "$1 should have failed"; }
	[ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || { show "$1"; fail "$1 hung until the test timeout"; }
	awk -v s="$secs" -v m="$2" 'BEGIN { exit !(s <= m) }' || { show "$1"; fail "$1 took ${secs}s (> $2 s) to fail"; }
	grep -Eq "$3" "$TMP/$1.out" || { show "$1"; fail "$1: no message matching '$3'"; }
}

# count_ok NAME N: the run printed N 'Out of bounds values : 0 OK' lines.
count_ok() {
	local n
	n=$(grep -c 'Out of bounds values : 0 OK' "$TMP/$1.out")
	[ "$n" -eq "$2" ] || { show "$1"; fail "$1: $n of $2 tests reported OK"; }
}

check_svg() {
	[ -s "$1" ] || fail "no SVG written at $1"
	if command -v xmllint >/dev/null 2>&1; then
		xmllint --noout "$1" || fail "$1 is not well-formed XML"
	elif command -v python3 >/dev/null 2>&1; then
		python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$1" ||
			fail "$1 is not well-formed XML"
	fi
	head -c 200 "$1" | grep -q '<svg' || fail "$1 has no <svg> root"
	tail -n 1 "$1" | grep -q '</svg>' || fail "$1 does not end with </svg>"
	[ "$(grep -c '<polyline' "$1")" -ge "$2" ] || fail "$1 has fewer than $2 lines"
	grep -q 'bus bandwidth' "$1" || fail "$1 has no axis label"
}

# check_csv FILE ROWS: header, ROWS rows of 14 fields, no wrong values.
check_csv() {
	[ -s "$1" ] || fail "no CSV written at $1"
	head -n 1 "$1" | grep -q '^test,nranks,size,count,type,redop,time_us,algbw_GBps,busbw_GBps,wrong,' ||
		fail "$1: bad header"
	awk -F, -v want="$2" 'NR > 1 { n++; if (NF != 14 || $10 != 0 || $7 <= 0) bad++ }
		END { exit !(n == want && bad == 0) }' "$1" || { cat "$1"; fail "$1: rows wrong"; }
}
