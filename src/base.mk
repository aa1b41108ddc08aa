# Plugin core: ABI headers, vtable, params, log, verbs seam,
# devices, GDR, MR cache. NV_BASE_SOURCES and NV_COMM_SOURCES (src/comm.mk)
# make up libnvcore.la, which the plugin and the unit tests link.
NV_BASE_SOURCES = src/log.c src/os.c src/param.c src/ibv.c src/ibv_load.c src/select.c src/device.c src/devset.c src/props.c src/route.c src/event.c \
	src/gdr.c src/mr.c src/hwcnt.c src/census.c
noinst_HEADERS += src/nv_common.h src/nv_api.h src/log.h src/os.h src/param.h src/ibv.h src/ibv_syms.h src/device.h src/devset.h src/select.h \
	src/event.h src/mr.h src/hwcnt.h src/census.h src/plugin.h \
	include/nccl/err.h include/nccl/common.h include/nccl/net_device.h include/nccl/net.h \
	include/nccl/net_v6.h include/nccl/net_v7.h include/nccl/net_v8.h include/nccl/net_v9.h \
	include/nccl/net_v10.h include/nccl/net_v11.h include/nccl/net_v12.h \
	src/rma.h include/nccl/rma.h include/nccl/rma_v13.h include/nccl/rma_v14.h include/nccl/rma_v15.h
# One-sided operations for NCCL's RMA tables (ncclRmaPlugin_v13..v15), a layer
# of their own above the devices and socket layers (src/rma.h).
NV_RMA_SOURCES = src/rma_coll.c src/rma_ctx.c src/rma_ops.c src/rma_plugin.c

noinst_LTLIBRARIES += libnvcore.la
libnvcore_la_SOURCES = $(NV_BASE_SOURCES) $(NV_COMM_SOURCES)
# No link-time libibverbs: src/ibv_load.c dlopens it (NCCL_IBVERBS_LIB or
# libibverbs.so.1) and binds its versioned symbols, so the plugin loads on any
# rdma-core, or none. Only the headers come from $(IBVERBS_CFLAGS).
libnvcore_la_LIBADD = -ldl

# The plugin is a module that NCCL dlopen()s by name, libnccl-net-verbs.so:
# libtool builds it (-module -avoid-version, -rpath makes it shared), but
# nothing ever links against it, so it is installed as that one file, without
# a .la and without anything that would need `libtool --finish`.
noinst_LTLIBRARIES += libnccl-net-verbs.la
libnccl_net_verbs_la_SOURCES = src/plugin.c src/plugin_compat.c $(NV_RMA_SOURCES)
libnccl_net_verbs_la_LIBADD = libnvcore.la
# nodelete: NCCL may dlclose us with our event threads still running (v6..v10
# get no finalize); keeping the code mapped makes that and reloads safe.
libnccl_net_verbs_la_LDFLAGS = -module -avoid-version -shared -no-undefined -rpath $(libdir) \
	-Wl,--no-undefined -Wl,-z,nodelete -export-symbols-regex '^nccl(Net|Rma)Plugin_v[0-9]+$$'
# A root `make install` into a directory the dynamic loader searches (e.g.
# /usr/local/lib, listed in /etc/ld.so.conf.d) refreshes ld.so's cache, so that
# NCCL_NET_PLUGIN=verbs finds the plugin at once.
install-exec-local: libnccl-net-verbs.la
	$(MKDIR_P) "$(DESTDIR)$(libdir)"
	$(INSTALL_DATA) .libs/libnccl-net-verbs.so "$(DESTDIR)$(libdir)/libnccl-net-verbs.so"
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && \
	    cat /etc/ld.so.conf /etc/ld.so.conf.d/*.conf 2>/dev/null | grep -qx "$(libdir)" && \
	    command -v ldconfig >/dev/null 2>&1; then \
	  echo " ldconfig (refresh the loader's cache for $(libdir))"; ldconfig || :; fi
uninstall-local:
	rm -f "$(DESTDIR)$(libdir)/libnccl-net-verbs.so"

# ---- unit tests (no devices needed unless noted) -----------------------------
noinst_HEADERS += test/unit/nvtest.h test/unit/nvplugin.h
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

# nccl-net-verbs-info: the plugin's view of this host (devices, GIDs, GPUDirect, knobs).
bin_PROGRAMS += nccl-net-verbs-info
nccl_net_verbs_info_SOURCES = src/tools/nccl-net-verbs-info.c \
	src/tools/nccl-net-verbs-info-watch.c src/tools/info-watch.h
nccl_net_verbs_info_LDADD = libnvcore.la
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
