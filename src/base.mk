# Plugin core: ABI headers, vtable, params, log, verbs seam, devices, GDR, MR cache.
# NV_BASE_SOURCES and NV_COMM_SOURCES (src/comm.mk) make up libnvcore.la, which
# the plugin and the unit tests link.
NV_BASE_SOURCES =

noinst_LTLIBRARIES += libnvcore.la
libnvcore_la_SOURCES = $(NV_BASE_SOURCES) $(NV_COMM_SOURCES)
libnvcore_la_LIBADD = $(IBVERBS_LIBS)

lib_LTLIBRARIES += libnccl-net-verbs.la
libnccl_net_verbs_la_SOURCES = src/plugin.c
libnccl_net_verbs_la_LIBADD = libnvcore.la $(IBVERBS_LIBS)
libnccl_net_verbs_la_LDFLAGS = -module -avoid-version -shared -no-undefined \
	-Wl,--no-undefined -export-symbols-regex '^ncclNetPlugin_v[0-9]+$$'
