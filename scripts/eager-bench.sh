#!/bin/bash
# eager-bench.sh [ROUNDS] - the eager path's figures (docs/measurements.md, "Eager path"),
# rounds interleaved so that load from elsewhere hits every variant alike.
#   8-byte half round trip: sv-rawbench -t imm (raw WRITE_WITH_IMM ping-pong)
#   next to the plugin with the eager path on (default) and off
#   (NCCL_VERBS_EAGER_MAX=0) and NCCL's IB transport (-p verbs,nccl-ib, one
#   run), in two receive patterns of nccl-net-bench's ping-pong:
#     depth 8: receives posted 8 ahead, as NCCL's proxy does in steady state
#              (every clear-to-send is at the sender before its message);
#     depth 1: each receive posted only when the previous one is done, so
#              the clear-to-send of the next message races its send (a
#              receiver that is not ahead: the case the eager path is for).
#   Every ping-pong spins (--yield -1), as sv-rawbench does.
#   Latency 8 B .. 64 KiB at depth 1, NCCL_VERBS_EAGER_MAX=65536 against 0.
#   sendrecv bandwidth at 4 MiB, eager on and off, each next to NCCL's transport.
# Prints per-round rows, the medians and the medians of the per-round ratios.
# Environment: NV_BUILD_DIR (default build/), EB_ITERS (latency iterations, 3000).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
B=${NV_BUILD_DIR:-$top/build}
rounds=${1:-7}
iters=${EB_ITERS:-3000}
BENCH=$B/nccl-net-bench
RAW=$B/test/simverbs/bench/sv-rawbench
P=$B/.libs/libnccl-net-verbs.so
N=${NCCL_NET_BENCH_NCCL_LIB:-/usr/local/cuda/lib64/libnccl.so.2}
export LD_LIBRARY_PATH="$B/test/simverbs/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SIMVERBS_FABRIC="eagerbench-$$"
unset SIMVERBS_LEAK_CHECK
for f in "$BENCH" "$RAW" "$P"; do
	[ -e "$f" ] || { echo "eager-bench.sh: $f is missing (build first: scripts/test.sh or make)" >&2; exit 1; }
done
pl=$P; ib=1
if [ -r "$N" ]; then pl="$P,nccl-ib:$N"; else ib=0; echo "# NCCL's transport: $N not readable, its columns are '-'"; fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# cmp FILE SIZE COL: the comparison table's value (1: first plugin, 2: second)
cmp() { awk -v s="$2" -v c="$3" '/comparison/ { t = 1; next } t && $1 == s { print $(1 + c); exit }' "$1"; }
# one FILE SIZE COL: a single-plugin table's value (5: latency, 7: busbw)
one() { awk -v s="$2" -v c="$3" '$1 == s && NF >= 8 { print $c; exit }' "$1"; }
med() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2); else print "-" }'; }
lat() {	# lat DEPTH OUT [env...]: the 8-byte ping-pong at this receive depth
	local d=$1 out=$2; shift 2
	env "$@" "$BENCH" -p "$pl" -t latency -b 8 -e 8 -n "$iters" -w 100 -R 3 --yield -1 \
		--recv-depth "$d" >"$out" 2>&1 || { echo "eager-bench.sh: nccl-net-bench failed:" >&2; tail -5 "$out" >&2; exit 1; }
}
val() {	# val FILE: our value, then NCCL's (from a two-plugin run)
	if [ "$ib" = 1 ]; then echo "$(cmp "$1" 8 1) $(cmp "$1" 8 2)"; else echo "$(one "$1" 8 5) -"; fi
}
echo "# 8-byte half round trip (us), spinning; depth = receives posted ahead"
echo "round load raw d8_on d8_off d8_nccl d1_on d1_off d1_nccl"
for r in $(seq 1 "$rounds"); do
	load=$(cut -d' ' -f1 /proc/loadavg)
	"$RAW" -d simib0 -t imm -n "$iters" -r 3 >"$tmp/raw" 2>&1
	raw=$(awk '/^imm_lat/ { for (i = 1; i <= NF; i++) if ($i ~ /^median_us=/) { sub("median_us=", "", $i); print $i } }' "$tmp/raw")
	lat 8 "$tmp/on8"
	lat 8 "$tmp/off8" NCCL_VERBS_EAGER_MAX=0
	lat 1 "$tmp/on1"
	lat 1 "$tmp/off1" NCCL_VERBS_EAGER_MAX=0
	set -- $(val "$tmp/on8"); on8=$1 ib8=$2
	set -- $(val "$tmp/off8"); off8=$1
	set -- $(val "$tmp/on1"); on1=$1 ib1=$2
	set -- $(val "$tmp/off1"); off1=$1
	echo "$r $load $raw $on8 $off8 $ib8 $on1 $off1 $ib1" | tee -a "$tmp/rows"
done
echo "median - $(for c in 3 4 5 6 7 8 9; do awk -v c=$c '{ print $c }' "$tmp/rows" | med; done | tr '\n' ' ')"
# ratio A B: the median over rounds of column A / column B
ratio() { awk -v a="$1" -v b="$2" '$b != "-" && $b > 0 { print $a / $b }' "$tmp/rows" | med; }
echo "ratios (medians of per-round ratios): depth 8: on/raw $(ratio 4 3) on/nccl $(ratio 4 6)" \
     "off/nccl $(ratio 5 6); depth 1: on/raw $(ratio 7 3) on/nccl $(ratio 7 9) off/nccl $(ratio 8 9)"
echo "# latency by size at depth 1 (us, spinning): NCCL_VERBS_EAGER_MAX=65536 vs 0, 3 rounds interleaved"
for r in 1 2 3; do
	for m in 65536 0; do
		NCCL_VERBS_EAGER_MAX=$m "$BENCH" -p "$P" -t latency -b 8 -e 64K -f 4 -n 1000 -w 50 -R 3 \
			--yield -1 --recv-depth 1 >"$tmp/s$m" 2>&1
	done
	for s in 8 32 128 512 2048 8192 32768; do
		echo "$s $(one "$tmp/s65536" $s 5) $(one "$tmp/s0" $s 5)"
	done >>"$tmp/sizes"
done
for s in 8 32 128 512 2048 8192 32768; do
	echo "size $s eager $(awk -v s=$s '$1 == s { print $2 }' "$tmp/sizes" | med) off $(awk -v s=$s '$1 == s { print $3 }' "$tmp/sizes" | med)"
done
echo "# sendrecv 4 MiB bus bandwidth (GB/s): eager on and off, each next to NCCL's transport; 3 rounds"
echo "on nccl_a off nccl_b"
for r in 1 2 3; do
	"$BENCH" -p "$pl" -t sendrecv -b 4M -e 4M -n 50 -w 5 >"$tmp/bw" 2>&1
	NCCL_VERBS_EAGER_MAX=0 "$BENCH" -p "$pl" -t sendrecv -b 4M -e 4M -n 50 -w 5 >"$tmp/bw0" 2>&1
	if [ "$ib" = 1 ]; then
		echo "$(cmp "$tmp/bw" 4194304 1) $(cmp "$tmp/bw" 4194304 2) $(cmp "$tmp/bw0" 4194304 1) $(cmp "$tmp/bw0" 4194304 2)"
	else
		echo "$(one "$tmp/bw" 4194304 7) - $(one "$tmp/bw0" 4194304 7) -"
	fi | tee -a "$tmp/bwrows"
done
echo "bw median on $(awk '{ print $1 }' "$tmp/bwrows" | med) off $(awk '{ print $3 }' "$tmp/bwrows" | med)" \
     "nccl_ib $(awk '{ print $2; print $4 }' "$tmp/bwrows" | med)"
