#!/usr/bin/env bash
# Unchanged Debian perftest ib_write_lat (RC, 8-byte RDMA write ping-pong, TCP exchange over
# loopback) on simverbs, InfiniBand and RoCE. The typical latency must be reported.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/perftest-lib.sh"
pt_setup ib_write_lat
for dev in simib0 simroce0; do
	pt_run "$dev-8b" ib_write_lat "$dev" lat -s 8 -n 1000
done
pt_run simib0-4k ib_write_lat simib0 lat -s 4096 -n 300
sv_finish
