#!/bin/sh
# libibverbs is bound at run time (src/ibv_load.c):
#  - the built plugin has no libibverbs dependency (NEEDED, versioned symbols);
#  - over simverbs built as an old rdma-core (IBVERBS_1.0/1.1 only) it loads,
#    logs each missing optional verb at INFO, and moves data (e2e_loopback);
#  - ibv_query_port_speed (IBVERBS_1.16) gives the port speed when present;
#  - NCCL_IBVERBS_LIB, then libibverbs.so, then libibverbs.so.1, as NCCL 2.30: the
#    first that opens (an unloadable NCCL_IBVERBS_LIB is a WARN naming it, dlerror() and
#    the library loaded instead; the next is tried);
#  - with no loadable libibverbs init fails with one WARN (NCCL falls back).
B="${NV_TOP_BUILDDIR:-.}"
PLUGIN="${NV_TEST_PLUGIN:-$B/.libs/libnccl-net-verbs.so}"
T="$B/test/unit/test_loadverbs"
OLD="$B/test/simverbs/old/.libs"
[ -x "$T" ] && [ -f "$PLUGIN" ] || { echo "no $T or $PLUGIN: skipped"; exit 77; }
[ -f "$OLD/libibverbs.so.1" ] || { echo "no old simverbs in $OLD: skipped"; exit 77; }
command -v objdump >/dev/null && command -v readelf >/dev/null || { echo "no binutils: skipped"; exit 77; }
fail=0
bad() { echo "FAIL: $*"; fail=1; }

readelf -d "$PLUGIN" | grep NEEDED | grep -q libibverbs && bad "plugin NEEDs libibverbs"
objdump -T "$PLUGIN" | grep -q 'IBVERBS_' && bad "plugin has versioned libibverbs symbols: $(objdump -T "$PLUGIN" | grep IBVERBS_ | head -3)"
objdump -T "$PLUGIN" | grep -q '[[:space:]]ibv_' && bad "plugin imports ibv_ symbols"

# old rdma-core: init works with the degradations logged, and data moves
LD_LIBRARY_PATH="$OLD" "$T" old || bad "init over the old rdma-core"
LD_LIBRARY_PATH="$OLD" "$B/test/e2e/e2e_loopback" >/dev/null 2>&1 || bad "e2e_loopback over the old rdma-core"
# nccl-net-verbs-info lists what the old library lacks, and nothing on simverbs' own
INFO="$B/nccl-net-verbs-info"
if [ -x "$INFO" ]; then
	out=$(LD_LIBRARY_PATH="$OLD" "$INFO" 2>&1)
	case "$out" in *"no ibv_reg_dmabuf_mr@IBVERBS_1.12: no dma-buf"*) ;; *) bad "info over the old rdma-core: $out" ;; esac
	out=$("$INFO" 2>&1)
	case "$out" in *"every optional verb present"*) ;; *) bad "info over simverbs: $out" ;; esac
fi
# NCCL_IBVERBS_LIB picks the library (here the old one, by path)
LD_LIBRARY_PATH="$OLD" NCCL_IBVERBS_LIB="$OLD/libibverbs.so.1" "$T" old || bad "NCCL_IBVERBS_LIB=path"
# without it, as NCCL: libibverbs.so before libibverbs.so.1 (here .so is the old library)
PREF=$(mktemp -d "${TMPDIR:-/tmp}/oldverbs.XXXXXX")
ln -s "$(readlink -f "$OLD/libibverbs.so.1")" "$PREF/libibverbs.so"
ln -s "$(readlink -f "$B/test/simverbs/.libs/libibverbs.so.1")" "$PREF/libibverbs.so.1"
LD_LIBRARY_PATH="$PREF" "$T" old || bad "libibverbs.so not tried before libibverbs.so.1"
rm -rf "$PREF"

# port speed: ibv_query_port_speed when exported (simverbs), else speed x width (HDR 4x)
export SIMVERBS_DEVICES="simib0:ll=ib,speed_mbps=400000"
"$T" speed 400000 || bad "speed from ibv_query_port_speed"
NCCL_IB_QUERY_PORT_SPEED=0 "$T" speed 200000 || bad "NCCL_IB_QUERY_PORT_SPEED=0"
LD_LIBRARY_PATH="$OLD" "$T" speed 200000 || bad "speed on the old rdma-core"
unset SIMVERBS_DEVICES

# a NCCL_IBVERBS_LIB that is nowhere falls back to the default names; no libibverbs at
# all (where a mount namespace is allowed): the system's library made unloadable
NCCL_IBVERBS_LIB=libibverbs-absent.so.1 "$T" fallback || bad "absent NCCL_IBVERBS_LIB: no fallback"
sys=$(ldconfig -p 2>/dev/null | awk '/libibverbs.so.1 /{print $NF; exit}')
if [ -n "$sys" ] && unshare -m true 2>/dev/null; then
	unshare -m sh -c "mount --bind /dev/null $(readlink -f "$sys") && LD_LIBRARY_PATH= exec $T absent" \
		|| bad "no loadable libibverbs on the search path"
else
	echo "no mount namespace: system-library case not run"
fi
[ $fail = 0 ] && echo "test-oldverbs: ok"
exit $fail
