#!/bin/sh
# NCCL_IB_MERGE_VFS (default 1, as NCCL): SR-IOV virtual functions of one NIC
# (simverbs pci=BB:DD.F) get the PF's PCI path and consecutive port numbers,
# so NCCL's topology sees one PCI device; with 0 only the functions of one
# PCI device number are merged.
INFO="${NV_TOP_BUILDDIR:-.}/nccl-net-verbs-info"
[ -x "$INFO" ] || { echo "no $INFO: skipped"; exit 77; }
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# "name port pci-tail" per device the plugin reports
devs() {
	"$INFO" 2>&1 | awk '/^  dev [0-9]+:/ { name = $3; port = $5 }
		/^    pciPath/ { n = split($2, p, "/"); print name, port, p[n] }'
}
export SIMVERBS_DEVICES="pf0:ll=ib,pci=05:00.0;vf0:ll=ib,pci=05:00.2;vf1:ll=ib,pci=05:01.3;other0:ll=ib,pci=07:00.0"
got=$(devs)
want="pf0 1 0000:05:00.0
vf0 2 0000:05:00.0
vf1 3 0000:05:00.0
other0 1 0000:07:00.0"
[ "$got" = "$want" ] || { bad "NCCL_IB_MERGE_VFS=1"; printf 'got:\n%s\nwant:\n%s\n' "$got" "$want"; }
got=$(NCCL_IB_MERGE_VFS=0 devs)
want="pf0 1 0000:05:00.0
vf0 2 0000:05:00.0
vf1 1 0000:05:01.0
other0 1 0000:07:00.0"
[ "$got" = "$want" ] || { bad "NCCL_IB_MERGE_VFS=0"; printf 'got:\n%s\nwant:\n%s\n' "$got" "$want"; }
[ $fail = 0 ] && echo "test-merge-vfs: ok"
exit $fail
