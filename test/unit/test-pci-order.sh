#!/bin/sh
# NCCL_IB_DEVICE_PCI_ORDER (default 1, as NCCL): devices are numbered by their PCI
# address (domain, bus, device, function, compared as one number; simverbs pci=BB:DD.F),
# whatever their names or the verbs list's order, so every node numbers alike; SR-IOV VFs
# that NCCL_IB_MERGE_VFS puts on one PCI path keep their function order (vf_2 at .1
# before vf_10 at .2, which a name order would swap). With 0: the verbs list's order.
INFO="${NV_TOP_BUILDDIR:-.}/nccl-net-verbs-info"
[ -x "$INFO" ] || { echo "no $INFO: skipped"; exit 77; }
fail=0
bad() { echo "FAIL: $*"; fail=1; }
devs() { # the device names in the plugin's order
	"$INFO" 2>&1 | awk '/^  dev [0-9]+:/ { printf "%s ", $3 }'
}
export SIMVERBS_DEVICES="zeta0:ll=ib,pci=0a:00.0;vf_10:ll=ib,pci=05:00.2;vf_2:ll=ib,pci=05:00.1;alpha0:ll=ib,pci=07:00.0"
got=$(devs)
want="vf_2 vf_10 alpha0 zeta0 "
[ "$got" = "$want" ] || bad "NCCL_IB_DEVICE_PCI_ORDER=1: got '$got', want '$want'"
got=$(NCCL_IB_DEVICE_PCI_ORDER=0 devs)
want="zeta0 vf_10 vf_2 alpha0 "
[ "$got" = "$want" ] || bad "NCCL_IB_DEVICE_PCI_ORDER=0: got '$got', want '$want'"
[ $fail = 0 ] && echo "test-pci-order: ok"
exit $fail
