#!/bin/sh
# nccl-net-verbs-info over simverbs: lists both devices, the picked RoCE GID,
# GPUDirect status, memlock and every knob; a bad knob makes it fail naming it.
INFO="${NV_TOP_BUILDDIR:-.}/nccl-net-verbs-info"
[ -x "$INFO" ] || { echo "no $INFO: skipped"; exit 77; }
out=$("$INFO" -g 2>&1) || { echo "$out"; echo "FAIL: info exited non-zero"; exit 1; }
fail=0
for want in "simib0" "simroce0" "auto-selected" "GPUDirect" "RLIMIT_MEMLOCK" \
	"NCCL_IB_HCA" "NCCL_IB_TIMEOUT" "NCCL_VERBS_CONNECT_TIMEOUT_MS" "=> ["; do
	case "$out" in
	*"$want"*) ;;
	*) echo "FAIL: output lacks '$want'"; fail=1 ;;
	esac
done
out=$(NCCL_IB_HCA='=simroce0' "$INFO" 2>&1)
case "$out" in *"dev 1:"*) echo "FAIL: NCCL_IB_HCA==simroce0 still shows two devices"; fail=1 ;; esac
case "$out" in *"skipped by NCCL_IB_HCA"*) ;; *) echo "FAIL: filtered port not explained"; fail=1 ;; esac
out=$(NCCL_IB_RETRY_CNT=9 "$INFO" 2>&1) && { echo "FAIL: bad knob accepted"; fail=1; }
case "$out" in *"NCCL_IB_RETRY_CNT=9"*) ;; *) echo "FAIL: bad knob not named: $out"; fail=1 ;; esac
[ $fail = 0 ] && echo "test-info: ok"
exit $fail
