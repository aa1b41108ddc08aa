#!/usr/bin/env bash
# rdmacm-utils.sh: Debian's rdma_cm programs (rping, ucmatose, rdma_client, perftest's
# ib_send_lat -R) on simverbs must fail cleanly: there is no rdma_cm kernel device, so they report
# an error and exit (any status, 99 included: simverbs' leak report of contexts librdmacm keeps),
# never crash on a signal (a wrong ibv_get_sysfs_path prototype made each of them segfault in librdmacm).
. "$(dirname "$0")/lib.sh"
sv_need_simverbs
sv_need_prog rping ucmatose
cmds=("rping -c -a 127.0.0.1 -C 1" "rping -s -a 127.0.0.1 -C 1" "ucmatose" "ucmatose -s 127.0.0.1")
command -v rdma_client >/dev/null 2>&1 && cmds+=("rdma_client -s 127.0.0.1")
command -v ib_send_lat >/dev/null 2>&1 && cmds+=("ib_send_lat -R -d simib0 127.0.0.1")
for c in "${cmds[@]}"; do
	# shellcheck disable=SC2086
	timeout "$SV_TIMEOUT" $c >"$SV_TMP/out" 2>&1
	rc=$?
	if [ "$rc" -eq 124 ]; then
		sv_fail "$c: hung (${SV_TIMEOUT}s)"
	elif [ "$rc" -gt 128 ] && [ "$rc" -lt 160 ]; then	# 255 is exit(-1), not a signal
		sv_fail "$c: killed by signal $((rc - 128)): $(tail -n 3 "$SV_TMP/out")"
	elif [ "$rc" -eq 0 ]; then
		sv_fail "$c: succeeded without an rdma_cm device?"
	else
		sv_log "$c: exit $rc, $(head -n 1 "$SV_TMP/out")"
	fi
done
sv_finish
