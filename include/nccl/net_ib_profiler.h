/*
 * net_ib_profiler.h - the event descriptor NCCL's InfiniBand transport hands
 * to the network profiler callback (ncclProfilerCallback_t, net v10+), as
 * NCCL 2.30 defines it (profiler net-IB ABI version 1). Written from its
 * documented layout; the plugin emits the same events so an NCCL profiler
 * plugin reads ours as it reads NCCL's.
 *
 * pluginId = NCCL_PROFILER_NET_TYPE_IB | NCCL_PROFILER_NET_IB_VER; extData
 * points at a ncclProfilerNetIbDescr_v1_t on ncclProfilerNetEventStart.
 */
#ifndef NCCL_NET_IB_PROFILER_H
#define NCCL_NET_IB_PROFILER_H

#include <stddef.h>
#include <stdint.h>
#include "nccl/common.h" /* NCCL_PROFILER_NET_TYPE_IB */

#define NCCL_PROFILER_NET_IB_VER 1

enum { ncclProfileQp = (1 << 0) }; /* event type: one work request on a QP */

typedef struct {
	uint8_t type; /* ncclProfileQp */
	union {
		struct {
			int device;     /* index of the device within the comm */
			uint64_t wr_id; /* work request id */
			int opcode;     /* ibv_wr_opcode (receives: IBV_WC_RECV_RDMA_WITH_IMM) */
			int qpNum;      /* QP number */
			size_t length;  /* bytes of the work request */
		} qp;
	};
} ncclProfilerNetIbDescr_v1_t;

#endif /* NCCL_NET_IB_PROFILER_H */
