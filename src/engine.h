/*
 * engine.h - what the data-path files (engine.c, recv.c, send.c, eager.c)
 * share: the request pool, the health and liveness checks, CQ progress, the
 * QP of a sequence and the clear-to-send post. Not for the layers below.
 *
 * The completion engine (engine.c) is the lowest data-path file: the receive
 * side (recv.c), the send side (send.c), the eager path (eager.c) and
 * failover (failover.c) call it, never the other way round, except through
 * these hooks, which the engine calls on purpose (scripts/check-layers.sh
 * allows exactly these):
 *  - eager.h, on a comm with eager on: nv_eager_recv_cqe (inline) and
 *    nv_eager_recv_cqe_slow for a receive completion, nv_eager_copy_done for
 *    a loopback copy's completion, nv_eager_grant (through the inline
 *    nv_eager_advance) when ring entries were freed, nv_eager_poll (through
 *    the inline nv_eager_test_poll) from test() of a receive not done yet;
 *  - failover.h, on a comm with failover on (c->fo): nv_fo_check from the
 *    slow half of nv_comm_check, nv_fo_wc_error for an error completion,
 *    nv_fo_peer_spoke from the liveness check.
 */
#ifndef NV_ENGINE_H
#define NV_ENGINE_H

#include <arpa/inet.h>

#include "comm.h"
#include "ibv.h"
#include "prof.h"

static inline struct nv_request *nv_req_get(struct nv_comm *c, int type)
{
	struct nv_request *r;

	if (c->free_head < 0)
		return NULL;
	r = &c->reqs[c->free_head];
	c->free_head = r->next_free;
	r->type = (uint8_t)type;
	r->done = 0;
	r->pending = 0;
	r->nreqs = 1;
	return r;
}

/* The request's age stamp for this use (comm.h): off the fast path only. */
static inline void nv_req_stamp(struct nv_request *r)
{
	r->t_post = atomic_load_explicit(&nv_coarse_ns, memory_order_relaxed);
	r->t_seq = r->seq;
}

static inline void nv_req_put(struct nv_comm *c, struct nv_request *r)
{
	if (nv_unlikely(r->prof_nev))
		nv_prof_stop_all(r);
	r->type = NV_REQ_FREE;
	r->next_free = (int16_t)c->free_head;
	c->free_head = r->idx;
}

/* x % nqps for a comm's QP of a sequence, without a division on a one-QP comm. */
static inline uint32_t nv_qp_of(uint64_t x, int nqps)
{
	return nv_likely(nqps == 1) ? 0 : (uint32_t)(x % (uint64_t)nqps);
}

/* nv_comm_check's slow path: a fatal async event or the sticky error (engine.c). */
nv_status_t nv_comm_check_slow(struct nv_comm *c, const char *fn);
/* Sticky errors and fatal async events, one load when healthy; NV_OK when usable. */
static inline nv_status_t nv_comm_check(struct nv_comm *c, const char *fn)
{
	if (nv_likely(atomic_load_explicit(&c->sink.fatal, memory_order_relaxed) == 0))
		return NV_OK;
	return nv_comm_check_slow(c, fn);
}

/* The liveness checks behind nv_comm_idle (engine.c). */
nv_status_t nv_comm_liveness(struct nv_comm *c, const struct nv_request *waiting);
nv_status_t nv_comm_peer_closed(struct nv_comm *c, const struct nv_request *waiting);
/*
 * Called when a caller is waiting without progress. A watched comm (the
 * HCA's event thread checks its socket every NV_LIVENESS_NS while this
 * keeps `waiting` set) pays a store and a load; else nv_comm_liveness.
 */
static inline nv_status_t nv_comm_idle(struct nv_comm *c, const struct nv_request *waiting)
{
	if (nv_likely(atomic_load_explicit(&c->sink.watched, memory_order_relaxed))) {
		/* the progress count, odd (never 0): the stall check's view (event.h) */
		atomic_store_explicit(&c->sink.waiting, (int)(c->st.done * 2 + 1),
				      memory_order_relaxed);
		if (nv_likely(!atomic_load_explicit(&c->sink.peer_gone, memory_order_acquire)))
			return NV_OK;
		return nv_comm_peer_closed(c, waiting);
	}
	return nv_comm_liveness(c, waiting);
}

/*
 * isend found no clear-to-send (or eager credit) for sequence head: counted
 * once per sequence, with its size and tag for a stall report; then the wait.
 */
static inline nv_status_t nv_send_wait(struct nv_comm *c, uint64_t head, size_t size, int tag)
{
	if (nv_unlikely(c->st.wait_seq != head + 1)) {
		c->st.wait_seq = head + 1;
		c->st.wait_size = size;
		c->st.wait_tag = tag;
		c->st.cts_waits++;
	}
	return nv_comm_idle(c, NULL);
}

/* Polls every CQ of the comm in batches until they are empty; NV_OK or the sticky error. */
nv_status_t nv_comm_progress(struct nv_comm *c);
/* A call that found nothing to do and returns no request: the comm's peer-liveness check. */
nv_status_t nv_comm_idle_call(struct nv_comm *c);

/*
 * Posts the clear-to-send of n entries of slot, from their shadow copy src
 * (which the NIC reads until the write executed), on CTS QP qi (q =
 * &c->qps[qi]). Inlined into both irecv paths, so the one-buffer path's n = 1
 * and its QP, already computed, fold in.
 */
static inline __attribute__((always_inline)) nv_status_t
nv_recv_post_cts_q(struct nv_recv_comm *rc, struct nv_comm_qp *q, uint32_t qi, uint32_t slot,
		   const struct nv_cts_entry *src, int n)
{
	struct nv_comm *c = &rc->base;
	struct ibv_send_wr *wr = &rc->cts_wr, *bad;	/* constant fields preset */
	struct ibv_sge *sge = &rc->cts_sge;

	sge->addr = (uintptr_t)src;
	sge->length = (uint32_t)(n * (int)sizeof(struct nv_cts_entry));
	sge->lkey = c->dev[q->dev].ctrl_mr->lkey;
	wr->wr.rdma.remote_addr = c->rctrl_addr + slot * sizeof(struct nv_cts_entry) * NV_MAX_RECVS;
	wr->wr.rdma.rkey = c->rmeta->dev[q->rdev].rkey;
	wr->wr_id = NV_WRID(NV_WR_CTS, 0, qi, slot); /* nwr 0 unless signalled below */
	q->outstanding++;
	/* Signal often enough that a small send queue still drains (never all unsignalled). */
	wr->send_flags = sge->length <= (uint32_t)q->max_inline ? IBV_SEND_INLINE : 0;
	if (++q->unsignalled >= NV_CTS_SIGNAL_EVERY || q->unsignalled * 2 >= q->max_wr) {
		wr->send_flags |= IBV_SEND_SIGNALED;
		wr->wr_id = NV_WRID(NV_WR_CTS, q->unsignalled, qi, slot);
		q->unsignalled = 0;
	}
	if (nv_ibv_post_send(q->qp, wr, &bad) != NV_OK) {
		nv_comm_fail(c, NV_ERR_SYSTEM, "posting a clear-to-send on QP 0x%x to %s failed",
			     q->qp->qp_num, c->peer);
		return c->error;
	}
	return NV_OK;
}

/*
 * What nv_comm_check (and nv_fo_check) return while a failover round is under
 * way: isend/irecv turn it into NV_OK with no request, test into "not done".
 */
#define NV_FO_BUSY ((nv_status_t)1)

/* ---- for failover.c: the sides' own steps, outside the fast path ------------ */
/* Posts slot seq again on the current QP layout (its requests and FIFO entries; send.c). */
nv_status_t nv_send_repost(struct nv_send_comm *s, uint64_t seq);
/* 1 when every QP slot seq uses has room for its chain (send.c). */
int nv_send_repost_room(struct nv_send_comm *s, uint64_t seq);
/* Posts the RECVs of receive request req again on the current QP layout (recv.c). */
nv_status_t nv_recv_repost(struct nv_recv_comm *rc, struct nv_request *req);

/* A receive completion reporting n bytes for a size-byte receive: the sticky error. */
__attribute__((cold)) nv_status_t nv_recv_too_big(struct nv_comm *c, uint32_t n, uint32_t size);

#endif /* NV_ENGINE_H */
