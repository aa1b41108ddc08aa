#!/bin/sh
# Devices the plugin cannot run on, and what RoCE needs from the fabric:
#  - an iWARP device (simverbs transport=iwarp) is skipped with one INFO line
#    naming it and why, and nccl-net-verbs-info shows it skipped; with only
#    iWARP devices init finds no usable port;
#  - nccl-net-verbs-info reports per RoCE port its netdev, TC and SL, and the
#    ECN/PFC state from the (fake) sysfs, or warns when there is none.
INFO="${NV_TOP_BUILDDIR:-.}/nccl-net-verbs-info"
[ -x "$INFO" ] || { echo "no $INFO: skipped"; exit 77; }
fail=0
bad() { echo "FAIL: $*"; fail=1; }
has() { case "$1" in *"$2"*) ;; *) bad "$3: output lacks '$2'"; echo "$1" | tail -30 ;; esac; }

export SIMVERBS_DEVICES="simib0:ll=ib;simiw0:transport=iwarp"
out=$(NCCL_DEBUG=INFO "$INFO" 2>&1) || { echo "$out"; bad "info failed with an iWARP device present"; }
has "$out" "skipped: iWARP transport: no RDMA Write with immediate" "info's device list"
n=$(printf '%s\n' "$out" | grep -c 'INFO NET/Verbs : simiw0 skipped: iWARP transport')
[ "$n" = 1 ] || bad "expected one INFO line skipping simiw0, got $n"
printf '%s\n' "$out" | grep -q 'dev [0-9]*: simiw0' && bad "simiw0 reported to NCCL"
has "$out" "dev 0: simib0" "the IB device"

export SIMVERBS_DEVICES="simiw0:transport=iwarp"
out=$("$INFO" 2>&1)
has "$out" "no usable RDMA port" "only iWARP"

# RoCE without any PFC/ECN state in sysfs: warned
export SIMVERBS_DEVICES="simroce0:ll=eth"
out=$(NCCL_IB_TC=106 NCCL_IB_SL=3 "$INFO" 2>&1)
has "$out" "simroce0:1  netdev eth0" "netdev"
has "$out" "traffic class 106 (NCCL_IB_TC; DSCP 26)" "TC"
has "$out" "service level 3 (NCCL_IB_SL)" "SL"
has "$out" "WARNING: no PFC or ECN state found in sysfs for eth0" "no lossless state"
# ... and with mlx5's ECN switches and the qos/pfc line: reported, no warning
export SIMVERBS_DEVICES="simroce0:ll=eth,ecn_np=0x08,ecn_rp=0x28,pfc=0x08"
out=$("$INFO" 2>&1)
has "$out" "notification point on priorities: 3; reaction point on: 3 5" "ECN"
has "$out" "PFC       per priority 0..7: 0 0 0 1 0 0 0 0" "PFC"
case "$out" in *"no PFC or ECN state"*) bad "warned although ECN/PFC are configured" ;; esac
export SIMVERBS_DEVICES="simroce0:ll=eth,ecn_np=0"
out=$("$INFO" 2>&1)
has "$out" "notification point on priorities: none; reaction point on: (not exposed)" "ECN off"
[ $fail = 0 ] && echo "test-roce-fabric: ok"
exit $fail
