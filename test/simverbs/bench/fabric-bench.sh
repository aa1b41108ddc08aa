#!/usr/bin/env bash
# fabric-bench.sh: the simverbs fabric figures, all from one run on this machine:
#   pvm-bw       process_vm_writev bandwidth between two processes (4 MiB) - the ceiling - and
#                the cost of one 8-byte call (the floor of a write's latency)
#   sv-rawbench  RDMA WRITE bandwidth sweep, 8-byte RDMA WRITE and WRITE_WITH_IMM ping-pong
#   perftest     ib_write_bw (4 MiB) and ib_write_lat (8 B), unchanged Debian programs
# then a summary with ratios. Figures only: nothing here passes or fails on speed.
#
# usage: test/simverbs/bench/fabric-bench.sh [-B BUILD_DIR] [-d DEV] [-q]
#   -B  build directory (default: $NV_TOP_BUILDDIR, else the current directory)
#   -d  simverbs device (default simib0; simroce0 uses its 127.0.0.1 RoCE v2 GID)
#   -q  quick (seconds instead of about a minute; figures are noisier)
set -u
dev=simib0
quick=0
while getopts "B:d:qh" opt; do
	case $opt in
	B) NV_TOP_BUILDDIR=$(cd "$OPTARG" && pwd) ;;
	d) dev=$OPTARG ;;
	q) quick=1 ;;
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
	pvm_args=(-q); raw_args=(-q); pt_bw_n=50; pt_lat_n=2000
else
	pvm_args=(); raw_args=(); pt_bw_n=500; pt_lat_n=20000
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
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "n/a" }'; }

echo "== fabric-bench $(date -u '+%Y-%m-%d %H:%M UTC') host=$(hostname) cpus=$(nproc) device=$dev"
echo "== kernel $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "-- pvm-bw ${pvm_args[*]}"
timeout "$SV_TIMEOUT" "$SV_BENCHDIR/pvm-bw" "${pvm_args[@]}" | tee "$SV_TMP/pvm" || sv_fail "pvm-bw failed"
echo "-- sv-rawbench ${raw_args[*]}"
timeout "$SV_TIMEOUT" "$SV_BENCHDIR/sv-rawbench" "${raw_args[@]}" | tee "$SV_TMP/raw" ||
	sv_fail "sv-rawbench failed"

pt_bw= pt_lat=
if command -v ib_write_bw >/dev/null && command -v ib_write_lat >/dev/null; then
	echo "-- ib_write_bw ${pt_dev[*]} -s 4194304 -n $pt_bw_n"
	if sv_pair ptbw ib_write_bw "${pt_dev[@]}" -s 4194304 -n "$pt_bw_n" -- \
		ib_write_bw "${pt_dev[@]}" -s 4194304 -n "$pt_bw_n" 127.0.0.1; then
		grep -A1 '#bytes' "$SV_TMP/ptbw.client"
		pt_bw=$(awk '/^ *#bytes/ { h = 1; next } h && /^ *[0-9]/ { print $4 * 1048576 / 1e9; exit }' \
			"$SV_TMP/ptbw.client")
	fi
	echo "-- ib_write_lat ${pt_dev[*]} -s 8 -n $pt_lat_n"
	if sv_pair ptlat ib_write_lat "${pt_dev[@]}" -s 8 -n "$pt_lat_n" -- \
		ib_write_lat "${pt_dev[@]}" -s 8 -n "$pt_lat_n" 127.0.0.1; then
		grep -A1 '#bytes' "$SV_TMP/ptlat.client"
		pt_lat=$(awk '/^ *#bytes/ { h = 1; next } h && /^ *[0-9]/ { print $5; exit }' \
			"$SV_TMP/ptlat.client")
	fi
else
	echo "-- perftest not installed: ib_write_bw / ib_write_lat skipped"
fi

pvm=$(field "$SV_TMP/pvm" pvm_bw median_GBps)
call=$(field "$SV_TMP/pvm" pvm_call median_ns)
raw=$(field "$SV_TMP/raw" write_bw median_GBps)
lat=$(field "$SV_TMP/raw" write_lat median_us)
imm=$(field "$SV_TMP/raw" imm_lat median_us)
echo
echo "== summary ($dev; medians; GB/s = 1e9 B/s; latency = half round trip)"
printf '  %-44s %10s GB/s\n' "process_vm_writev 4 MiB (ceiling)" "${pvm:-n/a}"
printf '  %-44s %10s GB/s   ratio to ceiling %s (target >= 0.8)\n' \
	"sv-rawbench RDMA WRITE 4 MiB" "${raw:-n/a}" "$(ratio "$raw" "$pvm")"
printf '  %-44s %10s GB/s   ratio to ceiling %s\n' "perftest ib_write_bw 4 MiB (BW average)" \
	"${pt_bw:-n/a}" "$(ratio "$pt_bw" "$pvm")"
printf '  %-44s %10s ns\n' "process_vm_writev 8 B, one call (floor)" "${call:-n/a}"
printf '  %-44s %10s us     (target < 3 us)\n' "sv-rawbench RDMA WRITE 8 B ping-pong" "${lat:-n/a}"
printf '  %-44s %10s us\n' "sv-rawbench WRITE_WITH_IMM 8 B ping-pong" "${imm:-n/a}"
printf '  %-44s %10s us\n' "perftest ib_write_lat 8 B (t_typical)" "${pt_lat:-n/a}"
[ "$SV_FAILS" -eq 0 ] || { echo "fabric-bench: $SV_FAILS run(s) failed"; exit 1; }
exit 0
