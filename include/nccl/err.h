/*
 * nccl/err.h - NCCL's result codes as seen by a network plugin.
 * Our own rendition (docs/net-api.md, "Logger and result codes").
 * A plugin returns only ncclSuccess .. ncclRemoteError; ncclInProgress is
 * listed for completeness and must never be returned from a plugin call.
 */
#ifndef NCCL_NV_ERR_H
#define NCCL_NV_ERR_H

typedef enum {
	ncclSuccess = 0,
	ncclUnhandledCudaError = 1,
	ncclSystemError = 2,    /* OS, network or hardware failure */
	ncclInternalError = 3,  /* NCCL misused the API */
	ncclInvalidArgument = 4,
	ncclInvalidUsage = 5,   /* user configuration error */
	ncclRemoteError = 6,    /* failure caused or reported by the peer */
	ncclInProgress = 7,     /* never returned by a plugin */
	ncclNumResults = 8
} ncclResult_t;

#endif /* NCCL_NV_ERR_H */
