#!/usr/bin/env bash
# The RMA tables across simulated hosts: test/rma/rma_harness, one process per rank, each in
# its host, meeting at h0 over the management network (the plugin's own ring too), the data
# over the hosts' NICs.
#  1. 4 ranks on 2 hosts (h0: ranks 0, 2; h1: 1, 3): put+signal to every rank (every byte
#     checked when its signal shows), put+flush, get, signal-only INC, windows of 4 KiB and
#     16 MiB (transfers up to 8 MiB at the window's end, strong and weak signals, flush, get),
#     bad offsets, rank, context, signal; then h1's port goes down under traffic: every rank's
#     put to the other host fails and queryLastError turns true within 30 s of the link going
#     down, stays true once it is back up, context 0 refuses work, context 1 carries again.
#  2. 3 ranks on 3 hosts through the v14 table, the last one killed: every other rank's put
#     to it fails, queryLastError turns true and stays, context 1 still carries.
# CL_RMA_WINDOWS=4K,16M,1G (by hand; docs/rma.md) adds windows to case 1 (default 4K,16M: a
# 1 GiB window takes 1 GiB per rank and tens of seconds on a loaded 2-core machine).
. "$(dirname "$0")/cl-common.sh"
HARNESS=$NV_TOP_BUILDDIR/test/rma/rma_harness
[ -x "$HARNESS" ] || fail "$HARNESS not built"
export NCCL_SOCKET_IFNAME=mgmt0 NCCL_IB_TIMEOUT=14
export NV_TEST_PLUGIN=${NV_TEST_PLUGIN:-$NV_TOP_BUILDDIR/.libs/libnccl-net-verbs.so}

cl_up --hosts 3 --nics 1

# rma_rank NAME HOST RANK NRANKS ARGS...: one harness rank in the background, output in
# $TMP/NAME.RANK
rma_rank() {
	local name=$1 host=$2 rank=$3 n=$4
	shift 4
	cl_exec "$host" -- timeout -k 5 300 "$HARNESS" -r "$rank" -n "$n" \
		-R "$(cl_addr h0 2):$PORT" "$@" >"$TMP/$name.$rank" 2>&1 &
	CL_PIDS+=($!)
}
# all_files DIR PREFIX N: DIR/PREFIX.0 .. DIR/PREFIX.(N-1) exist, or a rank is gone (the
# caller checks which)
all_files() {
	local r p
	for p in "${CL_PIDS[@]}"; do kill -0 "$p" 2>/dev/null || return 0; done
	for ((r = 0; r < $3; r++)); do [ -e "$1/$2.$r" ] || return 1; done
}

pd=$TMP/portdown
mkdir -p "$pd"
for r in 0 1 2 3; do
	rma_rank cases "h$((r % 2))" "$r" 4 -W "${CL_RMA_WINDOWS:-4K,16M}" -L "h1,$pd"
done
cl_until 240 all_files "$pd" ready 4 && [ -e "$pd/ready.3" ] && [ -e "$pd/ready.2" ] &&
	[ -e "$pd/ready.1" ] && [ -e "$pd/ready.0" ] ||
	{ cl_show cases; fail "the ranks did not reach the port-down case"; }
down_ms=$(date +%s%3N)
"$SC" link h1 0 down || fail "sim-cluster link h1 0 down"
cl_until 60 all_files "$pd" failed 4
"$SC" link h1 0 up || fail "sim-cluster link h1 0 up"
# the port follows the link (sysfs ACTIVE) a moment later; new work waits for that
port_active() { case $(cl_exec h1 -- cat /sys/class/infiniband/mlx5_0/ports/1/state) in *ACTIVE*) ;; *) return 1 ;; esac; }
cl_until 30 port_active || fail "h1's port not ACTIVE 30 s after its link came up"
touch "$pd/up"
cl_wait
[ "$rc" = 0 ] || { cl_show cases 40; fail "4 ranks on 2 hosts: $rc of 4 ranks failed"; }
for r in 0 1 2 3; do
	ms=$(cat "$pd/failed.$r")
	[ "$ms" -ge "$down_ms" ] || fail "rank $r saw its error before the link went down"
	[ $((ms - down_ms)) -le 30000 ] ||
		fail "rank $r saw the error $((ms - down_ms)) ms after the link went down (over 30 s)"
	echo "rank $r: the error seen $((ms - down_ms)) ms after h1's link went down"
done
for want in 'every byte there when its signal shows' 'put, flush and get' 'INC' \
	'window of 4096 B' 'window of 16777216 B' 'refused' 'port of h1 down'; do
	[ "$(grep -l "$want" "$TMP"/cases.* | wc -l)" = 4 ] ||
		{ cl_show cases 40; fail "not every rank reported '$want'"; }
done
echo "4 ranks on 2 hosts: every case, windows of 4 KiB and 16 MiB, h1's port down: ok"

for r in 0 1 2; do
	rma_rank kill "h$r" "$r" 3 -v 14 -k
done
cl_wait
[ "$rc" = 1 ] || { cl_show kill 40; fail "3 ranks on 3 hosts, the last killed: $rc of 3 ranks failed (want 1: the killed one)"; }
[ "$(grep -l 'killed rank 2: put failed (ncclRemoteError)' "$TMP"/kill.* | wc -l)" = 2 ] ||
	{ cl_show kill 40; fail "ranks 0 and 1 did not both see the killed rank's error"; }
echo "3 ranks on 3 hosts (v14), the last killed: ok"
