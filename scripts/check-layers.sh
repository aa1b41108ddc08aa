#!/bin/sh
# check-layers.sh [BUILDDIR] - the layers of src/ import only downwards:
#   base -> verbs seam -> devices -> connection set-up -> data path -> vtables
# Every file has a rank (table below). A file may include only headers of
# its rank or lower, and (from the built objects, with nm) call only nv_*
# functions defined in files of a lower rank or of its own rank. Files of
# one rank form one layer and may use each other (the devices layer); the
# connection layer is ranked file by file (comm < diag < qp < connect <
# accept), so no two of its files call each other.
# Exit 0 ok, 1 violations (each printed), 77 when BUILDDIR has no objects.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
objs=$build/src/.libs

ranks='
0    log.c os.c wire.c cts.c fo_msg.c nv_common.h log.h os.h wire.h cts.h fo_msg.h
0.1  sock.c sock.h
0.2  stage.c stage.h
1    ibv.c ibv_load.c ibv.h ibv_syms.h
2    param.c select.c select.h device.c devset.c devset.h props.c route.c event.c gdr.c mr.c hwcnt.c param.h device.h event.h mr.h hwcnt.h census.c census.h
3.0  comm.c comm.h nv_api.h prof.c prof.h cq_plan.c
3.1  diag.c
3.15 eager_ring.c
3.2  qp.c
3.25 handshake.c handshake.h
3.3  connect.c
3.35 admit.c admit.h
3.4  accept.c
4    engine.c engine.h recv.c send.c eager.c eager.h failover.c failover.h fo_detect.c fo_state.h
4.5  rma.h rma_coll.c rma_ctx.c rma_ops.c
5    plugin.c plugin_compat.c plugin.h rma_plugin.c
'
rank_of() {
	printf '%s\n' "$ranks" | awk -v f="$1" '{ for (i = 2; i <= NF; i++) if ($i == f) { print $1; exit } }'
}
below() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 <= b + 0) }'; }

fail=0
# 1. includes
for f in "$top"/src/*.c "$top"/src/*.h; do
	name=$(basename "$f")
	r=$(rank_of "$name")
	if [ -z "$r" ]; then
		echo "check-layers: src/$name has no layer: add it to the table in $0"
		fail=1
		continue
	fi
	for inc in $(sed -n 's/^#include "\([a-z_0-9]*\.h\)".*/\1/p' "$f"); do
		[ "$inc" = config.h ] && continue
		ir=$(rank_of "$inc")
		if [ -z "$ir" ]; then
			echo "check-layers: src/$name includes $inc, which has no layer"
			fail=1
		elif ! below "$ir" "$r"; then
			echo "check-layers: src/$name (rank $r) includes $inc (rank $ir): upward"
			fail=1
		fi
	done
done

# 2. calls, from the objects
if ! ls "$objs"/*.o >/dev/null 2>&1 || ! command -v nm >/dev/null; then
	echo "check-layers: includes checked; no objects in $objs (or no nm): calls skipped"
	[ $fail = 0 ] && exit 77
	exit 1
fi
# objects of sources that still exist (a build tree keeps those of renamed files)
objects=$(for o in "$objs"/*.o; do [ -f "$top/src/$(basename "$o" .o).c" ] && echo "$o"; done)
defs=$(for o in $objects; do
	nm -g --defined-only "$o" | awk -v f="$(basename "$o" .o).c" '$3 ~ /^nv_/ { print $3, f }'
done)
for o in $objects; do
	src=$(basename "$o" .o).c
	r=$(rank_of "$src")
	[ -n "$r" ] || continue
	for sym in $(nm -u "$o" | awk '$2 ~ /^nv_/ { print $2 }'); do
		def=$(printf '%s\n' "$defs" | awk -v s="$sym" '$1 == s { print $2; exit }')
		[ -n "$def" ] || continue
		dr=$(rank_of "$def")
		if [ -z "$dr" ] || ! below "$dr" "$r"; then
			echo "check-layers: $src (rank $r) calls $sym of $def (rank ${dr:-none}): upward"
			fail=1
		fi
	done
done
[ $fail = 0 ] && echo "check-layers: ok"
exit $fail
