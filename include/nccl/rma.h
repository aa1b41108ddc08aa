/*
 * nccl/rma.h - the RMA plugin ABI (tables v13 .. v15, the signal operations
 * and option bits); the unversioned names point at v15, the shape of our one
 * implementation. NCCL 2.30 tries ncclRmaPlugin_v14 then _v13, 2.31 starts at
 * _v15. Layout checks pin the LP64 offsets.
 */
#ifndef NCCL_NV_RMA_H
#define NCCL_NV_RMA_H

#include "nccl/net.h"

/* iputSignal's signalOp: what happens to the 64-bit word at signalOff */
#define NCCL_NET_SIGNAL_OP_INC 0x1 /* += 1 (signalValue ignored) */
#define NCCL_NET_SIGNAL_OP_ADD 0x2 /* += signalValue */

/* v15 optFlags (NCCL's GIN option bits) */
#define NCCL_RMA_OPT_DEFAULT 0x0
#define NCCL_RMA_OPT_MAY_SKIP_CREDIT_CHECK 0x1
#define NCCL_RMA_OPT_AGGREGATE_REQUESTS 0x2

#include "nccl/rma_v13.h"
#include "nccl/rma_v14.h"
#include "nccl/rma_v15.h"

typedef ncclRma_v15_t ncclRma_t;
typedef ncclRmaConfig_v15_t ncclRmaConfig_t;

#if !defined(__cplusplus) && defined(__LP64__)
#define NCCL_NV_RMA_CHECK(e) _Static_assert(e, #e)
NCCL_NV_RMA_CHECK(sizeof(ncclRmaConfig_v14_t) == 12);
NCCL_NV_RMA_CHECK(sizeof(ncclGinConfig_v13_t) == 20);
NCCL_NV_RMA_CHECK(offsetof(ncclGinConfig_v13_t, nContexts) == 8);
NCCL_NV_RMA_CHECK(offsetof(ncclGinConfig_v13_t, trafficClass) == 16);
/* 21 entries of 8 bytes: name and 20 functions, the same order in each */
NCCL_NV_RMA_CHECK(sizeof(ncclRma_v13_t) == 168);
NCCL_NV_RMA_CHECK(sizeof(ncclRma_v14_t) == 168);
NCCL_NV_RMA_CHECK(sizeof(ncclRma_v15_t) == 168);
NCCL_NV_RMA_CHECK(offsetof(ncclRma_v14_t, createContext) == 48);
NCCL_NV_RMA_CHECK(offsetof(ncclRma_v14_t, iput) == 104);
NCCL_NV_RMA_CHECK(offsetof(ncclRma_v14_t, iputSignal) == 112);
NCCL_NV_RMA_CHECK(offsetof(ncclRma_v14_t, test) == 136);
NCCL_NV_RMA_CHECK(offsetof(ncclRma_v14_t, rmaProgress) == 144);
NCCL_NV_RMA_CHECK(offsetof(ncclRma_v14_t, finalize) == 160);
NCCL_NV_RMA_CHECK(offsetof(ncclRma_v15_t, iget) == 120);
NCCL_NV_RMA_CHECK(offsetof(ncclRma_v13_t, ginProgress) == 144);
#undef NCCL_NV_RMA_CHECK
#endif

#endif /* NCCL_NV_RMA_H */
