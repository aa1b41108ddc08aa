#!/usr/bin/env bash
# A real launcher on the simulated cluster: Open MPI's mpirun (run in h0) starts one
# nccl-net-bench per host through sim-cluster-rsh (plm_rsh_agent: enters the host instead of
# ssh); the bench takes its rank and size from OMPI_COMM_WORLD_*; a 4-host AllReduce with
# every value checked, and an all-to-all with every byte checked. Skips (77) without mpirun.
. "$(dirname "$0")/cl-common.sh"
command -v mpirun >/dev/null || skip "no mpirun (Debian openmpi-bin)"

cl_up --hosts 4
MPI=(timeout -k 5 90 mpirun --allow-run-as-root -np 4 --host h0,h1,h2,h3 --map-by node
	--mca plm_rsh_agent "$NV_TOP_SRCDIR/test/cluster/sim-cluster-rsh" --mca plm_rsh_no_tree_spawn 1
	--mca oob_tcp_if_include mgmt0 --mca btl_tcp_if_include mgmt0 -x NCCL_SOCKET_IFNAME=mgmt0)
cl_exec h0 -- "${MPI[@]}" sh -c 'echo "rank $OMPI_COMM_WORLD_RANK of $OMPI_COMM_WORLD_SIZE on $SIM_CLUSTER_HOST"' \
	>"$TMP/where" 2>&1 || { cat "$TMP/where"; fail "mpirun could not start processes on the hosts"; }
for r in 0 1 2 3; do
	grep -q "^rank $r of 4 on h$r\$" "$TMP/where" || { cat "$TMP/where"; fail "rank $r is not on h$r"; }
done
cl_exec h0 -- "${MPI[@]}" "$BENCH" --root "$(cl_addr h0 2):$PORT" -T 60 -t allreduce -b 8 -e 1M \
	-f 16 -n 3 -w 1 >"$TMP/ar" 2>&1 || { cat "$TMP/ar"; fail "mpirun nccl-net-bench failed"; }
grep -q '^# allreduce: 4 ranks' "$TMP/ar" && grep -q 'Out of bounds values : 0 OK' "$TMP/ar" &&
	! grep -q FAILED "$TMP/ar" || { cat "$TMP/ar"; fail "4-host allreduce under mpirun"; }
# all-to-all: a comm pair per peer (12), every byte checked against its sender and receiver
cl_exec h0 -- "${MPI[@]}" "$BENCH" --root "$(cl_addr h0 2):$((PORT + 1))" -T 60 -t alltoall -b 32 -e 4M \
	-f 32 -n 3 -w 1 -B 1M >"$TMP/a2a" 2>&1 || { cat "$TMP/a2a"; fail "mpirun nccl-net-bench alltoall failed"; }
grep -q '^# alltoall: 4 ranks' "$TMP/a2a" && grep -q 'Out of bounds values : 0 OK' "$TMP/a2a" &&
	! grep -q FAILED "$TMP/a2a" || { cat "$TMP/a2a"; fail "4-host alltoall under mpirun"; }
echo "mpirun over sim-cluster-rsh: 4 ranks on 4 hosts, allreduce values and alltoall bytes right: ok"
