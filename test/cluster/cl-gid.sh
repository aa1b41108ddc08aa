#!/usr/bin/env bash
# RoCE GID choice across 2 simulated hosts: NCCL_IB_ADDR_RANGE chooses between two subnets on
# the rail (the GID table follows addresses added at run time), and a forced NCCL_IB_GID_INDEX
# that points at an address the peer cannot route to fails at connect within seconds, the
# error naming both NICs and GIDs (the plugin's connect-time probe), instead of connecting.
. "$(dirname "$0")/cl-common.sh"

cl_up --hosts 2 --nics 1
# a second subnet on both hosts' rail 0, and on h1 a third one nobody else has
cl_exec h0 -- ip addr add 10.98.0.1/24 dev rail0
cl_exec h1 -- ip addr add 10.98.0.2/24 dev rail0
cl_exec h1 -- ip addr add 10.99.0.2/24 dev rail0
export NCCL_SOCKET_IFNAME=mgmt0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET

for net in 10.98 10.100; do
	range=$net.0.0/24
	for r in 0 1; do
		NCCL_IB_ADDR_RANGE=$range cl_rank "range${net##*.}" "h$r" "$r" 2 0 -t sendrecv -b 8 -e 64K \
			-f 8 -n 2 -w 1
	done
	cl_wait
	[ "$rc" = 0 ] || { cl_show "range${net##*.}"; fail "NCCL_IB_ADDR_RANGE=$range: $rc rank(s) failed"; }
	for r in 0 1; do
		grep -q "mlx5_0:1 GID index [0-9]* ::ffff:$net.0.$((r + 1)) " "$TMP/range${net##*.}.$r" ||
			{ cl_show "range${net##*.}"; fail "NCCL_IB_ADDR_RANGE=$range: h$r did not pick $net.0.$((r + 1))"; }
	done
	echo "NCCL_IB_ADDR_RANGE=$range: both hosts use their $net.0.x GID: ok"
done

# h1's 10.99.0.2 (the last GID of its table): h0 has no route to it
idx=$(cl_exec h1 -- ibv_devinfo -v -d mlx5_0 | awk '/GID\[/ && /::ffff:10\.99\.0\.2, RoCE v2/ {
	sub(/.*GID\[ */, ""); sub(/\].*/, ""); print }')
[ -n "$idx" ] || fail "h1 has no GID for 10.99.0.2 (the GID table did not follow the address)"
t0=$(date +%s)
NCCL_IB_GID_INDEX=3 cl_rank forced h0 0 2 0 -t sendrecv -b 8 -e 8 -n 1 -w 0
NCCL_IB_GID_INDEX=$idx cl_rank forced h1 1 2 0 -t sendrecv -b 8 -e 8 -n 1 -w 0
cl_wait
secs=$(( $(date +%s) - t0 ))
[ "$rc" = 2 ] || { cl_show forced; fail "forced GID index $idx: $rc of 2 ranks failed (want both)"; }
[ "$secs" -le 20 ] || { cl_show forced; fail "forced GID index: took ${secs}s to fail"; }
# the prober (rank 0, whose write cannot be routed) names both NICs and both GIDs; its peer
# fails too, naming both NICs (it learns of the failure from the prober)
grep 'path check' "$TMP/forced.0" | grep 'local mlx5_0:1' | grep '::ffff:10\.100\.0\.1' |
	grep 'remote mlx5_0' | grep -q '::ffff:10\.99\.0\.2' ||
	{ cl_show forced 40; fail "rank 0's error does not name both NICs and GIDs"; }
grep 'failed' "$TMP/forced.1" | grep 'to mlx5_0:1' | grep -q 'peer mlx5_0' ||
	{ cl_show forced 40; fail "rank 1's error does not name both NICs"; }
echo "forced NCCL_IB_GID_INDEX=$idx to an unroutable address: both ranks fail in ${secs}s naming NICs and GIDs: ok"
