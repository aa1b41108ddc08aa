#!/bin/sh
# check-layers.sh [BUILDDIR] - the files of src/ import only downwards, so
# their import graph has no circle but the one declared below:
#   base -> verbs seam -> devices -> connection set-up -> data path -> vtables
# Every file has a rank (table below): the integer part is its layer, the
# fraction its place inside the layer. From the sources, a header includes
# only headers of a lower rank, a .c file headers of its rank or lower (its
# own header shares its rank, or sits lower). From the built objects, with nm,
# a file calls only nv_* functions defined in files of a lower rank: files of
# one rank never call each other, so a new circle, inside a layer or across
# layers, always has an upward step and fails here (make check:
# test/unit/test-layers.sh; test/unit/test-layers-circle.sh plants circles).
# The one deliberate circle is the completion engine's hooks into the
# protocols (listed in src/engine.h): `hooks` names each upward include and
# call it allows, and nothing else.
# Exit 0 ok, 1 violations (each printed), 77 when BUILDDIR has no objects.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
objs=$build/src/.libs

ranks='
0.00 nv_common.h
0.01 log.c log.h
0.02 os.c os.h
0.03 cts.c cts.h
0.04 wire.c wire.h
0.05 fo_msg.c fo_msg.h
0.10 sock.c sock.h
0.20 stage.c stage.h
1.00 ibv_load.c ibv.h ibv_syms.h
1.01 ibv.c
1.50 hwcnt.c hwcnt.h
2.00 device.h
2.01 select.c select.h
2.02 param.c param.h
2.025 census.c census.h
2.03 device.c
2.04 props.c
2.05 route.c
2.055 wqelat.c wqelat.h
2.06 event.c event.h
2.07 gdr.c
2.08 mr.c mr.h
2.09 devset.c devset.h
3.00 comm.c comm.h nv_api.h
3.005 state.c
3.01 prof.c prof.h
3.02 cq_plan.c
3.10 diag.c
3.15 eager_ring.c
3.20 qp.c
3.25 handshake.c handshake.h
3.30 connect.c
3.35 admit.c admit.h
3.40 accept.c
4.00 failover.h
4.01 fo_state.h
4.05 lb.c lb.h
4.10 engine.c engine.h
4.20 eager.c eager.h
4.30 recv.c
4.40 send.c
4.45 fo_detect.c
4.50 failover.c
4.60 rma.h
4.61 rma_coll.c
4.62 rma_ctx.c
4.63 rma_ops.c
5.00 plugin.c plugin.h
5.01 plugin_compat.c
5.02 rma_plugin.c
'
# The engine/protocol interface (src/engine.h): engine.c includes eager.h for
# its inline hooks and calls these functions of eager.c, failover.c and
# fo_detect.c, which call the engine back. "FILE HEADER.h" allows an include, "FILE nv_fn" a call.
hooks='
engine.c eager.h
engine.c nv_eager_recv_cqe_slow
engine.c nv_eager_copy_done
engine.c nv_eager_grant
engine.c nv_eager_poll
engine.c nv_fo_check
engine.c nv_fo_wc_error
engine.c nv_fo_peer_spoke
'
# judge KIND: reads "FILE TARGET TARGET_FILE" lines (an include: the header
# twice; a call: the function and the file defining it), prints each violation.
judge() {
	awk -v kind="$1" -v ranks="$ranks" -v hooks="$hooks" '
	BEGIN {
		n = split(ranks, l, "\n")
		for (i = 1; i <= n; i++) { m = split(l[i], w, " "); for (j = 2; j <= m; j++) rank[w[j]] = w[1] }
		n = split(hooks, l, "\n")
		for (i = 1; i <= n; i++) if (l[i] != "") hook[l[i]] = 1
	}
	{
		f = $1; t = $2; tf = $3
		# (a source without a rank is reported by the include pass)
		if (!(f in rank)) {
			if (kind == "include") { print "check-layers: src/" f " has no layer: add it to the table in scripts/check-layers.sh"; bad = 1 }
			next
		}
		if (t == "-" || (kind == "call" && !(tf in rank))) next
		if (!(tf in rank)) { print "check-layers: src/" f " includes " t ", which has no layer"; bad = 1; next }
		r = rank[f] + 0; tr = rank[tf] + 0
		if ((f " " t) in hook) { used[f " " t] = 1; next }
		if (tr < r || (kind == "include" && f ~ /\.c$/ && tr == r)) next
		if (kind == "include")
			print "check-layers: src/" f " (rank " rank[f] ") includes " t " (rank " rank[tf] "): upward or sideways"
		else
			print "check-layers: " f " (rank " rank[f] ") calls " t " of " tf " (rank " rank[tf] "): upward or sideways"
		bad = 1
	}
	END {
		for (h in hook)
			if (!(h in used) && (kind == "include") == (h ~ /\.h$/)) {
				print "check-layers: hook \"" h "\" is not used: remove it from the hooks in scripts/check-layers.sh"
				bad = 1
			}
		exit bad
	}'
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-layers.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
# 1. includes, from the sources ("FILE - -" for each, so that every file needs a rank)
{
for f in "$top"/src/*.c "$top"/src/*.h; do echo "${f##*/} - -"; done
awk 'FNR == 1 { n = split(FILENAME, p, "/"); f = p[n] }
	/^#include "[a-z_0-9]*\.h"/ { split($2, q, "\""); if (q[2] != "config.h") print f, q[2], q[2] }' \
	"$top"/src/*.c "$top"/src/*.h
} >"$tmp/includes" || exit 99
judge include <"$tmp/includes" | sort -u >"$tmp/out"
[ -s "$tmp/out" ] && { cat "$tmp/out"; fail=1; }

# 2. calls, from the objects
if ! ls "$objs"/*.o >/dev/null 2>&1 || ! command -v nm >/dev/null; then
	echo "check-layers: includes checked; no objects in $objs (or no nm): calls skipped"
	[ $fail = 0 ] && exit 77
	exit 1
fi
# objects of sources that still exist (a build tree keeps those of renamed files);
# "D nv_fn FILE.c" for each definition, "U nv_fn FILE.c" for each call out of a file
objects=$(for o in "$objs"/*.o; do [ -f "$top/src/$(basename "$o" .o).c" ] && echo "$o"; done)
nm -A -g --defined-only $objects >"$tmp/defined" && nm -A -u $objects >"$tmp/undefined" || exit 99
awk '$NF ~ /^nv_/ { n = split($1, p, "/"); sub(/\.o:.*/, ".c", p[n]); print FILENAME ~ /undefined$/ ? "U" : "D", $NF, p[n] }' \
	"$tmp/defined" "$tmp/undefined" |
	awk '$1 == "D" { def[$2] = $3; next } $2 in def { print $3, $2, def[$2] }' >"$tmp/calls" || exit 99
judge call <"$tmp/calls" >"$tmp/out"
[ -s "$tmp/out" ] && { cat "$tmp/out"; fail=1; }
[ $fail = 0 ] && echo "check-layers: ok ($(wc -l <"$tmp/includes") files and includes, $(wc -l <"$tmp/calls") calls between files)"
exit $fail
