#!/bin/bash
# gpu-check.sh - real NCCL drives the plugin, on a machine with a GPU.
#
# Builds what is missing (plugin, simverbs, test/gpu/nccl-allreduce, e2e_gpu),
# then runs the client over simverbs with every NCCL it finds (the PyTorch
# wheel's libnccl.so.2, the CUDA toolkit's, the system's), with 2 and 4 ranks,
# in two modes:
#   host  SIMVERBS_GPUDIRECT=0: no peer memory, no dma-buf; NCCL stages
#         through host memory (the log must show GPU Direct RDMA Disabled);
#   gdr   SIMVERBS_GPUDIRECT=1 + NCCL_NET_GDR_LEVEL=SYS: simverbs registers GPU
#         memory and moves it with CUDA IPC; NCCL uses regMr(NCCL_PTR_CUDA) /
#         regMrDmaBuf and iflush (the log must show /GDRDMA channels).
# and the plugin's e2e_gpu test in gdr mode; then one-sided operations: with
# every NCCL 2.30+ found, test/gpu/nccl-putsignal (ncclPutSignal, ncclSignal,
# ncclWaitSignal over symmetric windows of ncclMemAlloc memory, every byte
# checked) with 2 and 4 ranks in gdr mode, NCCL's log naming our RMA tables
# (docs/rma.md; older NCCLs are listed as skipped).  Logs and summary.txt go
# to one folder.  Without a GPU it says so and exits 77.
#
# usage: scripts/gpu-check.sh [--out DIR] [--build DIR] [--max BYTES] [--ranks "2 4"]
#                             [--modes "host gdr"] [--detect]
# GPU_CHECK_ENV="VAR=value ..." adds environment to every client run;
# GPU_CHECK_BUDGET_S (default 270) bounds the time spent on client runs,
# GPU_CHECK_RMA_S (default 120) the one-sided runs after them.
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
out=
max=256M
ranks="2 4"
modes="host gdr"
detect_only=0
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=$2; shift ;;
	--build) build=$2; shift ;;
	--max) max=$2; shift ;;
	--ranks) ranks=$2; shift ;;
	--modes) modes=$2; shift ;;
	--detect) detect_only=1 ;;
	*) echo "usage: $0 [--out DIR] [--build DIR] [--max BYTES] [--ranks \"2 4\"] [--modes \"host gdr\"] [--detect]" >&2
	   exit 2 ;;
	esac
	shift
done

py=/usr/bin/python3
[ -x "$py" ] || py=python3

# Number of CUDA devices the driver reports (0: none, or no driver).
gpu_count() {
	"$py" - <<'EOF' 2>/dev/null || echo 0
import ctypes
try:
    cu = ctypes.CDLL("libcuda.so.1")
except OSError:
    print(0); raise SystemExit
n = ctypes.c_int(0)
print(n.value if cu.cuInit(0) == 0 and cu.cuDeviceGetCount(ctypes.byref(n)) == 0 else 0)
EOF
}

ngpu=$(gpu_count)
if [ "${ngpu:-0}" -lt 1 ]; then
	echo "gpu-check: no GPU here (libcuda.so.1 / cuDeviceGetCount found none): nothing to check"
	exit 77
fi
[ $detect_only = 1 ] && { echo "gpu-check: $ngpu GPU(s)"; exit 0; }

[ -n "$out" ] || out=$top/gpu-check-$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
summary=$out/summary.txt
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }
t_start=$(date +%s)

say "gpu-check $(date -u +%FT%TZ) on $(hostname): $ngpu GPU(s)"
command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | tee -a "$summary"

# ---- the NCCLs: "label libdir" lines, one per distinct libnccl.so.2
find_nccls() {
	local d
	for p in /usr/bin/python3 python3; do
		command -v "$p" >/dev/null || continue
		"$p" -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null |
			while read -r d; do [ -e "$d/lib/libnccl.so.2" ] && echo "wheel $d/lib"; done
		"$p" -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null |
			while read -r d; do
				[ -e "$d/nvidia/nccl/lib/libnccl.so.2" ] && echo "wheel $d/nvidia/nccl/lib"
			done
	done
	for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" "${CUDA_HOME:-/usr/local/cuda}/lib" \
		 /usr/local/cuda/targets/x86_64-linux/lib; do
		[ -e "$d/libnccl.so.2" ] && echo "toolkit $d"
	done
	[ -e /usr/lib/x86_64-linux-gnu/libnccl.so.2 ] && echo "system /usr/lib/x86_64-linux-gnu"
}
nccls=$(find_nccls | while read -r label dir; do
	echo "$label $(readlink -f "$dir/libnccl.so.2") $dir"; done | sort -u -k2,2 | awk '{print $1, $3}')
if [ -z "$nccls" ]; then
	say "gpu-check: FAIL: no libnccl.so.2 found (PyTorch wheel nvidia/nccl/lib, CUDA toolkit, system)"
	exit 1
fi
say "NCCLs found:"
echo "$nccls" | sed 's/^/  /' | tee -a "$summary"

# ---- build what is missing
nccl_inc=
for d in "${CUDA_HOME:-/usr/local/cuda}" $(echo "$nccls" | awk '{print $2}' | sed 's,/lib$,,'); do
	[ -r "$d/include/nccl.h" ] && { nccl_inc=$d; break; }
done
# A build is usable when every piece exists and loads here (a build folder
# carried from another machine may lack a library or need a newer glibc).
usable() {
	local b=$1 f
	for f in "$b/test/gpu/nccl-allreduce" "$b/test/gpu/nccl-putsignal" "$b/.libs/libnccl-net-verbs.so" \
		 "$b/test/simverbs/.libs/libibverbs.so.1" "$b/test/e2e/e2e_gpu"; do
		[ -e "$f" ] || return 1
		LD_LIBRARY_PATH="$b/test/simverbs/.libs:$first_nccl:$cuda_libs" ldd "$f" 2>&1 |
			grep -q 'not found' && return 1
	done
	return 0
}
build_all() {
	local b=$1
	mkdir -p "$b" && cd "$b" || return 1
	if [ ! -f Makefile ] || ! grep -q '^NCCL_LIBS = .' Makefile; then
		[ -x "$top/configure" ] || (cd "$top" && ./autogen.sh) || return 1
		"$top/configure" ${nccl_inc:+--with-nccl=$nccl_inc} || return 1
	fi
	make -j"$(nproc)" all && make -j"$(nproc)" test/gpu/nccl-allreduce test/gpu/nccl-putsignal \
		test/e2e/e2e_gpu
}
# CUDA runtime for the client: the toolkit's, else the PyTorch wheel's
cuda_libs=
for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" "${CUDA_HOME:-/usr/local/cuda}/lib" \
	 $(echo "$nccls" | awk '{print $2}' | sed 's,/nccl/lib$,/cuda_runtime/lib,'); do
	ls "$d"/libcudart.so.* >/dev/null 2>&1 && cuda_libs=${cuda_libs:+$cuda_libs:}$d
done
first_nccl=$(echo "$nccls" | awk 'NR == 1 {print $2}')
if ! usable "$build"; then
	[ -f "$build/Makefile" ] && [ "$(sed -n 's/^abs_top_builddir = //p' "$build/Makefile")" != "$build" ] &&
		build=$top/build-gpu	# carried from elsewhere: its Makefile points there
	say "building in $build (nccl.h from ${nccl_inc:-nowhere}); log: $out/build.log"
	if ! (build_all "$build") > "$out/build.log" 2>&1 || ! usable "$build"; then
		say "gpu-check: FAIL: build failed (needs autoconf, automake, libtool, libibverbs-dev, nccl.h);" \
		    "tail of $out/build.log:"
		tail -n 40 "$out/build.log"
		exit 1
	fi
else
	say "using the build in $build"
fi
client=$build/test/gpu/nccl-allreduce
plugin=$build/.libs/libnccl-net-verbs.so
simlib=$build/test/simverbs/.libs

# the plugin WARNs under a small memlock limit (simverbs does not enforce it)
ulimit -l unlimited 2>/dev/null

# ---- one client run
run_client() {	# label libdir ranks mode seconds; fails non-zero
	local label=$1 lib=$2 n=$3 mode=$4 secs=$5 dir fab rc g
	dir=$out/$label-n$n-$mode
	mkdir -p "$dir"
	fab=gpucheck-$$-$label-n$n-$mode
	local env=(LD_LIBRARY_PATH="$simlib:$lib${cuda_libs:+:$cuda_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
		   SIMVERBS_FABRIC="$fab" NCCL_NET_PLUGIN="$plugin" NCCL_NET=Verbs
		   NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-lo}")
	if [ "$mode" = gdr ]; then	# host-nocumem: host, with GPU_CHECK_ENV
		g=1
		env+=(SIMVERBS_GPUDIRECT=1 NCCL_VERBS_GDR_SYSFS_ROOT="/tmp/simverbs-$(id -u)/$fab"
		      NCCL_NET_GDR_LEVEL=SYS NCCL_CUMEM_ENABLE=0)
	else
		g=0
		env+=(SIMVERBS_GPUDIRECT=0)
	fi
	# shellcheck disable=SC2206
	env+=(${GPU_CHECK_ENV:-})
	printf '%s\n' "${env[@]}" > "$dir/env.txt"
	env "${env[@]}" timeout -k 5 "$secs" "$client" -n "$n" -b 8 -e "$max" -f 4 -i 5 -w 1 \
		-t $((secs - 5)) \
		-p "$plugin" -l "$dir" -g "$g" > "$dir/client.out" 2>&1
	rc=$?
	local ver peak
	ver=$(sed -n 's/^rank 0: NCCL \([0-9.]*\),.*/\1/p' "$dir/client.out" | head -1)
	peak=$(sed -n 's/^# \(.*\): peak busbw \(.*\) GB\/s/\1=\2/p' "$dir/client.out" | tr '\n' ';')
	if [ $rc = 0 ]; then
		say "PASS $label NCCL ${ver:-?} n=$n $mode: peak busbw GB/s: $peak"
		grep '^rank 0:' "$dir/client.out" | head -1 | sed 's/^/     /' | tee -a "$summary"
	else
		say "FAIL $label NCCL ${ver:-?} n=$n $mode: exit $rc (logs in $dir)"
		echo "---- tail of $dir/client.out"; tail -n 30 "$dir/client.out"
		for f in "$dir"/nccl-rank*.log; do
			[ -e "$f" ] || continue
			echo "---- WARNs and tail of $f"
			grep -a 'WARN' "$f" | head -n 10
			tail -n 25 "$f"
		done
	fi
	rm -rf "/tmp/simverbs-$(id -u)/$fab" 2>/dev/null
	return $rc
}

# ---- the plugin's e2e_gpu in GPUDirect mode (seconds; first, a quick signal)
fab=gpucheck-$$-e2e
env LD_LIBRARY_PATH="$simlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" SIMVERBS_FABRIC="$fab" SIMVERBS_GPUDIRECT=1 \
	NCCL_VERBS_GDR_SYSFS_ROOT="/tmp/simverbs-$(id -u)/$fab" NV_TEST_PLUGIN="$plugin" \
	NV_TOP_SRCDIR="$top" NV_TOP_BUILDDIR="$build" NCCL_DEBUG=INFO \
	timeout -k 5 60 "$build/test/e2e/e2e_gpu" > "$out/e2e_gpu.log" 2>&1
rc=$?
rm -rf "/tmp/simverbs-$(id -u)/$fab"
efail=0
case $rc in
0) say "PASS e2e_gpu (SIMVERBS_GPUDIRECT=1): $(grep -a 'GPU on' "$out/e2e_gpu.log" | tail -n 1)" ;;
77) say "SKIP e2e_gpu: $(tail -n 1 "$out/e2e_gpu.log")"; efail=1 ;;
*) say "FAIL e2e_gpu: exit $rc"; tail -n 30 "$out/e2e_gpu.log"; efail=1 ;;
esac

# ---- the client runs: 2 ranks with every NCCL first, then 4; stop starting
# runs when the time budget is spent (they are listed as not run)
budget=${GPU_CHECK_BUDGET_S:-270}
for n in $ranks; do
	echo "$nccls" | while read -r label lib; do
		for mode in $modes; do
			left=$((budget - ($(date +%s) - t_start)))
			if [ "$left" -lt 20 ]; then
				say "NOT RUN $label n=$n $mode: time budget (${budget} s, GPU_CHECK_BUDGET_S) spent"
				echo 1 >> "$out/.fails"
				continue
			fi
			[ "$left" -gt 150 ] && left=150
			if ! run_client "$label" "$lib" "$n" "$mode" "$left"; then
				echo 1 >> "$out/.fails"
				# host staging with NCCL's cuMem host buffers is the one default
				# simverbs has never met: tell it apart with one more run
				left=$((budget - ($(date +%s) - t_start)))
				if [ "$mode" = host ] && [ -z "${GPU_CHECK_ENV:-}" ] && [ "$left" -ge 20 ]; then
					[ "$left" -gt 150 ] && left=150
					GPU_CHECK_ENV="NCCL_CUMEM_ENABLE=0" run_client "$label" "$lib" "$n" \
						host-nocumem "$left"
				fi
			fi
		done
	done
done
# ---- one-sided: ncclPutSignal through ncclRmaPlugin_v14 (v15 for 2.31+), GPU windows, so
# GPUDirect mode only (simverbs registers the GPU memory); 77 from the client: an NCCL older
# than 2.30 or an nccl.h older than 2.29, listed as skipped
run_putsignal() {	# label libdir ranks seconds; fails non-zero
	local label=$1 lib=$2 n=$3 secs=$4 dir fab rc
	dir=$out/$label-n$n-putsignal
	mkdir -p "$dir"
	fab=gpucheck-$$-$label-n$n-ps
	env LD_LIBRARY_PATH="$simlib:$lib${cuda_libs:+:$cuda_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
		SIMVERBS_FABRIC="$fab" SIMVERBS_GPUDIRECT=1 NCCL_VERBS_GDR_SYSFS_ROOT="/tmp/simverbs-$(id -u)/$fab" \
		NCCL_NET_GDR_LEVEL=SYS NCCL_NET_PLUGIN="$plugin" NCCL_NET=Verbs \
		NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-lo}" ${GPU_CHECK_ENV:-} \
		timeout -k 5 "$secs" "$build/test/gpu/nccl-putsignal" -n "$n" -b 8 -e 4M -i 5 \
		-l "$dir" -p "$plugin" > "$dir/client.out" 2>&1
	rc=$?
	case $rc in
	0) say "PASS $label n=$n putsignal: $(grep -a 'B to each' "$dir/client.out" | tail -n 1)" ;;
	77) say "SKIP $label n=$n putsignal: $(grep -a 'skipped' "$dir/client.out" | head -n 1)"; rc=0 ;;
	*) say "FAIL $label n=$n putsignal: exit $rc (logs in $dir)"
	   tail -n 30 "$dir/client.out"
	   for f in "$dir"/nccl-putsignal-rank*.log; do
		[ -e "$f" ] || continue
		echo "---- RMA lines, WARNs and tail of $f"
		grep -a 'RMA\|WARN' "$f" | head -n 20
		tail -n 15 "$f"
	   done ;;
	esac
	rm -rf "/tmp/simverbs-$(id -u)/$fab" 2>/dev/null
	return $rc
}
rma_end=$(( $(date +%s) + ${GPU_CHECK_RMA_S:-120} ))
for n in $ranks; do
	echo "$nccls" | while read -r label lib; do
		left=$((rma_end - $(date +%s)))
		if [ "$left" -lt 20 ]; then
			say "NOT RUN $label n=$n putsignal: time budget (GPU_CHECK_RMA_S) spent"
			echo 1 >> "$out/.fails"
			continue
		fi
		[ "$left" -gt 90 ] && left=90
		run_putsignal "$label" "$lib" "$n" "$left" || echo 1 >> "$out/.fails"
	done
done
fails=$(( efail + $(cat "$out/.fails" 2>/dev/null | wc -l) ))
rm -f "$out/.fails"

say "gpu-check: $([ "$fails" = 0 ] && echo OK || echo "$fails FAILED") in $(( $(date +%s) - t_start )) s; logs in $out"
[ "$fails" = 0 ]
