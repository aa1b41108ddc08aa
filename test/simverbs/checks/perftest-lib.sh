# perftest helpers for the checks (sourced after lib.sh).
# pt_run TAG PROG DEV KIND ARGS...: server `PROG -d DEV ... ARGS -p P`, client the same plus
# 127.0.0.1; KIND bw|lat selects the column parsed from the client's result line:
# bw -> BW average [MiB/s] ($4), lat -> t_typical [usec] ($5). The figure must be a positive
# number; it is printed, never compared with a target.
pt_run() {
	local tag=$1 prog=$2 dev=$3 kind=$4 col line fig dev_args
	shift 4
	dev_args=(-d "$dev" -i 1 -F)
	[ "$dev" = simroce0 ] && dev_args+=(-x "$PT_ROCE_GID")
	sv_pair "$tag" "$prog" "${dev_args[@]}" "$@" -- ${PT_CLIENT_ENV:+env $PT_CLIENT_ENV} \
		"$prog" "${dev_args[@]}" "$@" 127.0.0.1 || return
	[ "$kind" = bw ] && col=4 || col=5
	# Result line: first numeric row after the "#bytes" header.
	line=$(awk '/^ *#bytes/ { hdr = 1; next } hdr && /^ *[0-9]/ { print; exit }' "$SV_TMP/$tag.client")
	fig=$(echo "$line" | awk -v c="$col" '{ print $c }')
	if ! sv_is_positive "$fig"; then
		sv_fail "$tag: no result line with a positive figure in the client output"
		sv_show "$tag"
		return
	fi
	if grep -Eiq 'error|failed|couldn.t' "$SV_TMP/$tag.client" "$SV_TMP/$tag.server"; then
		sv_fail "$tag: error message in the output"
		sv_show "$tag"
		return
	fi
	if [ "$kind" = bw ]; then
		printf '%s: %-26s %10s MiB/s    (%s)\n' "$SV_NAME" "$tag" "$fig" "$*"
	else
		printf '%s: %-26s %10s usec typical (%s)\n' "$SV_NAME" "$tag" "$fig" "$*"
	fi
}

# PT_CLIENT_ENV (optional): VAR=value words put in the client's environment only.

# pt_setup PROG: skips without perftest, requires simverbs, checks that PROG loads the build
# tree's libibverbs and stand-in libmlx5 / libefa (not the system's), finds the RoCE GID index.
pt_setup() {
	local lib where
	sv_need_prog "$1" ibv_devinfo
	sv_need_simverbs
	if command -v ldd >/dev/null; then
		for lib in libibverbs.so.1 libmlx5.so.1 libefa.so.1; do
			where=$(ldd "$(command -v "$1")" | awk -v l="$lib" '$1 == l { print $3 }')
			[ "$where" = "$SV_LIBDIR/$lib" ] || sv_fail "$1 loads $lib from '$where', not $SV_LIBDIR"
		done
	fi
	PT_ROCE_GID=$(sv_roce_gid_index simroce0)
	[ -n "$PT_ROCE_GID" ] || { sv_fail "simroce0: no IPv4-mapped RoCE v2 GID"; PT_ROCE_GID=0; }
}
