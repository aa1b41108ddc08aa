# Unit tests (test/unit/): one program or script per module, included by
# Makefile.am. Those linking libnvcore.la call the plugin's functions directly;
# those depending on libnccl-net-verbs.la dlopen the built plugin
# ($NV_TEST_PLUGIN). No device needed unless noted; devices come from simverbs.
noinst_HEADERS += test/unit/nvtest.h test/unit/nvplugin.h test/unit/nvcomm.h
# Pure code, no device: the knob table, HCA/GID selection, the registration
# cache, the NIC counters' parsing.
UNIT_PURE_TESTS = test/unit/test_param test/unit/test_select test/unit/test_mr_cache test/unit/test_hwcnt
check_PROGRAMS += $(UNIT_PURE_TESTS)
TESTS += $(UNIT_PURE_TESTS)
test_unit_test_param_SOURCES = test/unit/test_param.c
test_unit_test_param_LDADD = libnvcore.la $(IBVERBS_LIBS)
test_unit_test_select_SOURCES = test/unit/test_select.c
test_unit_test_select_LDADD = libnvcore.la $(IBVERBS_LIBS)
test_unit_test_mr_cache_SOURCES = test/unit/test_mr_cache.c
test_unit_test_mr_cache_LDADD = libnvcore.la $(IBVERBS_LIBS)
test_unit_test_hwcnt_SOURCES = test/unit/test_hwcnt.c
test_unit_test_hwcnt_LDADD = libnvcore.la $(IBVERBS_LIBS)

# Needs devices: runs over simverbs (first on LD_LIBRARY_PATH in make check).
check_PROGRAMS += test/unit/test_device
TESTS += test/unit/test_device
test_unit_test_device_SOURCES = test/unit/test_device.c
test_unit_test_device_LDADD = libnvcore.la $(IBVERBS_LIBS)
# dlopens the built plugin (NV_TEST_PLUGIN) and drives every exported table.
check_PROGRAMS += test/unit/test_plugin
TESTS += test/unit/test_plugin
test_unit_test_plugin_SOURCES = test/unit/test_plugin.c
test_unit_test_plugin_LDADD = $(IBVERBS_LIBS)
EXTRA_test_unit_test_plugin_DEPENDENCIES = libnccl-net-verbs.la

# ---- the connection and data-path layers ----
check_PROGRAMS += test/unit/test_wire
TESTS += test/unit/test_wire
test_unit_test_wire_SOURCES = test/unit/test_wire.c
test_unit_test_wire_LDADD = libnvcore.la $(IBVERBS_LIBS)

check_PROGRAMS += test/unit/test_wire_bounds
TESTS += test/unit/test_wire_bounds
test_unit_test_wire_bounds_SOURCES = test/unit/test_wire_bounds.c
test_unit_test_wire_bounds_LDADD = libnvcore.la $(IBVERBS_LIBS)

check_PROGRAMS += test/unit/test_sock
TESTS += test/unit/test_sock
test_unit_test_sock_SOURCES = test/unit/test_sock.c
test_unit_test_sock_LDADD = libnvcore.la $(IBVERBS_LIBS)

check_PROGRAMS += test/unit/test_qp
TESTS += test/unit/test_qp
test_unit_test_qp_SOURCES = test/unit/test_qp.c
test_unit_test_qp_LDADD = libnvcore.la $(IBVERBS_LIBS)

check_PROGRAMS += test/unit/test_fo_msg
TESTS += test/unit/test_fo_msg
test_unit_test_fo_msg_SOURCES = test/unit/test_fo_msg.c
test_unit_test_fo_msg_LDADD = libnvcore.la $(IBVERBS_LIBS)

check_PROGRAMS += test/unit/test_cts
TESTS += test/unit/test_cts
test_unit_test_cts_SOURCES = test/unit/test_cts.c
test_unit_test_cts_LDADD = libnvcore.la $(IBVERBS_LIBS)

# the fast paths taken, or with NCCL_VERBS_FAST_PATHS=0 none (counted by the
# general paths); the forced reruns of the data-path tests are in test/reruns.mk
check_PROGRAMS += test/unit/test_fast_paths
TESTS += test/unit/test_fast_paths
test_unit_test_fast_paths_SOURCES = test/unit/test_fast_paths.c
test_unit_test_fast_paths_LDADD = libnvcore.la $(IBVERBS_LIBS)

# the order of reads on peer-written control data (flag first), by page traps
check_PROGRAMS += test/unit/test_read_order
TESTS += test/unit/test_read_order
test_unit_test_read_order_SOURCES = test/unit/test_read_order.c
test_unit_test_read_order_LDADD = libnvcore.la $(IBVERBS_LIBS)

# ECE negotiated through the handshake (simverbs' mlx5-like ECE); modify_qp
# retried on ETIMEDOUT (NCCL_IB_MQP_RETRY_*, simverbs' rtr_timeouts).
check_PROGRAMS += test/unit/test_qp_knobs
TESTS += test/unit/test_qp_knobs
test_unit_test_qp_knobs_SOURCES = test/unit/test_qp_knobs.c
test_unit_test_qp_knobs_LDADD = libnvcore.la $(IBVERBS_LIBS)

# ---- tools, layering, devices end to end ----
dist_check_SCRIPTS += test/unit/test-info.sh
TESTS += test/unit/test-info.sh
# src/ files import only downwards (includes and, from the objects, calls), and
# the check fails on each circle planted in a copy of the tree.
dist_check_SCRIPTS += test/unit/test-layers.sh test/unit/test-layers-circle.sh
EXTRA_DIST += scripts/check-layers.sh
TESTS += test/unit/test-layers.sh test/unit/test-layers-circle.sh
# Advertised limits hold (maxComms pairs connect under a lowered max_qp, ...).
check_PROGRAMS += test/unit/test_limits
TESTS += test/unit/test_limits
test_unit_test_limits_SOURCES = test/unit/test_limits.c
test_unit_test_limits_LDADD = $(IBVERBS_LIBS)
EXTRA_test_unit_test_limits_DEPENDENCIES = libnccl-net-verbs.la
# GPUDirect detected (fake peer-memory marker, simverbs' dma-buf): properties
# against their sources, CUDA-typed and dma-buf receives flushed.
check_PROGRAMS += test/unit/test_gdr
TESTS += test/unit/test_gdr
test_unit_test_gdr_SOURCES = test/unit/test_gdr.c
test_unit_test_gdr_LDADD = $(IBVERBS_LIBS)
EXTRA_test_unit_test_gdr_DEPENDENCIES = libnccl-net-verbs.la
# 2-3 GiB messages, every byte checked (~6.5 GiB of memory, about a minute):
# built with the tests, run only by `make check-large`.
check_PROGRAMS += test/unit/test_large
test_unit_test_large_SOURCES = test/unit/test_large.c
test_unit_test_large_LDADD = $(IBVERBS_LIBS)
EXTRA_test_unit_test_large_DEPENDENCIES = libnccl-net-verbs.la
check-large: test/unit/test_large$(EXEEXT) libnccl-net-verbs.la
	@$(AM_TESTS_ENVIRONMENT) ./test/unit/test_large$(EXEEXT)
.PHONY: check-large
# NIC fusion end to end (three simverbs devices, data through merged vNICs).
check_PROGRAMS += test/unit/test_vnic
TESTS += test/unit/test_vnic
test_unit_test_vnic_SOURCES = test/unit/test_vnic.c
test_unit_test_vnic_LDADD = $(IBVERBS_LIBS)
EXTRA_test_unit_test_vnic_DEPENDENCIES = libnccl-net-verbs.la
# libibverbs bound at run time: old rdma-core, none, port speed verb.
check_PROGRAMS += test/unit/test_loadverbs
test_unit_test_loadverbs_SOURCES = test/unit/test_loadverbs.c
test_unit_test_loadverbs_LDADD = -ldl
EXTRA_test_unit_test_loadverbs_DEPENDENCIES = libnccl-net-verbs.la test/simverbs/old/libibverbs.la
dist_check_SCRIPTS += test/unit/test-oldverbs.sh
TESTS += test/unit/test-oldverbs.sh
# iWARP skipped; RoCE ports' netdev, TC/SL and PFC/ECN state in nccl-net-verbs-info.
dist_check_SCRIPTS += test/unit/test-roce-fabric.sh
TESTS += test/unit/test-roce-fabric.sh
# nccl-net-verbs-info --watch: the loss diagnosis over a lossy simverbs link, none without loss.
dist_check_SCRIPTS += test/unit/test-info-watch.sh
TESTS += test/unit/test-info-watch.sh
# NCCL_IB_MERGE_VFS: VFs of one NIC on one PCI path; NCCL_IB_DEVICE_PCI_ORDER (simverbs pci=).
dist_check_SCRIPTS += test/unit/test-merge-vfs.sh test/unit/test-pci-order.sh
TESTS += test/unit/test-merge-vfs.sh test/unit/test-pci-order.sh
# Verbs seam failure messages over simverbs.
check_PROGRAMS += test/unit/test_ibv
TESTS += test/unit/test_ibv
test_unit_test_ibv_SOURCES = test/unit/test_ibv.c
test_unit_test_ibv_LDADD = libnvcore.la $(IBVERBS_LIBS)
