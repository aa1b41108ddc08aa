#!/usr/bin/env bash
# 2 simulated hosts, one NIC each, whose NCCL_VERBS_EAGER_MAX differ (rank 0: 4096, rank 1:
# 1024; then rank 0: 1024, rank 1: 0, eager off): sendrecv-bi (both directions) through
# nccl-net-bench, sizes 8 B .. 64 KiB (across both limits), every value checked. Each send
# comm must use the smaller of its own and its receiver's limit (its INFO line says which);
# a sender that went eager past the receiver's limit would write beyond the receiver's ring
# entry, which the receiver rejects (the rank fails).
. "$(dirname "$0")/cl-common.sh"

cl_up --hosts 2 --nics 1
export NCCL_SOCKET_IFNAME=mgmt0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET

# run NAME MAX0 MAX1 WANT: ranks 0 and 1 with their limits; every send comm's limit is WANT
run() {
	local name=$1 m0=$2 m1=$3 want=$4 r f
	NCCL_VERBS_EAGER_MAX=$m0 cl_rank "$name" h0 0 2 0 -t sendrecv-bi -b 8 -e 64K -f 2 -n 3 -w 1
	NCCL_VERBS_EAGER_MAX=$m1 cl_rank "$name" h1 1 2 0 -t sendrecv-bi -b 8 -e 64K -f 2 -n 3 -w 1
	cl_wait
	[ "$rc" = 0 ] || { cl_show "$name" 40; fail "$name: $rc of 2 ranks failed"; }
	grep -q 'Out of bounds values : 0 OK' "$TMP/$name.0" ||
		{ cl_show "$name" 40; fail "$name: rank 0 did not report its values OK"; }
	grep -q FAILED "$TMP/$name".* && { cl_show "$name"; fail "$name: wrong values"; }
	for r in 0 1; do
		f=$TMP/$name.$r
		if [ "$want" = 0 ]; then
			# off on one side: no send comm may use eager (a line saying 0, or none)
			grep 'eager messages up to' "$f" | grep -qv 'up to 0 bytes' &&
				{ grep 'eager messages' "$f"; fail "$name: rank $r went eager"; }
		else
			grep -q "eager messages up to $want bytes" "$f" ||
				{ grep 'eager messages' "$f"; cl_show "$name" 20
				  fail "$name: rank $r's send comm does not use the limit $want"; }
			grep 'eager messages up to' "$f" | grep -qv "up to $want bytes" &&
				{ grep 'eager messages' "$f"; fail "$name: rank $r used another limit"; }
		fi
	done
	echo "$name: limits $m0 / $m1: sendrecv-bi 8 B .. 64 KiB intact, limit $want"
}

run differ 4096 1024 1024
run off 1024 0 0
echo "eager limits differing between hosts: ok"
