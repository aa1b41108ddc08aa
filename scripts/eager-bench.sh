#!/bin/bash
# eager-bench.sh [ROUNDS] - the eager path's figures (README "Measured figures"),
# rounds interleaved so that load from elsewhere hits every variant alike:
#   8-byte half round trip: sv-rawbench -t imm (raw WRITE_WITH_IMM ping-pong),
#   the plugin with the eager path on (default) and off (NCCL_VERBS_EAGER_MAX=0)
#   next to NCCL's IB transport (-p verbs,nccl-ib, one run each);
#   latency at 1 KiB .. 64 KiB with NCCL_VERBS_EAGER_MAX=65536 and 0 (the default's choice);
#   sendrecv bandwidth at 4 MiB, eager on and off, next to NCCL's transport.
# Prints per-round rows and the medians; load average per round.
# Environment: NV_BUILD_DIR (default build/), EB_ITERS (latency iterations, 2000).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
B=${NV_BUILD_DIR:-$top/build}
rounds=${1:-7}
iters=${EB_ITERS:-2000}
BENCH=$B/nccl-net-bench
RAW=$B/test/simverbs/bench/sv-rawbench
P=$B/.libs/libnccl-net-verbs.so
N=${NCCL_NET_BENCH_NCCL_LIB:-/usr/local/cuda/lib64/libnccl.so.2}
export LD_LIBRARY_PATH="$B/test/simverbs/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SIMVERBS_FABRIC="eagerbench-$$"
unset SIMVERBS_LEAK_CHECK
pl=$P; [ -r "$N" ] && pl="$P,nccl-ib:$N"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# col FILE PLUGIN SIZE: the comparison table's value (1: first plugin, 2: second)
lat() { awk -v s="$2" -v c="$3" '/comparison/ { t = 1; next } t && $1 == s { print $(1 + c); exit }' "$1"; }
med() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
echo "round load raw_imm_us eager_on_us eager_off_us nccl_ib_us"
for r in $(seq 1 "$rounds"); do
	load=$(cut -d' ' -f1 /proc/loadavg)
	"$RAW" -d simib0 -t imm -n "$iters" -r 3 >"$tmp/raw" 2>&1
	raw=$(awk '/^imm_lat/ { for (i = 1; i <= NF; i++) if ($i ~ /^median_us=/) { sub("median_us=", "", $i); print $i } }' "$tmp/raw")
	"$BENCH" -p "$pl" -t latency -b 8 -e 8 -n "$iters" -w 100 -R 3 >"$tmp/on" 2>&1
	NCCL_VERBS_EAGER_MAX=0 "$BENCH" -p "$P" -t latency -b 8 -e 8 -n "$iters" -w 100 -R 3 >"$tmp/off" 2>&1
	on=$(lat "$tmp/on" 8 1); ib=$(lat "$tmp/on" 8 2)
	off=$(awk '$1 == 8 && NF >= 8 { print $5; exit }' "$tmp/off")
	echo "$r $load $raw $on $off ${ib:--}" | tee -a "$tmp/rows"
done
echo "median - $(for c in 3 4 5 6; do awk -v c=$c '{ print $c }' "$tmp/rows" | med; done | tr '\n' ' ')"
awk '{ print $4 / $3, $4 / $6 }' "$tmp/rows" | {
	cat >"$tmp/ratios"
	echo "eager_on/raw median $(awk '{ print $1 }' "$tmp/ratios" | med)," \
	     "eager_on/nccl_ib median $(awk '{ print $2 }' "$tmp/ratios" | med)"
}
echo "# latency by size (us), NCCL_VERBS_EAGER_MAX=65536 vs 0, 3 rounds interleaved"
for r in 1 2 3; do
	NCCL_VERBS_EAGER_MAX=65536 "$BENCH" -p "$P" -t latency -b 1K -e 64K -f 4 -n 1000 -w 50 -R 3 >"$tmp/s64"
	NCCL_VERBS_EAGER_MAX=0 "$BENCH" -p "$P" -t latency -b 1K -e 64K -f 4 -n 1000 -w 50 -R 3 >"$tmp/s0"
	for s in 1024 4096 16384 65536; do
		echo "$s $(awk -v s=$s '$1 == s && NF >= 8 { print $5; exit }' "$tmp/s64") $(awk -v s=$s '$1 == s && NF >= 8 { print $5; exit }' "$tmp/s0")"
	done >>"$tmp/sizes"
done
for s in 1024 4096 16384 65536; do
	echo "size $s eager $(awk -v s=$s '$1 == s { print $2 }' "$tmp/sizes" | med) off $(awk -v s=$s '$1 == s { print $3 }' "$tmp/sizes" | med)"
done
echo "# sendrecv 4 MiB bus bandwidth (GB/s): eager on, NCCL's transport, eager off; 3 rounds"
for r in 1 2 3; do
	"$BENCH" -p "$pl" -t sendrecv -b 4M -e 4M -n 50 -w 5 >"$tmp/bw" 2>&1
	NCCL_VERBS_EAGER_MAX=0 "$BENCH" -p "$P" -t sendrecv -b 4M -e 4M -n 50 -w 5 >"$tmp/bw0" 2>&1
	echo "$(lat "$tmp/bw" 4194304 1) $(lat "$tmp/bw" 4194304 2) $(awk '$1 == 4194304 && NF >= 8 { print $7; exit }' "$tmp/bw0")" | tee -a "$tmp/bwrows"
done
echo "bw median on $(awk '{ print $1 }' "$tmp/bwrows" | med) nccl_ib $(awk '{ print $2 }' "$tmp/bwrows" | med) off $(awk '{ print $3 }' "$tmp/bwrows" | med)"
