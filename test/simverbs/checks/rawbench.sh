#!/usr/bin/env bash
# The raw fabric benchmarks in short mode: pvm-bw (process_vm_writev ceiling) and sv-rawbench
# (RDMA WRITE bandwidth sweep with byte-exact data check, 8-byte write and write-with-imm
# ping-pong latency) on simverbs' InfiniBand and RoCE devices. Every figure must be present and
# positive; figures are printed, never judged. An unknown device must fail.
. "$(dirname "$0")/lib.sh"
sv_need_simverbs
PVM=$SV_BENCHDIR/pvm-bw
RAW=$SV_BENCHDIR/sv-rawbench
[ -x "$PVM" ] && [ -x "$RAW" ] || sv_hard "benchmarks not built in $SV_BENCHDIR"

# figure FILE KEY FIELD: value of FIELD= on the first line starting with KEY (empty if none).
figure() {
	awk -v k="$2" -v f="$3" '$1 == k { for (i = 2; i <= NF; i++) { split($i, kv, "=");
		if (kv[1] == f) { print kv[2]; exit } } }' "$1"
}

# expect_fig FILE KEY FIELD WHAT
expect_fig() {
	local v
	v=$(figure "$1" "$2" "$3")
	if sv_is_positive "$v"; then
		sv_log "$4: $2 $3=$v"
	else
		sv_fail "$4: no positive $2 $3"; cat "$1"
	fi
}

out=$SV_TMP/pvm
if timeout "$SV_TIMEOUT" "$PVM" -q >"$out" 2>&1; then
	expect_fig "$out" pvm_bw median_GBps pvm-bw
	expect_fig "$out" pvm_call median_ns pvm-bw
else
	sv_fail "pvm-bw -q failed"; cat "$out"
fi

# rawbench TAG NSIZES TESTS ARGS...: a quick sv-rawbench run; NSIZES write_bw lines (all
# non-zero) and a figure for each of TESTS (write_bw, write_lat, imm_lat) must be reported.
rawbench() {
	local tag=$1 nsizes=$2 tests=$3 f=$SV_TMP/$1 n t
	shift 3
	# hang guards, not figures: a phase took over 20 s with two spinning processes at
	# load 14, so a run may take 4 times the checks' usual bound, a phase 60 s
	if ! timeout "$((4 * SV_TIMEOUT))" "$RAW" -q -T 60 "$@" >"$f" 2>&1; then
		sv_fail "$tag: sv-rawbench $* failed"; cat "$f"; return
	fi
	grep '^#' "$f" | sed "s/^/$SV_NAME: $tag: /"
	n=$(grep -c '^write_bw ' "$f")
	[ "$n" -eq "$nsizes" ] || { sv_fail "$tag: $n write_bw sizes reported, $nsizes expected"; cat "$f"; }
	if grep '^write_bw ' "$f" | grep -Evq 'median_GBps=[0-9.]*[1-9]'; then
		sv_fail "$tag: a write_bw figure is zero"; cat "$f"
	fi
	for t in $tests; do
		case $t in
		write_bw) expect_fig "$f" write_bw median_GBps "$tag" ;;
		*) expect_fig "$f" "$t" median_us "$tag" ;;
		esac
	done
}
rawbench simib0 5 "write_bw write_lat imm_lat" -d simib0
rawbench simroce0 2 "write_bw write_lat imm_lat" -d simroce0 -S 4096,4M
# A slow fabric (1 ms per operation, as a loaded host can make it) still reports a positive
# 8-byte figure: the bandwidth is printed with enough digits never to round a real one to zero.
SIMVERBS_LATENCY_NS=1000000 rawbench slow 1 "write_bw" -d simib0 -S 8 -t bw -r 1 -w 1
# An explicit GID index, as ibv_devinfo lists it (sv-rawbench picks one itself otherwise).
if command -v ibv_devinfo >/dev/null; then
	gid=$(sv_roce_gid_index simroce0)
	[ -n "$gid" ] || sv_fail "simroce0: no IPv4-mapped RoCE v2 GID"
	rawbench simroce0-gid 1 "write_bw imm_lat" -d simroce0 -g "${gid:-0}" -S 65536 -t bw,imm
else
	sv_log "ibv_devinfo not installed: explicit -g run skipped"
fi
rawbench simib0-noinline 2 "write_bw write_lat" -d simib0 -I -S 8,1M -t bw,lat

if timeout "$SV_TIMEOUT" "$RAW" -q -d sv-no-such-device >"$SV_TMP/bad" 2>&1; then
	sv_fail "sv-rawbench accepted an unknown device"; cat "$SV_TMP/bad"
fi
sv_finish
