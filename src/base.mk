# Plugin core: ABI headers, vtable, params, log, verbs seam,
# devices, GDR, MR cache. NV_BASE_SOURCES and NV_COMM_SOURCES (src/comm.mk)
# make up libnvcore.la, which the plugin and the unit tests (test/unit/unit.mk) link.
NV_BASE_SOURCES = src/log.c src/os.c src/param.c src/ibv.c src/ibv_load.c src/select.c src/device.c src/devset.c src/props.c src/route.c src/event.c \
	src/gdr.c src/mr.c src/hwcnt.c src/census.c src/wqelat.c
noinst_HEADERS += src/nv_common.h src/nv_api.h src/log.h src/os.h src/param.h src/ibv.h src/ibv_syms.h src/device.h src/devset.h src/select.h \
	src/event.h src/mr.h src/hwcnt.h src/census.h src/wqelat.h src/plugin.h \
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

# nccl-net-verbs-info: the plugin's view of this host (devices, GIDs, GPUDirect, knobs).
bin_PROGRAMS += nccl-net-verbs-info
nccl_net_verbs_info_SOURCES = src/tools/nccl-net-verbs-info.c \
	src/tools/nccl-net-verbs-info-watch.c src/tools/info-watch.h
nccl_net_verbs_info_LDADD = libnvcore.la
