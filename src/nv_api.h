/*
 * nv_api.h - the contract between the vtable (plugin.c) and the
 * connection/data-path layer (connect.c, recv.c, send.c, engine.c).
 *
 * plugin.c owns the ncclNet_vN tables, the version adapters and the mapping
 * of nv_status_t to ncclResult_t. Everything below is implemented by the
 * comm layer, in the shape of the newest ABI, with no NCCL types:
 *  - a NULL *comm / *request with NV_OK means "not ready yet, call again";
 *  - comms are opaque to plugin.c;
 *  - every function logs its own errors (see nv_common.h).
 */
#ifndef NV_API_H
#define NV_API_H

#include <stddef.h>
#include <stdint.h>
#include "nv_common.h"

struct nv_ctx; /* per-init context (device.h): devices, trafficClass, ... */

nv_status_t nv_net_listen(struct nv_ctx *ctx, int dev, void *handle, void **listen_comm);
/* handle: NCCL_NET_HANDLE_MAXSIZE (128) bytes. traffic_class < 0: undefined. */
nv_status_t nv_net_connect(struct nv_ctx *ctx, int dev, void *handle, int traffic_class,
			   void **send_comm);
nv_status_t nv_net_accept(void *listen_comm, void **recv_comm);

/* type: NCCL_PTR_HOST / NCCL_PTR_CUDA / NCCL_PTR_DMABUF; fd -1 unless dma-buf. */
nv_status_t nv_net_reg_mr(void *comm, void *data, size_t size, int type, uint64_t offset,
			  int fd, void **mhandle);
nv_status_t nv_net_dereg_mr(void *comm, void *mhandle);

/* *request on entry may hold NCCL_NET_OPTIONAL_RECV_COMPLETION (irecv only).
 * phandle(s): NCCL's profiler handles (v10+), NULL when none (prof.h). */
nv_status_t nv_net_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			 void *phandle, void **request);
nv_status_t nv_net_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
			 void **mhandles, void **phandles, void **request);
nv_status_t nv_net_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
			  void **request);
/* sizes: NULL or one entry per grouped receive (int, as in the ABI). */
nv_status_t nv_net_test(void *request, int *done, int *sizes);

/*
 * Gives back everything held by connects and accepts of ctx (NULL: of every
 * context) that their caller abandoned mid-handshake: called at finalize(ctx)
 * and, for the per-process context, at the last finalize or unload.
 */
void nv_net_reclaim(struct nv_ctx *ctx);

/* Total and idempotent; keep going after a failed step, return the first error. */
nv_status_t nv_net_close_send(void *send_comm);
nv_status_t nv_net_close_recv(void *recv_comm);
nv_status_t nv_net_close_listen(void *listen_comm);

#endif /* NV_API_H */
