#!/usr/bin/env bash
# many-ranks.sh - an all-to-all over many ranks on simulated hosts, launched as users
# launch jobs: test/cluster/sim-cluster (root, iproute2) with MR_HOSTS hosts (default 8),
# Open MPI's mpirun (Debian openmpi-bin) starting MR_PER_HOST ranks on each (default 8:
# 64 ranks), every rank running nccl-net-bench -t alltoall over our plugin and NCCL's own
# IB transport in one run (sizes interleaved; NCCL's only when libnccl.so.2 is there),
# every byte checked. Sizes per peer from 8 B to MR_MAX_PER_PEER (default 1M), doubling.
#
# Prints, per transport, what connecting all n(n-1) comm pairs cost each process (time,
# resident memory, registered bytes, QPs, CQs, fds, threads: min / median / max over the
# ranks and per comm pair) and the busbw table of both. Figures of a run on a 2-core
# machine: docs/measurements.md ("Many peers").
#
# 64 busy-polling ranks on a 2-core machine starve each other: the connect deadline is
# raised (MR_CONNECT_TIMEOUT_MS, default 900000) so a connection whose peer does not get
# the CPU for 30 s is not given up. Environment: NV_BUILD_DIR (default build/), MR_HOSTS,
# MR_PER_HOST, MR_MAX_PER_PEER, MR_BUFFSIZE (-B, default 128K), MR_TIMEOUT (seconds,
# default 1600), NCCL_NET_BENCH_NCCL_LIB (default /usr/local/cuda/lib64/libnccl.so.2).
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=$(cd "${NV_BUILD_DIR:-$top/build}" && pwd)
sc=$top/test/cluster/sim-cluster
for f in "$B/nccl-net-bench" "$B/.libs/libnccl-net-verbs.so"; do
	[ -e "$f" ] || { echo "many-ranks: $f was not built" >&2; exit 1; }
done
command -v mpirun >/dev/null || { echo "many-ranks: no mpirun (Debian openmpi-bin)" >&2; exit 1; }
hosts=${MR_HOSTS:-8} per=${MR_PER_HOST:-8}
n=$((hosts * per))
perpeer=$(numfmt --from=iec "${MR_MAX_PER_PEER:-1M}")
nccl_lib=${NCCL_NET_BENCH_NCCL_LIB:-/usr/local/cuda/lib64/libnccl.so.2}
plugins=$B/.libs/libnccl-net-verbs.so
[ -e "$nccl_lib" ] && plugins="$plugins,nccl-ib:$nccl_lib"
export SIM_CLUSTER=${SIM_CLUSTER:-manyr}
hostlist=
for ((i = 0; i < hosts; i++)); do hostlist="$hostlist${hostlist:+,}h$i:$per"; done

printf '# many-ranks: %d hosts x %d ranks, %s, load average %s\n' "$hosts" "$per" \
	"$(date -u +%FT%TZ)" "$(cut -d' ' -f1-3 /proc/loadavg)"
"$sc" up --hosts "$hosts" --build "$B" >/dev/null || { echo "many-ranks: sim-cluster up failed" >&2; exit 1; }
trap '"$sc" down >/dev/null 2>&1' EXIT
t0=$(date +%s)
"$sc" exec h0 -- timeout -k 10 "$(( ${MR_TIMEOUT:-1600} + 60 ))" mpirun --allow-run-as-root \
	--oversubscribe -np "$n" --host "$hostlist" --map-by slot \
	--mca plm_rsh_agent "$top/test/cluster/sim-cluster-rsh" --mca plm_rsh_no_tree_spawn 1 \
	--mca oob_tcp_if_include mgmt0 --mca btl_tcp_if_include mgmt0 -x NCCL_SOCKET_IFNAME=mgmt0 \
	-x NCCL_VERBS_CONNECT_TIMEOUT_MS="${MR_CONNECT_TIMEOUT_MS:-900000}" \
	"$B/nccl-net-bench" -p "$plugins" --root 10.250.0.1:29501 -T "${MR_TIMEOUT:-1600}" \
	-t alltoall -b $((8 * n)) -e $((perpeer * n)) -f 2 -n 2 -w 1 -B "${MR_BUFFSIZE:-128K}"
rc=$?
printf '# many-ranks: exit %d after %d s, load average %s\n' "$rc" "$(($(date +%s) - t0))" \
	"$(cut -d' ' -f1-3 /proc/loadavg)"
exit "$rc"
