#!/bin/sh
# simverbs-ctl: commands run against $SIMVERBS_FABRIC, errors give exit 1.
set -u
ctl="${NV_TOP_BUILDDIR:-.}/test/simverbs/simverbs-ctl"
[ -x "$ctl" ] || { echo "no $ctl: skip"; exit 77; }
export SIMVERBS_FABRIC="${SIMVERBS_FABRIC:-svctl}-ctl"
fail() { echo "FAIL: $*"; exit 1; }

out=$("$ctl" status 2>&1) || fail "status: $out"
echo "$out" | grep -q "^fabric $SIMVERBS_FABRIC" || fail "status output: $out"
echo "$out" | grep -q "^proc " || fail "status lists no process: $out"
"$ctl" port-down simib0 1 || fail "port-down"
"$ctl" port-up simib0:1 || fail "port-up dev:port"
"$ctl" latency 1000 simroce0 || fail "latency per device"
"$ctl" bw-cap simib0 100 || fail "bw-cap"
"$ctl" gid-unreachable 10.1.2.3 || fail "gid-unreachable"
"$ctl" timeout-scale 0.5 || fail "timeout-scale"
"$ctl" reset || fail "reset"
"$ctl" leak-report || fail "leak-report"
out=$("$ctl" objects 2>&1) || fail "objects: $out"
echo "$out" | grep -Eq '^simverbs objects: context [0-9]+ pd [0-9]+ mr [0-9]+ cq [0-9]+ qp [0-9]+ .*pinned_bytes [0-9]+$' ||
	fail "objects output: $out"
for bad in "bogus" "port-down nosuchdev 1" "bw-cap nosuchdev 5" "qp-error 12345" \
	   "gid-unreachable not-a-gid" "timeout-scale -1"; do
	# shellcheck disable=SC2086
	if "$ctl" $bad 2>/dev/null; then fail "'$bad' succeeded"; fi
done
"$ctl" 2>/dev/null; [ $? -eq 2 ] || fail "no arguments should exit 2"
echo "simverbs-ctl commands and errors: ok"
