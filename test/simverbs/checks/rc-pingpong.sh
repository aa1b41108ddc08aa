#!/usr/bin/env bash
# Unchanged Debian ibv_rc_pingpong, server + client over loopback TCP, on simverbs' InfiniBand
# and RoCE devices: default mode, message sizes up to 1 MiB, completion events (-e), the new
# post-send API (-N), a GRH on InfiniBand (-g 0); received data validated (-c). Each run must
# succeed on both sides and report a positive bandwidth (printed, never judged).
. "$(dirname "$0")/lib.sh"
sv_need_prog ibv_rc_pingpong ibv_devinfo
sv_need_simverbs

# pingpong TAG DEV [ARGS...]: one server/client run; prints the client's figures.
pingpong() {
	local tag=$1 dev=$2 mbit usec
	shift 2
	sv_pair "$tag" ibv_rc_pingpong -d "$dev" -c "$@" -- \
		ibv_rc_pingpong -d "$dev" -c "$@" 127.0.0.1 || return
	mbit=$(sed -n 's/.* bytes in .* seconds = \([0-9.]*\) Mbit\/sec.*/\1/p' "$SV_TMP/$tag.client")
	usec=$(sed -n 's/.* iters in .* seconds = \([0-9.]*\) usec\/iter.*/\1/p' "$SV_TMP/$tag.client")
	if ! sv_is_positive "$mbit" || ! sv_is_positive "$usec"; then
		sv_fail "$tag: no bandwidth/latency figure in the client output"
		sv_show "$tag"
		return
	fi
	grep -q 'bytes in' "$SV_TMP/$tag.server" || { sv_fail "$tag: server printed no figure"; sv_show "$tag"; return; }
	printf '%s: %-22s %10s Mbit/s %10s usec/iter  (%s)\n' "$SV_NAME" "$tag" "$mbit" "$usec" "$*"
}

gid=$(sv_roce_gid_index simroce0)
[ -n "$gid" ] || { sv_fail "simroce0: no IPv4-mapped RoCE v2 GID in ibv_devinfo -v"; gid=0; }

for dev in simib0 simroce0; do
	extra=()
	[ "$dev" = simroce0 ] && extra=(-g "$gid")
	pingpong "$dev-default" "$dev" "${extra[@]}" -n 300
	pingpong "$dev-64k" "$dev" "${extra[@]}" -s 65536 -n 200
	pingpong "$dev-1m" "$dev" "${extra[@]}" -s 1048576 -n 50
	pingpong "$dev-events" "$dev" "${extra[@]}" -e -n 300
	# 20000 round trips on completion events: a lost wakeup (arming and publishing
	# racing) hung about 1 run of 8 at -n 300, so this one nearly always before the fix
	pingpong "$dev-events-long" "$dev" "${extra[@]}" -e -n 20000
	pingpong "$dev-events-1m" "$dev" "${extra[@]}" -e -s 1048576 -n 20
	pingpong "$dev-newsend" "$dev" "${extra[@]}" -N -n 300
done
pingpong simib0-grh simib0 -g 0 -n 200
sv_finish
