#!/usr/bin/env bash
# Shared set-up of scripts/test.sh and scripts/bench.sh on a Debian machine:
# installs the packages that the build, the tests, the benchmark and the tools
# call (when missing), bootstraps autotools and configures and builds into
# $NV_BUILD_DIR (default: build/). The terminal gets one line per step; the
# output of apt, dpkg, autoreconf, configure and make goes to
# $NV_BUILD_DIR/setup.log (the end of it is shown when a step fails).
# Not root and no sudo: prints the apt-get command to run and exits 1.
# Environment: NV_BUILD_DIR, NV_CONFIGURE_FLAGS, NV_SETUP_VERBOSE=1 (show everything).
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NV_BUILD_DIR=${NV_BUILD_DIR:-$top/build}

# Debian packages, one per line (keep the list sorted within each group; add
# what a new test or tool calls, so that no check skips for a missing tool).
pkgs=(
	# build
	autoconf automake gcc help2man libibverbs-dev libtool make pkg-config
	# tests and benchmark
	clang               # check-fuzz (libFuzzer), check-tsan
	ibverbs-utils       # ibv_devinfo, ibv_rc_pingpong over simverbs
	iproute2            # ip: tests with network namespaces and veth pairs
	libclang-rt-14-dev  # clang's sanitizer and libFuzzer runtimes
	librdmacm-dev rdmacm-utils  # librdmacm and rping & co. over simverbs
	libxml2-utils       # xmllint: the benchmark's SVG well-formedness check
	openmpi-bin         # mpirun: multi-process launch tests of nccl-net-bench
	perftest            # ib_write_bw & co.: the raw-fabric yardstick
	procps              # pgrep, pkill, ps: the tests watch and kill their children
	python3-pyverbs     # rdma-core's Python bindings over simverbs
	ucx-utils           # UCX (ucx_info, ucx_perftest) over simverbs
	valgrind            # check-valgrind
)

mkdir -p "$NV_BUILD_DIR"
NV_BUILD_DIR=$(cd "$NV_BUILD_DIR" && pwd)
log=$NV_BUILD_DIR/setup.log
: >"$log"
case $log in "$PWD"/*) showlog=${log#"$PWD"/} ;; *) showlog=$log ;; esac

# step MESSAGE CMD...: one line on the terminal, the command's output in the log.
step() {
	local msg=$1 t0 rc=0
	shift
	printf '%s... ' "$msg"
	t0=$(date +%s)
	echo "==== $msg: $*" >>"$log"
	if [ "${NV_SETUP_VERBOSE:-0}" = 1 ]; then
		echo; "$@" 2>&1 | tee -a "$log" || rc=${PIPESTATUS[0]}
	else
		"$@" >>"$log" 2>&1 </dev/null || rc=$?
	fi
	if [ $rc -ne 0 ]; then
		echo "FAILED (exit $rc) after $(( $(date +%s) - t0 )) s; the end of $showlog:"
		tail -n 40 "$log" | sed 's/^/  | /'
		exit $rc
	fi
	echo "done in $(( $(date +%s) - t0 )) s (log: $showlog)"
}

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	sudo_cmd=()
	if [ "$(id -u)" -ne 0 ]; then
		if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
			sudo_cmd=(sudo -n)
		else
			echo "setup: these Debian packages are missing: ${missing[*]}"
			echo "setup: install them as root, then run this again:"
			echo "  apt-get install --no-install-recommends ${missing[*]}"
			exit 1
		fi
	fi
	apt=("${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -y -o DPkg::Lock::Timeout=600)
	step "updating the package lists" "${apt[@]}" update
	n=$(apt-get -s -o Debug::NoLocking=1 install --no-install-recommends "${missing[@]}" 2>/dev/null |
		grep -c '^Inst ' || true)
	step "installing ${#missing[@]} packages (${n:-?} with dependencies)" \
		"${apt[@]}" install --no-install-recommends "${missing[@]}"
fi

if [ ! -x "$top/configure" ] || [ "$top/configure.ac" -nt "$top/configure" ]; then
	step "bootstrapping (autogen.sh)" "$top/autogen.sh"
fi
cd "$NV_BUILD_DIR"
if [ ! -f Makefile ] || [ "$top/configure" -nt config.status ]; then
	# shellcheck disable=SC2086
	step "configuring $NV_BUILD_DIR" "$top/configure" ${NV_CONFIGURE_FLAGS:-}
fi
step "building with $(nproc) jobs" make -j"$(nproc)"
