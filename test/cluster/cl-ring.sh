#!/usr/bin/env bash
# 4 simulated hosts x 2 rails (RoCE, per-rail subnets joined by a router): an 8-rank ring
# AllReduce and sendrecv through nccl-net-bench, ranks joined with --rank/--nranks/--root over
# the management network (NCCL_SOCKET_IFNAME=mgmt0), every value checked. Rank r runs on host
# r%4 on rail r/4, so the ring crosses hosts on both rails and, twice, from rail 0 to rail 1
# through the router. Per host, GID auto-selection picks that host's own rail address (never
# loopback, never another host's).
. "$(dirname "$0")/cl-common.sh"

cl_up --hosts 4 --nics 2
export NCCL_SOCKET_IFNAME=mgmt0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET
for r in 0 1 2 3 4 5 6 7; do
	cl_rank ring "h$((r % 4))" "$r" 8 "$((r / 4))" -t allreduce,sendrecv -b 8 -e 256K -f 8 \
		-n 3 -w 1
done
cl_wait
[ "$rc" = 0 ] || { cl_show ring; fail "$rc of 8 ranks failed"; }
n=$(grep -c 'Out of bounds values : 0 OK' "$TMP/ring.0")
[ "$n" = 2 ] || { cl_show ring 60; fail "rank 0 reported $n of 2 tests OK"; }
grep -q FAILED "$TMP"/ring.* && { cl_show ring; fail "wrong values"; }
# GID selection per host and rail: the host's own rail address
for r in 0 1 2 3 4 5 6 7; do
	h=h$((r % 4)) k=$((r / 4))
	want=$(cl_addr "$h" $((3 + k)))
	line=$(grep -m1 "mlx5_$k:1 GID" "$TMP/ring.$r") || { cl_show ring; fail "rank $r: no GID line"; }
	case $line in
	*"$want"*) ;;
	*) fail "rank $r on $h rail $k selected '$line', not its own address $want" ;;
	esac
	case $line in *127.0.0.1*|*"::1 "*) fail "rank $r selected a loopback GID: $line" ;; esac
done
echo "8-rank ring allreduce + sendrecv over 4 hosts x 2 rails: ok; each rank's GID is its host's rail address"
