/*
 * rma_plugin.c - the RMA plugin tables ncclRmaPlugin_v15, _v14 and _v13
 * ("Verbs"), exported next to the net tables so that NCCL, which looks for
 * them in the net plugin's library when NCCL_RMA_PLUGIN names none, carries
 * its one-sided traffic over this plugin too.
 *
 * One implementation in the v15 shape (nv_rma_* of rma.h); v14 drops optFlags
 * (every request rings its doorbell at once: nothing is aggregated, which the
 * flag allows but never requires), v13 is the GIN v13 table: GIN config in,
 * no device handles out (a proxy plugin: NCCL_NET_DEVICE_GIN_PROXY, which
 * NCCL's v13 loader requires), every signal strong. init and finalize share
 * the net tables' global state (plugin.c): one device scan per process.
 */
#include "config.h"

#include <string.h>

#include "nccl/rma.h"
#include "plugin.h"
#include "device.h"
#include "rma.h"

static inline ncclResult_t nv_rma_res(nv_status_t st)
{
	return (ncclResult_t)st; /* numerically equal (plugin.c checks) */
}

static ncclResult_t nv_rma_init(void **ctx, uint64_t comm_id, ncclDebugLogger_t logger)
{
	return nv_init(ctx, comm_id, NULL, logger, NULL);
}

static ncclResult_t nv_rma_listen_v(void *ctx, int dev, void *handle, void **listen_comm)
{
	(void)ctx;
	if (!handle || !listen_comm)
		return ncclInternalError;
	*listen_comm = NULL;
	if (dev < 0 || dev >= nv_vdev_count()) {
		NV_WARN("RMA listen: device %d does not exist (%d devices)", dev, nv_vdev_count());
		return ncclInternalError;
	}
	return nv_rma_res(nv_rma_listen(dev, handle, (struct nv_rma_listen **)listen_comm));
}

static ncclResult_t nv_rma_connect_v(void *ctx, void *handles[], int nranks, int rank,
				     void *listen_comm, void **coll)
{
	(void)ctx;
	if (!coll)
		return ncclInternalError;
	return nv_rma_res(nv_rma_connect(handles, nranks, rank, listen_comm,
					 (struct nv_rma_coll **)coll));
}

static ncclResult_t nv_rma_create_context(void *coll, ncclRmaConfig_v15_t *cfg, void **rctx)
{
	if (!coll || !cfg || !rctx) {
		NV_WARN("RMA createContext: a NULL collective, config or output");
		return ncclInternalError;
	}
	return nv_rma_res(nv_rma_create_ctx(coll, cfg->nContexts, cfg->trafficClass,
					    (struct nv_rma_ctx **)rctx));
}

static ncclResult_t nv_rma_reg_sym(void *coll, void *data, size_t size, int type, uint64_t flags,
				   void **mh)
{
	(void)flags;
	if (!coll || !mh)
		return ncclInternalError;
	return nv_rma_res(nv_rma_reg(coll, data, size, type, 0, -1, (struct nv_rma_win **)mh));
}

static ncclResult_t nv_rma_reg_sym_dmabuf(void *coll, void *data, size_t size, int type,
					  uint64_t offset, int fd, uint64_t flags, void **mh)
{
	(void)flags;
	if (!coll || !mh)
		return ncclInternalError;
	return nv_rma_res(nv_rma_reg(coll, data, size, type, offset, fd, (struct nv_rma_win **)mh));
}

static ncclResult_t nv_rma_dereg_sym(void *coll, void *mh)
{
	return nv_rma_res(nv_rma_dereg(coll, mh));
}

static ncclResult_t nv_rma_destroy_context(void *rctx)
{
	return nv_rma_res(nv_rma_destroy_ctx(rctx));
}

static ncclResult_t nv_rma_close_coll_v(void *coll)
{
	return nv_rma_res(nv_rma_close_coll(coll));
}

static ncclResult_t nv_rma_close_listen_v(void *lc)
{
	return nv_rma_res(nv_rma_close_listen(lc));
}

static ncclResult_t nv_rma_iput(void *rctx, int cx, uint64_t src_off, void *src, size_t size,
				uint64_t dst_off, void *dst, uint32_t rank, uint32_t opt, void **req)
{
	(void)opt;
	if (!rctx || !req)
		return ncclInternalError;
	return nv_rma_res(nv_rma_put(rctx, cx, src_off, src, size, dst_off, dst, rank, 0, NULL, 0, 0,
				     req));
}

static ncclResult_t nv_rma_iput_signal(void *rctx, int cx, uint64_t src_off, void *src, size_t size,
				       uint64_t dst_off, void *dst, uint32_t rank, uint64_t sig_off,
				       void *sig, uint64_t sig_value, uint32_t sig_op, bool strong,
				       uint32_t opt, void **req)
{
	(void)strong; /* every signal is ordered after its data (one QP) */
	(void)opt;
	if (!rctx || !req)
		return ncclInternalError;
	if (!sig_op) {
		NV_WARN("RMA iputSignal: signal operation 0 (INC %d, ADD %d)", NCCL_NET_SIGNAL_OP_INC,
			NCCL_NET_SIGNAL_OP_ADD);
		return ncclInvalidArgument;
	}
	return nv_rma_res(nv_rma_put(rctx, cx, src_off, src, size, dst_off, dst, rank, sig_off, sig,
				     sig_value, sig_op, req));
}

static ncclResult_t nv_rma_iget(void *rctx, int cx, uint64_t remote_off, void *remote, size_t size,
				uint64_t local_off, void *local, uint32_t rank, uint32_t opt,
				void **req)
{
	(void)opt;
	if (!rctx || !req)
		return ncclInternalError;
	return nv_rma_res(nv_rma_get(rctx, cx, remote_off, remote, size, local_off, local, rank,
				     req));
}

static ncclResult_t nv_rma_iflush(void *rctx, int cx, void *mh, uint32_t rank, void **req)
{
	if (!rctx || !req)
		return ncclInternalError;
	return nv_rma_res(nv_rma_flush(rctx, cx, mh, rank, req));
}

static ncclResult_t nv_rma_test_v(void *coll, void *req, int *done)
{
	(void)coll;
	if (!done)
		return ncclInternalError;
	return nv_rma_res(nv_rma_test(req, done));
}

static ncclResult_t nv_rma_progress_v(void *rctx)
{
	return rctx ? nv_rma_res(nv_rma_progress(rctx)) : ncclInternalError;
}

static ncclResult_t nv_rma_query_last_error(void *rctx, bool *has_error)
{
	if (!rctx || !has_error)
		return ncclInternalError;
	*has_error = nv_rma_has_error(rctx);
	return ncclSuccess;
}

NV_EXPORT ncclRma_v15_t ncclRmaPlugin_v15 = {
	.name = "Verbs",
	.init = nv_rma_init,
	.devices = nv_devices,
	.getProperties = nv_get_properties,
	.listen = nv_rma_listen_v,
	.connect = nv_rma_connect_v,
	.createContext = nv_rma_create_context,
	.regMrSym = nv_rma_reg_sym,
	.regMrSymDmaBuf = nv_rma_reg_sym_dmabuf,
	.deregMrSym = nv_rma_dereg_sym,
	.destroyContext = nv_rma_destroy_context,
	.closeColl = nv_rma_close_coll_v,
	.closeListen = nv_rma_close_listen_v,
	.iput = nv_rma_iput,
	.iputSignal = nv_rma_iput_signal,
	.iget = nv_rma_iget,
	.iflush = nv_rma_iflush,
	.test = nv_rma_test_v,
	.rmaProgress = nv_rma_progress_v,
	.queryLastError = nv_rma_query_last_error,
	.finalize = nv_finalize,
};

/* ---- v14: v15 without optFlags ------------------------------------------------ */

static ncclResult_t nv_rma_iput_v14(void *rctx, int cx, uint64_t src_off, void *src, size_t size,
				    uint64_t dst_off, void *dst, uint32_t rank, void **req)
{
	return nv_rma_iput(rctx, cx, src_off, src, size, dst_off, dst, rank, NCCL_RMA_OPT_DEFAULT, req);
}

static ncclResult_t nv_rma_iput_signal_v14(void *rctx, int cx, uint64_t src_off, void *src,
					   size_t size, uint64_t dst_off, void *dst, uint32_t rank,
					   uint64_t sig_off, void *sig, uint64_t sig_value,
					   uint32_t sig_op, bool strong, void **req)
{
	return nv_rma_iput_signal(rctx, cx, src_off, src, size, dst_off, dst, rank, sig_off, sig,
				  sig_value, sig_op, strong, NCCL_RMA_OPT_DEFAULT, req);
}

static ncclResult_t nv_rma_iget_v14(void *rctx, int cx, uint64_t remote_off, void *remote,
				    size_t size, uint64_t local_off, void *local, uint32_t rank,
				    void **req)
{
	return nv_rma_iget(rctx, cx, remote_off, remote, size, local_off, local, rank,
			   NCCL_RMA_OPT_DEFAULT, req);
}

NV_EXPORT ncclRma_v14_t ncclRmaPlugin_v14 = {
	.name = "Verbs",
	.init = nv_rma_init,
	.devices = nv_devices,
	.getProperties = nv_get_properties,
	.listen = nv_rma_listen_v,
	.connect = nv_rma_connect_v,
	.createContext = nv_rma_create_context,
	.regMrSym = nv_rma_reg_sym,
	.regMrSymDmaBuf = nv_rma_reg_sym_dmabuf,
	.deregMrSym = nv_rma_dereg_sym,
	.destroyContext = nv_rma_destroy_context,
	.closeColl = nv_rma_close_coll_v,
	.closeListen = nv_rma_close_listen_v,
	.iput = nv_rma_iput_v14,
	.iputSignal = nv_rma_iput_signal_v14,
	.iget = nv_rma_iget_v14,
	.iflush = nv_rma_iflush,
	.test = nv_rma_test_v,
	.rmaProgress = nv_rma_progress_v,
	.queryLastError = nv_rma_query_last_error,
	.finalize = nv_finalize,
};

/* ---- v13: the GIN v13 table of a proxy plugin --------------------------------- */

static ncclResult_t nv_rma_get_properties_v13(int dev, ncclNetProperties_v12_t *props)
{
	ncclResult_t r = nv_get_properties(dev, props);

	if (r == ncclSuccess)
		props->netDeviceType = NCCL_NET_DEVICE_GIN_PROXY;
	return r;
}

static ncclResult_t nv_rma_create_context_v13(void *coll, ncclGinConfig_v13_t *cfg, void **rctx,
					      ncclNetDeviceHandle_v11_t **dev_handle)
{
	ncclRmaConfig_v15_t c;

	if (!cfg)
		return nv_rma_create_context(coll, NULL, rctx);
	memset(&c, 0, sizeof(c));
	c.nContexts = cfg->nContexts;
	c.trafficClass = cfg->trafficClass;
	if (dev_handle)
		*dev_handle = NULL; /* proxy: no device-side handle */
	return nv_rma_create_context(coll, &c, rctx);
}

static ncclResult_t nv_rma_reg_sym_v13(void *coll, void *data, size_t size, int type,
				       uint64_t flags, void **mh, void **gin_handle)
{
	if (gin_handle)
		*gin_handle = NULL;
	return nv_rma_reg_sym(coll, data, size, type, flags, mh);
}

static ncclResult_t nv_rma_reg_sym_dmabuf_v13(void *coll, void *data, size_t size, int type,
					      uint64_t offset, int fd, uint64_t flags, void **mh,
					      void **gin_handle)
{
	if (gin_handle)
		*gin_handle = NULL;
	return nv_rma_reg_sym_dmabuf(coll, data, size, type, offset, fd, flags, mh);
}

static ncclResult_t nv_rma_iput_signal_v13(void *rctx, int cx, uint64_t src_off, void *src,
					   size_t size, uint64_t dst_off, void *dst, uint32_t rank,
					   uint64_t sig_off, void *sig, uint64_t sig_value,
					   uint32_t sig_op, void **req)
{
	return nv_rma_iput_signal(rctx, cx, src_off, src, size, dst_off, dst, rank, sig_off, sig,
				  sig_value, sig_op, true, NCCL_RMA_OPT_DEFAULT, req);
}

NV_EXPORT ncclRma_v13_t ncclRmaPlugin_v13 = {
	.name = "Verbs",
	.init = nv_rma_init,
	.devices = nv_devices,
	.getProperties = nv_rma_get_properties_v13,
	.listen = nv_rma_listen_v,
	.connect = nv_rma_connect_v,
	.createContext = nv_rma_create_context_v13,
	.regMrSym = nv_rma_reg_sym_v13,
	.regMrSymDmaBuf = nv_rma_reg_sym_dmabuf_v13,
	.deregMrSym = nv_rma_dereg_sym,
	.destroyContext = nv_rma_destroy_context,
	.closeColl = nv_rma_close_coll_v,
	.closeListen = nv_rma_close_listen_v,
	.iput = nv_rma_iput_v14,
	.iputSignal = nv_rma_iput_signal_v13,
	.iget = nv_rma_iget_v14,
	.iflush = nv_rma_iflush,
	.test = nv_rma_test_v,
	.ginProgress = nv_rma_progress_v,
	.queryLastError = nv_rma_query_last_error,
	.finalize = nv_finalize,
};
