# Shared helpers of the simverbs Debian-program checks (sourced, bash).
# Contract: scripts exit 0 = pass, 1 = fail, 77 = skip (a needed Debian program is missing),
# 99 = hard error (the build tree lacks simverbs or a benchmark program).
# Runs under automake's test driver with AM_TESTS_ENVIRONMENT (LD_LIBRARY_PATH -> simverbs,
# SIMVERBS_FABRIC unique per test, NV_TOP_BUILDDIR, ...); also runnable by hand from a build dir.

set -u
SV_NAME=$(basename "$0" .sh)
SV_TOP_BUILDDIR=${NV_TOP_BUILDDIR:-$PWD}
SV_LIBDIR=$SV_TOP_BUILDDIR/test/simverbs/.libs
SV_BENCHDIR=$SV_TOP_BUILDDIR/test/simverbs/bench
SV_TMP=$(mktemp -d "${TMPDIR:-/tmp}/$SV_NAME.XXXXXX")
SV_TIMEOUT=${SV_TIMEOUT:-30}	# seconds per program run; a hang fails the check
SV_FAILS=0
SV_PIDS=()

sv_cleanup() {
	local p
	for p in "${SV_PIDS[@]}"; do
		kill "$p" 2>/dev/null
	done
	rm -rf "$SV_TMP"
}
trap sv_cleanup EXIT

sv_log() { printf '%s: %s\n' "$SV_NAME" "$*"; }
sv_fail() { printf '%s: FAIL: %s\n' "$SV_NAME" "$*"; SV_FAILS=$((SV_FAILS + 1)); }
sv_skip() { printf '%s: SKIP: %s\n' "$SV_NAME" "$*"; exit 77; }
sv_hard() { printf '%s: ERROR: %s\n' "$SV_NAME" "$*"; exit 99; }
sv_finish() {
	if [ "$SV_FAILS" -ne 0 ]; then
		sv_log "$SV_FAILS failure(s)"
		exit 1
	fi
	sv_log "all passed"
	exit 0
}

# sv_need_prog PROG...: skip when a Debian program is missing (scripts/setup.sh installs them).
sv_need_prog() {
	local p
	for p in "$@"; do
		command -v "$p" >/dev/null 2>&1 || sv_skip "$p not installed (apt-get install ibverbs-utils perftest)"
	done
}

# The programs must load simverbs, not the system's libibverbs.
sv_need_simverbs() {
	[ -e "$SV_LIBDIR/libibverbs.so.1" ] || sv_hard "simverbs not built: $SV_LIBDIR/libibverbs.so.1"
	case ":${LD_LIBRARY_PATH:-}:" in
	*":$SV_LIBDIR:"*) ;;
	*) export LD_LIBRARY_PATH="$SV_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
	esac
	export SIMVERBS_FABRIC=${SIMVERBS_FABRIC:-svcheck-$$}
}

# sv_port_in_use PORT: true when a TCP socket (v4 or v6, any state) uses PORT locally.
sv_port_in_use() {
	local hex
	hex=$(printf '%04X' "$1")
	cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk -v h="$hex" '
		NR > 0 { split($2, a, ":"); if (a[2] == h) found = 1 } END { exit !found }'
}

# sv_pick_port: prints a currently unused port in 20000-59999.
sv_pick_port() {
	local p i
	for i in $(seq 1 50); do
		p=$((20000 + (RANDOM * 32768 + RANDOM + $$) % 40000))
		sv_port_in_use "$p" || { echo "$p"; return 0; }
	done
	echo 0
	return 1
}

# sv_wait_listen PORT PID: waits (<= 10 s) until PORT is in LISTEN state; fails if PID exits.
# Reads /proc/net/tcp{,6} so the server's single accept() is not consumed by a probe.
sv_wait_listen() {
	local hex i
	hex=$(printf '%04X' "$1")
	for i in $(seq 1 200); do
		if cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk -v h="$hex" '
			{ split($2, a, ":"); if (a[2] == h && $4 == "0A") found = 1 } END { exit !found }'
		then
			return 0
		fi
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# sv_pair TAG SERVER_ARGS... -- CLIENT_ARGS...
# Runs a server and a client (each under timeout) on a fresh free port, appended as `-p PORT`
# to both (the client's argument list includes the server host). Output goes to
# $SV_TMP/TAG.server and TAG.client. Returns 0 when both exit 0 (else counts a failure and
# shows the output); retries twice if the server never listened (port taken meanwhile).
sv_pair() {
	local tag=$1 try port spid srv=() cli=() rc_s rc_c
	shift
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do srv+=("$1"); shift; done
	shift
	cli=("$@")
	for try in 1 2 3; do
		port=$(sv_pick_port) || return 1
		timeout -k 5 "$SV_TIMEOUT" "${srv[@]}" -p "$port" >"$SV_TMP/$tag.server" 2>&1 &
		spid=$!
		SV_PIDS+=("$spid")
		if ! sv_wait_listen "$port" "$spid"; then
			wait "$spid"
			sv_log "$tag: server did not listen on $port (try $try)"
			continue
		fi
		timeout -k 5 "$SV_TIMEOUT" "${cli[@]}" -p "$port" >"$SV_TMP/$tag.client" 2>&1
		rc_c=$?
		wait "$spid"
		rc_s=$?
		SV_LAST_PORT=$port
		if [ "$rc_s" -ne 0 ] || [ "$rc_c" -ne 0 ]; then
			sv_fail "$tag: server exit $rc_s, client exit $rc_c (124 = timeout)"
			sv_show "$tag"
			return 1
		fi
		return 0
	done
	sv_fail "$tag: server never listened"
	sv_show "$tag"
	return 1
}

# sv_show TAG: prints the server and client output (for the test log).
sv_show() {
	local f
	for f in "$SV_TMP/$1".server "$SV_TMP/$1".client; do
		[ -f "$f" ] || continue
		echo "----- $(basename "$f")"
		tail -n 40 "$f"
	done
	echo "-----"
}

# sv_roce_gid_index DEV: the GID index of an IPv4-mapped RoCE v2 GID on port 1 (the port's
# netdev address; never loopback), as ibv_devinfo -v lists it; prints nothing if none.
sv_roce_gid_index() {
	ibv_devinfo -v -d "$1" -i 1 2>/dev/null | awk '
		/GID\[/ && /::ffff:127\.0\.0\.1, RoCE v2/ { sub(/.*GID\[ */, ""); sub(/\].*/, "");
							      print; found = 1; exit }
		/GID\[/ && /::ffff:[0-9.]+, RoCE v2/ && any == "" { a = $0; sub(/.*GID\[ */, "", a);
							      sub(/\].*/, "", a); any = a }
		END { if (!found && any != "") print any }'
}

# sv_is_positive X: true for a positive finite decimal number.
sv_is_positive() {
	awk -v x="$1" 'BEGIN { exit !(x ~ /^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$/ && x + 0 > 0) }'
}
