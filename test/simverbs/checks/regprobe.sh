#!/usr/bin/env bash
# simverbs' ibv_reg_mr held against the kernel's: sv-regprobe's answers (iova, access bits,
# ODP, rights against the mapping, wrapping, page faults paid at registration, rereg_mr,
# RLIMIT_MEMLOCK) on simib0 and simroce0 must be rxe's, recorded in regprobe-rxe.txt from
# the rxe VM (Linux 6.1), but for the one deliberate difference below.
. "$(dirname "$0")/lib.sh"
sv_need_simverbs
PROBE=$SV_BENCHDIR/sv-regprobe
[ -x "$PROBE" ] || sv_hard "sv-regprobe not built in $SV_BENCHDIR"
ref=$(dirname "$0")/regprobe-rxe.txt
# Deliberate: 6.1 pins a read-only MR with FOLL_FORCE, so rxe registers PROT_NONE memory for
# reading; simverbs reads with process_vm_readv, which cannot, so it refuses (EFAULT) at
# registration rather than fail every later read.
want=$SV_TMP/want
grep -v '^#' "$ref" | sed -E 's/^((PROT_NONE page|a range running into a PROT_NONE page) +)ok$/\1EFAULT/' >"$want"
for dev in simib0 simroce0; do
	out=$SV_TMP/$dev
	if ! timeout "$SV_TIMEOUT" "$PROBE" -d "$dev" >"$out" 2>&1; then
		sv_fail "sv-regprobe -d $dev failed"; cat "$out"; continue
	fi
	if diff -u "$want" "$out" >"$SV_TMP/diff"; then
		sv_log "$dev: $(wc -l <"$out") registration answers as rxe's"
	else
		sv_fail "$dev answers otherwise than rxe (- rxe, + simverbs):"; cat "$SV_TMP/diff"
	fi
done
sv_finish
