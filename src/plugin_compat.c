/*
 * plugin_compat.c - ncclNetPlugin_v6 .. v11: thin adapters over the v12-shaped
 * implementation in plugin.c. They only convert argument types (int sizes,
 * missing ctx/config/profiler handles) and property layouts; every table
 * points straight at the shared function where the prototype is identical.
 */
#include "config.h"

#include <string.h>

#include "plugin.h"
#include "device.h"
#include "nv_common.h"

/* Properties: fill the v12 shape once, copy the members each version has. */
#define NV_COPY_V6(d, s) \
	do { \
		(d)->name = (s)->name; \
		(d)->pciPath = (s)->pciPath; \
		(d)->guid = (s)->guid; \
		(d)->ptrSupport = (s)->ptrSupport; \
		(d)->speed = (s)->speed; \
		(d)->port = (s)->port; \
		(d)->latency = (s)->latency; \
		(d)->maxComms = (s)->maxComms; \
		(d)->maxRecvs = (s)->maxRecvs; \
	} while (0)
#define NV_COPY_V7(d, s) \
	do { \
		NV_COPY_V6(d, s); \
		(d)->netDeviceType = (s)->netDeviceType; \
		(d)->netDeviceVersion = (s)->netDeviceVersion; \
	} while (0)
#define NV_COPY_V8(d, s) \
	do { \
		NV_COPY_V7(d, s); \
		(d)->regIsGlobal = (s)->regIsGlobal; \
	} while (0)

static ncclResult_t nv_props(int dev, ncclNetProperties_v12_t *p)
{
	return nv_get_properties(dev, p);
}

static ncclResult_t nv_get_properties_v6(int dev, ncclNetProperties_v6_t *out)
{
	ncclNetProperties_v12_t p;
	ncclResult_t r = nv_props(dev, &p);

	if (r == ncclSuccess) {
		memset(out, 0, sizeof(*out));
		NV_COPY_V6(out, &p);
	}
	return r;
}

static ncclResult_t nv_get_properties_v7(int dev, ncclNetProperties_v7_t *out)
{
	ncclNetProperties_v12_t p;
	ncclResult_t r = nv_props(dev, &p);

	if (r == ncclSuccess) {
		memset(out, 0, sizeof(*out));
		NV_COPY_V7(out, &p);
	}
	return r;
}

static ncclResult_t nv_get_properties_v8(int dev, ncclNetProperties_v8_t *out)
{
	ncclNetProperties_v12_t p;
	ncclResult_t r = nv_props(dev, &p);

	if (r == ncclSuccess) {
		memset(out, 0, sizeof(*out));
		NV_COPY_V8(out, &p);
	}
	return r;
}

/* v9/v10 and v11 vProps hold 4 devices. */
static ncclResult_t nv_vprops_v11(int dev, const ncclNetProperties_v12_t *p,
				  ncclNetVDeviceProps_v9_t *out)
{
	if (p->vProps.ndevs > NCCL_NET_MAX_DEVS_PER_NIC_V11) {
		NV_WARN("getProperties: device %d merges %d NICs, more than this ABI version's %d",
			dev, p->vProps.ndevs, NCCL_NET_MAX_DEVS_PER_NIC_V11);
		return ncclInternalError;
	}
	memset(out, 0, sizeof(*out));
	out->ndevs = p->vProps.ndevs;
	memcpy(out->devs, p->vProps.devs, sizeof(int) * (size_t)p->vProps.ndevs);
	return ncclSuccess;
}

static ncclResult_t nv_get_properties_v9(int dev, ncclNetProperties_v9_t *out)
{
	ncclNetProperties_v12_t p;
	ncclResult_t r = nv_props(dev, &p);

	if (r != ncclSuccess)
		return r;
	memset(out, 0, sizeof(*out));
	NV_COPY_V8(out, &p);
	out->forceFlush = p.forceFlush;
	out->maxP2pBytes = p.maxP2pBytes;
	out->maxCollBytes = p.maxCollBytes;
	return nv_vprops_v11(dev, &p, &out->vProps);
}

static ncclResult_t nv_get_properties_v11(int dev, ncclNetProperties_v11_t *out)
{
	ncclNetProperties_v12_t p;
	ncclResult_t r = nv_props(dev, &p);

	if (r != ncclSuccess)
		return r;
	memset(out, 0, sizeof(*out));
	NV_COPY_V8(out, &p);
	out->forceFlush = p.forceFlush;
	out->maxP2pBytes = p.maxP2pBytes;
	out->maxCollBytes = p.maxCollBytes;
	out->maxMultiRequestSize = p.maxMultiRequestSize;
	return nv_vprops_v11(dev, &p, &out->vProps);
}

/* ---- init / listen / connect / accept ---------------------------------------- */

static ncclResult_t nv_init_v6(ncclDebugLogger_t logger)
{
	return nv_init_legacy(logger, NULL);
}

static ncclResult_t nv_init_v10(ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
	return nv_init_legacy(logger, prof);
}

static ncclResult_t nv_listen_v6(int dev, void *handle, void **listen_comm)
{
	return nv_listen(NULL, dev, handle, listen_comm);
}

static ncclResult_t nv_connect_v6(int dev, void *handle, void **send_comm)
{
	return nv_connect_tc(NULL, dev, handle, NCCL_NET_TRAFFIC_CLASS_UNDEF, send_comm);
}

static ncclResult_t nv_connect_v7(int dev, void *handle, void **send_comm,
				  ncclNetDeviceHandle_v7_t **dev_comm)
{
	(void)dev_comm;
	return nv_connect_v6(dev, handle, send_comm);
}

static ncclResult_t nv_connect_v10(int dev, ncclNetCommConfig_v10_t *config, void *handle,
				   void **send_comm, ncclNetDeviceHandle_v10_t **dev_comm)
{
	(void)dev_comm;
	return nv_connect_tc(NULL, dev, handle,
			     config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF, send_comm);
}

static ncclResult_t nv_accept_v6(void *listen_comm, void **recv_comm)
{
	return nv_accept(listen_comm, recv_comm, NULL);
}

/* ---- int-sized data calls (v6 .. v8) ------------------------------------------ */

static ncclResult_t nv_reg_mr_v6(void *comm, void *data, int size, int type, void **mhandle)
{
	if (size < 0) {
		NV_WARN("regMr: negative size %d", size);
		return ncclInternalError;
	}
	return nv_reg_mr(comm, data, (size_t)size, type, mhandle);
}

static ncclResult_t nv_isend_v6(void *send_comm, void *data, int size, int tag, void *mhandle,
				void **request)
{
	if (size < 0) {
		NV_WARN("isend: negative size %d", size);
		return ncclInternalError;
	}
	return nv_isend(send_comm, data, (size_t)size, tag, mhandle, NULL, request);
}

static ncclResult_t nv_irecv_v6(void *recv_comm, int n, void **data, int *sizes, int *tags,
				void **mhandles, void **request)
{
	size_t s[NV_MAX_RECVS];

	if (n < 1 || n > NV_MAX_RECVS) {
		NV_WARN("irecv: %d grouped receives requested, maxRecvs is %d", n, NV_MAX_RECVS);
		return ncclInternalError;
	}
	for (int i = 0; i < n; i++) {
		if (sizes[i] < 0) {
			NV_WARN("irecv: negative size %d for receive %d", sizes[i], i);
			return ncclInternalError;
		}
		s[i] = (size_t)sizes[i];
	}
	return nv_irecv(recv_comm, n, data, s, tags, mhandles, NULL, request);
}

/* ---- v9 (size_t, no profiler handles) ------------------------------------------ */

static ncclResult_t nv_isend_v9(void *send_comm, void *data, size_t size, int tag, void *mhandle,
				void **request)
{
	return nv_isend(send_comm, data, size, tag, mhandle, NULL, request);
}

static ncclResult_t nv_irecv_v9(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
				void **mhandles, void **request)
{
	return nv_irecv(recv_comm, n, data, sizes, tags, mhandles, NULL, request);
}

static ncclResult_t nv_make_vdevice_v10(int *d, ncclNetVDeviceProps_v10_t *props)
{
	if (!props)
		return ncclInternalError;
	return nv_make_vdevice_n(d, props->ndevs, props->devs, NCCL_NET_MAX_DEVS_PER_NIC_V11);
}

/* ---- the tables ------------------------------------------------------------------ */

NV_EXPORT ncclNet_v11_t ncclNetPlugin_v11 = {
	.name = "Verbs",
	.init = nv_init,
	.devices = nv_devices,
	.getProperties = nv_get_properties_v11,
	.listen = nv_listen,
	.connect = nv_connect,
	.accept = nv_accept,
	.regMr = nv_reg_mr,
	.regMrDmaBuf = nv_reg_mr_dmabuf,
	.deregMr = nv_dereg_mr,
	.isend = NV_ISEND_ENTRY,
	.irecv = NV_IRECV_ENTRY,
	.iflush = nv_iflush,
	.test = NV_TEST_ENTRY,
	.closeSend = nv_close_send,
	.closeRecv = nv_close_recv,
	.closeListen = nv_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = NULL,
	.makeVDevice = nv_make_vdevice_v10,
	.finalize = nv_finalize,
	.setNetAttr = nv_set_net_attr,
};

NV_EXPORT ncclNet_v10_t ncclNetPlugin_v10 = {
	.name = "Verbs",
	.init = nv_init_v10,
	.devices = nv_devices,
	.getProperties = nv_get_properties_v9,
	.listen = nv_listen_v6,
	.connect = nv_connect_v10,
	.accept = nv_accept,
	.regMr = nv_reg_mr,
	.regMrDmaBuf = nv_reg_mr_dmabuf,
	.deregMr = nv_dereg_mr,
	.isend = NV_ISEND_ENTRY,
	.irecv = NV_IRECV_ENTRY,
	.iflush = nv_iflush,
	.test = NV_TEST_ENTRY,
	.closeSend = nv_close_send,
	.closeRecv = nv_close_recv,
	.closeListen = nv_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = NULL,
	.makeVDevice = nv_make_vdevice_v10,
};

/* v9 is native in NCCL 2.24/2.25, which abort communicator init when
 * makeVDevice fails during automatic merging: offer no fusion there. */
NV_EXPORT ncclNet_v9_t ncclNetPlugin_v9 = {
	.name = "Verbs",
	.init = nv_init_v6,
	.devices = nv_devices,
	.getProperties = nv_get_properties_v9,
	.listen = nv_listen_v6,
	.connect = nv_connect_v7,
	.accept = nv_accept,
	.regMr = nv_reg_mr,
	.regMrDmaBuf = nv_reg_mr_dmabuf,
	.deregMr = nv_dereg_mr,
	.isend = nv_isend_v9,
	.irecv = nv_irecv_v9,
	.iflush = nv_iflush,
	.test = NV_TEST_ENTRY,
	.closeSend = nv_close_send,
	.closeRecv = nv_close_recv,
	.closeListen = nv_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = NULL,
	.makeVDevice = NULL,
};

NV_EXPORT ncclNet_v8_t ncclNetPlugin_v8 = {
	.name = "Verbs",
	.init = nv_init_v6,
	.devices = nv_devices,
	.getProperties = nv_get_properties_v8,
	.listen = nv_listen_v6,
	.connect = nv_connect_v7,
	.accept = nv_accept,
	.regMr = nv_reg_mr,
	.regMrDmaBuf = nv_reg_mr_dmabuf,
	.deregMr = nv_dereg_mr,
	.isend = nv_isend_v6,
	.irecv = nv_irecv_v6,
	.iflush = nv_iflush,
	.test = NV_TEST_ENTRY,
	.closeSend = nv_close_send,
	.closeRecv = nv_close_recv,
	.closeListen = nv_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = NULL,
};

NV_EXPORT ncclNet_v7_t ncclNetPlugin_v7 = {
	.name = "Verbs",
	.init = nv_init_v6,
	.devices = nv_devices,
	.getProperties = nv_get_properties_v7,
	.listen = nv_listen_v6,
	.connect = nv_connect_v7,
	.accept = nv_accept,
	.regMr = nv_reg_mr_v6,
	.regMrDmaBuf = nv_reg_mr_dmabuf,
	.deregMr = nv_dereg_mr,
	.isend = nv_isend_v6,
	.irecv = nv_irecv_v6,
	.iflush = nv_iflush,
	.test = NV_TEST_ENTRY,
	.closeSend = nv_close_send,
	.closeRecv = nv_close_recv,
	.closeListen = nv_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = NULL,
};

NV_EXPORT ncclNet_v6_t ncclNetPlugin_v6 = {
	.name = "Verbs",
	.init = nv_init_v6,
	.devices = nv_devices,
	.getProperties = nv_get_properties_v6,
	.listen = nv_listen_v6,
	.connect = nv_connect_v6,
	.accept = nv_accept_v6,
	.regMr = nv_reg_mr_v6,
	.regMrDmaBuf = nv_reg_mr_dmabuf,
	.deregMr = nv_dereg_mr,
	.isend = nv_isend_v6,
	.irecv = nv_irecv_v6,
	.iflush = nv_iflush,
	.test = NV_TEST_ENTRY,
	.closeSend = nv_close_send,
	.closeRecv = nv_close_recv,
	.closeListen = nv_close_listen,
};
