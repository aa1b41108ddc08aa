/*
 * nccl/rma_v14.h - the RMA plugin table NCCL 2.30 looks for first
 * (symbol ncclRmaPlugin_v14), written from the facts of NCCL's
 * src/include/plugin/rma/rma_v14.h: a collective comm over nranks, contexts
 * of connections, symmetric registrations exchanged inside the collective, and
 * one-sided puts, gets and signals addressed by (registration, offset, rank).
 * Properties are the net v12 ones. Every call returns ncclResult_t; a request
 * is done when test() says so.
 */
#ifndef NCCL_NV_RMA_V14_H
#define NCCL_NV_RMA_V14_H

#include <stdbool.h>
#include "nccl/net.h"

typedef struct {
	int nContexts;    /* connections per peer: context index 0 .. nContexts-1 */
	int trafficClass; /* NCCL_NET_TRAFFIC_CLASS_UNDEF or a TC for the QPs */
	int rankStride;   /* rank spacing of the group (may be ignored) */
} ncclRmaConfig_v14_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(void **ctx, uint64_t commId, ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t *props);
	/* handle: NCCL_NET_HANDLE_MAXSIZE bytes, exchanged by NCCL between ranks */
	ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
	/* collective: every rank calls it with every rank's handle */
	ncclResult_t (*connect)(void *ctx, void *handles[], int nranks, int rank, void *listenComm,
				void **collComm);
	ncclResult_t (*createContext)(void *collComm, ncclRmaConfig_v14_t *config, void **rmaCtx);
	/* collective registration: the same window on every rank */
	ncclResult_t (*regMrSym)(void *collComm, void *data, size_t size, int type, uint64_t mrFlags,
				 void **mhandle);
	ncclResult_t (*regMrSymDmaBuf)(void *collComm, void *data, size_t size, int type,
				       uint64_t offset, int fd, uint64_t mrFlags, void **mhandle);
	ncclResult_t (*deregMrSym)(void *collComm, void *mhandle);
	ncclResult_t (*destroyContext)(void *rmaCtx);
	ncclResult_t (*closeColl)(void *collComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*iput)(void *rmaCtx, int context, uint64_t srcOff, void *srcMhandle, size_t size,
			     uint64_t dstOff, void *dstMhandle, uint32_t rank, void **request);
	ncclResult_t (*iputSignal)(void *rmaCtx, int context, uint64_t srcOff, void *srcMhandle,
				   size_t size, uint64_t dstOff, void *dstMhandle, uint32_t rank,
				   uint64_t signalOff, void *signalMhandle, uint64_t signalValue,
				   uint32_t signalOp, bool isStrongSignal, void **request);
	ncclResult_t (*iget)(void *rmaCtx, int context, uint64_t remoteOff, void *remoteMhandle,
			     size_t size, uint64_t localOff, void *localMhandle, uint32_t rank,
			     void **request);
	ncclResult_t (*iflush)(void *rmaCtx, int context, void *mhandle, uint32_t rank, void **request);
	ncclResult_t (*test)(void *collComm, void *request, int *done);
	ncclResult_t (*rmaProgress)(void *rmaCtx);	/* called when non-NULL */
	ncclResult_t (*queryLastError)(void *rmaCtx, bool *hasError);
	ncclResult_t (*finalize)(void *ctx);
} ncclRma_v14_t;

#endif /* NCCL_NV_RMA_V14_H */
