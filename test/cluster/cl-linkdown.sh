#!/usr/bin/env bash
# Rail 0's links taken down mid-run (2 hosts x 2 rails, RoCE; both hosts' rail-0 NICs, as when
# the rail's switch fails, during a bidirectional sendrecv, so that each side has requests in
# flight and reports its own plugin error before the other side's exit ends the run): both sides' comms on that rail fail with errors naming the port and the
# peer; comms on the other rail are unaffected; the links back up let new comms on rail 0
# connect and move data.
. "$(dirname "$0")/cl-common.sh"
export NCCL_SOCKET_IFNAME=mgmt0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET

cl_up --hosts 2 --nics 2
long=(-t sendrecv-bi -b 256K -e 256K -n 100000 -w 1)
cl_rank down h0 0 2 0 "${long[@]}"
cl_rank down h1 1 2 0 "${long[@]}"
PORT=$((PORT + 100))
cl_rank other h0 0 2 1 -t sendrecv -b 8 -e 1M -f 4 -n 200 -w 1
cl_rank other h1 1 2 1 -t sendrecv -b 8 -e 1M -f 4 -n 200 -w 1
# mid-run: once both rail-0 ranks have their comms (each its "connected to" and "accepted";
# rank 0's table alone does not say that rank 1 finished its side of the handshake, which a
# loaded machine can delay past a fixed pause) and rank 0 prints its results table; then data
# moves.
started() {
	local r
	grep -q 'size.*count' "$TMP/down.0" 2>/dev/null || return 1
	for r in 0 1; do
		grep -q 'NET/Verbs : connected to' "$TMP/down.$r" &&
			grep -q 'NET/Verbs : accepted' "$TMP/down.$r" || return 1
	done
}
cl_until 40 started || { cl_show down; fail "rail 0's run did not start"; }
sleep 0.5
"$SC" link h1 0 down & "$SC" link h0 0 down || fail "sim-cluster link h0 0 down"
wait $! || fail "sim-cluster link h1 0 down"
t0=$(date +%s)
set -- "${CL_PIDS[@]}"
CL_PIDS=("$1" "$2")
cl_wait
secs=$(( $(date +%s) - t0 ))
[ "$rc" = 2 ] || { cl_show down; fail "rail 0 down: $rc of 2 ranks failed (want both)"; }
[ "$secs" -le 20 ] || { cl_show down; fail "rail 0 down: took ${secs}s to fail"; }
grep -q 'path check' "$TMP"/down.* && { cl_show down; fail "rail 0 failed at connect, not mid-run"; }
grep -h 'WARN' "$TMP"/down.0 | grep 'mlx5_0:1' | grep -q '10\.250\.0\.2' ||
	{ cl_show down; fail "h0's error does not name its port mlx5_0:1 and the peer 10.250.0.2"; }
grep -h 'WARN' "$TMP"/down.1 | grep 'mlx5_0:1' | grep -q '10\.250\.0\.1' ||
	{ cl_show down; fail "h1's error does not name its port mlx5_0:1 and the peer 10.250.0.1"; }
echo "rail 0 down mid-run: both ranks failed in ${secs}s naming port and peer: ok"
CL_PIDS=("$3" "$4")
cl_wait
[ "$rc" = 0 ] || { cl_show other; fail "rail 1 was affected by rail 0's link going down"; }
grep -q 'Out of bounds values : 0 OK' "$TMP/other.0" || { cl_show other; fail "rail 1: values"; }
echo "rail 1 during rail 0's outage: unaffected: ok"
"$SC" link h0 0 up && "$SC" link h1 0 up || fail "sim-cluster link h0/h1 0 up"
cl_rank again h0 0 2 0 -t sendrecv -b 8 -e 64K -f 8 -n 2 -w 1
cl_rank again h1 1 2 0 -t sendrecv -b 8 -e 64K -f 8 -n 2 -w 1
cl_wait
[ "$rc" = 0 ] || { cl_show again; fail "rail 0 back up: new comms do not connect"; }
echo "rail 0 back up: new comms connect: ok"
