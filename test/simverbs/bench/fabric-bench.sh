#!/usr/bin/env bash
# fabric-bench.sh: the simverbs fabric figures, all from one run on this machine:
#   pvm-bw       process_vm_writev bandwidth between two processes (4 MiB) - the ceiling - and
#                the cost of one 8-byte call (the floor of a write's latency)
#   sv-rawbench  RDMA WRITE bandwidth sweep, 8-byte RDMA WRITE and WRITE_WITH_IMM ping-pong
#   perftest     ib_write_bw (4 MiB) and ib_write_lat (8 B), unchanged Debian programs
# then a summary with ratios. The 4 MiB bandwidth ratio is taken from ROUNDS alternating
# pvm-bw / sv-rawbench pairs (median of the per-round ratios), so load from other processes
# hits both sides of a ratio alike. Figures only: nothing here passes or fails on speed.
#
# usage: test/simverbs/bench/fabric-bench.sh [-B BUILD_DIR] [-d DEV] [-r ROUNDS] [-q]
#   -B  build directory (default: $NV_TOP_BUILDDIR, else the current directory)
#   -d  simverbs device (default simib0; simroce0 uses the IPv4 RoCE v2 GID of its netdev)
#   -r  alternating bandwidth rounds (default 5; 2 with -q)
#   -q  quick (seconds instead of about a minute; figures are noisier)
set -u
dev=simib0
quick=0
rounds=
while getopts "B:d:r:qh" opt; do
	case $opt in
	B) NV_TOP_BUILDDIR=$(cd "$OPTARG" && pwd) ;;
	d) dev=$OPTARG ;;
	q) quick=1 ;;
	r) rounds=$OPTARG ;;
	*) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
	esac
done
export NV_TOP_BUILDDIR=${NV_TOP_BUILDDIR:-$PWD}
SV_TIMEOUT=${SV_TIMEOUT:-300}
. "$(dirname "$0")/../checks/lib.sh"
SV_NAME=fabric-bench
sv_need_simverbs
export SIMVERBS_FABRIC=fabric-bench-$$
unset SIMVERBS_LEAK_CHECK
[ -x "$SV_BENCHDIR/pvm-bw" ] && [ -x "$SV_BENCHDIR/sv-rawbench" ] ||
	sv_hard "benchmarks not built: run make in $NV_TOP_BUILDDIR"

if [ "$quick" = 1 ]; then
	pvm_args=(-q); raw_args=(-q); pt_bw_n=50; pt_lat_n=2000; rounds=${rounds:-2}
else
	pvm_args=(); raw_args=(); pt_bw_n=500; pt_lat_n=20000; rounds=${rounds:-5}
fi
raw_args+=(-d "$dev")
pt_dev=(-d "$dev" -i 1 -F)
if [ "$dev" = simroce0 ] || ibv_devinfo -d "$dev" 2>/dev/null | grep -q 'link_layer:.*Ethernet'; then
	gid=$(sv_roce_gid_index "$dev")
	pt_dev+=(-x "${gid:-0}")
	raw_args+=(-g "${gid:-0}")
fi

# field FILE KEY NAME: NAME=value on the first line starting with KEY.
field() {
	awk -v k="$2" -v f="$3" '$1 == k && (k != "write_bw" || $2 == "size=4194304") {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == f) { print kv[2]; exit } } }' "$1"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.3f", a / b; else print "n/a" }'; }

echo "== fabric-bench $(date -u '+%Y-%m-%d %H:%M UTC') host=$(hostname) cpus=$(nproc) device=$dev"
echo "== kernel $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "-- pvm-bw ${pvm_args[*]}"
timeout "$SV_TIMEOUT" "$SV_BENCHDIR/pvm-bw" "${pvm_args[@]}" | tee "$SV_TMP/pvm" || sv_fail "pvm-bw failed"
echo "-- $rounds alternating rounds: pvm-bw -s 4M -r 3 / sv-rawbench ${raw_args[*]} -t bw -S 4M -r 3"
: >"$SV_TMP/rounds"
# kv KEY NAME: NAME=value from the line starting with KEY on stdin.
kv() { awk -v k="$1" -v f="$2" '$1 == k { for (i = 2; i <= NF; i++) { split($i, a, "=");
	if (a[1] == f) print a[2] } }'; }
for r in $(seq 1 "$rounds"); do
	timeout "$SV_TIMEOUT" "$SV_BENCHDIR/pvm-bw" -s 4M -r 3 >"$SV_TMP/pvm.$r"
	timeout "$SV_TIMEOUT" "$SV_BENCHDIR/sv-rawbench" "${raw_args[@]}" -t bw -S 4M -r 3 >"$SV_TMP/raw.$r"
	a=$(kv pvm_bw median_GBps <"$SV_TMP/pvm.$r") ac=$(kv pvm_bw cpu_GBps <"$SV_TMP/pvm.$r")
	b=$(kv write_bw median_GBps <"$SV_TMP/raw.$r") bc=$(kv write_bw cpu_GBps <"$SV_TMP/raw.$r")
	echo "round $r: pvm_bw=${a:-n/a} write_bw=${b:-n/a} ratio=$(ratio "$b" "$a")" \
	     "pvm_cpu=${ac:-n/a} write_cpu=${bc:-n/a} cpu_ratio=$(ratio "$bc" "$ac")" |
		tee -a "$SV_TMP/rounds"
done
echo "-- sv-rawbench ${raw_args[*]}"
timeout "$SV_TIMEOUT" "$SV_BENCHDIR/sv-rawbench" "${raw_args[@]}" | tee "$SV_TMP/raw" ||
	sv_fail "sv-rawbench failed"

# pt_pair TAG PROG ARGS...: perftest server + client; if perftest's default (ibv_wr_*) post-send
# flow fails, says so and retries with --use_old_post_send so a figure is still printed.
pt_pair() {
	local tag=$1 prog=$2
	shift 2
	sv_pair "$tag" "$prog" "$@" -- "$prog" "$@" 127.0.0.1 && return 0
	SV_FAILS=$((SV_FAILS - 1))
	echo "-- $prog: default post-send flow failed (above); retrying with --use_old_post_send"
	sv_pair "$tag" "$prog" "$@" --use_old_post_send -- "$prog" "$@" --use_old_post_send 127.0.0.1
}

pt_bw= pt_lat=
if command -v ib_write_bw >/dev/null && command -v ib_write_lat >/dev/null; then
	echo "-- ib_write_bw ${pt_dev[*]} -s 4194304 -n $pt_bw_n"
	if pt_pair ptbw ib_write_bw "${pt_dev[@]}" -s 4194304 -n "$pt_bw_n"; then
		grep -A1 '#bytes' "$SV_TMP/ptbw.client"
		pt_bw=$(awk '/^ *#bytes/ { h = 1; next } h && /^ *[0-9]/ { printf "%.3f", $4 * 1048576 / 1e9; exit }' \
			"$SV_TMP/ptbw.client")
	fi
	echo "-- ib_write_lat ${pt_dev[*]} -s 8 -n $pt_lat_n"
	if pt_pair ptlat ib_write_lat "${pt_dev[@]}" -s 8 -n "$pt_lat_n"; then
		grep -A1 '#bytes' "$SV_TMP/ptlat.client"
		pt_lat=$(awk '/^ *#bytes/ { h = 1; next } h && /^ *[0-9]/ { print $5; exit }' \
			"$SV_TMP/ptlat.client")
	fi
else
	echo "-- perftest not installed: ib_write_bw / ib_write_lat skipped"
fi

pvm=$(field "$SV_TMP/pvm" pvm_bw median_GBps)
call=$(field "$SV_TMP/pvm" pvm_call median_ns) callc=$(field "$SV_TMP/pvm" pvm_call cpu_ns)
raw=$(field "$SV_TMP/raw" write_bw median_GBps)
lat=$(field "$SV_TMP/raw" write_lat median_us)
imm=$(field "$SV_TMP/raw" imm_lat median_us)
rmed() { # median of the NAME=value fields of the rounds file
	sed -n "s/.* $1=\([0-9.]*\).*/\1/p" "$SV_TMP/rounds" | sort -g |
		awk '{ v[NR] = $1 } END { if (NR) printf "%.3f\n", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
rpvm=$(rmed pvm_bw) rraw=$(rmed write_bw) rratio=$(rmed ratio)
rpvmc=$(rmed pvm_cpu) rrawc=$(rmed write_cpu) rcratio=$(rmed cpu_ratio)
echo
echo "== summary ($dev; medians; GB/s = 1e9 B/s; latency = half round trip)"
echo "   (only the alternating rounds compare like with like: the other bandwidth lines ran at"
echo "    other moments, and load from other processes moves them by 2-5x)"
printf '  %-44s %10s GB/s\n' "process_vm_writev 4 MiB, standalone run" "${pvm:-n/a}"
printf '  %-44s %10s GB/s vs %s GB/s: median ratio %s (target >= 0.8)\n' \
	"RDMA WRITE vs pvm 4 MiB, $rounds alt. rounds" "${rraw:-n/a}" "${rpvm:-n/a}" "${rratio:-n/a}"
printf '  %-44s %10s GB/s vs %s GB/s: median ratio %s\n' \
	"  same, per CPU second of the writer" "${rrawc:-n/a}" "${rpvmc:-n/a}" "${rcratio:-n/a}"
printf '  %-44s %10s GB/s\n' "sv-rawbench RDMA WRITE 4 MiB, sweep run" "${raw:-n/a}"
printf '  %-44s %10s GB/s\n' "perftest ib_write_bw 4 MiB (BW average)" "${pt_bw:-n/a}"
printf '  %-44s %10s ns     (%s ns of CPU)\n' "process_vm_writev 8 B, one call (floor)" "${call:-n/a}" \
	"${callc:-n/a}"
printf '  %-44s %10s us     (target < 3 us)\n' "sv-rawbench RDMA WRITE 8 B ping-pong" "${lat:-n/a}"
printf '  %-44s %10s us\n' "sv-rawbench WRITE_WITH_IMM 8 B ping-pong" "${imm:-n/a}"
printf '  %-44s %10s us\n' "perftest ib_write_lat 8 B (t_typical)" "${pt_lat:-n/a}"
[ "$SV_FAILS" -eq 0 ] || { echo "fabric-bench: $SV_FAILS run(s) failed"; exit 1; }
exit 0
