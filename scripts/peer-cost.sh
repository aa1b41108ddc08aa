#!/usr/bin/env bash
# peer-cost.sh - what idle comm pairs cost, our plugin and NCCL's own IB
# transport side by side: for each N in PC_PAIRS (default "256 1024"), one
# two-process run per transport of `nccl-net-bench --pairs N` (rank 0 opens N
# send comms to rank 1, which accepts N receive comms, as NCCL opens a comm
# pair per peer and channel), on simverbs unless the machine has an RDMA
# device (then the verbs object counts are not known and print as -1).
#
# Prints per comm pair (a send comm plus a receive comm): the time to connect
# all N, resident memory, registered (pinned) bytes, QPs, CQs, MRs, file
# descriptors, threads; and the transport's first error line when a run
# fails (a device limit ran out, for instance).
#
# Environment: NV_BUILD_DIR (default build/), PC_PAIRS, PC_TIMEOUT (seconds per
# run, default 300), NCCL_NET_BENCH_NCCL_LIB (NCCL library; default the CUDA
# toolkit's; NCCL's column is left out when it is not there), PC_PLUGINS
# (default "verbs nccl-ib"). Extra arguments go to nccl-net-bench.
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=$(cd "${NV_BUILD_DIR:-$top/build}" && pwd)
BENCH=$B/nccl-net-bench
PLUGIN=$B/.libs/libnccl-net-verbs.so
for f in "$BENCH" "$PLUGIN"; do
	[ -e "$f" ] || { echo "peer-cost: $f was not built" >&2; exit 1; }
done
if [ -z "$(ls -A /sys/class/infiniband 2>/dev/null)" ]; then
	export LD_LIBRARY_PATH="$B/test/simverbs/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	export SIMVERBS_FABRIC="nvpeers-$$-$(date +%s)"
fi
unset SIMVERBS_LEAK_CHECK
nccl_lib=${NCCL_NET_BENCH_NCCL_LIB:-/usr/local/cuda/lib64/libnccl.so.2}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/peer-cost.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# field NAME LINE: the value of NAME=... in a `pairs:` line
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }

fabric=simverbs
[ -n "${SIMVERBS_FABRIC:-}" ] || fabric="RDMA devices"
printf '# peer-cost: idle comm pairs on %s, %s, load average %s\n' "$fabric" \
	"$(date -u +%FT%TZ)" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '# per comm pair = one send comm + one receive comm; RSS and pinned in KiB\n'
printf '%-8s %6s %10s %10s %9s %9s %9s %6s %6s %6s %8s\n' transport pairs "connect s" \
	"us/pair" "RSS KiB" "pinned" "send/recv" QPs CQs MRs fds/thr
rc=0
for n in ${PC_PAIRS:-256 1024}; do
	for pl in ${PC_PLUGINS:-verbs nccl-ib}; do
		spec=$PLUGIN
		if [ "$pl" = nccl-ib ]; then
			[ -e "$nccl_lib" ] || continue
			spec="nccl-ib:$nccl_lib"
		fi
		out=$tmp/$pl-$n.out
		"$BENCH" -p "$spec" --pairs "$n" -T "${PC_TIMEOUT:-300}" "$@" >"$out" 2>&1
		line=$(grep '^pairs: ' "$out")
		if [ -z "$line" ]; then
			printf '%-8s %6s  failed: %s\n' "$pl" "$n" \
				"$(grep -m1 -E 'WARN|error' "$out" | cut -c1-300)"
			rc=1
			continue
		fi
		awk -v pl="$pl" -v n="$n" -v l="$line" 'BEGIN {
			k = split(l, kv, " ")
			for (i = 2; i <= k; i++) { split(kv[i], p, "="); v[p[1]] = p[2] }
			printf "%-8s %6d %10.3f %10.1f %9.1f %9.1f %4.0f/%-4.0f %6.2f %6.2f %6.2f %4.1f/%.2f\n",
				pl, n, v["connect_s"], v["connect_s"] * 1e6 / n,
				v["send_rss_kib"] + v["recv_rss_kib"],
				v["send_pinned_kib"] + v["recv_pinned_kib"],
				v["send_pinned_kib"], v["recv_pinned_kib"],
				v["send_qp"] + v["recv_qp"], v["send_cq"] + v["recv_cq"],
				v["send_mr"] + v["recv_mr"], v["send_fd"] + v["recv_fd"],
				v["send_threads"] + v["recv_threads"]
		}'
	done
done
exit $rc
