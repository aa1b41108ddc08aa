#!/usr/bin/env bash
# selftest.sh - make check's test of the real-device mode (test/device/run.sh):
#  1. test/device/tests.list holds every test of make check once, and nothing
#     else, each with a known mode, and sim/none entries with their reason;
#  2. the runner: --list plans real tests on D0, skips real2 with one device
#     and runs it with two; over fixture tests (a list of its own) it counts
#     PASS, FAIL (with the end of the log) and SKIP (the test's own 77 and a
#     sim entry), hands each test NV_TEST_DEVICES and NCCL_IB_HCA, exits 1
#     when a test failed, and 2 for a device libibverbs does not know;
#  3. the mode itself over simverbs' devices taken as real ones (make check's
#     LD_LIBRARY_PATH leads to simverbs): a few real tests on simib0, and the
#     real2 vNIC test on simib0,simib1. (All of them: run.sh --device simib0
#     under the same environment; docs/testing-real-devices.md.)
set -uo pipefail
src=${NV_TOP_SRCDIR:?} build=${NV_TOP_BUILDDIR:?}
run=$src/test/device/run.sh
list=$src/test/device/tests.list
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
errors=0
fail() { echo "selftest: FAIL: $*"; errors=$((errors + 1)); }

# ---- 1. the list -------------------------------------------------------------------
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$build" print-tests | tr ' ' '\n' |
	sed '/^$/d' | sort >"$tmp/make-tests" || { echo "selftest: make print-tests failed"; exit 99; }
[ -s "$tmp/make-tests" ] || { echo "selftest: make print-tests printed nothing"; exit 99; }
awk '!/^#/ && NF { print $1 }' "$list" | sort >"$tmp/list-tests"
missing=$(comm -23 "$tmp/make-tests" "$tmp/list-tests")
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$build" print-cuda-build-tests | tr ' ' '\n' |
	sed '/^$/d' | sort >"$tmp/cuda-tests" || { echo "selftest: make print-cuda-build-tests failed"; exit 99; }
# a test built only with CUDA's headers may be listed in a build without them
extra=$(comm -13 "$tmp/make-tests" "$tmp/list-tests" | comm -23 - "$tmp/cuda-tests")
dups=$(uniq -d "$tmp/list-tests")
[ -z "$missing" ] || fail "tests of make check missing from tests.list (add each with its mode):" $missing
[ -z "$extra" ] || fail "tests.list names tests make check does not have:" $extra
[ -z "$dups" ] || fail "tests.list names these more than once:" $dups
bad=$(awk '!/^#/ && NF && ($2 !~ /^(real|real2|gpu|sim|none)$/ ||
	($2 ~ /^(sim|none)$/ && NF < 3)) { print $1 " (" $2 ")" }' "$list")
[ -z "$bad" ] || fail "entries with an unknown mode, or sim/none without a reason:" "$bad"
echo "selftest: tests.list: $(wc -l <"$tmp/list-tests") tests ($(awk '!/^#/ && NF { print $2 }' "$list" |
	sort | uniq -c | awk '{ printf "%s%s %s", n++ ? ", " : "", $1, $2 }'))"

# ---- 2. the runner ------------------------------------------------------------------
"$run" --build "$build" --device simib0 --list >"$tmp/plan1" 2>&1 || fail "--list exited $?"
grep -q '^RUN   test/e2e/e2e_loopback on simib0$' "$tmp/plan1" || fail "--list: e2e_loopback not run on simib0"
grep -q '^SKIP  test/e2e/e2e_vnic: needs two devices' "$tmp/plan1" || fail "--list: e2e_vnic not skipped with one device"
grep -q '^SKIP  test/fault/fault_qp: needs simverbs: ' "$tmp/plan1" || fail "--list: fault_qp not skipped as sim"
"$run" --build "$build" --device simib0,simib1 --list --only e2e_vnic >"$tmp/plan2" 2>&1
grep -q '^RUN   test/e2e/e2e_vnic on simib0,simib1$' "$tmp/plan2" || fail "--list: e2e_vnic not run on two devices"

fx=$tmp/fx
mkdir -p "$fx/.libs" "$fx/t"
: >"$fx/.libs/libnccl-net-verbs.so"
printf '#!/bin/sh\nexit 0\n' >"$fx/t/pass"
printf '#!/bin/sh\necho "boom at the end"\nexit 3\n' >"$fx/t/fail"
printf '#!/bin/sh\necho "SKIP: no widget here"\nexit 77\n' >"$fx/t/skip"
printf '#!/bin/sh\n[ "$NV_TEST_DEVICES" = simib0 ] && [ "$NCCL_IB_HCA" = =simib0 ] && [ -f "$NV_TEST_PLUGIN" ]\n' >"$fx/t/env"
chmod +x "$fx"/t/*
printf '%s\n' "t/pass real" "t/fail real" "t/skip real" "t/env real" "t/never sim fault injection" \
	"t/pair real2" >"$tmp/fx.list"
rc=0
"$run" --build "$fx" --device simib0 --tests "$tmp/fx.list" --logs "$tmp/fxlogs" >"$tmp/fx.out" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "fixtures: exit $rc, want 1 (a test failed)"
tail -n 1 "$tmp/fx.out" | grep -qx '2 passed, 1 failed, 3 skipped' ||
	fail "fixtures: last line '$(tail -n 1 "$tmp/fx.out")', want '2 passed, 1 failed, 3 skipped'"
grep -q '^FAIL  t/fail (exit 3' "$tmp/fx.out" && grep -q '  | boom at the end' "$tmp/fx.out" ||
	fail "fixtures: the failure or the end of its log not shown"
grep -q '^SKIP  t/skip: the test skipped itself: SKIP: no widget here' "$tmp/fx.out" ||
	fail "fixtures: the test's own skip not reported with its reason"
grep -q '^SKIP  t/never: needs simverbs: fault injection' "$tmp/fx.out" || fail "fixtures: sim entry not skipped"
grep -q '^PASS  t/env' "$tmp/fx.out" || fail "fixtures: NV_TEST_DEVICES / NCCL_IB_HCA not given to the test"
[ "$errors" -eq 0 ] || sed 's/^/  fixtures| /' "$tmp/fx.out"
rc=0
"$run" --build "$fx" --device nosuch0 --tests "$tmp/fx.list" >"$tmp/nodev.out" 2>&1 || rc=$?
[ "$rc" -eq 2 ] && grep -q 'device nosuch0 not found' "$tmp/nodev.out" ||
	fail "an unknown device: exit $rc, want 2 and 'device nosuch0 not found': $(cat "$tmp/nodev.out")"

# ---- 3. the mode over simverbs' devices ------------------------------------------------
rc=0
"$run" --build "$build" --device simib0 --logs "$tmp/logs1" \
	--only e2e_loopback,e2e_handshake,fault_rules,fault_misroute >"$tmp/real1.out" 2>&1 || rc=$?
cat "$tmp/real1.out"
[ "$rc" -eq 0 ] && tail -n 1 "$tmp/real1.out" | grep -qx '4 passed, 0 failed, 0 skipped' ||
	fail "real tests on simib0: exit $rc, '$(tail -n 1 "$tmp/real1.out")', want '4 passed, 0 failed, 0 skipped'"
rc=0
SIMVERBS_DEVICES="simib0:ll=ib;simib1:ll=ib" "$run" --build "$build" --device simib0,simib1 \
	--logs "$tmp/logs2" --only e2e_vnic >"$tmp/real2.out" 2>&1 || rc=$?
cat "$tmp/real2.out"
[ "$rc" -eq 0 ] && tail -n 1 "$tmp/real2.out" | grep -qx '1 passed, 0 failed, 0 skipped' ||
	fail "e2e_vnic on simib0,simib1: exit $rc, '$(tail -n 1 "$tmp/real2.out")'"

[ "$errors" -eq 0 ] || exit 1
echo "selftest: PASS"
