#!/usr/bin/env bash
# loss-bench.sh - what packet loss on a RoCE link costs, our plugin and NCCL's own IB
# transport side by side: two simulated hosts joined by a RoCE link
# (test/cluster/sim-cluster --link roce; root, iproute2), one rank each, at simverbs packet
# loss LB_LOSSES (default "0 1e-5 1e-4 1e-3") on every link. Per loss: sendrecv bus
# bandwidth at LB_SIZE (default 4M) and the 8-byte half round trip, both transports in one
# run each (nccl-net-bench -p ours,nccl-ib, sizes interleaved; LB_REPS repetitions, the
# median; NCCL's column only when libnccl.so.2 is there), and what h0's port counters
# counted over the bandwidth run. nccl-net-verbs-info --watch runs on h0 throughout (it
# also keeps the fabric, and so the counters, alive between runs); its diagnosis lines
# from the lossiest bandwidth run are shown at the end.
#
# The loss model (test/simverbs/README.md, "Packet loss and port counters"): go-back-N
# after a NAK costs a round trip, a lost last packet or ACK the local ACK timeout,
# 4.096 us x 2^NCCL_IB_TIMEOUT (20 for both transports) x the fabric's timeout scale
# (LB_TIMEOUT_SCALE, default 0.01: 43 ms instead of 4.3 s).
#
# Environment: NV_BUILD_DIR (default build/), LB_LOSSES, LB_SIZE, LB_BW_ITERS (default 40),
# LB_LAT_ITERS (default 2000), LB_REPS (default 5), LB_TIMEOUT_SCALE,
# NCCL_NET_BENCH_NCCL_LIB (default /usr/local/cuda/lib64/libnccl.so.2).
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=$(cd "${NV_BUILD_DIR:-$top/build}" && pwd)
BENCH=$B/nccl-net-bench
INFO=$B/nccl-net-verbs-info
PLUGIN=$B/.libs/libnccl-net-verbs.so
sc=$top/test/cluster/sim-cluster
for f in "$BENCH" "$INFO" "$PLUGIN"; do
	[ -e "$f" ] || { echo "loss-bench: $f was not built" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "loss-bench: sim-cluster needs root" >&2; exit 1; }
nccl_lib=${NCCL_NET_BENCH_NCCL_LIB:-/usr/local/cuda/lib64/libnccl.so.2}
spec=$PLUGIN
[ -e "$nccl_lib" ] && spec="$PLUGIN,nccl-ib:$nccl_lib"
size=${LB_SIZE:-4M}
reps=${LB_REPS:-5}
tscale=${LB_TIMEOUT_SCALE:-0.01}
export SIM_CLUSTER="lb$(($$ % 100000))"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/loss-bench.XXXXXX")
wpid=
trap '[ -n "$wpid" ] && kill "$wpid"; "$sc" down >/dev/null 2>&1; rm -rf "$tmp"' EXIT
"$sc" up --hosts 2 --link roce --build "$B" >"$tmp/up.out" 2>&1 ||
	{ cat "$tmp/up.out"; echo "loss-bench: sim-cluster up failed" >&2; exit 1; }
"$sc" exec h0 -- "$INFO" --watch 2 >"$tmp/watch" 2>&1 &
wpid=$!
for _ in $(seq 120); do	# attached (the counter files exist) once it printed its first line
	grep -q 'per port' "$tmp/watch" && break
	sleep 0.5
done
port=$((30000 + $$ % 20000))

# run NAME LOSS ARGS...: both ranks of one nccl-net-bench run; rank 0's output in $tmp/NAME
run() {
	local name=$1 loss=$2 r pids=() rc=0
	shift 2
	for r in 0 1; do
		SIMVERBS_CONTROL="timeout-scale $tscale;loss $loss" NCCL_SOCKET_IFNAME=mgmt0 \
			"$sc" exec "h$r" -- "$BENCH" -p "$spec" --timeout 600 --rank "$r" --nranks 2 \
			--root "10.250.0.1:$port" "$@" >"$tmp/$name.$r" 2>&1 &
		pids+=($!)
	done
	for r in "${pids[@]}"; do wait "$r" || rc=1; done
	port=$((port + 1))
	cp "$tmp/$name.0" "$tmp/$name"
	return $rc
}

# col FILE SIZE N: column N (2: ours, 3: NCCL's) of SIZE's row in FILE's comparison table
col() { awk -v s="$2" -v n="$3" '/comparison:/ { t = 1 } t && $1 == s { print $n; exit }' "$1"; }
# one FILE TEST SIZE FIELD: the value of a single-plugin run (no comparison table)
one() { awk -v s="$3" -v f="$4" '$1 == s && NF >= 9 { print $f; exit }' "$1"; }

# counters: h0's first port's loss and recovery counters, "name value" lines
counters() {
	"$sc" exec h0 -- sh -c 'for d in /sys/class/infiniband/*/ports/1/hw_counters; do
		cd "$d" 2>/dev/null || continue; for f in out_of_sequence out_of_seq_request packet_seq_err rcvd_seq_err \
			implied_nak_seq_err local_ack_timeout_err completer_retry_err \
			duplicate_request; do [ -e "$f" ] && echo "$f $(cat "$f")"; done; break; done'
}
# delta BEFORE AFTER: "name=after-before ..." of the counters in both
delta() {
	awk 'NR == FNR { b[$1] = $2; next } ($1 in b) { printf "%s=%d ", $1, $2 - b[$1] }' "$1" "$2"
}

printf '# loss-bench: 2 simulated hosts, RoCE (simverbs, sim-cluster), %s, load average %s\n' \
	"$(date -u +%FT%TZ)" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '# sendrecv %s bus bandwidth (GB/s) and 8-byte half round trip (us), median of %s;\n' \
	"$size" "$reps"
printf '# local ACK timeout 4.096 us x 2^20 x %s; h0 port counters over the bandwidth run\n' \
	"$tscale"
printf '%-7s %10s %10s %10s %10s  %s\n' loss "ours GB/s" "NCCL GB/s" "ours us" "NCCL us" \
	"h0 counters over the bandwidth run"
status=0
last=""
for loss in ${LB_LOSSES:-0 1e-5 1e-4 1e-3}; do
	last=$loss
	counters >"$tmp/c0"
	wl=$(wc -l <"$tmp/watch")
	run "bw-$loss" "$loss" -t sendrecv -b "$size" -e "$size" -n "${LB_BW_ITERS:-40}" -w 5 \
		-R "$reps" || { status=1; echo "loss $loss: bandwidth run failed:"; tail -n 5 "$tmp/bw-$loss"; }
	sleep 0.2
	counters >"$tmp/c1"
	cnt=$(delta "$tmp/c0" "$tmp/c1")
	tail -n +"$((wl + 1))" "$tmp/watch" | grep DIAGNOSIS | head -n 2 >"$tmp/diag-$loss"
	run "lat-$loss" "$loss" -t latency -b 8 -e 8 -n "${LB_LAT_ITERS:-2000}" -w 100 -R "$reps" ||
		{ status=1; echo "loss $loss: latency run failed:"; tail -n 5 "$tmp/lat-$loss"; }
	sz=$(numfmt --from=iec "$size")
	if [ "$spec" = "$PLUGIN" ]; then
		printf '%-7s %10s %10s %10s %10s  %s\n' "$loss" "$(one "$tmp/bw-$loss" sendrecv "$sz" 8)" - \
			"$(one "$tmp/lat-$loss" latency 8 6)" - "$cnt"
	else
		printf '%-7s %10s %10s %10s %10s  %s\n' "$loss" "$(col "$tmp/bw-$loss" "$sz" 2)" \
			"$(col "$tmp/bw-$loss" "$sz" 3)" "$(col "$tmp/lat-$loss" 8 2)" \
			"$(col "$tmp/lat-$loss" 8 3)" "$cnt"
	fi
done
echo "# nccl-net-verbs-info --watch 2 on h0 during the loss $last bandwidth run:"
sed 's/^/#   /' "$tmp/diag-$last"
exit $status
