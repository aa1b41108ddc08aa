#!/usr/bin/env bash
# perftest-probe.sh: which perftest programs and modes run on a fabric - one line per case,
# "NAME ARGS: ok|fail (why)", the same on every run, so that simverbs and a kernel driver
# (rxe) can be compared with diff (test/simverbs/README.md, "simverbs against the kernel's
# rxe"). Short runs (4 KiB, 50 iterations), never judged on speed.
#
#   test/simverbs/perftest-probe.sh SERVER_DEV SERVER_GID CLIENT_DEV CLIENT_GID ADDRESS
#
# e.g. on simverbs (LD_LIBRARY_PATH=build/test/simverbs/.libs, as the checks set it):
#   perftest-probe.sh simroce0 3 simroce0 3 127.0.0.1
# and in the rxe VM: perftest-probe.sh rxe0 G0 rxe1 G1 10.77.0.1 (G: RoCE v2 IPv4 GID index).
# Exit status 0 (a report), 2 on bad usage or without perftest.
set -u
[ $# -eq 5 ] || { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
sdev=$1 sgid=$2 cdev=$3 cgid=$4 addr=$5
command -v ib_write_bw >/dev/null || { echo "perftest not installed" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/perftest-probe.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
port=$((18515 + $$ % 2000))
one() {	# one PROG ARGS...: a server and a client, both must exit 0
	local prog=$1 try rc=1 spid
	shift
	for try in 1 2 3; do
		port=$((port + 1))
		timeout 90 "$prog" -d "$sdev" -x "$sgid" -i 1 -F -p "$port" "$@" >"$tmp/s" 2>&1 &
		spid=$!
		sleep $((try * 2))
		timeout 90 "$prog" -d "$cdev" -x "$cgid" -i 1 -F -p "$port" "$@" "$addr" >"$tmp/c" 2>&1
		rc=$?
		wait "$spid"
		src=$?
		[ "$rc" -eq 0 ] && [ "$src" -eq 0 ] && break
		grep -qi "couldn't connect\|connection refused" "$tmp/c" || break
	done
	if [ "$rc" -eq 0 ] && [ "$src" -eq 0 ]; then
		echo "$prog $*: ok"
	else
		why=$(cat "$tmp/c" "$tmp/s" | grep -iE "error|fail|not supported|unable|couldn|invalid" |
			head -n 1 | tr -s ' \t' ' ' | cut -c1-100)
		echo "$prog $*: fail (client $rc, server $src: ${why:-no message})"
	fi
}
for p in ib_write_bw ib_read_bw ib_send_bw; do
	one "$p" -s 4096 -n 50
	one "$p" -s 4096 -n 50 --use_old_post_send
done
one ib_send_bw -s 1024 -n 50 -c UD
one ib_write_bw -s 65536 -n 20 -q 2
for p in ib_write_lat ib_read_lat ib_send_lat; do
	one "$p" -s 8 -n 50
done
one ib_atomic_bw -n 50
one ib_atomic_lat -n 50
exit 0
