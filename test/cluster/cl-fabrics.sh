#!/usr/bin/env bash
# 2 simulated hosts on other fabrics: an IPv6-only RoCE fabric works with
# NCCL_IB_ADDR_FAMILY=AF_INET6 (each host's GID is its rail's IPv6 address); InfiniBand across
# hosts uses distinct LIDs, and a LID of another subnet (no router, no FLID) fails at connect
# within seconds naming both NICs; NCCL_SOCKET_IFNAME picks the interface the handshake uses
# among management and rails.
. "$(dirname "$0")/cl-common.sh"
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET

pair() { # pair NAME DEV0 DEV1 ARGS...: a 2-rank sendrecv, h0 on DEV0, h1 on DEV1
	local name=$1 d0=$2 d1=$3
	shift 3
	cl_rank "$name" h0 0 2 "$d0" -t sendrecv -b 8 -e 64K -f 8 -n 2 -w 1 "$@"
	cl_rank "$name" h1 1 2 "$d1" -t sendrecv -b 8 -e 64K -f 8 -n 2 -w 1 "$@"
	cl_wait
}

cl_up --hosts 2 --nics 1 --ipv6
NCCL_SOCKET_IFNAME=mgmt0 NCCL_IB_ADDR_FAMILY=AF_INET6 pair v6 0 0
[ "$rc" = 0 ] || { cl_show v6; fail "IPv6-only fabric: $rc rank(s) failed"; }
for r in 0 1; do
	grep -q "mlx5_0:1 GID index [0-9]* fd00:100::$((r + 1)) " "$TMP/v6.$r" ||
		{ cl_show v6; fail "IPv6: h$r did not pick fd00:100::$((r + 1))"; }
done
echo "IPv6-only RoCE with NCCL_IB_ADDR_FAMILY=AF_INET6: ok"

cl_up --hosts 2 --nics 2 --link ib
for ifn in mgmt0 rail1; do
	NCCL_SOCKET_IFNAME=$ifn pair "ib$ifn" 0 0
	[ "$rc" = 0 ] || { cl_show "ib$ifn"; fail "IB, handshake on $ifn: $rc rank(s) failed"; }
	want=$([ "$ifn" = mgmt0 ] && echo '10\.250\.' || echo '10\.101\.')
	grep -q "handshake interface $ifn" "$TMP/ib$ifn".* &&
		grep -hE 'listening on|accepted|connected to' "$TMP/ib$ifn".* | grep -q . &&
		! grep -hE 'listening on|accepted|connected to' "$TMP/ib$ifn".* | grep -vq "$want" ||
		{ cl_show "ib$ifn"; fail "NCCL_SOCKET_IFNAME=$ifn: handshake not only on $ifn"; }
done
l0=$(grep -m1 -o 'mlx5_0 port 1 IB .* lid [0-9]*' "$TMP/ibmgmt0.0" | awk '{print $NF}')
l1=$(grep -m1 -o 'mlx5_0 port 1 IB .* lid [0-9]*' "$TMP/ibmgmt0.1" | awk '{print $NF}')
[ -n "$l0" ] && [ -n "$l1" ] && [ "$l0" != "$l1" ] || { cl_show ibmgmt0; fail "IB LIDs '$l0' '$l1' not distinct"; }
echo "InfiniBand across hosts (LIDs $l0, $l1), handshake on mgmt0 or rail1 as NCCL_SOCKET_IFNAME says: ok"

# rail 1 is IB subnet 1: h0's rail-0 port has no path to h1's rail-1 LID
t0=$(date +%s)
NCCL_SOCKET_IFNAME=mgmt0 pair wronglid 0 1
secs=$(( $(date +%s) - t0 ))
[ "$rc" -ge 1 ] || { cl_show wronglid; fail "a LID of another subnet connected"; }
[ "$secs" -le 20 ] || { cl_show wronglid; fail "a LID of another subnet took ${secs}s to fail"; }
grep -h 'failed' "$TMP"/wronglid.* | grep 'mlx5_0' | grep -q 'mlx5_1' ||
	{ cl_show wronglid; fail "the error does not name both NICs"; }
echo "IB LID of another subnet: fails at connect in ${secs}s naming both NICs: ok"
