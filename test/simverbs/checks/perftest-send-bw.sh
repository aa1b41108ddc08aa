#!/usr/bin/env bash
# Unchanged Debian perftest ib_send_bw (RC SEND/RECV, TCP exchange over loopback) on simverbs,
# InfiniBand and RoCE. Bandwidth must be reported (printed, not judged).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/perftest-lib.sh"
pt_setup ib_send_bw
# perftest 4.5's destroy_ctx() does not destroy the receive CQ of a SEND bandwidth client (it
# only does for latency tests, the server, duplex or event mode), so simverbs' leak report would
# fail the client; the fabric is not at fault. The server keeps the leak check.
PT_CLIENT_ENV=SIMVERBS_LEAK_CHECK=0
for dev in simib0 simroce0; do
	pt_run "$dev-64k" ib_send_bw "$dev" bw -s 65536 -n 500
done
pt_run simib0-1m ib_send_bw simib0 bw -s 1048576 -n 50
sv_finish
