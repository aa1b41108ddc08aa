/*
 * nccl/net_v6.h - ncclNet_v6_t (symbol ncclNetPlugin_v6) (docs/net-api.md, "The tables").
 * Properties 48 bytes, table 17 slots (136 bytes) on LP64.
 */
#ifndef NCCL_NV_NET_V6_H
#define NCCL_NV_NET_V6_H

#include <stddef.h>
#include <stdint.h>
#include "nccl/common.h"

typedef struct {
	char *name;       /* unique per device */
	char *pciPath;    /* sysfs path of the PCI function, or NULL */
	uint64_t guid;
	int ptrSupport;   /* NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF */
	int speed;        /* Mbps */
	int port;
	float latency;    /* microseconds */
	int maxComms;
	int maxRecvs;
} ncclNetProperties_v6_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v6_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, void *handle, void **sendComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm);
	ncclResult_t (*regMr)(void *comm, void *data, int size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
				    int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle,
			      void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags,
			      void **mhandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
} ncclNet_v6_t;

#endif /* NCCL_NV_NET_V6_H */
