/*
 * plugin.c - the ncclNet vtables v6 .. v12 ("Verbs").
 *
 * One implementation in the v12 shape (nv_* below, nv_net_* from the comm
 * layer); every older table is a set of thin adapters that convert argument
 * types and property layouts. Only the ncclNetPlugin_vN objects are exported.
 *
 * Lifetime: the global state (parameter table, devices, event threads) is
 * refcounted. v6..v10 init is per process and takes one reference that is
 * never dropped (NCCL gives them no shutdown call; the library is linked
 * -z nodelete so a dlclose cannot unmap running threads). v11/v12 init is
 * per communicator: each ctx holds one reference and finalize(ctx) drops it,
 * so the last finalize releases everything and a later init starts afresh.
 * Connects and accepts abandoned mid-handshake are given back at finalize of
 * their ctx, the per-process context's at the last finalize or at unload.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "nccl/net.h"
#include "failover.h"
#include "lb.h"
#include "plugin.h"
#include "device.h"
#include "devset.h"
#include "log.h"
#include "mr.h"
#include "nv_api.h"
#include "ibv.h"
#include "param.h"
#include "prof.h"

#define NV_PLUGIN_NAME "Verbs"

static pthread_mutex_t nv_init_lock = PTHREAD_MUTEX_INITIALIZER;
static int nv_global_refs;
static bool nv_legacy_ref;               /* v6..v10 init took its reference */
static struct nv_ctx nv_legacy_ctx = { 0, NCCL_NET_TRAFFIC_CLASS_UNDEF };

_Static_assert(NV_OK == (int)ncclSuccess && NV_ERR_SYSTEM == (int)ncclSystemError &&
	       NV_ERR_INTERNAL == (int)ncclInternalError &&
	       NV_ERR_INVALID == (int)ncclInvalidArgument &&
	       NV_ERR_USAGE == (int)ncclInvalidUsage && NV_ERR_REMOTE == (int)ncclRemoteError,
	       "nv_status_t values are the ncclResult_t they map to");
_Static_assert(sizeof(nv_status_t) == sizeof(ncclResult_t), "one size: NV_TEST_ENTRY (plugin.h)");

static inline ncclResult_t nv_to_nccl(nv_status_t st)
{
	return (ncclResult_t)st;
}

/* Once per process (caller holds nv_init_lock), and only when the limit
 * applies: with CAP_IPC_LOCK (root, usually) the kernel ignores it. */
static void nv_memlock_check(void)
{
	static bool warned;
	char lim[48];

	if (warned || !nv_memlock_applies())
		return;
	warned = true;
	NV_WARN("RLIMIT_MEMLOCK is %s, not unlimited, and the process lacks CAP_IPC_LOCK: "
		"large registrations may fail with ENOMEM (ulimit -l unlimited, or docker "
		"--ulimit memlock=-1)", nv_memlock_str(lim, sizeof(lim)));
}

/* First reference: read the knobs, discover devices. Caller holds nv_init_lock. */
static nv_status_t nv_global_first(void)
{
	nv_status_t st = nv_param_load();

	if (st != NV_OK) {
		NV_WARN("invalid configuration (see above); plugin not used");
		return st;
	}
	if (nv_param_int(NV_PARAM_IB_DISABLE)) {
		static bool said; /* once per process: NCCL calls init per communicator */

		if (!said)
			NV_WARN("NCCL_IB_DISABLE=1: the plugin is disabled, init fails (NCCL falls "
				"back to another transport)");
		said = true;
		nv_param_reset();
		return NV_ERR_INTERNAL;
	}
	nv_param_log();
	st = nv_ibv_load(nv_param_str(NV_PARAM_IBVERBS_LIB)); /* first: without libibverbs nothing else is worth a word */
	if (st != NV_OK) {
		nv_param_reset();
		return st;
	}
	nv_memlock_check();
	st = nv_devices_init();
	if (st != NV_OK) {
		nv_param_reset();
		return st;
	}
	NV_INFO(NV_SUB_INIT | NV_SUB_NET, "plugin %s %s ready: %d device(s)", NV_PLUGIN_NAME,
		PACKAGE_VERSION, nv_vdev_count());
	return NV_OK;
}

static nv_status_t nv_global_get(ncclDebugLogger_t logger)
{
	nv_status_t st = NV_OK;

	pthread_mutex_lock(&nv_init_lock);
	if (logger)
		nv_log_set_logger(logger);
	if (nv_global_refs == 0)
		st = nv_global_first();
	if (st == NV_OK)
		nv_global_refs++;
	pthread_mutex_unlock(&nv_init_lock);
	return st;
}

static void nv_global_put(void)
{
	pthread_mutex_lock(&nv_init_lock);
	if (nv_global_refs > 0 && --nv_global_refs == 0) {
		nv_net_reclaim(NULL); /* before the devices go: they hold PDs */
		nv_devices_fini();
		nv_param_reset();
		NV_INFO(NV_SUB_INIT | NV_SUB_NET, "plugin %s finalized", NV_PLUGIN_NAME);
	}
	pthread_mutex_unlock(&nv_init_lock);
}

/* v6..v10 get no shutdown call: at process exit (the library is nodelete, so
 * this runs only then) release the per-process reference if it is the last
 * one and no comm still holds a PD; otherwise leave everything to the OS
 * rather than pull devices from under a live comm. NCCL's logger may already
 * be gone, so messages go to stderr. */
__attribute__((destructor)) static void nv_plugin_exit(void)
{
	pthread_mutex_lock(&nv_init_lock);
	if (nv_legacy_ref && nv_global_refs == 1)
		nv_net_reclaim(&nv_legacy_ctx); /* connects/accepts abandoned mid-handshake */
	if (nv_legacy_ref && nv_global_refs == 1 && !nv_devices_busy()) {
		nv_log_set_logger(NULL);
		nv_legacy_ref = false;
		nv_global_refs = 0;
		nv_devices_fini();
		nv_param_reset();
	}
	pthread_mutex_unlock(&nv_init_lock);
}

/* ---- the v12-shaped implementation ---------------------------------------- */

ncclResult_t nv_init_legacy(ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
	nv_status_t st = NV_OK;

	nv_prof_set(prof);
	pthread_mutex_lock(&nv_init_lock);
	if (logger)
		nv_log_set_logger(logger);
	if (!nv_legacy_ref) {
		if (nv_global_refs == 0)
			st = nv_global_first();
		if (st == NV_OK) {
			nv_global_refs++;
			nv_legacy_ref = true;
		}
	}
	pthread_mutex_unlock(&nv_init_lock);
	return nv_to_nccl(st);
}

ncclResult_t nv_init(void **ctx, uint64_t comm_id, ncclNetCommConfig_v12_t *config,
			    ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
	struct nv_ctx *c;
	nv_status_t st;

	if (!ctx)
		return ncclInternalError;
	*ctx = NULL;
	nv_prof_set(prof);
	st = nv_global_get(logger);
	if (st != NV_OK)
		return nv_to_nccl(st);
	c = calloc(1, sizeof(*c));
	if (!c) {
		NV_WARN("out of memory allocating the communicator context");
		nv_global_put();
		return ncclSystemError;
	}
	c->comm_id = comm_id;
	c->traffic_class = config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
	*ctx = c;
	NV_INFO(NV_SUB_INIT | NV_SUB_NET, "init comm 0x%llx traffic class %d",
		(unsigned long long)comm_id, c->traffic_class);
	return ncclSuccess;
}

ncclResult_t nv_finalize(void *ctx)
{
	if (!ctx)
		return ncclSuccess; /* init failed: it took no reference */
	nv_net_reclaim(ctx);
	free(ctx);
	nv_global_put();
	return ncclSuccess;
}

ncclResult_t nv_devices(int *ndev)
{
	if (!ndev)
		return ncclInternalError;
	*ndev = nv_vdev_count();
	return ncclSuccess;
}

ncclResult_t nv_get_properties(int dev, ncclNetProperties_v12_t *props)
{
	if (!props)
		return ncclInternalError;
	return nv_to_nccl(nv_vdev_properties(dev, props));
}

static nv_status_t nv_check_dev(const char *what, int dev)
{
	if (dev >= 0 && dev < nv_vdev_count())
		return NV_OK;
	NV_WARN("%s: device %d does not exist (%d devices)", what, dev, nv_vdev_count());
	return NV_ERR_INTERNAL;
}

ncclResult_t nv_listen(void *ctx, int dev, void *handle, void **listen_comm)
{
	nv_status_t st = nv_check_dev("listen", dev);

	if (st == NV_OK)
		st = nv_net_listen(ctx ? ctx : &nv_legacy_ctx, dev, handle, listen_comm);
	return nv_to_nccl(st);
}

ncclResult_t nv_connect_tc(void *ctx_, int dev, void *handle, int tc,
				  void **send_comm)
{
	struct nv_ctx *ctx = ctx_ ? ctx_ : &nv_legacy_ctx;
	nv_status_t st = nv_check_dev("connect", dev);

	if (st == NV_OK)
		st = nv_net_connect(ctx, dev, handle, tc, send_comm);
	if (st == NV_OK && *send_comm) {
		nv_fo_attach(*send_comm);
		nv_lb_attach(*send_comm);
	}
	return nv_to_nccl(st);
}

ncclResult_t nv_connect(void *ctx, int dev, void *handle, void **send_comm,
			       ncclNetDeviceHandle_v12_t **dev_comm)
{
	struct nv_ctx *c = ctx ? ctx : &nv_legacy_ctx;

	(void)dev_comm; /* host plugin: NCCL passes a pointer to NULL, left untouched */
	return nv_connect_tc(c, dev, handle, c->traffic_class, send_comm);
}

ncclResult_t nv_accept(void *listen_comm, void **recv_comm,
			      ncclNetDeviceHandle_v12_t **dev_comm)
{
	nv_status_t st = nv_net_accept(listen_comm, recv_comm);

	(void)dev_comm;
	if (st == NV_OK && *recv_comm) {
		nv_fo_attach(*recv_comm);
		nv_lb_attach(*recv_comm);
	}
	return nv_to_nccl(st);
}

ncclResult_t nv_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	return nv_to_nccl(nv_net_reg_mr(comm, data, size, type, 0, -1, mhandle));
}

ncclResult_t nv_reg_mr_dmabuf(void *comm, void *data, size_t size, int type,
				     uint64_t offset, int fd, void **mhandle)
{
	if (fd >= 0)
		type = NCCL_PTR_DMABUF;
	return nv_to_nccl(nv_net_reg_mr(comm, data, size, type, offset, fd, mhandle));
}

ncclResult_t nv_dereg_mr(void *comm, void *mhandle)
{
	return nv_to_nccl(nv_net_dereg_mr(comm, mhandle));
}

ncclResult_t nv_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			     void *phandle, void **request)
{
	return nv_to_nccl(nv_net_isend(send_comm, data, size, tag, mhandle, phandle, request));
}

ncclResult_t nv_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
			     void **mhandles, void **phandles, void **request)
{
	/* nv_net_irecv checks n (1..maxRecvs, else ncclInternalError) */
	return nv_to_nccl(nv_net_irecv(recv_comm, n, data, sizes, tags, mhandles, phandles,
				       request));
}

ncclResult_t nv_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
			      void **request)
{
	return nv_to_nccl(nv_net_iflush(recv_comm, n, data, sizes, mhandles, request));
}

ncclResult_t nv_close_send(void *c)
{
	nv_fo_release(c);
	return nv_to_nccl(nv_net_close_send(c));
}

ncclResult_t nv_close_recv(void *c)
{
	nv_fo_release(c);
	return nv_to_nccl(nv_net_close_recv(c));
}

ncclResult_t nv_close_listen(void *c)
{
	return nv_to_nccl(nv_net_close_listen(c));
}

ncclResult_t nv_make_vdevice_n(int *d, int ndevs, const int *devs, int max_devs)
{
	/* The comm layer stripes a comm's QPs over every member (qp.c). */
	if (!d || !devs)
		return ncclInternalError;
	return nv_to_nccl(nv_vdev_make(devs, ndevs, max_devs, d));
}

ncclResult_t nv_make_vdevice(int *d, ncclNetVDeviceProps_v12_t *props)
{
	if (!props)
		return ncclInternalError;
	return nv_make_vdevice_n(d, props->ndevs, props->devs, NCCL_NET_MAX_DEVS_PER_NIC_V12);
}

ncclResult_t nv_set_net_attr(void *ctx, ncclNetAttr_v12_t *attr)
{
	/* Advisory hints (docs/net-api.md, "Hints"); the data path does not use them. */
	if (attr)
		NV_TRACE(NV_SUB_NET, "setNetAttr ctx %p: send peers %d..%d flows %d..%d, op 0x%x",
			 ctx, attr->sendCommAttr.minConcurrentPeers,
			 attr->sendCommAttr.maxConcurrentPeers, attr->sendCommAttr.minFlowsPerPeer,
			 attr->sendCommAttr.maxFlowsPerPeer, attr->op);
	return ncclSuccess;
}

NV_EXPORT ncclNet_v12_t ncclNetPlugin_v12 = {
	.name = NV_PLUGIN_NAME,
	.init = nv_init,
	.devices = nv_devices,
	.getProperties = nv_get_properties,
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
	.getDeviceMr = NULL,   /* host plugin: never asked (docs/net-api.md) */
	.irecvConsumed = NULL, /* requests are recycled when test reports done */
	.makeVDevice = nv_make_vdevice,
	.finalize = nv_finalize,
	.setNetAttr = nv_set_net_attr,
};
