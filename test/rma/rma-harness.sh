#!/bin/sh
# The RMA harness cases: 4 ranks through the v15 table (with windows of 4 KiB
# and 1 MiB besides), 3 through v14, 2
# through v13 (the loader's other paths and the adapters), 1 rank alone, 4
# ranks with the last one killed, and 2 ranks on a device without atomics
# (createContext refused). Each under `timeout`, scaled for a loaded host.
set -u
h=${NV_TOP_BUILDDIR:-.}/test/rma/rma_harness
[ -x "$h" ] || { echo "no $h"; exit 1; }
[ -n "${SIMVERBS_FABRIC:-}" ] || { echo "not on simverbs: skip"; exit 77; }
export NCCL_IB_TIMEOUT=${NCCL_IB_TIMEOUT:-14}
fab=$SIMVERBS_FABRIC
fail=0
run() {
	name=$1; shift
	echo "== $name: rma_harness $*"
	if timeout 240 "$h" "$@"; then echo "== $name: ok"; else echo "== $name: FAILED ($?)"; fail=1; fi
}
SIMVERBS_FABRIC=$fab-a run "v15, 4 ranks, windows of 4 KiB and 1 MiB" -n 4 -W 4K,1M
SIMVERBS_FABRIC=$fab-b run "v14, 3 ranks" -n 3 -v 14
SIMVERBS_FABRIC=$fab-c run "v13, 2 ranks" -n 2 -v 13
SIMVERBS_FABRIC=$fab-d run "v15, 1 rank" -n 1
SIMVERBS_FABRIC=$fab-e run "v15, 4 ranks, the last killed" -n 4 -k
SIMVERBS_FABRIC=$fab-f SIMVERBS_DEVICES="simroce0:ll=eth,atomics=none" \
	run "no atomics, 2 ranks" -n 2 -A
exit $fail
