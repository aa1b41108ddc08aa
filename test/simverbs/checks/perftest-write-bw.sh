#!/usr/bin/env bash
# Unchanged Debian perftest ib_write_bw (RC, TCP exchange over loopback) on simverbs, with the
# stand-in libmlx5/libefa: 64 KiB and 4 MiB messages on InfiniBand and RoCE, plus the
# ibv_post_send flow. Bandwidth must be reported (printed, not judged).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/perftest-lib.sh"
pt_setup ib_write_bw
for dev in simib0 simroce0; do
	pt_run "$dev-64k" ib_write_bw "$dev" bw -s 65536 -n 1000
	pt_run "$dev-4m" ib_write_bw "$dev" bw -s 4194304 -n 50
done
pt_run simib0-64k-oldpost ib_write_bw simib0 bw -s 65536 -n 1000 --use_old_post_send
sv_finish
