#!/usr/bin/env bash
# fuzz.sh - builds and runs the libFuzzer targets of the network decoders
# (test/fault/fuzz/fuzz_*.c, each linked directly with src/wire.c).
#
#   test/fault/fuzz.sh [--runs N] [--time SECONDS] [--jobs J] [--seeds] [target...]
#
# --runs N      executions per target (default 20000: the short pass of check-extra)
# --time S      instead, run each target for S seconds
# --seeds       (re)generate the seed corpus in the source tree first
# targets       handle hdr hello status meta stream cts records eager credit fo lb
#               (default: all whose decoder source exists: cts, records, eager
#               and credit need src/cts.c, fo src/fo_msg.c)
# Environment: NV_TOP_SRCDIR, NV_TOP_BUILDDIR (default: this checkout and ./build),
# CLANG (default clang). Exit 77 when clang cannot link -fsanitize=fuzzer.
# New inputs go to a scratch corpus under the build dir; the committed seed
# corpus (test/fault/corpus/<target>) is only read. Crashes are saved as
# <build>/test/fault/fuzz-out/<target>/crash-* and the script exits 1.
set -u
src=${NV_TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${NV_TOP_BUILDDIR:-$src/build}
cc=${CLANG:-clang}
runs=20000
time=
seeds=0
targets=()
while [ $# -gt 0 ]; do
	case $1 in
	--runs) runs=$2; shift 2 ;;
	--time) time=$2; shift 2 ;;
	--seeds) seeds=1; shift ;;
	-h|--help) sed -n '2,16p' "$0"; exit 0 ;;
	*) targets+=("$1"); shift ;;
	esac
done
if [ ${#targets[@]} -eq 0 ]; then
	targets=(handle hdr hello status meta stream)
	grep -q nv_wire_lb_decode "$src/src/wire.c" && targets+=(lb)
	[ -f "$src/src/cts.c" ] && targets+=(cts records eager credit)
	[ -f "$src/src/fo_msg.c" ] && targets+=(fo)
fi

out=$build/test/fault/fuzz-out
bin=$build/test/fault/fuzz-bin
mkdir -p "$out" "$bin"
probe=$bin/probe.c
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }' >"$probe"
if ! "$cc" -fsanitize=fuzzer,address "$probe" -o "$bin/probe" 2>/dev/null; then
	echo "fuzz.sh: $cc cannot link -fsanitize=fuzzer,address (install clang and libclang-rt-14-dev); skipping"
	exit 77
fi
if [ ! -f "$build/config.h" ]; then
	echo "fuzz.sh: $build/config.h missing (configure the build dir first)"
	exit 1
fi
cflags=(-g -O1 -std=gnu11 -Wall -Wextra -Werror -I"$src/include" -I"$src/src" -I"$build"
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)

if [ $seeds = 1 ]; then
	"$cc" -std=gnu11 -Wall -Wextra -Werror -I"$src/include" -I"$src/src" -I"$build" \
		"$src/src/wire.c" "$src/src/fo_msg.c" "$src/test/fault/fuzz/fuzz_seeds.c" \
		-o "$bin/fuzz_seeds" || exit 1
	mkdir -p "$src/test/fault/corpus" && "$bin/fuzz_seeds" "$src/test/fault/corpus" || exit 1
fi

status=0
for t in "${targets[@]}"; do
	exe=$bin/fuzz_$t
	case $t in
	cts|records|eager|credit) dec=("$src/src/cts.c") ;;
	fo) dec=("$src/src/fo_msg.c" "$src/src/cts.c") ;;
	*) dec=("$src/src/wire.c") ;;
	esac
	"$cc" "${cflags[@]}" "${dec[@]}" "$src/test/fault/fuzz/fuzz_$t.c" -o "$exe" || exit 1
	mkdir -p "$out/$t/corpus"
	if [ -n "$time" ]; then limit=(-max_total_time="$time"); else limit=(-runs="$runs"); fi
	start=$(date +%s)
	"$exe" "${limit[@]}" -max_len=8192 -timeout=10 -rss_limit_mb=1024 -print_final_stats=1 \
		-artifact_prefix="$out/$t/" "$out/$t/corpus" "$src/test/fault/corpus/$t" \
		>"$out/$t/log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$t/log")
	cov=$(grep -o 'cov: [0-9]*' "$out/$t/log" | tail -1)
	echo "fuzz_$t: exit $rc, ${execs:-?} executions, $cov, $(( $(date +%s) - start )) s"
	if [ $rc -ne 0 ]; then
		tail -n 30 "$out/$t/log"
		status=1
	fi
done
exit $status
