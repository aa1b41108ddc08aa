#!/usr/bin/env bash
# Port failover across hosts (NCCL_IB_RESILIENCY_PORT_FAILOVER=1): a virtual NIC fusing both
# rails of 2 simulated hosts (RoCE) runs a bidirectional sendrecv; h0's rail-1 link is cut
# mid-run (sim-cluster link: its port goes down, the peer's operations towards it time out).
# Both ranks finish the run with every value right, over rail 0 alone; each comm gave one
# WARN naming the failed port; with recovery on, the link back up mid-run brings rail 1 back into
# both comms of both ranks; without failover the same cut fails the run.
. "$(dirname "$0")/cl-common.sh"
export NCCL_SOCKET_IFNAME=mgmt0 NCCL_DEBUG=WARN

cl_up --hosts 2 --nics 2
run() { # NAME FAILOVER [RECOVER]: both ranks, h0's rail 1 cut once the run is moving data
	export NCCL_IB_RESILIENCY_PORT_FAILOVER=$2 NCCL_IB_RESILIENCY_PORT_RECOVERY=${3:-0}
	for r in 0 1; do
		cl_rank "$1" "h$r" "$r" 2 0 --vdev 0,1 -t sendrecv-bi -b 256K -e 256K -n "${4:-12000}" -w 1
	done
	for ((i = 0; i < 400; i++)); do
		grep -q 'size.*count' "$TMP/$1.0" 2>/dev/null && break
		sleep 0.05
	done
	sleep 0.1
	"$SC" link h0 1 down || fail "sim-cluster link h0 1 down"
	if [ -n "${3:-}" ]; then # back up, once h0 failed over, while the run goes on
		for ((i = 0; i < 200; i++)); do
			grep -q 'PORT_FAILOVER: going on' "$TMP/$1.0" 2>/dev/null && break
			sleep 0.05
		done
		"$SC" link h0 1 up || fail "sim-cluster link h0 1 up"
	fi
	cl_wait
	"$SC" link h0 1 up || fail "sim-cluster link h0 1 up"
}
run fo 1
[ "$rc" = 0 ] || { cl_show fo; fail "failover on: $rc rank(s) failed"; }
grep -q 'Out of bounds values : 0 OK' "$TMP/fo.0" || { cl_show fo 60; fail "values"; }
for r in 0 1; do
	n=$(grep -c 'WARN.*NCCL_IB_RESILIENCY_PORT_FAILOVER' "$TMP/fo.$r")
	[ "$n" = 2 ] || { cl_show fo 60; fail "rank $r: $n failover WARNs, want one per comm (2)"; }
	grep 'WARN.*NCCL_IB_RESILIENCY_PORT_FAILOVER' "$TMP/fo.$r" | grep -qv 'mlx5_1:1' &&
		{ cl_show fo 60; fail "rank $r: a failover WARN does not name mlx5_1:1"; }
done
echo "h0's rail 1 cut mid-run, failover on: both ranks finished, values right, one WARN per comm: ok"
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET NCCL_IB_RESILIENCY_PORT_RECOVERY_START_DELAY=50 run rec 1 1 24000
[ "$rc" = 0 ] || { cl_show rec; fail "recovery on: $rc rank(s) failed"; }
grep -q 'Out of bounds values : 0 OK' "$TMP/rec.0" || { cl_show rec 60; fail "recovery: values"; }
for r in 0 1; do
	n=$(grep 'recovered (NCCL_IB_RESILIENCY_PORT_RECOVERY)' "$TMP/rec.$r" | grep -c '2 QP(s)')
	[ "$n" -ge 2 ] || { cl_show rec 60; fail "rank $r: $n comms took rail 1 back (want 2)"; }
done
echo "h0's rail 1 cut and back mid-run, recovery on: both comms of both ranks took it back: ok"
run off 0
[ "$rc" -ge 1 ] || { cl_show off; fail "failover off: the cut did not fail the run"; }
echo "the same cut with failover off: the run fails as before: ok"
