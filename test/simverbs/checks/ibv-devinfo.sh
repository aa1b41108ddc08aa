#!/usr/bin/env bash
# Unchanged Debian ibv_devices / ibv_devinfo on simverbs: both default devices are listed with
# a node GUID, ports are ACTIVE with the right link layer, the InfiniBand port has a LID and a
# link-local GID, the RoCE port lists RoCE v1 and v2 GIDs of its netdev (IPv4-mapped and a
# link-local one), never loopback's. An unknown device name is an error.
. "$(dirname "$0")/lib.sh"
sv_need_prog ibv_devices ibv_devinfo
sv_need_simverbs

out=$SV_TMP/out
hex16='[0-9a-f]{16}'

# expect_re FILE ERE WHAT: counts a failure when no line of FILE matches ERE.
expect_re() {
	grep -Eq -- "$2" "$1" && return
	sv_fail "$3 (no line matching /$2/ in:)"
	grep -E 'hca_id|port:|state:|link_layer|lid|guid|GID|HCA|^[[:space:]]*sim' "$1" | head -40
}

if timeout "$SV_TIMEOUT" ibv_devices >"$out" 2>&1; then
	for d in simib0 simroce0; do
		expect_re "$out" "^[[:space:]]*$d[[:space:]]+$hex16[[:space:]]*\$" "ibv_devices lists $d"
		grep -Eq "^[[:space:]]*$d[[:space:]]+0{16}" "$out" && sv_fail "ibv_devices: $d GUID is 0"
	done
else
	sv_fail "ibv_devices exited non-zero"; cat "$out"
fi

if timeout "$SV_TIMEOUT" ibv_devinfo -l >"$out" 2>&1; then
	expect_re "$out" '^[[:space:]]*[2-9][0-9]* HCAs? found' "ibv_devinfo -l counts >= 2 devices"
	expect_re "$out" '^[[:space:]]*simib0$' "ibv_devinfo -l lists simib0"
	expect_re "$out" '^[[:space:]]*simroce0$' "ibv_devinfo -l lists simroce0"
else
	sv_fail "ibv_devinfo -l exited non-zero"; cat "$out"
fi

# Per-device attributes (ibv_devinfo -d DEV).
check_dev() {
	local d=$1 ll=$2 f=$SV_TMP/$1
	if ! timeout "$SV_TIMEOUT" ibv_devinfo -d "$d" >"$f" 2>&1; then
		sv_fail "ibv_devinfo -d $d exited non-zero"; cat "$f"; return
	fi
	expect_re "$f" "^hca_id:[[:space:]]+$d\$" "$d: hca_id"
	expect_re "$f" 'transport:[[:space:]]+InfiniBand \(0\)' "$d: transport"
	expect_re "$f" 'node_guid:[[:space:]]+[0-9a-f]{4}(:[0-9a-f]{4}){3}' "$d: node_guid"
	grep -Eq 'node_guid:[[:space:]]+0000:0000:0000:0000' "$f" && sv_fail "$d: node_guid is 0"
	expect_re "$f" 'phys_port_cnt:[[:space:]]+[1-9]' "$d: phys_port_cnt >= 1"
	expect_re "$f" 'port:[[:space:]]+1$' "$d: port 1 listed"
	expect_re "$f" 'state:[[:space:]]+PORT_ACTIVE \(4\)' "$d: port ACTIVE"
	expect_re "$f" 'active_mtu:[[:space:]]+(256|512|1024|2048|4096) \([1-5]\)' "$d: active_mtu"
	expect_re "$f" "link_layer:[[:space:]]+$ll\$" "$d: link_layer $ll"
}
check_dev simib0 InfiniBand
check_dev simroce0 Ethernet
if [ -f "$SV_TMP/simib0" ]; then
	expect_re "$SV_TMP/simib0" 'port_lid:[[:space:]]+[1-9][0-9]*$' "simib0: port has a LID"
	# The node GUID printed by ibv_devices and by ibv_devinfo must agree.
	g1=$(timeout "$SV_TIMEOUT" ibv_devices | awk '$1 == "simib0" { print $2 }')
	g2=$(awk '/node_guid:/ { gsub(":", "", $2); print $2 }' "$SV_TMP/simib0")
	[ -n "$g1" ] && [ "$g1" = "$g2" ] || sv_fail "simib0 GUID differs: ibv_devices '$g1', ibv_devinfo '$g2'"
fi

# GID tables (ibv_devinfo -v).
gid='GID\[ *[0-9]+\]:[[:space:]]+'
if timeout "$SV_TIMEOUT" ibv_devinfo -v -d simib0 >"$out" 2>&1; then
	expect_re "$out" "${gid}fe80:0000:0000:0000:[0-9a-f]{4}(:[0-9a-f]{4}){3}" \
		"simib0: link-local GID (fe80::/64 + port GUID)"
else
	sv_fail "ibv_devinfo -v -d simib0 exited non-zero"; cat "$out"
fi
if timeout "$SV_TIMEOUT" ibv_devinfo -v -d simroce0 >"$out" 2>&1; then
	# ibv_devinfo prints RoCE v1 GIDs as 8 hex groups and RoCE v2 GIDs via inet_ntop.
	expect_re "$out" "${gid}::ffff:[0-9.]+, RoCE v2\$" "simroce0: RoCE v2 IPv4-mapped GID"
	! grep -Eq "${gid}::ffff:127\.|${gid}::1," "$out" || sv_fail "simroce0: a loopback GID"
	expect_re "$out" "${gid}0000:0000:0000:0000:0000:ffff:[0-9a-f]{4}:[0-9a-f]{4}, RoCE v1\$" \
		"simroce0: RoCE v1 IPv4-mapped GID"
	expect_re "$out" "${gid}fe80:[0-9a-f:]+, RoCE v[12]\$" "simroce0: link-local GID"
	idx=$(sv_roce_gid_index simroce0)
	[ -n "$idx" ] || sv_fail "simroce0: no GID index found for the RoCE checks"
	sv_log "simroce0: $(grep -Ec "$gid" "$out") GIDs, IPv4 RoCE v2 at index ${idx:-?}"
else
	sv_fail "ibv_devinfo -v -d simroce0 exited non-zero"; cat "$out"
fi

if timeout "$SV_TIMEOUT" ibv_devinfo -d sv-no-such-device >"$out" 2>&1; then
	sv_fail "ibv_devinfo accepted an unknown device"; cat "$out"
fi
sv_finish
