#!/usr/bin/env bash
# cpu-cost.sh - instructions the plugin's own object executes per message,
# counted by valgrind's callgrind, for our plugin and (when libnccl.so.2 is
# there and not stripped) for NCCL's built-in IB transport, with the ratios.
#
# Patterns (each run at two iteration counts N1 < N2 and differenced, so
# set-up and teardown cancel out; per message = difference / messages). Only
# the calling thread inside the measured loop is counted (callgrind
# --toggle-collect of nb_self_rounds, nb_self_idle or nb_run): not set-up,
# not the plugin's background threads (ours: the per-HCA event thread, which
# wakes every 100 ms and checks the sockets of waiting comms; NCCL's: its
# async-event thread, blocked in the kernel).
#   loopback  one process, a loopback send/recv pair on one device, rounds of
#             irecv + isend + test until both are done (nccl-net-bench --self):
#             on simverbs, which completes loopback work inside ibv_post_send,
#             every round makes the same calls, so this count does not depend
#             on load and repeats to the instruction
#   send-first  the same rounds, each trying its isend before its irecv
#             (--self --send-first): a message that may go eager goes before
#             its clear-to-send exists (ours: NCCL_VERBS_EAGER_MAX); a plugin
#             without an eager path pays a null isend per round instead
#             (not in the default CC_PATTERNS)
#   latency   two processes, the 8-byte-style ping-pong of nccl-net-bench -t
#             latency (2 messages per iteration, both ranks counted)
#   sendrecv  two processes, one direction (1 message per iteration)
# The two-process runs' raw counts include every call that found
# nothing to do while waiting for the peer, whose number depends on load; the
# benchmark counts those (--calls: test() not done, isend() without a
# request), and "work" subtracts them at the cost of one such call, measured
# per plugin and size by the idle patterns (per call, not per message):
#   idle-test   --self --idle test: test() of a receive nothing is sent to
#   idle-isend  --self --idle isend: isend() before any receive is posted
# (CC_I1/CC_I2 calls, differenced). Sizes: 8 B and 512 KiB.
#
# Environment: NV_BUILD_DIR (default build/), CC_N1/CC_N2 (loopback rounds,
# default 200/400), CC_P1/CC_P2 (two-process iterations, default 100/300),
# CC_REPS (two-process pairs, median reported; default 3), CC_I1/CC_I2
# (idle calls, default 200/1200), CC_PATTERNS (default "loopback latency
# sendrecv", spaces or commas), CC_SIZES (default "8 524288"),
# NCCL_NET_BENCH_NCCL_LIB (NCCL library; default the CUDA toolkit's),
# CC_VERBOSE=1 (every pair's two-process figures on stderr).
# Prints a table; exits non-zero when a run fails.
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=$(cd "${NV_BUILD_DIR:-$top/build}" && pwd)
BENCH=$B/nccl-net-bench
PLUGIN=$B/.libs/libnccl-net-verbs.so
for f in "$BENCH" "$PLUGIN"; do
	[ -e "$f" ] || { echo "cpu-cost: $f was not built" >&2; exit 1; }
done
command -v valgrind >/dev/null || { echo "cpu-cost: valgrind is not installed" >&2; exit 1; }
if [ -z "$(ls -A /sys/class/infiniband 2>/dev/null)" ]; then
	export LD_LIBRARY_PATH="$B/test/simverbs/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	export SIMVERBS_FABRIC="nvcost-$$-$(date +%s)"
	fabric=simverbs
else
	fabric=real
fi
unset SIMVERBS_LEAK_CHECK
n1=${CC_N1:-200} n2=${CC_N2:-400} p1=${CC_P1:-100} p2=${CC_P2:-300} nrep=${CC_REPS:-3}
i1=${CC_I1:-200} i2=${CC_I2:-1200}
patterns=${CC_PATTERNS:-loopback latency sendrecv}
patterns=${patterns//,/ }
sizes=${CC_SIZES:-8 524288}
sizes=${sizes//,/ }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpucost.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

plugins=("$PLUGIN")
labels=(Verbs)
nccl=${NCCL_NET_BENCH_NCCL_LIB:-}
for f in /usr/local/cuda/lib64/libnccl.so.2 /usr/local/cuda/lib/libnccl.so.2; do
	[ -z "$nccl" ] && [ -r "$f" ] && nccl=$f
done
if [ -n "$nccl" ] && [ -r "$nccl" ] && "$BENCH" -p "nccl-ib:$nccl" -l >"$tmp/l" 2>&1; then
	plugins+=("nccl-ib:$nccl")
	labels+=(NCCL-IB)
else
	echo "# cpu-cost: NCCL's IB transport skipped: $(tail -n 1 "$tmp/l" 2>/dev/null ||
		echo "no libnccl.so.2")"
fi

# Self instructions of one object (path matching $2) summed over callgrind files $1*.
obj_ir() {
	awk -v want="$2" '
	function obname(s,   id, rest) {
		if (match(s, /^\([0-9]+\)/)) {
			id = substr(s, 1, RLENGTH); rest = substr(s, RLENGTH + 2)
			if (rest != "") name[id] = rest
			return name[id]
		}
		return s
	}
	FNR == 1 { delete name; ob = "" }
	/^ob=/ { ob = obname(substr($0, 4)); next }
	/^cob=/ { obname(substr($0, 5)); next }
	/^calls=/ { skip = 1; next }
	/^[0-9+*-]/ { if (skip) { skip = 0; next } if (index(ob, want)) sum += $NF; next }
	{ skip = 0 }
	END { printf "%.0f\n", sum }' "$1"*
}

# Sum over the "# calls" lines of log $1 (nccl-net-bench --calls, one per rank)
# of the fields named $2, $3, ...: "test idle isend_null irecv_null".
calls() {
	awk '/^# calls / {
		for (i = 1; i <= NF; i++) {
			if ($i == "test") t += $(i + 1)
			if ($i == "idle") ti += $(i + 1)
			if ($i == "isend") s = 1
			if ($i == "irecv") s = 2
			if ($i == "null") { if (s == 1) sn += $(i + 1); else rn += $(i + 1) }
		}
	} END { printf "%.0f %.0f %.0f %.0f\n", t, ti, sn, rn }' "$1"
}

# run PATTERN PLUGIN SIZE N OUT: one callgrind run, files OUT.*, log OUT.log
run() {
	local vg=(valgrind --tool=callgrind --callgrind-out-file="$5.%p")
	case $1 in
	loopback | send-first)
		"${vg[@]}" --toggle-collect=nb_self_rounds "$BENCH" --self -p "$2" -b "$3" -n "$4" \
			-w 10 --calls $([ "$1" = send-first ] && echo --send-first) ;;
	idle-test | idle-isend)
		"${vg[@]}" --toggle-collect=nb_self_idle "$BENCH" --self --idle "${1#idle-}" -p "$2" \
			-b "$3" -n "$4" -w 10 --calls ;;
	latency | sendrecv)
		"${vg[@]}" --toggle-collect=nb_run "$BENCH" -p "$2" -t "$1" -b "$3" -e "$3" -n "$4" -w 5 -c 0 \
			--timeout 600 --calls ;;
	esac >"$5.log" 2>&1 || { echo "cpu-cost: $1 $3 B with $2 failed:" >&2; tail -n 20 "$5.log" >&2; exit 1; }
}

# pair PATTERN PLUGIN SIZE OBJ LO HI: runs at LO and HI, prints the differences
# "instructions test() idle-test() idle-isend() null-irecv()"
pair() {
	local a b
	run "$1" "$2" "$3" "$5" "$tmp/a"
	run "$1" "$2" "$3" "$6" "$tmp/b"
	a="$(obj_ir "$tmp/a." "$4") $(calls "$tmp/a.log")"
	b="$(obj_ir "$tmp/b." "$4") $(calls "$tmp/b.log")"
	rm -f "$tmp"/a.* "$tmp"/b.*
	if [ "${a%% *}" = 0 ] || [ "${b%% *}" = 0 ]; then
		echo "cpu-cost: $1 $3 B with $2: nothing of $4 counted (was the measured function inlined?)" >&2
		exit 1
	fi
	awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " ")
		for (i = 1; i <= 5; i++) printf "%.0f%s", y[i] - x[i], i < 5 ? " " : "\n" }'
}

# idle_cost KIND PLUGIN SIZE OBJ: instructions of one call that finds nothing
# to do (--self --idle KIND; CC_I1/CC_I2 calls differenced), one decimal
idle_cost() {
	pair "idle-$1" "$2" "$3" "$4" "$i1" "$i2" | awk -v n=$((i2 - i1)) '{ printf "%.1f\n", $1 / n }'
}

# two PATTERN PLUGIN SIZE OBJ CTEST CISEND: the two-process figures per message,
# median over CC_REPS differenced pairs (of each column on its own):
# "work raw idle_tests idle_isends null_irecvs"; work = raw minus the idle
# test() and null isend() calls times what one such call costs (CTEST, CISEND)
two() {
	local m=1 i rows=() med=()
	[ "$1" = latency ] && m=2
	for _ in $(seq 1 "$nrep"); do
		rows+=("$(pair "$1" "$2" "$3" "$4" "$p1" "$p2" |
			awk -v n=$(((p2 - p1) * m)) -v ct="$5" -v cs="$6" '{
				printf "%.0f %.0f %.2f %.2f %.2f\n", ($1 - $3 * ct - $4 * cs) / n,
					$1 / n, $3 / n, $4 / n, $5 / n }')")
	done
	[ "${CC_VERBOSE:-0}" = 1 ] &&
		printf '# %s %s B %s: work raw idle-tests null-isends null-irecvs per message, each pair: %s\n' \
			"$1" "$3" "$4" "$(printf '[%s] ' "${rows[@]}")" >&2
	for i in 1 2 3 4 5; do
		med+=("$(printf '%s\n' "${rows[@]}" | cut -d' ' -f$i | sort -g |
			sed -n "$(((nrep + 1) / 2))p")")
	done
	echo "${med[*]}"
}

echo "# cpu-cost on $fabric: instructions of the plugin's own object per message (callgrind)"
echo "# latency, sendrecv: work = all instructions minus the calls that found nothing to do"
echo "#   (test() not done, isend() without a request) times the idle-* cost of one such call;"
echo "#   the :raw rows give all instructions / idle test() / idle isend() per message"
echo "# idle-test, idle-isend: instructions of one such call (not per message)"
printf "%-13s %8s" pattern size
for l in "${labels[@]}"; do printf " %20s" "$l"; done
[ ${#plugins[@]} -gt 1 ] && printf " %7s" ratio
echo
# row LABEL SIZE VALUE...: the ratio is of the first fields (up to a '/') of the first two
row() {
	local lab=$1 sz=$2 v
	shift 2
	printf "%-13s %8s" "$lab" "$sz"
	for v in "$@"; do printf " %20s" "$v"; done
	[ $# -gt 1 ] && awk -v a="${1%%/*}" -v b="${2%%/*}" 'BEGIN { printf " %7.2f", (b > 0 ? a / b : 0) }'
	echo
}
two_proc=0
for pat in $patterns; do case $pat in loopback | send-first) ;; *) two_proc=1 ;; esac; done
for s in $sizes; do
	ct=() cs=()
	for i in "${!plugins[@]}"; do
		obj=libnccl-net-verbs.so
		[ "${labels[$i]}" = NCCL-IB ] && obj=$(basename "$nccl")
		objs[i]=$obj
		if [ $two_proc = 1 ]; then
			ct[i]=$(idle_cost test "${plugins[$i]}" "$s" "$obj")
			cs[i]=$(idle_cost isend "${plugins[$i]}" "$s" "$obj")
		fi
	done
	for pat in $patterns; do
		case $pat in idle-*) continue ;; esac	# per call, printed below
		vals=() raws=()
		for i in "${!plugins[@]}"; do
			if [ "$pat" = loopback ] || [ "$pat" = send-first ]; then
				vals+=("$(pair "$pat" "${plugins[$i]}" "$s" "${objs[$i]}" "$n1" "$n2" |
					awk -v n=$((n2 - n1)) '{ printf "%.0f\n", $1 / n }')")
				continue
			fi
			res=$(two "$pat" "${plugins[$i]}" "$s" "${objs[$i]}" "${ct[$i]}" "${cs[$i]}")
			read -r w r it is nr <<<"$res"
			vals+=("$w")
			raws+=("$r/$it/$is")
			awk -v nr="$nr" 'BEGIN { exit !(nr > 0) }' &&
				echo "# $pat $s B ${labels[$i]}: $nr irecv() per message returned no request (counted as work)"
		done
		row "$pat" "$s" "${vals[@]}"
		[ ${#raws[@]} -gt 0 ] && row "$pat:raw" "$s" "${raws[@]}"
	done
	if [ $two_proc = 1 ]; then
		row idle-test "$s" "${ct[@]}"
		row idle-isend "$s" "${cs[@]}"
	fi
done
