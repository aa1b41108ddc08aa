#!/usr/bin/env bash
# A virtual NIC (makeVDevice, nccl-net-bench --vdev 0,1) fusing both rails of 2 simulated hosts:
# every connection stripes its QPs over rail 0 and rail 1 (mlx5_0 to mlx5_0, mlx5_1 to mlx5_1)
# and sendrecv and allreduce move every byte correctly.
. "$(dirname "$0")/cl-common.sh"
export NCCL_SOCKET_IFNAME=mgmt0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET

cl_up --hosts 2 --nics 2
for r in 0 1; do
	cl_rank vnic "h$r" "$r" 2 0 --vdev 0,1 -t sendrecv,allreduce -b 8 -e 4M -f 16 -n 3 -w 1
done
cl_wait
[ "$rc" = 0 ] || { cl_show vnic; fail "$rc rank(s) failed"; }
[ "$(grep -c 'Out of bounds values : 0 OK' "$TMP/vnic.0")" = 2 ] || { cl_show vnic 60; fail "values"; }
grep -q 'virtual device 2 = mlx5_0+mlx5_1' "$TMP/vnic.0" || { cl_show vnic; fail "no fused device"; }
for k in 0 1; do
	grep 'nv_comm_qp_rtr' "$TMP/vnic.0" | grep -q "mlx5_$k:1 -> .* mlx5_$k" ||
		{ cl_show vnic 80; fail "no QP on rail $k (mlx5_$k to mlx5_$k)"; }
done
echo "virtual NIC over both rails across hosts: QPs on both rails, every byte right: ok"
