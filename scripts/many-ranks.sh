#!/usr/bin/env bash
# many-ranks.sh - an all-to-all over many ranks on simulated hosts, launched as users
# launch jobs: test/cluster/sim-cluster (root, iproute2) with MR_HOSTS hosts (default 8),
# MR_PER_HOST ranks on each (default 8: 64 ranks) started by Open MPI's mpirun (Debian
# openmpi-bin; MR_LAUNCHER=mpirun, the default) or by Slurm's srun (MR_LAUNCHER=slurm:
# Debian slurmd, slurmctld, slurm-client and munge; one slurmctld in h0 and one slurmd per
# simulated host under its own hostname, started and stopped here, with the host's
# cgroup hierarchies mounted in its mount namespace for slurmd; munged must be running),
# every rank running nccl-net-bench -t alltoall over our plugin and NCCL's own
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
launcher=${MR_LAUNCHER:-mpirun}
case $launcher in
mpirun) command -v mpirun >/dev/null || { echo "many-ranks: no mpirun (Debian openmpi-bin)" >&2; exit 1; } ;;
slurm)
	for t in slurmctld slurmd srun; do
		command -v $t >/dev/null || { echo "many-ranks: no $t (Debian slurmctld, slurmd, slurm-client)" >&2; exit 1; }
	done
	pgrep -x munged >/dev/null || { echo "many-ranks: munged is not running (Debian munge)" >&2; exit 1; } ;;
*) echo "many-ranks: MR_LAUNCHER is mpirun or slurm" >&2; exit 1 ;;
esac
hosts=${MR_HOSTS:-8} per=${MR_PER_HOST:-8}
n=$((hosts * per))
perpeer=$(numfmt --from=iec "${MR_MAX_PER_PEER:-1M}")
nccl_lib=${NCCL_NET_BENCH_NCCL_LIB:-/usr/local/cuda/lib64/libnccl.so.2}
plugins=$B/.libs/libnccl-net-verbs.so
[ -e "$nccl_lib" ] && plugins="$plugins,nccl-ib:$nccl_lib"
export SIM_CLUSTER=${SIM_CLUSTER:-manyr}
hostlist=
for ((i = 0; i < hosts; i++)); do hostlist="$hostlist${hostlist:+,}h$i:$per"; done

printf '# many-ranks: %d hosts x %d ranks by %s, %s, load average %s\n' "$hosts" "$per" "$launcher" \
	"$(date -u +%FT%TZ)" "$(cut -d' ' -f1-3 /proc/loadavg)"
"$sc" up --hosts "$hosts" --build "$B" >/dev/null || { echo "many-ranks: sim-cluster up failed" >&2; exit 1; }
pids=()
slurm_dir=
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do
		for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
	done
	"$sc" down >/dev/null 2>&1
	[ -z "$slurm_dir" ] || rm -rf "$slurm_dir"
}
trap cleanup EXIT
BENCH=("$B/nccl-net-bench" -p "$plugins" --root 10.250.0.1:29501 -T "${MR_TIMEOUT:-1600}"
	-t alltoall -b $((8 * n)) -e $((perpeer * n)) -f 2 -n 2 -w 1 -B "${MR_BUFFSIZE:-128K}")

# slurm_up: slurm.conf for h0..h(hosts-1), slurmctld in h0, a slurmd per host; waits until idle
slurm_up() {
	local i
	slurm_dir=$(mktemp -d "${TMPDIR:-/tmp}/many-ranks-slurm.XXXXXX")
	export SLURM_CONF=$slurm_dir/slurm.conf
	{
		printf 'ClusterName=simc\nSlurmctldHost=h0(10.250.0.1)\nAuthType=auth/munge\n'
		printf 'CredType=cred/munge\nSlurmUser=root\nSlurmdUser=root\n'
		printf 'StateSaveLocation=%s/ctld\nSlurmdSpoolDir=%s/spool-%%n\n' "$slurm_dir" "$slurm_dir"
		printf 'SlurmctldPidFile=%s/ctld.pid\nSlurmdPidFile=%s/slurmd-%%n.pid\n' "$slurm_dir" "$slurm_dir"
		printf 'SlurmctldLogFile=%s/ctld.log\nSlurmdLogFile=%s/slurmd-%%n.log\n' "$slurm_dir" "$slurm_dir"
		printf 'ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSelectType=select/linear\n'
		printf 'SchedulerType=sched/builtin\nMpiDefault=none\nReturnToService=2\n'
		printf 'SlurmdParameters=config_overrides\nJobAcctGatherType=jobacct_gather/none\n'
		printf 'AccountingStorageType=accounting_storage/none\nSlurmdTimeout=300\n'
		printf 'SlurmctldTimeout=300\nMessageTimeout=60\n'
		for ((i = 0; i < hosts; i++)); do
			printf 'NodeName=h%d NodeAddr=10.250.0.%d CPUs=%d State=UNKNOWN\n' "$i" $((i + 1)) "$per"
		done
		printf 'PartitionName=sim Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE\n'
	} >"$SLURM_CONF"
	echo "CgroupPlugin=autodetect" >"$slurm_dir/cgroup.conf"
	mkdir -p "$slurm_dir/ctld"
	"$sc" exec h0 -- slurmctld -D -i -f "$SLURM_CONF" >"$slurm_dir/ctld.out" 2>&1 &
	pids+=($!)
	for ((i = 0; i < hosts; i++)); do
		# slurmd needs the cgroup hierarchies, which a host's fresh /sys lacks
		"$sc" exec h$i -- sh -c 'mountpoint -q /sys/fs/cgroup || { mount -t tmpfs none /sys/fs/cgroup &&
			for c in cpu cpuacct cpuset memory devices freezer pids; do
				mkdir -p /sys/fs/cgroup/$c && mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c; done &&
			mkdir -p /sys/fs/cgroup/systemd &&
			mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd; }' ||
			{ echo "many-ranks: cgroups for slurmd in h$i" >&2; return 1; }
		"$sc" exec h$i -- slurmd -D -N h$i -f "$SLURM_CONF" >"$slurm_dir/slurmd-h$i.out" 2>&1 &
		pids+=($!)
	done
	for i in $(seq 60); do
		[ "$("$sc" exec h0 -- sinfo -h -t idle -o %D 2>/dev/null)" = "$hosts" ] && return 0
		sleep 1
	done
	echo "many-ranks: the slurmds did not come up:" >&2
	tail -n 3 "$slurm_dir"/*.out >&2
	return 1
}

t0=$(date +%s)
export NCCL_SOCKET_IFNAME=mgmt0 NCCL_VERBS_CONNECT_TIMEOUT_MS="${MR_CONNECT_TIMEOUT_MS:-900000}"
if [ "$launcher" = slurm ]; then
	slurm_up || exit 1
	t0=$(date +%s)
	# each task enters its own simulated host's simverbs environment (srun passes h0's on)
	"$sc" exec h0 -- timeout -k 10 "$(( ${MR_TIMEOUT:-1600} + 60 ))" srun -N "$hosts" -n "$n" \
		--ntasks-per-node="$per" sh -c 'exec "$0" exec "$(hostname)" -- "$@"' "$sc" "${BENCH[@]}"
else
	"$sc" exec h0 -- timeout -k 10 "$(( ${MR_TIMEOUT:-1600} + 60 ))" mpirun --allow-run-as-root \
		--oversubscribe -np "$n" --host "$hostlist" --map-by slot \
		--mca plm_rsh_agent "$top/test/cluster/sim-cluster-rsh" --mca plm_rsh_no_tree_spawn 1 \
		--mca oob_tcp_if_include mgmt0 --mca btl_tcp_if_include mgmt0 -x NCCL_SOCKET_IFNAME \
		-x NCCL_VERBS_CONNECT_TIMEOUT_MS "${BENCH[@]}"
fi
rc=$?
printf '# many-ranks: exit %d after %d s, load average %s\n' "$rc" "$(($(date +%s) - t0))" \
	"$(cut -d' ' -f1-3 /proc/loadavg)"
exit "$rc"
