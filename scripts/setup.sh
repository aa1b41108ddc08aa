#!/usr/bin/env bash
# Shared set-up for scripts/test.sh and scripts/bench.sh: installs the Debian
# packages the build and the tests need (when missing), bootstraps autotools
# and configures an out-of-tree build in $NV_BUILD_DIR (default: build/).
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NV_BUILD_DIR=${NV_BUILD_DIR:-$top/build}

# Packages: build tools, rdma-core (headers, library, ibv_* programs),
# perftest (raw-fabric yardstick), valgrind and clang (leak checks, fuzzing),
# librdmacm/rdmacm-utils, UCX and pyverbs (simverbs under third-party software).
pkgs="autoconf automake libtool pkg-config make gcc libibverbs-dev ibverbs-utils
      perftest valgrind clang libclang-rt-14-dev librdmacm-dev rdmacm-utils ucx-utils
      python3-pyverbs"
missing=()
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "setup: installing ${missing[*]}"
	sudo_cmd=
	[ "$(id -u)" -eq 0 ] || sudo_cmd=sudo
	$sudo_cmd apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ ! -x "$top/configure" ] || [ "$top/configure.ac" -nt "$top/configure" ]; then
	"$top/autogen.sh"
fi
mkdir -p "$NV_BUILD_DIR"
cd "$NV_BUILD_DIR"
if [ ! -f Makefile ] || [ "$top/configure" -nt config.status ]; then
	"$top/configure" ${NV_CONFIGURE_FLAGS:-}
fi
make -j"$(nproc)"
