/*
 * p2p.h - what the data-path files (p2p.c, p2p_send.c, eager.c) share: the
 * request pool, CQ progress, the health and liveness checks, the QP of a
 * sequence and the clear-to-send post. Not for the
 * layers below.
 */
#ifndef NV_P2P_H
#define NV_P2P_H

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

/* nv_comm_check's slow path: a fatal async event or the sticky error (p2p.c). */
nv_status_t nv_comm_check_slow(struct nv_comm *c, const char *fn);
/* Sticky errors and fatal async events, one load when healthy; NV_OK when usable. */
static inline nv_status_t nv_comm_check(struct nv_comm *c, const char *fn)
{
	if (nv_likely(atomic_load_explicit(&c->sink.fatal, memory_order_relaxed) == 0))
		return NV_OK;
	return nv_comm_check_slow(c, fn);
}

/* The liveness checks behind nv_comm_idle (p2p.c). */
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
		atomic_store_explicit(&c->sink.waiting, 1, memory_order_relaxed);
		if (nv_likely(!atomic_load_explicit(&c->sink.peer_gone, memory_order_acquire)))
			return NV_OK;
		return nv_comm_peer_closed(c, waiting);
	}
	return nv_comm_liveness(c, waiting);
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

/* ---- eager protocol (eager.c; comm.h has the protocol) ---------------------- */
/* isend of at most s->eager.max bytes whose clear-to-send has not arrived. */
nv_status_t nv_eager_isend(struct nv_send_comm *s, void *data, size_t size, int tag,
			   void *mhandle, void *phandle, void **request);
/*
 * isend found no CTS: 1 when a credit may allow the message to go eager (a
 * grant left, a new credit word, or a CTS whose grant was not read yet);
 * nv_eager_isend decides. 0: it waits for its CTS, as an idle call.
 */
static inline int nv_eager_may_send(const struct nv_send_comm *s)
{
	const struct nv_send_ctrl *ctrl = s->base.ctrl;

	return s->head < s->eager.grant || s->eager.cts_took != s->eager.cts_seq ||
	       __atomic_load_n(&ctrl->eager_grant, __ATOMIC_ACQUIRE) > s->head;
}
/* irecv on a comm with eager on (every entry one sequence). */
nv_status_t nv_eager_irecv(struct nv_recv_comm *rc, int n, void **data, size_t *sizes, int *tags,
			   void **mhandles, void **phandles, void **request);
/* The rest of nv_eager_irecv_one when the ring entry of seq has its flag already. */
nv_status_t nv_eager_irecv_arrived(struct nv_recv_comm *rc, uint64_t seq);
/* Room for n more sequences and the cursor's RECV and CTS. */
static inline int nv_eager_room(const struct nv_recv_comm *rc, int n)
{
	const struct nv_comm_qp *q = &rc->base.qps[0];

	return rc->head + (uint64_t)n - rc->eager.tail <= NV_EAGER_SLOTS &&
	       q->outstanding + 1 <= q->max_wr &&
	       (rc->eager.surplus || q->recv_outstanding + 1 <= q->max_recv);
}
/* The trailer of ring entry seq % NV_EAGER_SLOTS (it ends the entry). */
static inline struct nv_eager_trailer *nv_eager_trl(const struct nv_eager_recv *E, uint64_t seq)
{
	return (struct nv_eager_trailer *)(E->ring + (seq % NV_EAGER_SLOTS) * E->entry + E->entry -
					   NV_EAGER_TRAILER);
}

/*
 * RECV (or a surplus one) and the CTS of n entries for sequence seq from its
 * shadow entries src (nv_eager_shadow(ctrl, seq)), room checked by the
 * caller; 0, or -1 with the comm failed.
 */
static inline __attribute__((always_inline)) int
nv_eager_post_n(struct nv_recv_comm *rc, uint64_t seq, struct nv_cts_entry *src, int n)
{
	struct nv_comm *c = &rc->base;
	struct nv_comm_qp *q = &c->qps[0];
	struct ibv_recv_wr *wr = &rc->recv_wr, *bad;
	uint32_t slot = (uint32_t)(seq % NV_EAGER_SLOTS);

	/* the grant of this moment rides on the CTS (comm.h; ignored by a sender
	 * that did not ask for it); tail <= seq < tail + slots */
	src[0].eager.grant = (uint32_t)(rc->eager.tail + NV_EAGER_SLOTS - seq);

	if (nv_unlikely(rc->eager.surplus)) {
		rc->eager.surplus--;
	} else {
		wr->wr_id = NV_WRID(NV_WR_RECV, 0, 0, slot); /* not used to match (comm.h) */
		q->recv_outstanding++;
		if (nv_ibv_post_recv(q->qp, wr, &bad) != NV_OK) {
			nv_comm_fail(c, NV_ERR_SYSTEM, "posting a receive on QP 0x%x (from %s) "
				     "failed", q->qp->qp_num, c->peer);
			return -1;
		}
	}
	rc->eager.seqs[slot].state = NV_ESEQ_WAIT;
	return nv_recv_post_cts_q(rc, q, 0, slot, src, n) == NV_OK ? 0 : -1;
}

/*
 * irecv of one registered buffer on an eager comm with room for it
 * (nv_eager_room): the same sequence state, entry, arrival check and RECV +
 * CTS as the general path (nv_eager_irecv), without its loops and the pass
 * over older sequences. Inline into nv_net_irecv; a ring entry that already
 * has its flag goes out of line (nv_eager_irecv_arrived checks it).
 */
static inline __attribute__((always_inline)) nv_status_t
nv_eager_irecv_one(struct nv_recv_comm *rc, void *data, size_t size, int tag,
		   const struct nv_mhandle *mh, void *phandle, void **request)
{
	struct nv_comm *c = &rc->base;
	struct nv_eager_recv *E = &rc->eager;
	uint64_t seq = rc->head;
	uint32_t slot = (uint32_t)(seq % NV_EAGER_SLOTS);
	struct nv_cts_entry *e = nv_eager_shadow(c->ctrl, seq);
	struct nv_request *req = nv_req_get(c, NV_REQ_RECV);

	if (!req)
		return nv_comm_idle_call(c);
	req->seq = seq;
	req->pending = 1;
	req->eager_left = 1;
	req->eager_map[0] = 0;
	req->eager_kind[0] = (uint8_t)mh->kind;
	req->mem_kind = (uint8_t)mh->kind;
	req->sizes[0] = size > UINT32_MAX ? UINT32_MAX : (uint32_t)size;
	if (nv_unlikely(nv_prof_cb != NULL)) {
		req->phandle[0] = phandle;
		nv_prof_qp_start(req, phandle, c->qps[0].dev, c->qps[0].qp->qp_num,
				 IBV_WC_RECV_RDMA_WITH_IMM, size, NV_WRID(NV_WR_RECV, 0, 0, slot));
	}
	e->addr = (uintptr_t)data;
	e->size = (uint64_t)req->sizes[0];
	e->rkey[0] = mh->rkey[0];
	e->tag = (uint32_t)tag;
	e->nreqs = 1;
	e->seq = seq + 1;
	E->seqs[slot].req = req->idx;
	E->seqs[slot].state = NV_ESEQ_PEND;
	rc->head = seq + 1;
	*request = req;
	if (nv_unlikely(__atomic_load_n(&nv_eager_trl(E, seq)->seq, __ATOMIC_ACQUIRE) == seq + 1))
		return nv_eager_irecv_arrived(rc, seq);
	return nv_eager_post_n(rc, seq, e, 1) < 0 ? c->error : NV_OK;
}

/* Freed ring entries to grant: the credit word, unless the grant on a CTS the
 * sender used is enough (comm.h). */
nv_status_t nv_eager_grant(struct nv_recv_comm *rc);

/* Frees finished sequences from the tail; grants the freed ring entries in batches. */
static inline nv_status_t nv_eager_advance(struct nv_recv_comm *rc)
{
	struct nv_eager_recv *E = &rc->eager;

	while (E->tail < rc->head && E->seqs[E->tail % NV_EAGER_SLOTS].state == NV_ESEQ_DONE)
		E->seqs[E->tail++ % NV_EAGER_SLOTS].state = NV_ESEQ_FREE;
	if (nv_likely(E->tail + NV_EAGER_SLOTS - E->granted < NV_EAGER_GRANT_BATCH))
		return NV_OK;
	return nv_eager_grant(rc);
}

/* A receive completion reporting n bytes for a size-byte receive: the sticky error. */
__attribute__((cold)) nv_status_t nv_recv_too_big(struct nv_comm *c, uint32_t n, uint32_t size);
/* The entries still open on cursor seq's CTS got their data (sizes from imm or the records). */
nv_status_t nv_eager_cts_done(struct nv_recv_comm *rc, uint64_t seq, uint32_t imm);
/* A WRITE_WITH_IMM completion that is not the common case below (RECV already counted). */
nv_status_t nv_eager_recv_cqe_slow(struct nv_recv_comm *rc, const struct ibv_wc *wc);

/*
 * A WRITE_WITH_IMM completion on an eager comm, matched by order, not wr_id
 * (comm.h). The common case inline: the tail waits for it on the CTS of a
 * one-buffer receive and its ring entry has not arrived; no sequence is
 * older, so no ring entry written before this completion can be pending.
 * Only sequences in [tail, head) have a state other than FREE (irecv sets
 * head's, the tail frees what it passes), so a WAIT tail is below head; and
 * a one-buffer receive in WAIT has its one entry open (eager_left 1, its
 * capacity in sizes[0], pending 1).
 */
static inline __attribute__((always_inline)) nv_status_t
nv_eager_recv_cqe(struct nv_recv_comm *rc, const struct ibv_wc *wc)
{
	struct nv_comm *c = &rc->base;
	struct nv_eager_recv *E = &rc->eager;
	uint64_t seq = E->tail;
	uint32_t slot = (uint32_t)(seq % NV_EAGER_SLOTS), imm = ntohl(wc->imm_data);
	struct nv_request *r = &c->reqs[E->seqs[slot].req];

	c->qps[0].recv_outstanding--;
	if (nv_unlikely(E->seqs[slot].state != NV_ESEQ_WAIT || r->nreqs != 1 ||
			!(wc->wc_flags & IBV_WC_WITH_IMM) || imm > r->sizes[0] ||
			__atomic_load_n(&nv_eager_trl(E, seq)->seq, __ATOMIC_ACQUIRE) == seq + 1))
		return nv_eager_recv_cqe_slow(rc, wc);
	r->sizes[0] = imm;
	r->eager_left = 0;
	r->pending = 0;
	r->done = 1;
	E->seqs[slot].state = NV_ESEQ_FREE;
	E->tail = seq + 1;
	E->cts_done = seq; /* the sender found the grant on its CTS (comm.h) */
	return nv_eager_advance(rc);
}
/* A loopback copy into a GPU buffer completed. */
nv_status_t nv_eager_copy_done(struct nv_recv_comm *rc, const struct ibv_wc *wc);
/* Delivers the ring entries that arrived, in sequence order; NV_OK or the sticky error. */
nv_status_t nv_eager_poll(struct nv_recv_comm *rc);
/*
 * test() of receive r, not done after the CQ poll: a pass over the posted
 * sequences only when it can finish something, i.e. the ring entry of r's
 * cursor arrived, or a sequence waits for a CTS or copy that found no room.
 * Other receives' arrived entries are taken when they are tested or when a
 * completion needs the pass (nv_eager_recv_cqe_slow).
 */
static inline nv_status_t nv_eager_test_poll(struct nv_recv_comm *rc, const struct nv_request *r)
{
	struct nv_eager_recv *E = &rc->eager;
	uint64_t c = r->seq + r->nreqs - r->eager_left;

	if (nv_unlikely(E->dirty) ||
	    (r->eager_left && __atomic_load_n(&nv_eager_trl(E, c)->seq, __ATOMIC_ACQUIRE) == c + 1))
		return nv_eager_poll(rc);
	return NV_OK;
}

#endif /* NV_P2P_H */
