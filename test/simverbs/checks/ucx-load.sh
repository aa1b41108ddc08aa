#!/usr/bin/env bash
# ucx-load.sh: Debian's UCX loads its InfiniBand transport module (libuct_ib, which binds
# libmlx5.so.1 symbols under MLX5_1.1 ... MLX5_1.11) on simverbs and its stand-in providers, and
# `ucx_info -d` exits cleanly.  Before the stand-ins were generated from Debian's libmlx5, the
# module failed to load ("version `MLX5_1.2' not found").  Skips (77) without ucx-utils.
. "$(dirname "$0")/lib.sh"
sv_need_simverbs
command -v ucx_info >/dev/null 2>&1 || sv_skip "ucx_info not installed (apt-get install ucx-utils)"
UCX_LOG_LEVEL=debug timeout "$SV_TIMEOUT" ucx_info -d >"$SV_TMP/out" 2>&1
rc=$?
[ "$rc" -eq 0 ] || sv_fail "ucx_info -d: exit $rc: $(tail -n 3 "$SV_TMP/out")"
if grep -q "dlopen('[^']*libuct_ib[^']*'.*failed" "$SV_TMP/out"; then
	sv_fail "libuct_ib does not load: $(grep -m1 "libuct_ib.*failed" "$SV_TMP/out")"
fi
grep -q "loading modules for uct_ib" "$SV_TMP/out" ||
	sv_fail "UCX never reached its uct_ib modules (libuct_ib not loaded)"
sv_finish
