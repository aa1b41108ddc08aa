#!/usr/bin/env bash
# The main command (README "The two commands"; docs/benchmark.md): set up a fresh Debian machine (packages,
# bootstrap, configure, build into build/), then measure, in one run,
#   (a) raw RDMA WRITE bandwidth at 4 MiB (sv-rawbench, raw verbs, 2 processes)
#   (b) nccl-net-bench sendrecv through the plugin at 4 MiB
#   (c) 8-byte latency through the plugin vs the raw WRITE_WITH_IMM ping-pong
#       (receives posted 8 ahead as NCCL's proxy does; and (c1) posted 1 ahead,
#       spinning as the raw ping-pong does: each send races its clear-to-send,
#       the case the eager path is for)
#   (d) 2-rank ring allreduce bus bandwidth at 64 MiB through the plugin
#   (b), (c), (d) also through NCCL's built-in IB transport in the same runs
#   (nccl-net-bench -p ours,nccl-ib, sizes interleaved) when libnccl.so.2 is there
#   (e) instructions per message of the plugin and of NCCL's transport
#   (scripts/cpu-cost.sh, valgrind; NB_QUICK: loopback pattern only; NB_NO_CPU_COST=1 skips)
# plus a size sweep of every nccl-net-bench test for the plot. Runs on simverbs
# (the software fabric built with the project) when the machine has no RDMA
# device (/sys/class/infiniband empty), on the real devices otherwise.
# Prints one page: what runs, a line per round, the summary with the ratios and
# their targets, and where the files are. Every run's full output (the raw
# benchmark's, nccl-net-bench's tables, cpu-cost.sh's) goes to
# build/bench/bench.log, and to the terminal too with -v. Writes
# build/bench/bench.svg and build/bench/*.csv. Exit status: non-zero when a
# run fails or a result is wrong (speed targets are reported, not enforced).
#
# --hosts N (N >= 2, simverbs only, as root): the plugin runs of (b), (c), (d) and the sweep
# across N simulated hosts instead (test/cluster/sim-cluster: one rank per host, InfiniBand,
# handshake on the management network); the raw benchmark and the ratios are single-host only.
# Environment: NV_BUILD_DIR (default build/), NB_QUICK=1 (fewer rounds),
# NB_ROUNDS (rounds of (a)-(d), default 5), NB_DEV (plugin device index, default 0), NB_RAW_DEV (verbs device for the
# raw benchmark), NB_SKIP_SETUP=1 (use the existing build as is).
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
hosts=1
verbose=0
while [ $# -gt 0 ]; do
	case $1 in
	--hosts) hosts=${2:-}; shift 2 ;;
	-v | --verbose) verbose=1; shift ;;
	*) echo "usage: scripts/bench.sh [-v] [--hosts N]" >&2; exit 2 ;;
	esac
done
[[ $hosts =~ ^[0-9]+$ ]] && [ "$hosts" -ge 1 ] || { echo "bench: --hosts wants a number" >&2; exit 2; }
B=${NV_BUILD_DIR:-$top/build}
export NV_BUILD_DIR=$B

[ "${NB_SKIP_SETUP:-0}" = 1 ] || "$top/scripts/setup.sh"
B=$(cd "$B" && pwd)
out=$B/bench
mkdir -p "$out"
rm -f "$out"/*.csv "$out"/*.txt "$out"/bench.svg "$out"/bench.log
log=$out/bench.log
rv=$(mktemp -d)	# per-round figures, one file per metric (kept as rounds.csv)
trap 'rm -rf "$rv"' EXIT

# The terminal gets a page; every run's full output goes to the log (-v: here too).
say() { printf '%s\n' "$*" | tee -a "$log"; }
detail() {	# detail TEXT...: a line for the log only (and the terminal with -v)
	if [ "$verbose" = 1 ]; then printf '%s\n' "$*" | tee -a "$log"; else printf '%s\n' "$*" >>"$log"; fi
}
show() {	# show FILE: a run's output file into the log (and the terminal with -v)
	if [ "$verbose" = 1 ]; then tee -a "$log" <"$1"; else cat "$1" >>"$log"; fi
}
failed=""	# what failed, for the closing line
run() {	# run [-o FILE] NAME CMD...: output to the log (stdout to FILE with -o, which the
	# caller shows); on failure the page names the run and shows the end of its output
	local t o="" rc=0
	if [ "$1" = -o ]; then o=$2; shift 2; fi
	t=$(mktemp)
	detail "\$ ${*:2}${o:+ >$o}"
	if [ -n "$o" ]; then "${@:2}" >"$o" 2>"$t" || rc=$?; else "${@:2}" >"$t" 2>&1 || rc=$?; fi
	show "$t"
	if [ "$rc" != 0 ]; then
		say "  $1 FAILED (exit $rc); its last lines (all of it in $log):"
		cat ${o:+"$o"} "$t" | tail -n 15 | sed 's/^/    | /' | tee -a "$log"
		failed="$failed${failed:+;} $1"
	fi
	rm -f "$t"
	return "$rc"
}
BENCH=$B/nccl-net-bench
RAW=$B/test/simverbs/bench/sv-rawbench
PLUGIN=$B/.libs/libnccl-net-verbs.so
for f in "$BENCH" "$RAW" "$PLUGIN"; do
	[ -e "$f" ] || { echo "bench: $f was not built" >&2; exit 1; }
done

if [ -z "$(ls -A /sys/class/infiniband 2>/dev/null)" ]; then
	fabric=simverbs
	export LD_LIBRARY_PATH="$B/test/simverbs/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	export SIMVERBS_FABRIC="nvbench-$$-$(date +%s)"
	unset SIMVERBS_LEAK_CHECK
	raw_dev=${NB_RAW_DEV:-simib0}
else
	fabric=real
	raw_dev=${NB_RAW_DEV:-$(ls /sys/class/infiniband | head -n 1)}
fi

# RoCE ports need a GID index for the raw benchmark: a RoCE v2 IPv4 one if any.
raw_gid=()
ll=$(ibv_devinfo -d "$raw_dev" 2>/dev/null | awk '/link_layer:/ { print $2; exit }' || true)
if [ "$ll" = Ethernet ]; then
	gi=$(ibv_devinfo -v -d "$raw_dev" 2>/dev/null |
		awk '/GID\[/ && /v2/ && /::ffff:/ { gsub(/.*GID\[ */, ""); sub(/\].*/, ""); print; exit }')
	raw_gid=(-g "${gi:-0}")
fi

if [ "${NB_QUICK:-0}" = 1 ]; then
	rounds=3; bw_iters=20; lat_iters=1000; ar_iters=3; sweep="-b 8 -e 16M -f 8 -n 5 -w 1"
else
	rounds=${NB_ROUNDS:-5}; bw_iters=100; lat_iters=5000; ar_iters=10
	sweep="-b 8 -e 64M -f 4 -n 10 -w 2"
fi
nb=("$BENCH" -p "$PLUGIN" -d "${NB_DEV:-0}" --timeout 300)
status=0
# NCCL's own IB transport next to ours in (b), (c), (d), when libnccl.so.2 is usable.
nccl=${NCCL_NET_BENCH_NCCL_LIB:-}
for f in /usr/local/cuda/lib64/libnccl.so.2 /usr/local/cuda/lib/libnccl.so.2; do
	[ -z "$nccl" ] && [ -r "$f" ] && nccl=$f
done
nbc=("${nb[@]}")
if [ -n "$nccl" ] && "$BENCH" -p "nccl-ib:$nccl" -l >/dev/null 2>&1; then
	nbc=("$BENCH" -p "$PLUGIN,nccl-ib:$nccl" -d "${NB_DEV:-0}" --timeout 300)
else
	nccl=""
fi

say "bench: $fabric ($(nproc) CPUs, $(uname -r)), raw device $raw_dev, plugin device ${NB_DEV:-0}," \
	"$(date -u '+%Y-%m-%d %H:%M UTC')"
if [ "$hosts" -gt 1 ]; then
	say "  across $hosts simulated hosts (one rank each): sendrecv 4 MiB, latency 8 B, allreduce 64 MiB, size sweep"
else
	say "  $rounds rounds of: (a) raw RDMA WRITE 4 MiB, (b) plugin sendrecv 4 MiB, (c) 8 B latency, plugin and raw"
	say "  ping-pong, (c1) the same with receives posted 1 ahead, (d) plugin allreduce 64 MiB; then a size sweep"
	if [ "${NB_NO_CPU_COST:-0}" != 1 ] && command -v valgrind >/dev/null; then
		say "  and (e) instructions per message (scripts/cpu-cost.sh$([ "${NB_QUICK:-0}" = 1 ] && echo ", loopback only"))"
	fi
	if [ -n "$nccl" ]; then
		say "  NCCL's IB transport ($nccl) runs beside the plugin in (b), (c), (c1), (d)"
	else
		say "  NCCL's IB transport not compared (no usable libnccl.so.2)"
	fi
fi
say "  every run's full output: $log$([ "$verbose" = 1 ] || echo " (-v: also here)")"

step() { detail ""; detail "== $*"; }
field() {	# field FILE KEY NAME: NAME=value on the first line starting with KEY
	awk -v k="$2" -v f="$3" '$1 == k { for (i = 2; i <= NF; i++) {
		split($i, kv, "="); if (kv[1] == f) { print kv[2]; exit } } }' "$1"
}
csvcol() {	# csvcol FILE TEST SIZE COLUMN [PLUGIN]: default the first plugin of the file
	awk -F, -v t="$2" -v s="$3" -v c="$4" -v p="${5:-}" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
		$1 == t && $3 == s && (p == "" || $col["plugin"] == p) { print $col[c]; exit }' "$1"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "n/a" }'; }
verdict() {	# verdict RATIO OP TARGET
	awk -v r="$1" -v op="$2" -v t="$3" 'BEGIN { if (r == "n/a") { print "n/a"; exit }
		ok = (op == ">=") ? (r + 0 >= t) : (r + 0 <= t); print ok ? "met" : "MISSED" }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2];
	else printf "%.4g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# --hosts N: the plugin's runs across N simulated hosts, one rank per host.
bench_hosts() {
	local sc=$top/test/cluster/sim-cluster port=$((30000 + $$ % 20000)) name args r pids rc
	[ "$fabric" = simverbs ] || { echo "bench: --hosts needs simverbs (no RDMA device)" >&2; exit 1; }
	export SIM_CLUSTER="bh$(($$ % 1000000))"
	trap '"$sc" down >/dev/null 2>&1; rm -rf "$rv"' EXIT
	step "sim-cluster up --hosts $hosts --link ib"
	run "sim-cluster up" "$sc" up --hosts "$hosts" --link ib --build "$B" || exit 1
	for name in sendrecv latency allreduce sweep; do
		case $name in
		sendrecv) args=(-t sendrecv -b 4M -e 4M -n "$bw_iters" -w 5) ;;
		latency) args=(-t latency -b 8 -e 8 -n "$lat_iters" -w 100 -R 3) ;;
		allreduce) args=(-t allreduce -b 64M -e 64M -n "$ar_iters" -w 1) ;;
		sweep) args=(-t all $sweep --plot "$out/bench.svg") ;;
		esac
		step "$name across $hosts hosts: nccl-net-bench ${args[*]}"
		SECONDS=0
		pids=()
		for ((r = 0; r < hosts; r++)); do
			NCCL_SOCKET_IFNAME=mgmt0 "$sc" exec "h$r" -- "$BENCH" -p "$PLUGIN" -d "${NB_DEV:-0}" \
				--timeout 300 --rank "$r" --nranks "$hosts" --root "10.250.0.1:$port" \
				"${args[@]}" --csv "$out/hosts-$name.csv" >"$out/hosts-$name.$r.txt" 2>&1 &
			pids+=($!)
		done
		rc=0
		for r in "${pids[@]}"; do wait "$r" || rc=1; done
		show "$out/hosts-$name.0.txt"
		if [ "$rc" = 0 ]; then
			say "$name across $hosts hosts: done [$SECONDS s]"
		else
			status=1
			failed="$failed${failed:+;} $name"
			say "$name across $hosts hosts: FAILED; rank 0's last lines (every rank: $out/hosts-$name.<rank>.txt):"
			tail -n 15 "$out/hosts-$name.0.txt" | sed 's/^/    | /' | tee -a "$log"
		fi
		port=$((port + 1))
	done
	say ""
	say "== summary ($hosts simulated hosts, InfiniBand, one rank each)"
	say "  sendrecv 4 MiB bus bandwidth: $(csvcol "$out/hosts-sendrecv.csv" sendrecv 4194304 busbw_GBps) GB/s"
	say "  8 B latency: $(csvcol "$out/hosts-latency.csv" latency 8 time_us) us"
	say "  allreduce 64 MiB bus bandwidth: $(csvcol "$out/hosts-allreduce.csv" allreduce 67108864 busbw_GBps) GB/s"
	say "  files: $out/{bench.svg,hosts-*.csv}, each rank's output hosts-<run>.<rank>.txt; log $log"
	[ "$status" = 0 ] || say "bench: FAILED:$failed (see above and $log)"
	exit "$status"
}

# One round = (a), (b), (c), (d) back to back; several rounds interleave the raw
# and the plugin runs so that load from elsewhere hits both alike; medians.
[ "$hosts" -gt 1 ] && bench_hosts
for m in a b c craw d acpu bcpu dcpu cmin crawmin bn cn dn c1 c1n load; do : >"$rv/$m.txt"; done
# this round's figure of a metric (n/a when its run gave none), 2 decimals on the page (the csv
# files keep every digit); n0 holds each metric's line count when the round started
declare -A n0
last() { awk -v n="${n0[$1]}" 'NR > n { v = $1 } END { if (v == "") print "n/a"; else printf "%.2f\n", v }' \
	"$rv/$1.txt"; }
say ""
for round in $(seq 1 "$rounds"); do
	SECONDS=0
	for m in a b c craw d c1 bn cn c1n dn load; do n0[$m]=$(wc -l <"$rv/$m.txt"); done
	q=(); [ "$round" = 1 ] || q=(-q)
	step "round $round/$rounds (a) raw RDMA WRITE 4 MiB: sv-rawbench -d $raw_dev ${raw_gid[*]} -t bw -S 4194304 -r 1"
	run -o "$out/raw-bw.txt" "round $round (a) sv-rawbench -t bw" \
		timeout 300 "$RAW" -d "$raw_dev" "${raw_gid[@]}" -t bw -S 4194304 -r 1 || status=1
	show "$out/raw-bw.txt"
	field "$out/raw-bw.txt" write_bw median_GBps >>"$rv/a.txt"
	field "$out/raw-bw.txt" write_bw cpu_GBps >>"$rv/acpu.txt"

	step "round $round/$rounds (b) plugin sendrecv 4 MiB: nccl-net-bench -t sendrecv -b 4M -e 4M -n $bw_iters -w 5"
	run "round $round (b) sendrecv" "${nbc[@]}" "${q[@]}" -t sendrecv -b 4M -e 4M -n "$bw_iters" -w 5 \
		--csv "$out/sendrecv-4M-$round.csv" || status=1
	csvcol "$out/sendrecv-4M-$round.csv" sendrecv 4194304 busbw_GBps >>"$rv/b.txt"
	[ -z "$nccl" ] || csvcol "$out/sendrecv-4M-$round.csv" sendrecv 4194304 busbw_GBps IB >>"$rv/bn.txt"
	csvcol "$out/sendrecv-4M-$round.csv" sendrecv 4194304 cpu_busbw_GBps >>"$rv/bcpu.txt"

	step "round $round/$rounds (c) 8 B latency: sv-rawbench -t imm -n $lat_iters -r 3; nccl-net-bench -t latency -b 8 -e 8 -n $lat_iters -R 3"
	cut -d' ' -f1 /proc/loadavg >>"$rv/load.txt"
	run -o "$out/raw-lat.txt" "round $round (c) sv-rawbench -t imm" \
		timeout 300 "$RAW" -d "$raw_dev" "${raw_gid[@]}" -t imm -n "$lat_iters" -r 3 || status=1
	show "$out/raw-lat.txt"
	field "$out/raw-lat.txt" imm_lat median_us >>"$rv/craw.txt"
	field "$out/raw-lat.txt" imm_lat min_us >>"$rv/crawmin.txt"
	run "round $round (c) latency" "${nbc[@]}" "${q[@]}" -t latency -b 8 -e 8 -n "$lat_iters" -w 100 -R 3 \
		--csv "$out/latency-8-$round.csv" || status=1
	csvcol "$out/latency-8-$round.csv" latency 8 time_us >>"$rv/c.txt"
	[ -z "$nccl" ] || csvcol "$out/latency-8-$round.csv" latency 8 time_us IB >>"$rv/cn.txt"
	csvcol "$out/latency-8-$round.csv" latency 8 time_min_us >>"$rv/cmin.txt"
	run "round $round (c1) latency, 1 ahead" "${nbc[@]}" "${q[@]}" -t latency -b 8 -e 8 -n "$lat_iters" -w 100 \
		-R 3 --recv-depth 1 --yield -1 --csv "$out/latency1-8-$round.csv" || status=1
	csvcol "$out/latency1-8-$round.csv" latency 8 time_us >>"$rv/c1.txt"
	[ -z "$nccl" ] || csvcol "$out/latency1-8-$round.csv" latency 8 time_us IB >>"$rv/c1n.txt"

	step "round $round/$rounds (d) allreduce 64 MiB: nccl-net-bench -t allreduce -b 64M -e 64M -n $ar_iters -w 1"
	run "round $round (d) allreduce" "${nbc[@]}" "${q[@]}" -t allreduce -b 64M -e 64M -n "$ar_iters" -w 1 \
		--csv "$out/allreduce-64M-$round.csv" || status=1
	csvcol "$out/allreduce-64M-$round.csv" allreduce 67108864 busbw_GBps >>"$rv/d.txt"
	[ -z "$nccl" ] || csvcol "$out/allreduce-64M-$round.csv" allreduce 67108864 busbw_GBps IB >>"$rv/dn.txt"
	csvcol "$out/allreduce-64M-$round.csv" allreduce 67108864 cpu_busbw_GBps >>"$rv/dcpu.txt"
	say "$(printf 'round %d/%d: (a) %s GB/s  (b) %s GB/s  (c) %s us, raw %s us  (c1) %s us  (d) %s GB/s  load %s  [%d s]' \
		"$round" "$rounds" "$(last a)" "$(last b)" "$(last c)" "$(last craw)" "$(last c1)" "$(last d)" \
		"$(last load)" "$SECONDS")"
	[ -z "$nccl" ] || say "$(printf '        NCCL IB: (b) %s GB/s  (c) %s us  (c1) %s us  (d) %s GB/s' \
		"$(last bn)" "$(last cn)" "$(last c1n)" "$(last dn)")"
done
a=$(median <"$rv/a.txt"); b=$(median <"$rv/b.txt"); c=$(median <"$rv/c.txt")
craw=$(median <"$rv/craw.txt"); d=$(median <"$rv/d.txt")
acpu=$(median <"$rv/acpu.txt"); bcpu=$(median <"$rv/bcpu.txt"); dcpu=$(median <"$rv/dcpu.txt")
cmin=$(sort -g "$rv/cmin.txt" | head -n 1); crawmin=$(sort -g "$rv/crawmin.txt" | head -n 1)
bn=$(median <"$rv/bn.txt"); cn=$(median <"$rv/cn.txt"); dn=$(median <"$rv/dn.txt")
c1=$(median <"$rv/c1.txt"); c1n=$(median <"$rv/c1n.txt")
{
	echo "round,raw_write_bw_4M_GBps,plugin_sendrecv_4M_GBps,plugin_latency_8B_us,raw_imm_lat_8B_us,plugin_allreduce_64M_busbw_GBps,raw_write_bw_4M_per_cpu_s_GBps,plugin_sendrecv_4M_per_cpu_s_GBps,plugin_allreduce_64M_busbw_per_cpu_s_GBps,plugin_latency_8B_min_us,raw_imm_lat_8B_min_us,nccl_ib_sendrecv_4M_GBps,nccl_ib_latency_8B_us,nccl_ib_allreduce_64M_busbw_GBps,plugin_latency_8B_depth1_us,nccl_ib_latency_8B_depth1_us,load_average_1min"
	paste -d, "$rv"/{a,b,c,craw,d,acpu,bcpu,dcpu,cmin,crawmin,bn,cn,dn,c1,c1n,load}.txt | awk '{ print NR "," $0 }'
} >"$out/rounds.csv"

step "sweep for the plot: nccl-net-bench -t all $sweep"
SECONDS=0
# shellcheck disable=SC2086
if run "sweep" "${nb[@]}" -t all $sweep --csv "$out/sweep.csv" --plot "$out/bench.svg"; then
	say "sweep for the plot (nccl-net-bench -t all $sweep): done [$SECONDS s]"
else
	status=1
fi

cpucost=""
if [ "${NB_NO_CPU_COST:-0}" != 1 ] && command -v valgrind >/dev/null; then
	cc_env=(); [ "${NB_QUICK:-0}" = 1 ] && cc_env=(CC_PATTERNS=loopback)
	step "(e) instructions per message: scripts/cpu-cost.sh"
	ccload=$(cut -d' ' -f1 /proc/loadavg)
	SECONDS=0
	if run -o "$out/cpu-cost.txt" "(e) cpu-cost.sh" \
		env "${cc_env[@]}" NV_BUILD_DIR="$B" "$top/scripts/cpu-cost.sh"; then
		say "(e) instructions per message (scripts/cpu-cost.sh): done [$SECONDS s]"
	else
		status=1
	fi
	show "$out/cpu-cost.txt"
	ccload="$ccload .. $(cut -d' ' -f1 /proc/loadavg)"
	cpucost=$out/cpu-cost.txt
fi

# ratios: median of the per-round ratios (both sides of a ratio come from the same round)
rratio() { paste "$rv/$1.txt" "$rv/$2.txt" | awk '$1 + 0 > 0 && $2 + 0 > 0 { printf "%.4f\n", $1 / $2 }' |
	median | awk '{ if ($1 == "") print "n/a"; else printf "%.2f", $1 }'; }
rb=$(rratio b a); rc=$(rratio c craw); rd=$(rratio d b)
rbc=$(rratio bcpu acpu); rcm=$(ratio "$cmin" "$crawmin"); rdc=$(rratio dcpu bcpu)
rbn=$(rratio b bn); rcn=$(rratio c cn); rdn=$(rratio d dn)
rc1=$(rratio c1 craw); rc1n=$(rratio c1 c1n)
{
	echo "metric,value,unit,ratio,target,verdict"
	echo "raw_write_bw_4M,${a:-n/a},GB/s,,,"
	echo "plugin_sendrecv_4M,${b:-n/a},GB/s,$rb,>=0.9 x raw_write_bw_4M,$(verdict "$rb" '>=' 0.9)"
	echo "raw_imm_lat_8B,${craw:-n/a},us,,,"
	echo "plugin_latency_8B,${c:-n/a},us,$rc,<=1.5 x raw_imm_lat_8B,$(verdict "$rc" '<=' 1.5)"
	echo "plugin_allreduce_64M_busbw,${d:-n/a},GB/s,$rd,>=0.8 x plugin_sendrecv_4M,$(verdict "$rd" '>=' 0.8)"
	echo "raw_write_bw_4M_per_cpu_s,${acpu:-n/a},GB/s,,,"
	echo "plugin_sendrecv_4M_per_cpu_s,${bcpu:-n/a},GB/s,$rbc,>=0.9 x raw per CPU s,$(verdict "$rbc" '>=' 0.9)"
	echo "raw_imm_lat_8B_min,${crawmin:-n/a},us,,,"
	echo "plugin_latency_8B_min,${cmin:-n/a},us,$rcm,<=1.5 x raw min,$(verdict "$rcm" '<=' 1.5)"
	echo "plugin_allreduce_64M_busbw_per_cpu_s,${dcpu:-n/a},GB/s,$rdc,>=0.8 x sendrecv per CPU s,$(verdict "$rdc" '>=' 0.8)"
	echo "nccl_ib_sendrecv_4M,${bn:-n/a},GB/s,$rbn,plugin/nccl >=1.0,$(verdict "$rbn" '>=' 1.0)"
	echo "nccl_ib_latency_8B,${cn:-n/a},us,$rcn,plugin/nccl <=1.0 (receives 8 ahead: no wait to remove),$(verdict "$rcn" '<=' 1.0)"
	echo "plugin_latency_8B_depth1,${c1:-n/a},us,$rc1,<=1.15 x raw_imm_lat_8B (eager path),$(verdict "$rc1" '<=' 1.15)"
	echo "nccl_ib_latency_8B_depth1,${c1n:-n/a},us,$rc1n,plugin/nccl <=0.85 (eager path),$(verdict "$rc1n" '<=' 0.85)"
	echo "nccl_ib_allreduce_64M_busbw,${dn:-n/a},GB/s,$rdn,plugin/nccl >=1.0,$(verdict "$rdn" '>=' 1.0)"
	# (e): per message (loopback; two-process work), and one idle call; ratio plugin / NCCL
	[ -z "$cpucost" ] || awk '$1 ~ /^(loopback|latency|sendrecv|idle-test|idle-isend)$/ && NF >= 3 {
		idle = ($1 ~ /^idle/); r = (NF >= 5) ? $5 : "n/a"
		v = (r == "n/a" || idle) ? (r == "n/a" ? "n/a" : "") : (r + 0 <= 0.7 ? "met" : "MISSED")
		printf "instructions_%s_%sB,%s,%s,%s,%s,%s\n", $1, $2, $3,
			idle ? "instructions per call" : "instructions per message", r,
			idle ? "" : "<=0.70 x nccl_ib", v }' "$cpucost"
} >"$out/summary.csv"

lmin=$(sort -g "$rv/load.txt" | head -n 1); lmax=$(sort -g "$rv/load.txt" | tail -n 1)
v() { awk -v x="$1" -v u="$2" 'BEGIN { if (x == "") print "n/a " u; else printf "%.2f %s\n", x, u }'; }	# value, unit
row() {	# row LABEL VALUE RATIO TARGET VERDICT | VALUE RATIO VERDICT
	printf '  %-36s %-12s %-15s %-8s %-7s| %-12s %-14s %s\n' "$@" | sed 's/ *$//' | tee -a "$log"
}
say ""
say "== summary ($fabric, $(nproc) CPUs): medians over $rounds rounds; ratios are medians of the per-round ratios"
say "  (per CPU s: per CPU second of the busiest process that writes data; fastest rep.: fastest repetition of all rounds)"
row "figure" "wall clock" "ratio" "target" "" "per CPU s" "ratio" ""
row "(a) raw RDMA WRITE 4 MiB" "$(v "$a" GB/s)" "" "" "" "$(v "$acpu" GB/s)" "" ""
row "(b) plugin sendrecv 4 MiB" "$(v "$b" GB/s)" "(b)/(a) $rb" ">= 0.9" "$(verdict "$rb" '>=' 0.9)" \
	"$(v "$bcpu" GB/s)" "(b)/(a) $rbc" "$(verdict "$rbc" '>=' 0.9)"
row "(d) plugin allreduce 64 MiB, busbw" "$(v "$d" GB/s)" "(d)/(b) $rd" ">= 0.8" "$(verdict "$rd" '>=' 0.8)" \
	"$(v "$dcpu" GB/s)" "(d)/(b) $rdc" "$(verdict "$rdc" '>=' 0.8)"
row "" "median" "" "" "" "fastest rep." "" ""
row "(c) plugin latency 8 B" "$(v "$c" us)" "(c)/raw $rc" "<= 1.5" "$(verdict "$rc" '<=' 1.5)" \
	"$(v "$cmin" us)" "(c)/raw $rcm" "$(verdict "$rcm" '<=' 1.5)"
row "    raw WRITE_WITH_IMM ping-pong 8 B" "$(v "$craw" us)" "" "" "" "$(v "$crawmin" us)" "" ""
row "(c1) latency 8 B, 1 ahead, spinning" "$(v "$c1" us)" "(c1)/raw $rc1" "<= 1.15" "$(verdict "$rc1" '<=' 1.15)" \
	"" "" ""
if [ -n "$nccl" ]; then
	say "  NCCL's IB transport, same runs (sizes interleaved with ours); ratio = plugin / NCCL:"
	row "    sendrecv 4 MiB" "$(v "$bn" GB/s)" "ratio $rbn" ">= 1.0" "$(verdict "$rbn" '>=' 1.0)" "" "" ""
	row "    latency 8 B (8 ahead)" "$(v "$cn" us)" "ratio $rcn" "<= 1.0" "$(verdict "$rcn" '<=' 1.0)" "" "" ""
	row "    latency 8 B (c1: 1 ahead)" "$(v "$c1n" us)" "ratio $rc1n" "<= 0.85" "$(verdict "$rc1n" '<=' 0.85)" "" "" ""
	row "    allreduce 64 MiB, busbw" "$(v "$dn" GB/s)" "ratio $rdn" ">= 1.0" "$(verdict "$rdn" '>=' 1.0)" "" "" ""
fi
say "  load average over the rounds: $lmin .. $lmax on $(nproc) CPUs$(awk -v l="$lmax" -v n="$(nproc)" \
	'BEGIN { if (l + 0 > n / 2) print " - other load may have distorted the wall-clock and median figures;" }')"
awk -v l="$lmax" -v n="$(nproc)" 'BEGIN { exit !(l + 0 > n / 2) }' &&
	say "  the per CPU s and fastest-repetition columns are the stable ones"
[ -z "$cpucost" ] || { say "  (e) instructions per message (ratio: plugin / NCCL, target <= 0.70; load average $ccload):"
	sed 's/^/      /' "$cpucost" | tee -a "$log"; }
say ""
say "files in $out/:"
say "  summary.csv (the figures above, ratios, targets), rounds.csv (every round's figures and load),"
say "  bench.svg (bus bandwidth against size), sweep.csv, per-round sendrecv-4M-, latency-8-, latency1-8-,"
say "  allreduce-64M-<round>.csv, raw-bw.txt, raw-lat.txt$( [ -z "$cpucost" ] || echo ", cpu-cost.txt"), bench.log (every run's output)"
[ "$status" = 0 ] || say "bench: FAILED:${failed:- a result was wrong} (see above and $log)"
exit "$status"
