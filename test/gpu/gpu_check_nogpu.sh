#!/bin/sh
# make check: scripts/gpu-check.sh on a machine without a GPU says so and
# exits 77 before building or writing anything.  With a GPU present this test
# skips (the real check takes minutes: run scripts/gpu-check.sh).
s="${NV_TOP_SRCDIR:-.}/scripts/gpu-check.sh"
if "$s" --detect >/dev/null 2>&1; then
	echo "a GPU is present: run scripts/gpu-check.sh for the real check"
	exit 77
fi
msg=$("$s" --build /nonexistent 2>&1)
rc=$?
echo "$msg"
if [ "$rc" != 77 ] || ! echo "$msg" | grep -q "no GPU here"; then
	echo "FAIL: expected exit 77 and 'no GPU here' without a GPU, got exit $rc"
	exit 1
fi
[ ! -e /nonexistent ] || { echo "FAIL: the no-GPU path created its build folder"; exit 1; }
exit 0
