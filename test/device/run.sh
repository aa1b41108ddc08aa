#!/usr/bin/env bash
# run.sh - the real-device test mode: the plugin's tests that need nothing of
# simverbs, run against the system's libibverbs on the devices named (an RDMA
# NIC, or rxe devices), as a user validates the plugin before a job.
#
#   test/device/run.sh --device D0[,D1] [--build DIR] [--prepare] [--only NAMES]
#                      [--list] [--timeout S] [--logs DIR] [--tests FILE]
#
# Which tests run is in test/device/tests.list (every test of make check with
# its mode: real, real2, gpu, sim, none). real tests run on D0, real2 tests on
# D0 and D1 (skipped with one device), gpu tests on D0 where a GPU is visible;
# sim and none tests are skipped with their reason. Each test gets
#   NV_TEST_DEVICES=D0[,D1]  the devices (tests that name simverbs' devices
#                            take these instead: test/e2e/e2e.h e2e_dev)
#   NCCL_IB_HCA==D0[,D1]     so that the plugin opens those devices only
#   NV_TEST_PLUGIN, NV_TOP_SRCDIR, NV_TOP_BUILDDIR, NCCL_DEBUG=WARN
# and nothing of simverbs: LD_LIBRARY_PATH is the caller's (test/device/
# selftest.sh runs this mode over simverbs by setting it).
#
# Prints per test PASS / FAIL / SKIP and why, the end of each failed test's
# log, and a last line "N passed, N failed, N skipped". Exit status: 0 when
# nothing failed, 1 when a test failed, 2 on a usage or set-up error.
#
#   --device D0[,D1]  the devices (default: $NV_TEST_DEVICES)
#   --build DIR       the build tree (default: $NV_BUILD_DIR, else build/)
#   --prepare         build the test programs first (make check TESTS=)
#   --only NAMES      only these tests (comma-separated; a name is a path of
#                     tests.list or its last component: e2e_loopback)
#   --list            print what would run or be skipped, run nothing
#   --timeout S       per-test limit in seconds (default 600)
#   --logs DIR        where the logs go (default: BUILD/test-device, else a
#                     temporary directory when the build tree is read-only)
#   --tests FILE      another list in the format of tests.list
#
# The fault tests' time bounds are multiplied by FH_TIME_SCALE (default 1; 12
# when a device is a software one, rxe* or siw*: under QEMU's TCG, 256
# connects at once onto rxe0 took 16 s, past fault_storm's bound at 4).
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

usage() { sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 2; }
die() { echo "run.sh: $*" >&2; exit 2; }

devices=${NV_TEST_DEVICES:-} build=${NV_BUILD_DIR:-$top/build} prepare=0 only= list=0
timeout_s=600 logs= tests=$top/test/device/tests.list
while [ $# -gt 0 ]; do
	case $1 in
	--device) devices=${2:-}; shift ;;
	--device=*) devices=${1#*=} ;;
	--build) build=${2:-}; shift ;;
	--build=*) build=${1#*=} ;;
	--prepare) prepare=1 ;;
	--only) only=${2:-}; shift ;;
	--only=*) only=${1#*=} ;;
	--list) list=1 ;;
	--timeout) timeout_s=${2:-}; shift ;;
	--timeout=*) timeout_s=${1#*=} ;;
	--logs) logs=${2:-}; shift ;;
	--logs=*) logs=${1#*=} ;;
	--tests) tests=${2:-}; shift ;;
	--tests=*) tests=${1#*=} ;;
	-h|--help) usage ;;
	*) die "unknown argument '$1' (--help)" ;;
	esac
	shift
done

[ -n "$devices" ] || die "no device: give --device D0[,D1] or NV_TEST_DEVICES (ibv_devices lists them)"
IFS=, read -r -a devs <<<"$devices"
[ ${#devs[@]} -ge 1 ] && [ ${#devs[@]} -le 2 ] || die "--device takes one or two devices, got '$devices'"
for d in "${devs[@]}"; do
	[[ $d =~ ^[A-Za-z0-9_.-]+$ ]] || die "bad device name '$d'"
done
[[ $timeout_s =~ ^[0-9]+$ ]] && [ "$timeout_s" -gt 0 ] || die "bad --timeout '$timeout_s'"
[ -f "$tests" ] || die "no test list $tests"
[ -d "$build" ] || die "no build tree $build (run scripts/setup.sh, or give --build)"
build=$(cd "$build" && pwd)
src=$top
plugin=$build/.libs/libnccl-net-verbs.so

if [ -z "${FH_TIME_SCALE:-}" ]; then
	case ${devs[0]} in rxe* | siw*) export FH_TIME_SCALE=12 ;; esac
fi

if [ "$prepare" = 1 ] && [ "$list" = 0 ]; then
	echo "run.sh: building the test programs (make check TESTS=) in $build"
	make -C "$build" -s -j"$(nproc)" check TESTS= >/dev/null || die "building the tests failed"
fi

# gpu_reason: empty when a GPU is visible, else why not.
gpu_reason() {
	if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
		echo "needs a GPU (no libcuda.so.1)"
	elif [ ! -e /dev/nvidia0 ] && ! ls /dev/dri/renderD* >/dev/null 2>&1; then
		echo "needs a GPU (no /dev/nvidia0)"
	fi
}

# selected NAME: whether --only lets NAME run.
selected() {
	[ -z "$only" ] && return 0
	local o
	IFS=, read -r -a o <<<"$only"
	for x in "${o[@]}"; do
		[ "$x" = "$1" ] || [ "$x" = "${1##*/}" ] && return 0
	done
	return 1
}

# decide MODE REASON: sets why (empty: run it) and run_devs.
decide() {
	why= run_devs=${devs[0]}
	case $1 in
	real) ;;
	real2)
		if [ ${#devs[@]} -lt 2 ]; then why="needs two devices (--device D0,D1)"
		else run_devs="${devs[0]},${devs[1]}"; fi ;;
	gpu) why=$(gpu_reason) ;;
	sim) why="needs simverbs: $2" ;;
	none) why="no device involved ($2): make check runs it" ;;
	*) why="unknown mode '$1' in $(basename "$tests")" ;;
	esac
}

if [ "$list" = 0 ]; then
	[ -f "$plugin" ] || die "the plugin is not built ($plugin)"
	if command -v ibv_devinfo >/dev/null 2>&1; then
		for d in "${devs[@]}"; do
			ibv_devinfo -d "$d" >/dev/null 2>&1 ||
				die "device $d not found by libibverbs (ibv_devices: $(ibv_devices 2>/dev/null |
					awk 'NR > 2 { printf "%s ", $1 }'))"
		done
	fi
	if [ -z "$logs" ]; then
		logs=$build/test-device
		mkdir -p "$logs" 2>/dev/null && [ -w "$logs" ] || logs=$(mktemp -d /tmp/nv-test-device.XXXXXX)
	fi
	mkdir -p "$logs" || die "cannot create $logs"
	echo "run.sh: devices ${devs[*]}, libibverbs from the system$( [ -n "${LD_LIBRARY_PATH:-}" ] &&
		echo " (LD_LIBRARY_PATH=$LD_LIBRARY_PATH)")$( [ -n "${FH_TIME_SCALE:-}" ] &&
		echo ", FH_TIME_SCALE=$FH_TIME_SCALE"), logs in $logs"
fi

pass=0 fail=0 skip=0 failed=()
while read -r name mode reason; do
	case $name in ''|'#'*) continue ;; esac
	selected "$name" || continue
	decide "$mode" "$reason"
	if [ -n "$why" ]; then
		printf 'SKIP  %s: %s\n' "$name" "$why"
		skip=$((skip + 1))
		continue
	fi
	if [ "$list" = 1 ]; then
		printf 'RUN   %s on %s\n' "$name" "$run_devs"
		continue
	fi
	case $name in
	*.eager0 | *.fast0) cmd=(sh "$src/test/e2e/rerun.sh" "$name") ;;
	*) if [ -x "$build/$name" ]; then cmd=("$build/$name")
	   elif [ -x "$src/$name" ]; then cmd=("$src/$name")
	   else cmd=(); fi ;;
	esac
	log=$logs/${name//\//_}.log
	if [ ${#cmd[@]} -eq 0 ]; then
		printf 'FAIL  %s: not built (run with --prepare, or make check TESTS= in %s)\n' "$name" "$build"
		fail=$((fail + 1)) failed+=("$name")
		continue
	fi
	t0=$(date +%s)
	rc=0
	env NV_TEST_DEVICES="$run_devs" NCCL_IB_HCA="=$run_devs" NV_TEST_PLUGIN="$plugin" \
		NV_TOP_SRCDIR="$src" NV_TOP_BUILDDIR="$build" NCCL_DEBUG="${NCCL_DEBUG:-WARN}" \
		timeout -k 10 "$timeout_s" "${cmd[@]}" </dev/null >"$log" 2>&1 || rc=$?
	secs=$(( $(date +%s) - t0 ))
	case $rc in
	0) printf 'PASS  %s (%d s)\n' "$name" "$secs"; pass=$((pass + 1)) ;;
	77) printf 'SKIP  %s: the test skipped itself: %s\n' "$name" \
		"$(grep -v '^\s*$' "$log" | tail -n 1 | cut -c1-160)"
	    skip=$((skip + 1)) ;;
	*)  printf 'FAIL  %s (exit %d%s, %d s; log: %s)\n' "$name" "$rc" \
		"$( [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && echo ": timed out after $timeout_s s")" \
		"$secs" "$log"
	    tail -n 25 "$log" | sed 's/^/  | /'
	    fail=$((fail + 1)) failed+=("$name") ;;
	esac
done <"$tests"

[ "$list" = 1 ] && exit 0
[ "$fail" -eq 0 ] || echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
