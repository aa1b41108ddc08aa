#!/usr/bin/env bash
# soak.sh - the long soak: >= 10^6 messages of random sizes
# (0 B .. 4 MiB, mostly small), random tags and grouped receives over several
# connections between two processes, InfiniBand and RoCE, every byte checked.
#
#   test/fault/soak.sh [--build DIR] [--messages N] [--conns K] [--depth D] [--seed S]
#                      [--failover F]
#
# Defaults: --messages 1000000 --conns 4 --depth 8, build dir ./build. Prints
# the result line and the wall time; exit status 0 only when every message
# arrived once, intact and with its size, and messages went eager (the eager
# path is on unless NCCL_VERBS_EAGER_MAX=0). --failover F adds F connections
# over a fused NIC (simib1 + simib2) with port failover and recovery on, into
# which random faults are injected while the soak runs (QP errors, failed
# work requests, lost acknowledgements, a port down and up); the counts of
# faults and failover rounds are printed. The long run of the README:
#   test/fault/soak.sh --messages 1000000 --failover 2
# (make check runs the same program with 20000 messages: test/fault/fault_soak.)
# FAULT_SOAK_PROGRESS=1 prints progress.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$src/build
args=()
have_msgs=0
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$(cd "$2" && pwd); shift 2 ;;
	--messages) have_msgs=1; args+=("$1" "$2"); shift 2 ;;
	-h|--help) sed -n '2,19p' "$0"; exit 0 ;;
	*) args+=("$1"); shift ;;
	esac
done
[ $have_msgs = 1 ] || args+=(--messages 1000000)
[[ " ${args[*]} " == *" --depth "* ]] || args+=(--depth 8)
prog=$build/test/fault/fault_soak
[ -x "$prog" ] || make -C "$build" test/fault/fault_soak >/dev/null
export LD_LIBRARY_PATH="$build/test/simverbs/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SIMVERBS_FABRIC="nvsoak-$$" SIMVERBS_LEAK_CHECK=1
export NV_TEST_PLUGIN="$build/.libs/libnccl-net-verbs.so" NCCL_DEBUG="${NCCL_DEBUG:-WARN}"
start=$(date +%s)
"$prog" "${args[@]}"
echo "soak.sh: ok in $(( $(date +%s) - start )) s"
