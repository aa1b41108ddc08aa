#!/usr/bin/env bash
# Inside a simulated host, the RDMA sysfs view is at its real paths (the host's private mount
# namespace), as unchanged software reads it: /sys/class/infiniband/<dev>/{node_guid,
# sys_image_guid,fw_ver,device -> PCI dir,ports/1/{state,phys_state,rate,lid,link_layer,gids/N,
# gid_attrs/types/N,gid_attrs/ndevs/N}}, /sys/class/infiniband_verbs/uverbsN, and the character
# devices /dev/infiniband/uverbsN; each host shows its own NICs (fabric-unique GUIDs, its own
# addresses), the port state follows the rail's link, and the machine's /dev is untouched.
. "$(dirname "$0")/cl-common.sh"

cl_up --hosts 2 --nics 2
for h in h0 h1; do cl_exec "$h" -- ibv_devices >"$TMP/devs.$h" 2>&1 || { cat "$TMP/devs.$h"; fail "ibv_devices in $h"; }; done
rd() { cl_exec "$1" -- cat "/sys/class/infiniband/$2"; }
g0=$(rd h0 mlx5_0/node_guid) g1=$(rd h1 mlx5_0/node_guid)
[ -n "$g0" ] && [ "$g0" != "$g1" ] || fail "node GUIDs of h0/h1 mlx5_0: '$g0' '$g1' (must differ)"
[ "$(rd h1 mlx5_1/sys_image_guid)" = "$(rd h1 mlx5_1/node_guid)" ] || fail "sys_image_guid"
grep -q "${g1//:/}" "$TMP/devs.h1" ||
	{ cat "$TMP/devs.h1"; fail "ibv_devices in h1 does not list h1's GUID $g1"; }
[ -n "$(rd h1 mlx5_0/fw_ver)" ] || fail "no fw_ver"
for f in state phys_state rate lid link_layer gids/3 gid_attrs/types/3 gid_attrs/ndevs/3; do
	v=$(rd h1 "mlx5_1/ports/1/$f") || fail "h1: no ports/1/$f"
	echo "    h1 mlx5_1 ports/1/$f: $v"
done
[ "$(rd h1 mlx5_1/ports/1/gids/3)" = "0000:0000:0000:0000:0000:ffff:0a65:0002" ] ||
	fail "h1 mlx5_1 gids/3 is not ::ffff:10.101.0.2"
[ "$(rd h1 mlx5_1/ports/1/gid_attrs/ndevs/3)" = rail1 ] || fail "gid_attrs/ndevs/3 is not rail1"
[ "$(rd h1 mlx5_1/ports/1/gid_attrs/types/3)" = "RoCE v2" ] || fail "gid_attrs/types/3"
[ "$(rd h1 mlx5_1/ports/1/link_layer)" = Ethernet ] || fail "link_layer"
pci=$(cl_exec h1 -- readlink -f /sys/class/infiniband/mlx5_0/device)
cl_exec h1 -- test -f "$pci/vendor" -a -f "$pci/numa_node" -a -f "$pci/local_cpulist" ||
	fail "device link $pci has no PCI topology files"
[ "$(cl_exec h1 -- cat /sys/class/infiniband_verbs/uverbs1/ibdev)" = mlx5_1 ] || fail "infiniband_verbs"
cl_exec h1 -- test -c /dev/infiniband/uverbs0 -a -c /dev/infiniband/uverbs1 || fail "no /dev/infiniband/uverbsN"
cl_exec h1 -- test -e /sys/class/net/rail0 || fail "the host's other /sys/class entries are gone"
[ -e /dev/infiniband/uverbs0 ] && [ ! -e /sys/class/infiniband/mlx5_0 ] &&
	fail "the machine's /dev/infiniband changed"
"$SC" link h1 1 down
for ((i = 0; i < 100; i++)); do
	cl_exec h1 -- ibv_devinfo -d mlx5_1 >/dev/null 2>&1	# a process on the host sees the change
	case $(rd h1 mlx5_1/ports/1/state) in *DOWN*) break ;; esac
	sleep 0.1
done
case $(rd h1 mlx5_1/ports/1/state) in *DOWN*) ;; *) fail "rail 1 down: sysfs state $(rd h1 mlx5_1/ports/1/state)" ;; esac
cl_exec h1 -- ibv_devinfo -d mlx5_1 | grep -q 'PORT_DOWN' || fail "rail 1 down: ibv_devinfo not PORT_DOWN"
echo "sysfs and /dev/infiniband at their real paths inside hosts, per-host GUIDs and GIDs, state follows the link: ok"
