/*
 * plugin.h - the v12-shaped vtable implementation (plugin.c) shared with the
 * older-version adapters (plugin_compat.c). Nothing here is exported.
 */
#ifndef NV_PLUGIN_H
#define NV_PLUGIN_H

#include "nccl/net.h"
#include "nv_api.h"

#define NV_EXPORT __attribute__((visibility("default")))

ncclResult_t nv_init_legacy(ncclDebugLogger_t logger, ncclProfilerCallback_t prof);
ncclResult_t nv_init(void **ctx, uint64_t comm_id, ncclNetCommConfig_v12_t *config,
		     ncclDebugLogger_t logger, ncclProfilerCallback_t prof);
ncclResult_t nv_finalize(void *ctx);
ncclResult_t nv_devices(int *ndev);
ncclResult_t nv_get_properties(int dev, ncclNetProperties_v12_t *props);
ncclResult_t nv_listen(void *ctx, int dev, void *handle, void **listen_comm); /* ctx NULL: per-process */
/* ctx NULL: per-process context; tc: traffic class (-1 undefined). */
ncclResult_t nv_connect_tc(void *ctx, int dev, void *handle, int tc, void **send_comm);
ncclResult_t nv_connect(void *ctx, int dev, void *handle, void **send_comm,
			ncclNetDeviceHandle_v12_t **dev_comm);
ncclResult_t nv_accept(void *listen_comm, void **recv_comm, ncclNetDeviceHandle_v12_t **dev_comm);
ncclResult_t nv_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
ncclResult_t nv_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
			      int fd, void **mhandle);
ncclResult_t nv_dereg_mr(void *comm, void *mhandle);
ncclResult_t nv_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
		      void *phandle, void **request);
ncclResult_t nv_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
		      void **mhandles, void **phandles, void **request);
ncclResult_t nv_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
		       void **request);
/*
 * The tables' isend, irecv and test entries (v10 .. v12, whose signatures
 * they have): the data path's own functions, without a wrapper call per
 * operation. nv_status_t values are the ncclResult_t they map to and both
 * enums have one size (asserted in plugin.c), so the call is the same.
 */
#define NV_ISEND_ENTRY ((ncclResult_t (*)(void *, void *, size_t, int, void *, void *, \
					  void **))nv_net_isend)
#define NV_IRECV_ENTRY ((ncclResult_t (*)(void *, int, void **, size_t *, int *, void **, \
					  void **, void **))nv_net_irecv)
#define NV_TEST_ENTRY ((ncclResult_t (*)(void *, int *, int *))nv_net_test)
ncclResult_t nv_close_send(void *c);
ncclResult_t nv_close_recv(void *c);
ncclResult_t nv_close_listen(void *c);
ncclResult_t nv_make_vdevice_n(int *d, int ndevs, const int *devs, int max_devs);
ncclResult_t nv_make_vdevice(int *d, ncclNetVDeviceProps_v12_t *props);
ncclResult_t nv_set_net_attr(void *ctx, ncclNetAttr_v12_t *attr);

#endif /* NV_PLUGIN_H */
