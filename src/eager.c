/*
 * eager.c - the eager path for small messages (protocol and invariants in
 * eager.h; docs/design.md, "The eager path").
 *
 * Sender: a message of at most eager.max bytes whose clear-to-send has not
 * arrived goes into the peer's ring while the receiver's grant allows it.
 * Receiver: every receive entry takes one sequence; an arrived ring entry is
 * delivered into its receive (CPU copy for host buffers, a loopback RDMA
 * write on the flush QP for GPU buffers), else the entry's RECV and
 * clear-to-send go out as on the plain path.
 *
 * Rules kept: no allocation, no lock, no system call; every trailer the peer
 * wrote is checked before use (sequence, size <= our limit, tag); errors are
 * sticky and name the connection and the cause.
 */
#include "config.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "ibv.h"
#include "mr.h"
#include "eager.h"
#include "engine.h"
#include "prof.h"

/* ---- send ---------------------------------------------------------------- */

static __attribute__((noinline, cold)) nv_status_t nv_eager_grant_bad(struct nv_send_comm *s,
								    uint64_t grant)
{
	struct nv_comm *c = &s->base;
	char id[256];

	nv_comm_fail(c, NV_ERR_REMOTE, "connection %s: the peer granted eager messages up to %" PRIu64
		     " while we are at message %" PRIu64 " and its ring holds %d (protocol "
		     "violation)", nv_comm_ident(c, id, sizeof(id)), grant, s->head, NV_EAGER_SLOTS);
	return c->error;
}

static __attribute__((noinline, cold)) nv_status_t nv_eager_cts_grant_bad(struct nv_send_comm *s,
									 uint64_t seq, uint32_t off)
{
	struct nv_comm *c = &s->base;
	char id[256];

	nv_comm_fail(c, NV_ERR_REMOTE, "connection %s: the clear-to-send of message %" PRIu64
		     " grants eager messages up to %" PRIu64 " while we are at message %" PRIu64
		     " and its ring holds %d (protocol violation)", nv_comm_ident(c, id, sizeof(id)),
		     seq, seq + off, s->head, NV_EAGER_SLOTS);
	return c->error;
}

/*
 * Out of credit: the grant on the last CTS isend found, or on a newer one
 * that has landed in its FIFO slot since (comm.h). The flag is read first (nv_cts_grant_read):
 * an entry being overwritten (it lands in address order, the flag last)
 * then pairs the older sequence with the newer entry's offset, a sum below
 * the newer grant, never the reverse; so the sum is at most a grant given.
 */
static __attribute__((noinline)) nv_status_t nv_eager_cts_credit(struct nv_send_comm *s)
{
	const struct nv_cts_entry *e =
		nv_send_ctrl_of(&s->base)->fifo[s->eager.cts_seq % NV_FIFO_SLOTS];
	uint64_t flag, seq, grant;
	uint32_t off = nv_cts_grant_read(&e[0], &flag);

	if (!flag || !off)
		return NV_OK; /* nothing there yet, or a receiver that gives none */
	s->eager.cts_took = s->eager.cts_seq; /* once per CTS: an idle isend stays cheap */
	seq = flag - 1;
	grant = seq + off;
	if (nv_cts_grant_bad(seq, off, s->head))
		return nv_eager_cts_grant_bad(s, seq, off);
	if (grant > s->eager.grant)
		s->eager.grant = grant;
	return NV_OK;
}

nv_status_t nv_eager_isend(struct nv_send_comm *s, void *data, size_t size, int tag,
			   void *mhandle, void *phandle, void **request)
{
	struct nv_comm *c = &s->base;
	struct nv_send_ctrl *ctrl = nv_send_ctrl_of(c);
	struct nv_eager_send *E = &s->eager;
	struct nv_comm_qp *q = &c->qps[0];
	uint64_t grant = __atomic_load_n(&ctrl->eager_grant, __ATOMIC_ACQUIRE);
	uint32_t slot = (uint32_t)(s->head % NV_EAGER_SLOTS);
	struct nv_eager_trailer *t = &ctrl->eager_trl[slot];
	const struct nv_mhandle *mh = mhandle;
	struct ibv_send_wr *wr = &s->wr[0], *bad;
	struct ibv_sge *sge = &s->sge[0];
	struct nv_request *req;

	/* the grant only grows; the receiver never grants past its free entries,
	 * which are at most NV_EAGER_SLOTS past any message we have not sent */
	if (nv_unlikely(grant > E->grant)) {
		if (nv_eager_word_bad(grant, s->head))
			return nv_eager_grant_bad(s, grant);
		E->grant = grant;
	}
	if (s->head >= E->grant && (E->cts_took == E->cts_seq || nv_eager_cts_credit(s) != NV_OK ||
				    s->head >= E->grant))
		return c->error != NV_OK ? c->error : nv_send_wait(c, s->head, size, tag); /* its CTS */
	if (q->outstanding + 1 > q->max_wr &&
	    (nv_comm_progress(c) != NV_OK || q->outstanding + 1 > q->max_wr))
		return c->error;
	req = nv_req_get(c, NV_REQ_SEND);
	if (!req)
		return NV_OK;
	req->data = data;
	req->size = size;
	req->mh = mhandle;
	req->mem_kind = (uint8_t)(mh ? mh->kind : NV_MEM_HOST);
	req->entry = 0;
	req->seq = s->head;
	req->phandle[0] = phandle;
	/* the trailer source is reused for head + NV_EAGER_SLOTS only after the
	 * receiver freed this entry (its grant), so after this write executed */
	t->size = (uint32_t)size;
	t->tag = (uint32_t)tag;
	t->seq = s->head + 1;
	sge[0].addr = (uintptr_t)data;
	sge[0].length = (uint32_t)size;
	sge[0].lkey = mh ? mh->lkey[0] : 0;
	sge[1].addr = (uintptr_t)t;
	sge[1].length = NV_EAGER_TRAILER;
	sge[1].lkey = c->dev[0].ctrl_mr->lkey;
	wr->sg_list = size ? &sge[0] : &sge[1];
	wr->num_sge = size ? 2 : 1;
	wr->opcode = IBV_WR_RDMA_WRITE;
	wr->send_flags = IBV_SEND_SIGNALED;
	/* data right before the trailer, which ends the entry */
	wr->wr.rdma.remote_addr = E->ring_addr + (uint64_t)slot * E->entry + E->entry -
				  NV_EAGER_TRAILER - size;
	wr->wr.rdma.rkey = E->rkey;
	wr->wr_id = NV_WRID(NV_WR_EAGER, 1, 0, req->idx);
	wr->next = NULL;
	q->outstanding++;
	if (nv_unlikely(nv_prof_cb != NULL))
		nv_prof_qp_start(req, phandle, q->dev, q->qp->qp_num, wr->opcode, size, wr->wr_id);
	if (nv_unlikely(c->wqe != NULL)) /* NCCL_IB_WQE_LATENCY_THRESHOLD_NS */
		nv_wqe_post(&c->wqe->qp[0]);
	if (nv_ibv_post_send(q->qp, wr, &bad) != NV_OK) {
		nv_comm_fail(c, NV_ERR_SYSTEM, "posting an eager message on QP 0x%x to %s failed",
			     q->qp->qp_num, c->peer);
		nv_req_put(c, req);
		return c->error;
	}
	c->st.eager++;
	s->head++;
	*request = req;
	return NV_OK;
}

/* ---- receive: ring entries ------------------------------------------------- */

static __attribute__((noinline, cold)) int nv_eager_bad(struct nv_recv_comm *rc, uint64_t seq)
{
	struct nv_comm *c = &rc->base;
	char why[160], id[256];

	nv_eager_trailer_why(nv_eager_trl(&rc->eager, seq), seq, rc->eager.max, why, sizeof(why));
	nv_comm_fail(c, NV_ERR_REMOTE, "connection %s: the peer wrote %s (protocol violation)",
		     nv_comm_ident(c, id, sizeof(id)), why);
	return -1;
}

/* 1 the ring entry of seq arrived and is usable, 0 not yet, -1 hostile (sticky error). */
static inline int nv_eager_arrived(struct nv_recv_comm *rc, uint64_t seq)
{
	int r = nv_eager_trailer_check(nv_eager_trl(&rc->eager, seq), seq, rc->eager.max, NULL, 0);

	return nv_likely(r >= 0) ? r : nv_eager_bad(rc, seq);
}

/* An eager-delivered sequence finished: its entry counts down. */
static void nv_eager_seq_done(struct nv_comm *c, struct nv_eager_seq *q)
{
	struct nv_request *r = &c->reqs[q->req];

	q->state = NV_ESEQ_DONE;
	if (--r->pending == 0)
		r->done = 1;
}

/* The loopback RDMA write of an arrived entry into its GPU buffer; 0 posted or no room yet. */
static int nv_eager_copy_post(struct nv_recv_comm *rc, uint64_t seq)
{
	struct nv_comm *c = &rc->base;
	struct nv_comm_dev *d = &c->dev[0];
	struct nv_eager_recv *E = &rc->eager;
	uint32_t slot = (uint32_t)(seq % NV_EAGER_SLOTS);
	struct nv_eager_seq *q = &E->seqs[slot];
	/* the cursor's CTS entries stay in its shadow slot until seq + NV_SHADOW_SLOTS */
	const struct nv_cts_entry *e = &nv_eager_shadow(nv_recv_ctrl_of(c), seq)[q->i];
	const struct nv_eager_trailer *t = nv_eager_trl(E, seq);
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;

	if (nv_unlikely(!d->flush_qp) && nv_comm_flush_qps(c) != NV_OK) {
		nv_comm_fail(c, NV_ERR_SYSTEM, "creating the loopback QP that copies eager messages "
			     "into GPU buffers on %s (connection from %s) failed (see above)",
			     d->hca->name, c->peer);
		return -1;
	}
	if (d->flush_outstanding >= d->flush_max) {
		E->dirty = 1;
		return 0; /* COPYQ: posted by a later pass */
	}
	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)t - t->size;
	sge.length = t->size < e->size ? t->size : (uint32_t)e->size;
	sge.lkey = E->mr->lkey;
	wr.wr_id = NV_WRID(NV_WR_ECOPY, 1, 0, slot);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = e->addr;
	wr.wr.rdma.rkey = e->rkey[0];
	if (nv_ibv_post_send(d->flush_qp, &wr, &bad) != NV_OK) {
		nv_comm_fail(c, NV_ERR_SYSTEM, "posting the loopback copy of an eager message into a "
			     "GPU buffer on %s (connection from %s) failed", d->hca->name, c->peer);
		return -1;
	}
	d->flush_outstanding++;
	q->state = NV_ESEQ_COPY;
	return 0;
}

/*
 * The cursor c of a receive moves on after an eager message took CTS entry
 * i: the open entries but i become c + 1's (PEND), in the same order.
 */
static void nv_eager_cursor_next(struct nv_recv_comm *rc, uint64_t c, struct nv_request *r,
				 int i)
{
	const struct nv_cts_entry *from = nv_eager_shadow(nv_recv_ctrl_of(&rc->base), c);
	struct nv_cts_entry *to = nv_eager_shadow(nv_recv_ctrl_of(&rc->base), c + 1);
	int j, n = 0;

	for (j = 0; j < r->eager_left; j++) {
		if (j == i)
			continue;
		to[n] = from[j];
		to[n].nreqs = (uint32_t)(r->eager_left - 1);
		to[n].seq = c + 2;
		r->eager_map[n++] = r->eager_map[j];
	}
	r->eager_left = (uint8_t)n;
	rc->eager.seqs[(c + 1) % NV_EAGER_SLOTS].state = NV_ESEQ_PEND;
	rc->eager.dirty = 1;
}

/*
 * Takes the arrived ring entry of cursor seq into the first open entry of
 * its receive with the same tag (posted: its RECV and CTS went out, so the
 * RECV becomes a surplus one). A host buffer gets it now; a GPU buffer by a
 * loopback write. 0 ok, -1 sticky error.
 */
static int nv_eager_deliver(struct nv_recv_comm *rc, uint64_t seq, int posted)
{
	struct nv_comm *c = &rc->base;
	struct nv_eager_recv *E = &rc->eager;
	uint32_t slot = (uint32_t)(seq % NV_EAGER_SLOTS);
	const struct nv_cts_entry *e = nv_eager_shadow(nv_recv_ctrl_of(c), seq);
	const struct nv_eager_trailer *t = nv_eager_trl(E, seq);
	struct nv_eager_seq *q = &E->seqs[slot];
	struct nv_request *r = &c->reqs[q->req];
	int i, k;
	uint32_t n;
	char id[256];

	for (i = 0; i < r->eager_left && e[i].tag != t->tag; i++)
		;
	if (nv_unlikely(i == r->eager_left)) {
		nv_comm_fail(c, NV_ERR_REMOTE, "connection %s: the peer's message %" PRIu64 " has tag "
			     "%u, which no open entry of the receive it is matched to (in order) has "
			     "(first tag %u); hint: both sides must post the messages of a comm in "
			     "the same order", nv_comm_ident(c, id, sizeof(id)), seq, t->tag,
			     e[0].tag);
		return -1;
	}
	k = r->eager_map[i];
	n = t->size < e[i].size ? t->size : (uint32_t)e[i].size; /* truncation */
	rc->base.st.eager++;
	r->sizes[k] = n;
	q->i = (uint8_t)i;
	if (posted)
		E->surplus++;
	if (r->eager_left > 1)
		nv_eager_cursor_next(rc, seq, r, i); /* e[i] stays valid: other slot */
	else
		r->eager_left = 0;
	if (n && (r->eager_kind[k] & (NV_MEM_CUDA | NV_MEM_DMABUF))) {
		q->state = NV_ESEQ_COPYQ;
		return nv_eager_copy_post(rc, seq);
	}
	if (n)
		memcpy((void *)(uintptr_t)e[i].addr, (const uint8_t *)t - t->size, n);
	nv_eager_seq_done(c, q);
	return 0;
}

/* The credit word itself: sequences below tail + NV_EAGER_SLOTS may go eager
 * (nv_eager_grant decided the sender needs it). */
static __attribute__((noinline)) nv_status_t nv_eager_grant_write(struct nv_recv_comm *rc)
{
	struct nv_comm *c = &rc->base;
	struct nv_eager_recv *E = &rc->eager;
	struct nv_comm_qp *q = &c->qps[0];
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	uint64_t *src;

	if (q->outstanding + 1 > q->max_wr)
		return NV_OK; /* a full queue: later (the sender waits for CTS meanwhile) */
	/* one source word per grant write, reused NV_EAGER_SLOTS grants later, long
	 * after the write executed (the sender used those grants) */
	src = (uint64_t *)(E->ring + (size_t)NV_EAGER_SLOTS * E->entry) + E->ngrant++ % NV_EAGER_SLOTS;
	*src = E->tail + NV_EAGER_SLOTS;
	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)src;
	sge.length = sizeof(*src);
	sge.lkey = E->mr->lkey;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	/* the credit word: struct nv_send_ctrl.eager_grant, right after the v3 region */
	wr.wr.rdma.remote_addr = c->rmeta->addr + NV_SEND_CTRL_REMOTE_LEN;
	wr.wr.rdma.rkey = c->rmeta->dev[q->rdev].rkey;
	wr.wr_id = NV_WRID(NV_WR_CTS, 0, 0, 0); /* counted like a clear-to-send */
	wr.send_flags = sge.length <= (uint32_t)q->max_inline ? IBV_SEND_INLINE : 0;
	q->outstanding++;
	if (++q->unsignalled >= NV_CTS_SIGNAL_EVERY || q->unsignalled * 2 >= q->max_wr) {
		wr.send_flags |= IBV_SEND_SIGNALED;
		wr.wr_id = NV_WRID(NV_WR_CTS, q->unsignalled, 0, 0);
		q->unsignalled = 0;
	}
	if (nv_ibv_post_send(q->qp, &wr, &bad) != NV_OK) {
		nv_comm_fail(c, NV_ERR_SYSTEM, "posting an eager credit write on QP 0x%x to %s "
			     "failed", q->qp->qp_num, c->peer);
		return c->error;
	}
	E->granted = *src;
	return NV_OK;
}

__attribute__((noinline)) nv_status_t nv_eager_grant(struct nv_recv_comm *rc)
{
	struct nv_eager_recv *E = &rc->eager;

	if (E->cts_grant) {
		/* what the sender found on the CTS of the last message that came
		 * through one may be enough (comm.h); the slot still holds it
		 * unless it was posted again since, for cts_done + NV_SHADOW_SLOTS */
		const struct nv_cts_entry *e = nv_eager_shadow(nv_recv_ctrl_of(&rc->base), E->cts_done);

		if (e->seq == E->cts_done + 1 && E->cts_done + e->eager.grant > E->granted)
			E->granted = E->cts_done + e->eager.grant;
		if (E->tail + NV_EAGER_SLOTS - E->granted < NV_EAGER_GRANT_BATCH)
			return NV_OK;
	}
	return nv_eager_grant_write(rc);
}

/* RECV (unless a surplus one is in the queue) and the CTS of cursor seq; 1 no room yet. */
static int nv_eager_post_cts(struct nv_recv_comm *rc, uint64_t seq)
{
	struct nv_comm *c = &rc->base;
	struct nv_comm_qp *q = &c->qps[0];
	uint32_t slot = (uint32_t)(seq % NV_EAGER_SLOTS);
	struct nv_request *r = &c->reqs[rc->eager.seqs[slot].req];

	if (q->outstanding + 1 > q->max_wr ||
	    (!rc->eager.surplus && q->recv_outstanding + 1 > q->max_recv)) {
		rc->eager.dirty = 1; /* PEND: posted by a later pass */
		return 1;
	}
	return nv_eager_post_n(rc, seq, nv_eager_shadow(nv_recv_ctrl_of(c), seq), r->eager_left);
}

/* A cursor whose CTS is not out: take its ring entry, or post its CTS. 0 ok, -1 error. */
static int nv_eager_pend(struct nv_recv_comm *rc, uint64_t seq)
{
	int r = nv_eager_arrived(rc, seq);

	if (r > 0)
		return nv_eager_deliver(rc, seq, 0);
	if (r < 0)
		return -1;
	return nv_eager_post_cts(rc, seq) < 0 ? -1 : 0;
}

/*
 * One pass from the tail over the sequences of posted receives: delivers
 * arrived ring entries, posts CTS and loopback copies still owed. *first:
 * the oldest sequence whose CTS is out and whose ring entry has not arrived
 * (rc->head when none): a WRITE_WITH_IMM completion belongs to it, since the
 * entries of earlier sequences were written before it on the same QP.
 */
static nv_status_t nv_eager_drain(struct nv_recv_comm *rc, uint64_t *first)
{
	struct nv_comm *c = &rc->base;
	struct nv_eager_recv *E = &rc->eager;
	uint64_t seq;
	int r = 0;

	*first = rc->head;
	E->dirty = 0;
	for (seq = E->tail; seq < rc->head && r >= 0; seq++) {
		struct nv_eager_seq *q = &E->seqs[seq % NV_EAGER_SLOTS];

		switch (q->state) {
		case NV_ESEQ_WAIT:
			r = nv_eager_arrived(rc, seq);
			if (r > 0)
				r = nv_eager_deliver(rc, seq, 1);
			else if (r == 0 && *first == rc->head)
				*first = seq;
			break;
		case NV_ESEQ_PEND:
			r = nv_eager_pend(rc, seq);
			break;
		case NV_ESEQ_COPYQ:
			r = nv_eager_copy_post(rc, seq);
			break;
		default: /* GROUP (behind a cursor), COPY, DONE */
			break;
		}
	}
	if (r < 0)
		return c->error;
	return nv_eager_advance(rc);
}

nv_status_t nv_eager_poll(struct nv_recv_comm *rc)
{
	uint64_t first;

	return nv_eager_drain(rc, &first);
}

/* The entries still open on cursor seq's CTS got their data: sizes, and they are done. */
nv_status_t nv_eager_cts_done(struct nv_recv_comm *rc, uint64_t seq, uint32_t imm)
{
	struct nv_comm *c = &rc->base;
	struct nv_eager_recv *E = &rc->eager;
	const struct nv_recv_ctrl *ctrl = nv_recv_ctrl_of(c);
	const struct nv_cts_entry *e = nv_eager_shadow(nv_recv_ctrl_of(c), seq);
	struct nv_request *r = &c->reqs[E->seqs[seq % NV_EAGER_SLOTS].req];
	uint32_t cap[NV_MAX_RECVS] = { 0 };
	uint64_t end = r->seq + r->nreqs, s;
	char why[128], id[256];
	int i, n = r->eager_left;

	E->cts_done = seq; /* the sender found the grant on its CTS (comm.h) */
	if (nv_likely(n == 1)) {
		if (nv_unlikely(imm > e[0].size))
			return nv_recv_too_big(c, imm, (uint32_t)e[0].size);
		r->sizes[r->eager_map[0]] = imm;
	} else {
		for (i = 0; i < n; i++)
			cap[i] = (uint32_t)e[i].size;
		const uint32_t *rec = ctrl->records[seq % NV_FIFO_SLOTS];

		if (nv_records_check(rec, cap, n, why, sizeof(why))) {
			nv_comm_fail(c, NV_ERR_REMOTE, "connection %s: the peer's sizes: %s (protocol "
				     "violation)", nv_comm_ident(c, id, sizeof(id)), why);
			return c->error;
		}
		for (i = 0; i < n; i++)
			r->sizes[r->eager_map[i]] = rec[i];
	}
	/* the CTS of n entries stood for the messages seq .. seq + n - 1 */
	E->seqs[seq % NV_EAGER_SLOTS].state = NV_ESEQ_DONE;
	for (s = seq + 1; nv_unlikely(s < end); s++)
		E->seqs[s % NV_EAGER_SLOTS].state = NV_ESEQ_DONE;
	r->eager_left = 0;
	r->pending -= n;
	if (r->pending == 0)
		r->done = 1;
	return nv_eager_advance(rc);
}

nv_status_t nv_eager_recv_cqe_slow(struct nv_recv_comm *rc, const struct ibv_wc *wc)
{
	struct nv_comm *c = &rc->base;
	uint64_t seq;
	char id[256];

	rc->gen_cqe++;
	if (nv_eager_drain(rc, &seq) != NV_OK)
		return c->error;
	if (nv_unlikely(seq == rc->head || !(wc->wc_flags & IBV_WC_WITH_IMM))) {
		nv_comm_fail(c, NV_ERR_REMOTE, "connection %s: the peer wrote data %s (protocol "
			     "violation)", nv_comm_ident(c, id, sizeof(id)),
			     seq == rc->head ? "that no clear-to-send asked for"
					     : "without an immediate");
		return c->error;
	}
	return nv_eager_cts_done(rc, seq, ntohl(wc->imm_data));
}

nv_status_t nv_eager_copy_done(struct nv_recv_comm *rc, const struct ibv_wc *wc)
{
	struct nv_comm *c = &rc->base;
	struct nv_eager_seq *q = &rc->eager.seqs[NV_WRID_IDX(wc->wr_id) % NV_EAGER_SLOTS];

	c->dev[0].flush_outstanding--;
	if (q->state == NV_ESEQ_COPY)
		nv_eager_seq_done(c, q);
	return nv_eager_advance(rc);
}

/* ---- receive: irecv --------------------------------------------------------- */

/*
 * The rest of nv_eager_irecv_one (eager.h) when the ring entry of seq has its
 * flag already: checked and delivered, or the sticky error.
 */
nv_status_t nv_eager_irecv_arrived(struct nv_recv_comm *rc, uint64_t seq)
{
	struct nv_comm *c = &rc->base;

	/* the flag was read (acquire) by the caller; the size is read after it */
	if (nv_unlikely(nv_eager_trl(&rc->eager, seq)->size > rc->eager.max)) {
		nv_eager_bad(rc, seq);
		return c->error;
	}
	if (nv_eager_deliver(rc, seq, 0) < 0)
		return c->error;
	return nv_eager_advance(rc);
}

nv_status_t nv_eager_irecv(struct nv_recv_comm *rc, int n, void **data, size_t *sizes, int *tags,
			   void **mhandles, void **phandles, void **request)
{
	struct nv_comm *c = &rc->base;
	struct nv_eager_recv *E = &rc->eager;
	struct nv_cts_entry *e = nv_eager_shadow(nv_recv_ctrl_of(c), rc->head);
	struct nv_request *req;
	int i;

	for (i = 0; i < n; i++) {
		if (nv_unlikely(sizes[i] && (!mhandles || !mhandles[i]))) {
			NV_WARN("irecv from %s: buffer %d of %zu bytes has no registration", c->peer,
				i, sizes[i]);
			return NV_ERR_INVALID;
		}
	}
	/* n sequences inside the window of ring entries and CTS slots, and room for
	 * the cursor's RECV and CTS, so a returned receive has its CTS out (as on the
	 * plain path) unless its ring entry is already here */
	if (!nv_eager_room(rc, n) &&
	    (nv_comm_progress(c) != NV_OK || nv_eager_poll(rc) != NV_OK || !nv_eager_room(rc, n)))
		return c->error != NV_OK ? c->error : nv_comm_idle_call(c);
	if (n == rc->one_recvs && mhandles && mhandles[0])
		return nv_eager_irecv_one(rc, data[0], sizes[0], tags[0], mhandles[0],
					  phandles ? phandles[0] : NULL, request);
	req = nv_req_get(c, NV_REQ_RECV);
	if (!req)
		return nv_comm_idle_call(c);
	rc->gen_irecv++;
	req->seq = rc->head;
	req->nreqs = (uint8_t)n;
	req->pending = n;
	req->eager_left = (uint8_t)n;
	req->mem_kind = (uint8_t)(mhandles && mhandles[0] ? ((struct nv_mhandle *)mhandles[0])->kind
							  : NV_MEM_HOST);
	for (i = 0; i < n; i++) {
		const struct nv_mhandle *mh = mhandles ? mhandles[i] : NULL;

		if (nv_unlikely(nv_prof_cb != NULL)) { /* one event per entry, as its RECV */
			req->phandle[i] = phandles ? phandles[i] : NULL;
			nv_prof_qp_start(req, req->phandle[i], c->qps[0].dev, c->qps[0].qp->qp_num,
					 IBV_WC_RECV_RDMA_WITH_IMM, (size_t)sizes[i],
					 NV_WRID(NV_WR_RECV, 0, 0, (rc->head + (uint64_t)i) % NV_EAGER_SLOTS));
		}
		/* capacity above 4 GiB - 1 is told as UINT32_MAX (as on the plain path) */
		req->sizes[i] = sizes[i] > UINT32_MAX ? UINT32_MAX : (uint32_t)sizes[i];
		req->eager_map[i] = (uint8_t)i;
		req->eager_kind[i] = (uint8_t)(mh ? mh->kind : NV_MEM_HOST);
		e[i].addr = (uintptr_t)data[i];
		e[i].size = (uint64_t)req->sizes[i];
		e[i].rkey[0] = mh ? mh->rkey[0] : 0;
		e[i].tag = (uint32_t)tags[i];
		e[i].nreqs = (uint32_t)n;
		e[i].seq = rc->head + 1;
		E->seqs[(rc->head + (uint64_t)i) % NV_EAGER_SLOTS].req = req->idx;
		E->seqs[(rc->head + (uint64_t)i) % NV_EAGER_SLOTS].state = i ? NV_ESEQ_GROUP
									      : NV_ESEQ_PEND;
	}
	rc->head += (uint64_t)n;
	*request = req;
	/* the cursor: its ring entry (and maybe the next ones) or its CTS */
	return nv_eager_poll(rc);
}
