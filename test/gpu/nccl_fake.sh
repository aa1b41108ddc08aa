#!/bin/sh
# The nccl-allreduce client's own logic, without a GPU: run over fake_nccl
# and fake_cudart (stand-ins for libnccl.so.2 and the CUDA runtime; they do
# not load the plugin - this tests the client, not NCCL or the plugin):
# 3 ranks pass with every element right and the log checks passing; a rank
# whose AllReduce result is off by one makes the run fail with #wrong > 0;
# a rank whose NCCL call fails makes it fail with the error and exit 2; no
# GPU is exit 77.
b="${NV_TOP_BUILDDIR:-.}"
c="$b/test/gpu/nccl-allreduce"
fake="$b/test/gpu/fake/.libs"
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
run() { # expected-rc description env... -- args
	want=$1; what=$2; shift 2
	env LD_LIBRARY_PATH="$fake" "$@" > "$d/out" 2>&1
	rc=$?
	if [ "$rc" != "$want" ]; then
		echo "FAIL: $what: exit $rc, expected $want"; cat "$d/out"; exit 1
	fi
	echo "ok: $what (exit $rc)"
}
run 0 "3 ranks, host staging" SIMVERBS_GPUDIRECT=0 "$c" -n 3 -b 8 -e 1M -f 8 -i 2 -l "$d" -g 0
cat "$d/out"
# every collective and size row shows 0 wrong; the 1 MiB end is included
rows=$(grep -c '^ *[0-9][0-9]* .* 0$' "$d/out")
[ "$rows" -ge 24 ] || { echo "FAIL: expected >= 24 table rows with 0 wrong, got $rows"; exit 1; }
grep -q '^ *1048576 ' "$d/out" || { echo "FAIL: no 1 MiB row"; exit 1; }
run 0 "2 ranks, GPUDirect expected and logged" SIMVERBS_GPUDIRECT=1 "$c" -n 2 -b 8 -e 64K -f 8 -l "$d" -g 1
run 1 "GPUDirect expected, log says host staging" SIMVERBS_GPUDIRECT=0 "$c" -n 2 -b 8 -e 64K -f 8 -l "$d" -g 1
run 1 "rank 1's AllReduce off by one" FAKE_NCCL_CORRUPT=1 "$c" -n 2 -b 8 -e 64K -f 8 -l "$d"
grep -q 'FAILED: 2 ranks, [1-9][0-9]* wrong element' "$d/out" || { echo "FAIL: wrong elements not reported"; cat "$d/out"; exit 1; }
run 2 "rank 0's AllGather fails" FAKE_NCCL_FAIL=0 "$c" -n 2 -b 8 -e 64K -f 8 -t 5 -l "$d"
grep -q 'rank 0 exited with 2: .*ncclAllGather' "$d/out" || { echo "FAIL: error not reported"; cat "$d/out"; exit 1; }
run 77 "no GPU" FAKE_CUDART_NO_GPU=1 "$c" -n 2 -l "$d"
exit 0
