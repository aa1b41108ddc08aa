#!/usr/bin/env bash
# Unchanged Debian perftest ib_read_bw (RC RDMA READ, TCP exchange over loopback) on simverbs,
# InfiniBand and RoCE. Bandwidth must be reported (printed, not judged).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/perftest-lib.sh"
pt_setup ib_read_bw
for dev in simib0 simroce0; do
	pt_run "$dev-64k" ib_read_bw "$dev" bw -s 65536 -n 500
done
pt_run simib0-1m ib_read_bw simib0 bw -s 1048576 -n 50
sv_finish
