/*
 * census.c - process-wide counts of the device resources comms hold, and the
 * message that explains running out of one (census.h).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>

#include "census.h"
#include "log.h"
#include "os.h"
#include "param.h"

static long nv_census[NV_CEN_COUNT];

void nv_census_add(enum nv_census_kind k, long delta)
{
	__atomic_add_fetch(&nv_census[k], delta, __ATOMIC_RELAXED);
}

long nv_census_get(enum nv_census_kind k)
{
	return __atomic_load_n(&nv_census[k], __ATOMIC_RELAXED);
}

#define NV_CENSUS_KNOBS                                                                   \
	"NCCL opens a send and a receive comm per peer and channel: fewer channels per "  \
	"peer (NCCL_NCHANNELS_PER_NET_PEER=1, NCCL_MAX_NCHANNELS) or fewer peers per "     \
	"process take fewer"

void nv_census_explain(const struct nv_hca *hca, enum nv_census_kind k, int err)
{
	long send = nv_census_get(NV_CEN_SEND), recv = nv_census_get(NV_CEN_RECV);
	int q = (int)nv_param_int(NV_PARAM_IB_QPS_PER_CONNECTION);
	char lim[32];

	if (err != ENOMEM && err != ENOSPC && err != EAGAIN && !(k == NV_CEN_MR && err == EPERM))
		return;
	if (k == NV_CEN_QP)
		NV_WARN("%s: out of queue pairs: the device's max_qp is %d; this process holds %ld "
			"QPs for %ld send and %ld receive comms, this one counted (%d per comm, "
			"NCCL_IB_QPS_PER_CONNECTION; a receive comm one more from its first GPU "
			"flush); " NV_CENSUS_KNOBS ", NCCL_IB_QPS_PER_CONNECTION=1 fewer QPs each",
			hca->name, hca->attr.max_qp, nv_census_get(NV_CEN_QP), send, recv, q);
	else if (k == NV_CEN_CQ)
		NV_WARN("%s: out of completion queues: the device's max_cq is %d; this process "
			"holds %ld CQs for %ld send and %ld receive comms (one per comm and "
			"device); " NV_CENSUS_KNOBS, hca->name, hca->attr.max_cq,
			nv_census_get(NV_CEN_CQ), send, recv);
	else if (k == NV_CEN_MR)
		NV_WARN("%s: out of memory registrations: this process holds %ld MRs (the "
			"device's max_mr is %d) of %ld KiB for %ld send and %ld receive comms "
			"against RLIMIT_MEMLOCK %s (a receive comm registers its eager ring; "
			"NCCL_VERBS_EAGER_MAX=0: none); raise the limit (ulimit -l "
			"unlimited, the container's memlock limit) or take fewer: " NV_CENSUS_KNOBS,
			hca->name, nv_census_get(NV_CEN_MR), hca->attr.max_mr,
			nv_census_get(NV_CEN_MR_BYTES) / 1024, send, recv,
			nv_memlock_str(lim, sizeof(lim)));
}
