#!/usr/bin/env bash
# NCCL_IB_SUBNET_AWARE_ROUTING on a rail-optimised RoCE cluster (2 hosts x 2 rails, each rail
# its own /24, the rails joined by a router): h0 is given device 0 (rail 0), the listener on h1
# device 1 (rail 1).
#  - knob off (the default, as NCCL): h0 connects from mlx5_0 to h1's rail-1 GID, through the
#    router (the QP INFO line says so: another subnet, routed); with the router down, that connect fails within seconds (the path check names
#    both GIDs);
#  - knob on: h0 connects from mlx5_1, the NIC on the listener's subnet, and moves data with
#    the router down (so the data went over rail 1, not through the router);
#  - a listener with the knob on accepts a knob-off connector from rail 0 on its rail-0 NIC;
#  - a fused NIC (mlx5_0+mlx5_1) is not kept when one of its ports is on another subnet than
#    the listener: the connector falls back to the single NIC that is (as NCCL); one whose
#    ports are all on the listener's subnets is kept;
#  - the router back up (the hosts' neighbour entries for it left FAILED by the outage): knob
#    off connects through it again (simverbs probes a FAILED entry again, as the kernel);
#  - NCCL_IB_SUBNET_PREFIX_LEN=15 makes 10.100/10.101 one subnet: no override;
#  - IPv6-only rails: the same choice by the GIDs' 64-bit subnet prefixes;
#  - InfiniBand: no effect (the knob is about RoCE subnets).
# Every byte is checked by the bench in every run that must succeed.
. "$(dirname "$0")/cl-common.sh"
export NCCL_SOCKET_IFNAME=mgmt0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET

# side NAME HOST RANK DEV "VAR=VALUE..." ARGS...: one rank of a 2-rank sendrecv, with its own
# environment (rank 0 on h0 connects to rank 1's listener on h1)
side() {
	local name=$1 host=$2 rank=$3 dev=$4 v
	for v in $5; do local -x "$v"; done
	shift 5
	cl_rank "$name" "$host" "$rank" 2 "$dev" -t sendrecv -b 8 -e 256K -f 8 -n 2 -w 1 "$@"
}
# pair NAME DEV0 DEV1 [H0ARGS...]: both ranks, h0's environment E0 and h1's E1 added
pair() {
	local name=$1 d0=$2 d1=$3
	shift 3
	side "$name" h0 0 "$d0" "${E0:-}" "$@"
	side "$name" h1 1 "$d1" "${E1:-}"
	cl_wait
}
ok() { # ok NAME WHAT: both ranks succeeded with every value right
	[ "$rc" = 0 ] || { cl_show "$1" 40; fail "$2: $rc rank(s) failed"; }
	grep -q 'Out of bounds values : 0 OK' "$TMP/$1.0" || { cl_show "$1" 40; fail "$2: values"; }
}
qp_line() { # qp_line NAME RANK LOCAL REMOTE: the QP INFO line names this device pair
	grep -q "QP 0x[0-9a-f]* $3:1 -> [0-9.:]* $4: " "$TMP/$1.$2" ||
		{ cl_show "$1" 40; fail "$1: rank $2 has no QP from $3 to the peer's $4"; }
}

cl_up --hosts 2 --nics 2 --subnets per-rail

export NCCL_IB_SUBNET_AWARE_ROUTING=0
pair off 0 1
ok off "knob off, router up"
qp_line off 0 mlx5_0 mlx5_1
grep -q 'subnet-aware routing' "$TMP"/off.* && { cl_show off; fail "knob off: the device was overridden"; }
grep -q 'GID ::ffff:10\.100\.0\.1 -> ::ffff:10\.101\.0\.2, another subnet (/24): routed' "$TMP/off.0" ||
	{ cl_show off 40; fail "knob off: the QP line does not say the path is routed"; }
echo "knob off: h0 connects from mlx5_0 (rail 0) to h1's mlx5_1 (rail 1) through the router: ok"

E1=NCCL_IB_SUBNET_AWARE_ROUTING=1 pair on 0 1
ok on "listener with the knob on, connector off"
qp_line on 0 mlx5_0 mlx5_0
grep -q 'subnet-aware routing: accepting on device 0 (mlx5_0) instead of 1' "$TMP/on.1" ||
	{ cl_show on 40; fail "the listener did not accept on its rail-0 NIC"; }
qp_line on 1 mlx5_0 mlx5_0
echo "listener with the knob on accepts a rail-0 connector on its own mlx5_0: ok"

NCCL_IB_SUBNET_AWARE_ROUTING=1 NCCL_IB_SUBNET_PREFIX_LEN=15 pair plen 0 1
ok plen "NCCL_IB_SUBNET_PREFIX_LEN=15"
grep -q 'subnet-aware routing' "$TMP"/plen.* && { cl_show plen; fail "/15: the device was overridden"; }
qp_line plen 0 mlx5_0 mlx5_1
grep -q 'GID ::ffff:10\.100\.0\.1 -> ::ffff:10\.101\.0\.2, same subnet (/15)$' "$TMP/plen.0" ||
	{ cl_show plen 40; fail "/15: the QP line does not say one subnet"; }
echo "NCCL_IB_SUBNET_PREFIX_LEN=15 (10.100/10.101 one subnet): no override: ok"

"$SC" router down || fail "sim-cluster router down"
t0=$(date +%s)
pair offnort 0 1
secs=$(( $(date +%s) - t0 ))
[ "$rc" = 2 ] || { cl_show offnort 40; fail "knob off, no router: $rc of 2 ranks failed (want both)"; }
[ "$secs" -le 20 ] || { cl_show offnort 40; fail "knob off, no router: took ${secs}s to fail"; }
grep 'path check' "$TMP/offnort.0" | grep 'local mlx5_0:1' | grep '::ffff:10\.100\.0\.1' |
	grep 'remote mlx5_1' | grep -q '::ffff:10\.101\.0\.2' ||
	{ cl_show offnort 40; fail "knob off, no router: rank 0's error does not name both NICs and GIDs"; }
echo "knob off, router down: both ranks fail at connect in ${secs}s naming both NICs and GIDs: ok"

export NCCL_IB_SUBNET_AWARE_ROUTING=1
pair onnort 0 1
ok onnort "knob on, router down"
grep -q 'subnet-aware routing: connecting from device 1 (mlx5_1) instead of 0' "$TMP/onnort.0" ||
	{ cl_show onnort 40; fail "knob on: h0 did not switch to mlx5_1"; }
qp_line onnort 0 mlx5_1 mlx5_1
qp_line onnort 1 mlx5_1 mlx5_1
grep -q 'GID ::ffff:10\.101\.0\.1 -> ::ffff:10\.101\.0\.2, same subnet (/24)$' "$TMP/onnort.0" ||
	{ cl_show onnort 40; fail "knob on: the QP line does not say one subnet"; }
echo "knob on, router down: h0 connects from mlx5_1, the listener's subnet, data checked: ok"

pair fused 0 1 --vdev 0,1
ok fused "knob on, fused connector, router down"
grep -q 'subnet-aware routing: connecting from device 1 (mlx5_1) instead of 2' "$TMP/fused.0" ||
	{ cl_show fused 40; fail "knob on: the fused NIC (device 2) was kept"; }
grep -q "QP 0x[0-9a-f]* mlx5_0:1 " "$TMP/fused.0" && { cl_show fused 40; fail "fused: a QP on mlx5_0"; }
echo "knob on, fused mlx5_0+mlx5_1 connector: falls back to mlx5_1 (the listener's subnet): ok"

# both sides fused over both rails: every port of the connector's fused NIC is on one of the
# listener's subnets, so it is kept (NIC fusion preserved), each rail talking to its own
side fusedboth h0 0 0 "" --vdev 0,1
side fusedboth h1 1 0 "" --vdev 0,1
cl_wait
ok fusedboth "knob on, both sides fused, router down"
grep -q 'subnet-aware routing' "$TMP"/fusedboth.* && { cl_show fusedboth 40; fail "fused both: overridden"; }
qp_line fusedboth 0 mlx5_0 mlx5_0
qp_line fusedboth 0 mlx5_1 mlx5_1
echo "knob on, both sides fused over both rails: the fused NIC is kept, rail to rail: ok"

# a fused listener (ports on both rails) and a knob-off connector from rail 0 only: the
# listener falls back to its rail-0 NIC (as NCCL), though the connector made its QPs for a
# two-device peer (the handle's device count)
side fusedlisten h0 0 0 "NCCL_IB_SUBNET_AWARE_ROUTING=0"
side fusedlisten h1 1 0 "" --vdev 0,1
cl_wait
ok fusedlisten "fused listener, rail-0 connector, router down"
grep -q 'subnet-aware routing: accepting on device 0 (mlx5_0) instead of 2' "$TMP/fusedlisten.1" ||
	{ cl_show fusedlisten 40; fail "the fused listener did not fall back to mlx5_0"; }
grep -q "QP 0x[0-9a-f]* mlx5_1:1 " "$TMP/fusedlisten.1" && { cl_show fusedlisten 40; fail "fused listener: a QP on mlx5_1"; }
echo "fused listener, knob-off rail-0 connector: accepts on mlx5_0 alone: ok"
# once the outage has lasted long enough for every probe of the gateways to give up, their
# entries are FAILED (down again marks them so: a probe started by the runs above may still
# be pending, and the kernel retries an INCOMPLETE entry only on its own timer, up to 1 s)
"$SC" router down || fail "sim-cluster router down (again)"
"$SC" router up || fail "sim-cluster router up"
NCCL_IB_SUBNET_AWARE_ROUTING=0 pair back 0 1
ok back "knob off, router back up"
qp_line back 0 mlx5_0 mlx5_1
echo "router back up: knob off connects through it again: ok"

# IPv6-only rails (fd00:100::/64, fd00:101::/64): subnets compared by their 64-bit prefix
cl_up --hosts 2 --nics 2 --subnets per-rail --ipv6
"$SC" router down || fail "sim-cluster router down (IPv6)"
NCCL_IB_ADDR_FAMILY=AF_INET6 pair v6 0 1
ok v6 "IPv6, knob on, router down"
grep -q 'subnet-aware routing: connecting from device 1 (mlx5_1) instead of 0' "$TMP/v6.0" &&
	grep -q 'mlx5_1:1 GID index [0-9]* fd00:101::1 ' "$TMP/v6.0" ||
	{ cl_show v6 40; fail "IPv6, knob on: h0 did not switch to mlx5_1 (fd00:101::1)"; }
qp_line v6 0 mlx5_1 mlx5_1
grep -q 'GID fd00:101::1 -> fd00:101::2, same subnet (/64)$' "$TMP/v6.0" ||
	{ cl_show v6 40; fail "IPv6: the QP line does not say one /64"; }
echo "IPv6 rails, knob on, router down: h0 connects from mlx5_1 (fd00:101::/64): ok"

# InfiniBand (rail k = IB subnet k, no FLIDs): the knob only looks at RoCE GIDs, as NCCL, so
# the handle carries none and the connector keeps its device: rail 0 cannot reach rail 1
cl_up --hosts 2 --nics 2 --subnets per-rail --link ib
pair ib 0 1
[ "$rc" -ge 1 ] || { cl_show ib 40; fail "IB, knob on: a LID of another subnet connected"; }
grep -q 'subnet-aware routing' "$TMP"/ib.* && { cl_show ib 40; fail "IB: the device was overridden"; }
echo "InfiniBand, knob on: no override (no RoCE GIDs), rail 0 to rail 1 fails as with it off: ok"
