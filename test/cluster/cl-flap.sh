#!/usr/bin/env bash
# NCCL_VERBS_LINK_HOLD_MS across 2 simulated hosts, one RoCE NIC each. In the middle of a
# bidirectional sendrecv, then of an AllReduce, h1's link goes down for 0.5 s and its address is
# removed and added again with a second address of the rail in another order, so the address comes
# back at another GID index (as a netdev flap re-indexes the kernel's GID table; NCCL_IB_ADDR_RANGE
# picks it again):
# both runs complete with every byte checked, each comm prints one "holding" and one "recovered"
# line, h1's say the GID index moved, no WARN. Then a flap longer than the hold: both ranks fail
# within the hold plus a bounded margin, naming the port, the peer and how long they waited.
. "$(dirname "$0")/cl-common.sh"
export NCCL_SOCKET_IFNAME=mgmt0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET NCCL_IB_ADDR_RANGE=10.100.0.0/24

cl_up --hosts 2 --nics 1
cl_exec h1 -- ip addr add 10.98.0.2/24 dev rail0 # a second address: the flap reorders the two

# rank NAME HOST RANK ARGS...: like cl_rank, with room for a loaded machine
rank() {
	local name=$1 host=$2 r=$3
	shift 3
	cl_exec "$host" -- timeout -k 5 180 "$BENCH" --rank "$r" --nranks 2 \
		--root "$(cl_addr h0 2):$PORT" -d 0 -T 50 "$@" >"$TMP/$name.$r" 2>&1 &
	CL_PIDS+=($!)
}
# the timed loop runs (rank 0's table header) and both ranks have their comms
started() {
	local r
	grep -q 'size.*count' "$TMP/$1.0" 2>/dev/null || return 1
	for r in 0 1; do
		grep -q 'NET/Verbs : connected to' "$TMP/$1.$r" &&
			grep -q 'NET/Verbs : accepted' "$TMP/$1.$r" || return 1
	done
}
# flap SECONDS FIRST: h1's rail down, both its addresses removed, back after SECONDS, FIRST (the
# address that takes the lower GID slots) added first
flap() {
	local a
	"$SC" link h1 0 down || fail "sim-cluster link h1 0 down"
	for a in 10.100.0.2 10.98.0.2; do
		cl_exec h1 -- ip addr del $a/24 dev rail0 || fail "ip addr del $a"
	done
	sleep "$1"
	for a in "$2" 10.100.0.2 10.98.0.2; do
		cl_exec h1 -- ip addr add $a/24 dev rail0 2>/dev/null
	done
	"$SC" link h1 0 up || fail "sim-cluster link h1 0 up"
}
gid_index() { # the RoCE v2 GID index of 10.100.0.2 on h1
	cl_exec h1 -- ibv_devinfo -v -d mlx5_0 | awk '/GID\[/ && /::ffff:10\.100\.0\.2, RoCE v2/ {
		sub(/.*GID\[ */, ""); sub(/\].*/, ""); print }'
}

export NCCL_VERBS_LINK_HOLD_MS=20000
for t in sendrecv-bi allreduce; do
	before=$(gid_index)
	rank "$t" h0 0 -t "$t" -b 1M -e 1M -n 3000 -w 1
	rank "$t" h1 1 -t "$t" -b 1M -e 1M -n 3000 -w 1
	cl_until 60 started "$t" || { cl_show "$t"; fail "$t: the run did not start"; }
	# the address comes back in the other place: behind 10.98.0.2, or before it
	if [ "$before" = 3 ]; then flap 0.5 10.98.0.2; else flap 0.5 10.100.0.2; fi
	after=$(gid_index)
	cl_wait
	[ "$rc" = 0 ] || { cl_show "$t" 40; fail "$t: $rc rank(s) failed through a 0.5 s flap"; }
	grep -q 'Out of bounds values : 0 OK' "$TMP/$t.0" || { cl_show "$t"; fail "$t: values"; }
	for r in 0 1; do
		f=$TMP/$t.$r
		h=$(grep -c 'holding its requests' "$f")
		b=$(grep -c 'recovered after .* on hold (NCCL_VERBS_LINK_HOLD_MS)' "$f")
		w=$(grep -c 'WARN' "$f")
		[ "$h" = 2 ] && [ "$b" = 2 ] && [ "$w" = 0 ] || { cl_show "$t" 40
			fail "$t: rank $r: $h holding and $b recovered lines (want 2 each: one per comm), $w WARN(s)"; }
	done
	[ -n "$before" ] && [ -n "$after" ] && [ "$before" != "$after" ] ||
		fail "the flap did not move h1's GID for 10.100.0.2 ($before -> $after)"
	[ "$(grep -c "mlx5_0:1 GID index $before -> $after" "$TMP/$t.1")" = 2 ] ||
		{ cl_show "$t" 40; fail "$t: h1's recovered lines do not say GID index $before -> $after"; }
	echo "$t: a 0.5 s flap mid-run (GID index $before -> $after): every value checked, one holding" \
		"and one recovered line per comm, no WARN: ok"
	grep -h 'recovered after' "$TMP/$t".* | sed 's/^/    /'
done

export NCCL_VERBS_LINK_HOLD_MS=1000
rank long h0 0 -t sendrecv-bi -b 1M -e 1M -n 3000 -w 1
rank long h1 1 -t sendrecv-bi -b 1M -e 1M -n 3000 -w 1
cl_until 60 started long || { cl_show long; fail "long: the run did not start"; }
"$SC" link h1 0 down || fail "sim-cluster link h1 0 down"
t0=$(date +%s%N)
cl_wait
ms=$((($(date +%s%N) - t0) / 1000000)) # bc is not in a fresh root: integer ms
secs=$((ms / 1000)).$(printf %03d $((ms % 1000)))
"$SC" link h1 0 up || fail "sim-cluster link h1 0 up"
[ "$rc" = 2 ] || { cl_show long; fail "a flap longer than the hold: $rc of 2 ranks failed (want both)"; }
# hold 1 s, plus detection (retry timeout) and the peer's own hold, plus load: 15 s at most
[ "$ms" -le 15000 ] || { cl_show long; fail "a flap longer than the hold: failed after ${secs}s"; }
grep -h 'WARN' "$TMP/long.1" | grep 'mlx5_0:1' | grep '10\.250\.0\.1' |
	grep -q 'did not come back within NCCL_VERBS_LINK_HOLD_MS=1000 (waited' ||
	{ cl_show long; fail "h1's error does not name its port, the peer and the wait"; }
grep -h 'WARN' "$TMP/long.0" | grep -q '10\.250\.0\.2' ||
	{ cl_show long; fail "h0's error does not name the peer"; }
echo "a flap longer than the 1 s hold: both ranks failed in ${secs}s naming port, peer and the wait: ok"
grep -h 'WARN.*NCCL_VERBS_LINK_HOLD_MS' "$TMP/long.1" | head -1 | sed 's/^/    /'
