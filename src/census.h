/*
 * census.h - what this process holds of the device resources comms take
 * (send and receive comms, QPs, CQs, MRs and their bytes), counted where
 * they are created and destroyed (qp.c, mr.c), so that running out of one
 * names the limit, the counts and the knob that helps (nv_census_explain):
 * an all-to-all job opens a send and a receive comm per peer and channel,
 * thousands per process. Process-wide atomic counters; any thread.
 */
#ifndef NV_CENSUS_H
#define NV_CENSUS_H

#include "device.h"

enum nv_census_kind {
	NV_CEN_SEND,		/* send comms with their CQs */
	NV_CEN_RECV,		/* receive comms with their CQs */
	NV_CEN_QP,
	NV_CEN_CQ,
	NV_CEN_MR,
	NV_CEN_MR_BYTES,	/* host and GPU bytes the MRs cover */
	NV_CEN_COUNT
};

void nv_census_add(enum nv_census_kind k, long delta);
long nv_census_get(enum nv_census_kind k);
/*
 * After creating a QP, CQ or MR (k) on hca failed with err: when err says a
 * resource ran out (ENOMEM, ENOSPC, EAGAIN, and EPERM for an MR), one WARN
 * naming the device's limit (max_qp, max_cq, max_mr; RLIMIT_MEMLOCK for an
 * MR), what this process holds and the knobs that take fewer.
 */
void nv_census_explain(const struct nv_hca *hca, enum nv_census_kind k, int err);

#endif /* NV_CENSUS_H */
