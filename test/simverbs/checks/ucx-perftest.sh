#!/usr/bin/env bash
# ucx-perftest.sh: Debian's UCX (ucx_perftest) runs over its rc_verbs transport on simverbs, on
# simib0 and simroce0: UCP tag-matching latency (8 B) and bandwidth (1 MiB) with UCX_TLS=rc_v
# (rc_verbs for the data, ud_verbs only to wire the endpoints up; the test checks UCX chose
# rc_verbs for the tag lane), and UCT active-message latency (8 B), active-message bandwidth
# (8 KiB bcopy) and RDMA-write bandwidth (1 MiB zcopy) on rc_verbs.  rc_verbs receives through a
# shared receive queue, so this exercises simverbs' SRQ and UD under programs nobody here wrote.
#
# UCX only uses a device whose /dev/infiniband/uverbsN is a read-write character device, so the
# script re-runs itself in a private mount namespace (unshare -m) where /dev is a tmpfs holding
# copies of the usual nodes, bind mounts of /dev/shm, /dev/pts, /dev/mqueue, and
# infiniband/uverbs0..15 (character devices 1:3, what /dev/null is: simverbs never opens them).
# The real /dev is never touched.  Skips (77) without ucx-utils, without root or unshare.
. "$(dirname "$0")/lib.sh"
sv_need_simverbs
command -v ucx_perftest >/dev/null 2>&1 || sv_skip "ucx_perftest not installed (apt-get install ucx-utils)"

if [ -z "${SV_UCX_NS:-}" ]; then
	[ "$(id -u)" -eq 0 ] || sv_skip "needs root for a private mount namespace"
	command -v unshare >/dev/null 2>&1 || sv_skip "unshare not installed"
	SV_UCX_NS=$(mktemp -d "${TMPDIR:-/tmp}/sv-ucx-ns.XXXXXX") || sv_hard "mktemp"
	export SV_UCX_NS
	unshare -m --propagation private "$BASH" "$0" "$@"
	rc=$?
	# only empty mount points are left (the mounts died with the namespace): no rm -r
	rmdir "$SV_UCX_NS/dev" "$SV_UCX_NS" 2>/dev/null
	exit $rc
fi

# ---- inside the private mount namespace
d=$SV_UCX_NS/dev
mkdir -p "$d" && mount -t tmpfs -o mode=755 tmpfs "$d" || sv_hard "tmpfs on $d"
for f in null zero random urandom full tty ptmx fd stdin stdout stderr; do
	[ -e "/dev/$f" ] || [ -L "/dev/$f" ] && cp -a "/dev/$f" "$d/"
done
for m in shm pts mqueue hugepages; do
	[ -d "/dev/$m" ] || continue
	mkdir -p "$d/$m" && mount --bind "/dev/$m" "$d/$m" || sv_hard "bind /dev/$m"
done
mkdir "$d/infiniband"
for i in $(seq 0 15); do mknod -m 666 "$d/infiniband/uverbs$i" c 1 3; done
mount --bind "$d" /dev || sv_hard "bind $d over /dev"
[ -c /dev/infiniband/uverbs0 ] && [ -e /dev/shm ] || sv_hard "namespace /dev not as expected"

# sv_uct TAG DEV ARGS...: one UCT test between two ucx_perftest processes; prints Final line.
sv_uct() {
	local tag=$1 dev=$2
	shift 2
	if sv_pair "$tag" ucx_perftest -x rc_verbs -d "$dev" -- \
		ucx_perftest 127.0.0.1 -x rc_verbs -d "$dev" "$@"; then
		if grep -q '^Final:' "$SV_TMP/$tag.client"; then
			sv_log "$tag: $(grep '^Final:' "$SV_TMP/$tag.client" | tr -s ' ')"
		else
			sv_fail "$tag: no Final line"
			sv_show "$tag"
		fi
	fi
}

# sv_ucp TAG DEV ARGS...: one UCP test over rc_verbs (ud_verbs wires up); the tag lane must be
# rc_verbs (UCX logs its endpoint configuration at info level).
sv_ucp() {
	local tag=$1 dev=$2
	shift 2
	if UCX_TLS=rc_v UCX_NET_DEVICES=$dev UCX_LOG_LEVEL=info sv_pair "$tag" ucx_perftest -- \
		ucx_perftest 127.0.0.1 "$@"; then
		if ! grep -q "ep_cfg\[[0-9]*\]: tag(rc_verbs/$dev" "$SV_TMP/$tag.client"; then
			sv_fail "$tag: the tag lane is not rc_verbs/$dev"
			sv_show "$tag"
		elif grep -q '^Final:' "$SV_TMP/$tag.client"; then
			sv_log "$tag: $(grep '^Final:' "$SV_TMP/$tag.client" | tr -s ' ')"
		else
			sv_fail "$tag: no Final line"
			sv_show "$tag"
		fi
	fi
}

for dev in simib0:1 simroce0:1; do
	n=${dev%:1}
	sv_ucp "$n-tag_lat" "$dev" -t tag_lat -s 8 -n 5000 -w 500
	sv_ucp "$n-tag_bw" "$dev" -t tag_bw -s 1048576 -n 300 -w 30
	sv_uct "$n-am_lat" "$dev" -t am_lat -s 8 -n 5000 -w 500
	sv_uct "$n-am_bw" "$dev" -t am_bw -s 8192 -D bcopy -n 5000 -w 500
	sv_uct "$n-put_bw" "$dev" -t put_bw -s 1048576 -D zcopy -n 300 -w 30
done
sv_log "columns: iterations, latency us (median, average, overall), MB/s (average, overall), msg/s"
sv_finish
