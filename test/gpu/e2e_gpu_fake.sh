#!/bin/sh
# e2e_gpu over fakecuda (a stand-in libcuda.so.1 whose device memory the CPU
# cannot touch; test/simverbs/tests/fakecuda.c): the plugin's GPUDirect path
# without a GPU.  SIMVERBS_GPUDIRECT=1: simverbs shows the peer-memory marker
# and dma-buf, the plugin offers NCCL_PTR_CUDA|DMABUF, and device memory,
# a CUDA dma-buf and managed memory receive (flushed) and send correctly.
# SIMVERBS_GPUDIRECT=0: the plugin reports no GPUDirect (e2e_gpu skips, 77).
b="${NV_TOP_BUILDDIR:-.}"
fake="$b/test/simverbs/tests/fakecuda/.libs"
[ -e "$fake/libcuda.so.1" ] || { echo "fakecuda not built"; exit 1; }
root="/tmp/simverbs-$(id -u)/${SIMVERBS_FABRIC:-simverbs-$(id -u)}"
out=$(LD_LIBRARY_PATH="$fake:$LD_LIBRARY_PATH" SIMVERBS_GPUDIRECT=1 NCCL_VERBS_GDR_SYSFS_ROOT="$root" \
	"$b/test/e2e/e2e_gpu" 2>&1)
rc=$?
echo "$out"
if [ $rc != 0 ] || ! echo "$out" | grep -q "device memory: receive + flush + send ok; dma-buf: receive + flush ok"; then
	echo "FAIL: e2e_gpu over fakecuda with SIMVERBS_GPUDIRECT=1: exit $rc"
	exit 1
fi
out=$(LD_LIBRARY_PATH="$fake:$LD_LIBRARY_PATH" SIMVERBS_GPUDIRECT=0 NCCL_VERBS_GDR_SYSFS_ROOT="$root" \
	"$b/test/e2e/e2e_gpu" 2>&1)
rc=$?
echo "$out"
if [ $rc != 77 ] || ! echo "$out" | grep -q "does not offer NCCL_PTR_CUDA"; then
	echo "FAIL: e2e_gpu over fakecuda with SIMVERBS_GPUDIRECT=0: exit $rc, expected 77 (no GPUDirect)"
	exit 1
fi
exit 0
