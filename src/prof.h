/*
 * prof.h - network profiler events (net v10+ init's profiler callback), the
 * ones NCCL's IB transport emits: one ncclProfileQp event per work request
 * the data path posts for a request NCCL gave a profiler handle (send: each
 * data WRITE; receive: each RECV per grouped receive), started when it is
 * posted and stopped when the request completes (or is released).
 *
 * Contract: with no callback (nv_prof_cb NULL) the data path pays one load
 * and a predicted branch per post and per irecv, a store per isend and a
 * test when a request is released; nothing else. A request's prof_nev is 0
 * whenever it is free (pool zeroed; nv_prof_stop_all resets it). Events beyond
 * NV_PROF_MAX_EV per request are not emitted (counted in nv_prof_dropped).
 * A callback error is ignored (logged once): profiling never fails traffic.
 */
#ifndef NV_PROF_H
#define NV_PROF_H

#include <stddef.h>
#include <stdint.h>
#include "nccl/common.h"
#include "nv_common.h"

#define NV_PROF_MAX_EV 16

struct nv_request;

/* hidden: one PC-relative load on the data path, no GOT indirection */
extern ncclProfilerCallback_t nv_prof_cb NV_HIDDEN;

void nv_prof_set(ncclProfilerCallback_t cb);
/* Starts one QP event of request r under NCCL's handle phandle (NULL: none). */
void nv_prof_qp_start(struct nv_request *r, void *phandle, int dev, uint32_t qpn, int opcode,
		      size_t len, uint64_t wr_id);
/* Stops every event r started. */
void nv_prof_stop_all(struct nv_request *r);
uint64_t nv_prof_dropped(void);

#endif /* NV_PROF_H */
