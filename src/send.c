/*
 * send.c - the data path's send side: isend, the send chains and the
 * slot claim (protocol in comm.h). The rules of engine.c hold here too: no
 * allocation, lock or system call per operation; every post first checks
 * the QP's outstanding-WR count and every chain ends with a signalled WR.
 */
#include "config.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "ibv.h"
#include "mr.h"
#include "nv_api.h"
#include "eager.h"
#include "engine.h"
#include "lb.h"
#include "prof.h"

#define NV_UNMATCHED 0xffff

/* ---- send ---------------------------------------------------------------- */

/*
 * WRs one QP's chain for this slot may need: per entry, its chunk (what the
 * receive can take, at most max_bytes, split over nq QPs) in writes of at
 * most wr_bytes, plus the closing WRITE_WITH_IMM. At most NV_SEND_CHAIN_MAX.
 * A comm that weighs by speed (lb.h) may give one QP the whole message.
 */
static inline __attribute__((always_inline)) int nv_send_chain_len(const struct nv_send_comm *s, const struct nv_cts_entry *e,
			     int nreqs)
{
	uint64_t nq = nv_unlikely(s->base.lb != NULL) ? 1 : (uint64_t)s->base.nq;
	int r, n = 1;

	for (r = 0; r < nreqs; r++) {
		uint64_t size = e[r].size < s->max_bytes ? e[r].size : s->max_bytes;
		uint64_t chunk = NV_ALIGN_UP((size + nq - 1) / nq, (uint64_t)NV_CHUNK_ALIGN);

		n += chunk ? (int)((chunk + s->wr_bytes - 1) / s->wr_bytes) : 1;
	}
	return n;
}

static int nv_send_room(struct nv_send_comm *s, uint64_t seq, int nwr)
{
	struct nv_comm *c = &s->base;
	int i;

	for (i = 0; i < c->nq; i++) {
		struct nv_comm_qp *q = &c->qps[(seq * (uint64_t)c->nq + (uint64_t)i) % (uint64_t)c->nqps];

		if (q->outstanding + nwr > q->max_wr)
			return 0;
	}
	return 1;
}

static nv_status_t nv_send_post_qp(struct nv_send_comm *s, struct nv_send_slot *sl, int i)
{
	struct nv_comm *c = &s->base;
	struct nv_send_ctrl *ctrl = nv_send_ctrl_of(c);
	uint32_t slot = (uint32_t)(sl->seq % NV_FIFO_SLOTS);
	uint32_t qi = (uint32_t)((sl->seq * (uint64_t)c->nq + (uint64_t)i) % (uint64_t)c->nqps);
	struct nv_comm_qp *q = &c->qps[qi];
	const struct nv_cts_entry *e = ctrl->fifo[slot];
	struct ibv_send_wr *bad, *last;
	struct nv_request *wreq[NV_SEND_CHAIN_MAX]; /* request of each data WR (profiler) */
	int r, nwr = 0, ndata;

	s->gen_chain++;
	for (r = 0; r < sl->nreqs; r++) {
		struct nv_request *req = &c->reqs[sl->req[r]];
		uint64_t chunk = NV_ALIGN_UP((req->size + (uint64_t)c->nq - 1) / (uint64_t)c->nq,
					     (uint64_t)NV_CHUNK_ALIGN);
		uint64_t off = chunk * (uint64_t)i, end;

		if (nv_unlikely(s->lb_on)) { /* NCCL_IB_EVENT_BASED_LB: cut by speed (lb.h) */
			off = nv_lb_off(c->lb, c->nq, req->size, i);
			end = nv_lb_off(c->lb, c->nq, req->size, i + 1);
			if (off >= end)
				continue;
		} else if (off >= req->size) {
			continue;
		} else {
			end = req->size - off < chunk ? req->size : off + chunk;
		}

		/* writes of at most wr_bytes (the port's max_msg_sz): NV_MAX_WR_PER_MSG
		 * at most, as isend keeps size <= max_bytes (nv_send_chain_len) */
		for (; off < end; off += s->wr_bytes) {
			s->sge[nwr].addr = (uintptr_t)req->data + off;
			s->sge[nwr].length = (uint32_t)(end - off < s->wr_bytes ? end - off
										 : s->wr_bytes);
			s->sge[nwr].lkey = req->mh->lkey[q->dev];
			s->wr[nwr].opcode = IBV_WR_RDMA_WRITE;
			s->wr[nwr].num_sge = 1;
			s->wr[nwr].wr.rdma.remote_addr = e[req->entry].addr + off;
			s->wr[nwr].wr.rdma.rkey = e[req->entry].rkey[q->rdev];
			wreq[nwr] = req;
			nwr++;
		}
	}
	ndata = nwr;
	if (sl->nreqs == 1 && nwr == 1 && c->reqs[sl->req[0]].size < s->ar_threshold) {
		last = &s->wr[0]; /* data and immediate in one WR */
	} else {
		last = &s->wr[nwr];
		last->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		last->num_sge = 0;
		last->wr.rdma.remote_addr = c->rctrl_addr + slot * sizeof(ctrl->sizes[0]);
		last->wr.rdma.rkey = c->rmeta->dev[q->rdev].rkey;
		if (sl->nreqs > 1 && i == 0) {
			for (r = 0; r < sl->nreqs; r++)
				ctrl->sizes[slot][r] = (uint32_t)c->reqs[sl->req[r]].size;
			s->sge[nwr].addr = (uintptr_t)ctrl->sizes[slot];
			s->sge[nwr].length = (uint32_t)(sl->nreqs * sizeof(int32_t));
			s->sge[nwr].lkey = c->dev[q->dev].ctrl_mr->lkey;
			last->num_sge = 1;
		}
		nwr++;
	}
	last->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	last->imm_data = htonl(sl->nreqs == 1 ? (uint32_t)c->reqs[sl->req[0]].size : 0);
	for (r = 0; r < nwr; r++) {
		s->wr[r].sg_list = &s->sge[r];
		s->wr[r].send_flags = 0;
		s->wr[r].next = &s->wr[r + 1];
		/* decodable even from an error completion of an unsignalled WR (nwr 0) */
		s->wr[r].wr_id = NV_WRID(NV_WR_DATA, 0, qi, sl->seq);
	}
	last->send_flags = IBV_SEND_SIGNALED;
	last->wr_id = NV_WRID(NV_WR_DATA, nwr, qi, sl->seq);
	last->next = NULL;
	q->outstanding += nwr;
	if (nv_unlikely(nv_prof_cb != NULL))
		for (r = 0; r < ndata; r++) /* the data WRs: one per request */
			nv_prof_qp_start(wreq[r], wreq[r]->phandle[0], q->dev, q->qp->qp_num,
					 s->wr[r].opcode, s->sge[r].length, s->wr[r].wr_id);
	if (nv_unlikely(c->wqe != NULL)) /* NCCL_IB_WQE_LATENCY_THRESHOLD_NS */
		nv_wqe_post(&c->wqe->qp[qi]);
	if (nv_ibv_post_send(q->qp, s->wr, &bad) != NV_OK) {
		nv_comm_fail(c, NV_ERR_SYSTEM, "posting %d data WR(s) on QP 0x%x to %s failed",
			     nwr, q->qp->qp_num, c->peer);
		return c->error;
	}
	return NV_OK;
}

/*
 * The common case: one receive, one QP, 1 byte .. one write (wr_bytes). The same chain
 * nv_send_post_qp builds for it: one WRITE_WITH_IMM carrying the data, or,
 * from the adaptive-routing threshold on, the data WRITE followed by a
 * 0-byte WRITE_WITH_IMM into the peer's records. Built from the comm's
 * templates (comm.h), whose constant fields are set once.
 */
static inline __attribute__((always_inline)) nv_status_t
nv_send_post_one(struct nv_send_comm *s, struct nv_send_slot *sl, struct nv_request *req)
{
	struct nv_comm *c = &s->base;
	uint32_t qi = nv_qp_of(sl->seq, c->nqps);
	uint32_t slot = (uint32_t)(sl->seq % NV_FIFO_SLOTS);
	struct nv_comm_qp *q = &c->qps[qi];
	const struct nv_cts_entry *e = &nv_send_ctrl_of(c)->fifo[slot][req->entry];
	struct ibv_send_wr *wr, *bad;
	struct ibv_sge *sge = &s->one_sge;
	int nwr = 1;

	sge->addr = (uintptr_t)req->data;
	sge->length = (uint32_t)req->size;
	sge->lkey = req->mh->lkey[q->dev];
	if (req->size < s->ar_threshold) {
		wr = &s->one_wr;
		wr->wr.rdma.remote_addr = e->addr;
		wr->wr.rdma.rkey = e->rkey[q->rdev];
		wr->imm_data = htonl((uint32_t)req->size);
		wr->wr_id = NV_WRID(NV_WR_DATA, 1, qi, sl->seq);
	} else {
		struct ibv_send_wr *imm = &s->split_wr[1];

		wr = &s->split_wr[0];
		wr->wr.rdma.remote_addr = e->addr;
		wr->wr.rdma.rkey = e->rkey[q->rdev];
		wr->wr_id = NV_WRID(NV_WR_DATA, 0, qi, sl->seq);
		imm->wr.rdma.remote_addr =
			c->rctrl_addr + slot * sizeof(((struct nv_send_ctrl *)0)->sizes[0]);
		imm->wr.rdma.rkey = c->rmeta->dev[q->rdev].rkey;
		imm->imm_data = htonl((uint32_t)req->size);
		imm->wr_id = NV_WRID(NV_WR_DATA, 2, qi, sl->seq);
		nwr = 2;
	}
	q->outstanding += nwr;
	if (nv_unlikely(nv_prof_cb != NULL))
		nv_prof_qp_start(req, req->phandle[0], q->dev, q->qp->qp_num, wr->opcode,
				 sge->length, wr->wr_id);
	if (nv_unlikely(c->wqe != NULL)) /* NCCL_IB_WQE_LATENCY_THRESHOLD_NS */
		nv_wqe_post(&c->wqe->qp[qi]);
	if (nv_ibv_post_send(q->qp, wr, &bad) != NV_OK) {
		nv_comm_fail(c, NV_ERR_SYSTEM, "posting %d data WR(s) on QP 0x%x to %s failed",
			     nwr, q->qp->qp_num, c->peer);
		return c->error;
	}
	return NV_OK;
}

/* Inlined into isend and into failover's resend, so the fast path stays as it was. */
static inline __attribute__((always_inline)) nv_status_t nv_send_post(struct nv_send_comm *s,
								      struct nv_send_slot *sl)
{
	struct nv_request *r0 = &s->base.reqs[sl->req[0]];
	nv_status_t st;
	int i;

	sl->pending = s->base.nq;
	sl->posted = 1;
	if (nv_likely(s->base.nq == 1 && sl->nreqs == 1 && r0->size && r0->size <= s->one_bytes))
		return nv_send_post_one(s, sl, r0);
	/* NCCL_IB_EVENT_BASED_LB: this message's cut (fails on a bad speed buffer) */
	if (nv_unlikely(s->base.lb != NULL) && nv_lb_prepare(s, sl->seq) != NV_OK)
		return s->base.error;
	for (i = 0; i < s->base.nq; i++) {
		st = nv_send_post_qp(s, sl, i);
		if (st != NV_OK)
			return st;
	}
	return NV_OK;
}

/* A slot nv_cts_slot_ready called hostile: the reason, the sticky error. */
static __attribute__((noinline, cold)) int nv_send_slot_bad(struct nv_send_comm *s, uint64_t seq)
{
	struct nv_comm *c = &s->base;
	const struct nv_cts_entry *e = nv_send_ctrl_of(c)->fifo[seq % NV_FIFO_SLOTS];
	char why[192], id[256];
	int r = nv_cts_slot_check(e, seq, c->rmeta->ndevs, why, sizeof(why));

	if (r < 0)
		nv_comm_fail(c, NV_ERR_REMOTE, "connection %s: the peer posted %s",
			     nv_comm_ident(c, id, sizeof(id)), why);
	return r;
}

/* Checks the whole slot once its entries arrived; 1 valid, 0 not yet, -1 hostile. */
static inline int nv_send_slot_ready(struct nv_send_comm *s, uint64_t seq)
{
	struct nv_comm *c = &s->base;
	const struct nv_cts_entry *e = nv_send_ctrl_of(c)->fifo[seq % NV_FIFO_SLOTS];
	int r = nv_cts_slot_ready(e, seq, c->rmeta->ndevs);

	return nv_likely(r >= 0) ? r : nv_send_slot_bad(s, seq);
}

/* Makes sure slots[] for `seq` is fresh; 0 when the older occupant is still in flight. */
static int nv_send_slot_claim(struct nv_send_comm *s, uint64_t seq, int nreqs)
{
	struct nv_send_slot *sl = &s->slots[seq % NV_FIFO_SLOTS];

	if (sl->seq == seq && sl->nreqs)
		return 1;
	if (sl->pending > 0 && (nv_comm_progress(&s->base) != NV_OK || sl->pending > 0))
		return 0;
	sl->seq = seq;
	sl->nreqs = (uint8_t)nreqs;
	sl->matched = 0;
	sl->posted = 0;
	memset(sl->req, 0xff, sizeof(sl->req));
	return 1;
}

/*
 * isend for a slot of one receive on a one-QP comm, whose entry arrived
 * (e->seq checked by the caller), of a message one RDMA write carries
 * (size <= wr_bytes, checked by the caller): the same checks, matching and chain as
 * the general path below, without its bookkeeping for grouped slots.
 * NCCL_VERBS_FAST_PATHS=0 (one_bytes 0) sends every message the general way,
 * which the reruns of test/reruns.mk hold to the same results.
 */
static inline nv_status_t nv_isend_single(struct nv_send_comm *s, const struct nv_cts_entry *e,
					  void *data, size_t size, int tag, void *mhandle,
					  void *phandle, void **request)
{
	struct nv_comm *c = &s->base;
	struct nv_send_slot *sl = &s->slots[s->head % NV_FIFO_SLOTS];
	const struct nv_comm_qp *q = &c->qps[nv_qp_of(s->head, c->nqps)];
	struct nv_request *req;
	nv_status_t st;

	if (nv_unlikely(nv_cts_entry_bad(e, 1, c->rmeta->ndevs)))
		return nv_send_slot_bad(s, s->head) < 0 ? c->error : NV_OK;
	if (e->tag != (uint32_t)tag)
		return NV_OK; /* no receive with this tag in the current slot yet */
	/* the slot's previous occupant (s->head - NV_FIFO_SLOTS) must have completed */
	if (sl->pending > 0 && (nv_comm_progress(c) != NV_OK || sl->pending > 0))
		return c->error;
	if (q->outstanding + 2 > q->max_wr &&
	    (nv_comm_progress(c) != NV_OK || q->outstanding + 2 > q->max_wr))
		return c->error;
	req = nv_req_get(c, NV_REQ_SEND);
	if (!req)
		return NV_OK;
	req->data = data;
	req->size = size < e->size ? size : e->size; /* truncation as NCCL expects */
	req->mh = mhandle;
	req->mem_kind = (uint8_t)((struct nv_mhandle *)mhandle)->kind;
	req->entry = 0;
	req->seq = s->head;
	req->phandle[0] = phandle;
	sl->seq = s->head;
	sl->nreqs = 1;
	sl->matched = 1;
	sl->req[0] = req->idx;
	sl->pending = 1;
	sl->posted = 1;
	st = nv_send_post_one(s, sl, req);
	if (st != NV_OK)
		return st;
	s->head++;
	*request = req;
	return NV_OK;
}

nv_status_t nv_net_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			 void *phandle, void **request)
{
	struct nv_send_comm *s = send_comm;
	struct nv_comm *c = &s->base;
	const struct nv_cts_entry *e;
	struct nv_send_slot *sl;
	struct nv_request *req;
	nv_status_t st;
	int r, ready, nwr;

	*request = NULL;
	st = nv_comm_check(c, "isend");
	if (st != NV_OK)
		return st == NV_FO_BUSY ? NV_OK : st; /* busy: no request yet */
	if (nv_unlikely(size > s->max_bytes || (size && !mhandle))) {
		NV_WARN("isend to %s: %zu bytes %s", c->peer, size, size && !mhandle ?
			"without a registration" : "above maxP2pBytes");
		if (size > s->max_bytes)
			NV_WARN("isend to %s: the longest message is %" PRIu64 " bytes (%d writes of "
				"the port's max_msg_sz rounded down to %u, at most 4 GiB - 1)", c->peer,
				s->max_bytes, NV_MAX_WR_PER_MSG, s->wr_bytes);
		return NV_ERR_INVALID;
	}
	e = nv_send_ctrl_of(c)->fifo[s->head % NV_FIFO_SLOTS];
	/* nothing of the slot has arrived: the poll of a sender waiting for the receiver,
	 * or a small message that goes eager instead (order: comm.h) */
	if (__atomic_load_n(&e[0].seq, __ATOMIC_ACQUIRE) != s->head + 1) {
		if (s->eager.max && size <= s->eager.max && nv_eager_may_send(s))
			return nv_eager_isend(s, data, size, tag, mhandle, phandle, request);
		return nv_send_wait(c, s->head, size, tag);
	}
	s->eager.cts_seq = s->head; /* its grant, if eager needs one later (comm.h) */
	if (nv_likely(c->nq == 1 && size && size <= s->one_bytes && /* one write carries it */
		      e[0].nreqs == 1))
		return nv_isend_single(s, e, data, size, tag, mhandle, phandle, request);
	ready = nv_send_slot_ready(s, s->head);
	if (ready <= 0)
		return ready < 0 ? c->error : nv_comm_idle_call(c);
	if (!nv_send_slot_claim(s, s->head, (int)e[0].nreqs))
		return c->error;
	sl = &s->slots[s->head % NV_FIFO_SLOTS];
	for (r = 0; r < sl->nreqs; r++)
		if (sl->req[r] == NV_UNMATCHED && e[r].tag == (uint32_t)tag)
			break;
	if (r == sl->nreqs)
		return NV_OK; /* no receive with this tag in the current slot yet */
	nwr = nv_send_chain_len(s, e, sl->nreqs);
	if (nv_unlikely(nwr > c->qps[0].max_wr)) {
		nv_comm_fail(c, NV_ERR_SYSTEM, "isend to %s: the slot needs %d work requests per QP, "
			     "the send queue holds %d (device max_qp_wr)", c->peer, nwr,
			     c->qps[0].max_wr);
		return c->error;
	}
	if (!nv_send_room(s, s->head, nwr) &&
	    (nv_comm_progress(c) != NV_OK || !nv_send_room(s, s->head, nwr)))
		return c->error;
	req = nv_req_get(c, NV_REQ_SEND);
	if (!req)
		return NV_OK;
	s->gen_isend++;
	req->data = data;
	req->size = size < e[r].size ? size : e[r].size; /* truncation as NCCL expects */
	req->mh = mhandle;
	req->mem_kind = (uint8_t)(mhandle ? ((struct nv_mhandle *)mhandle)->kind : NV_MEM_HOST);
	req->entry = r;
	req->seq = s->head;
	req->phandle[0] = phandle;
	sl->req[r] = req->idx;
	if (++sl->matched == sl->nreqs) {
		st = nv_send_post(s, sl);
		if (st != NV_OK)
			return st;
		/* eager comms count messages: this slot stood for nreqs of them (comm.h) */
		s->head += s->eager.max ? sl->nreqs : 1;
	}
	*request = req;
	return NV_OK;
}

/* ---- for failover.c: the same steps, outside the fast path ------------------ */

nv_status_t nv_send_repost(struct nv_send_comm *s, uint64_t seq)
{
	return nv_send_post(s, &s->slots[seq % NV_FIFO_SLOTS]);
}

int nv_send_repost_room(struct nv_send_comm *s, uint64_t seq)
{
	const struct nv_cts_entry *e = nv_send_ctrl_of(&s->base)->fifo[seq % NV_FIFO_SLOTS];

	return nv_send_room(s, seq, nv_send_chain_len(s, e, s->slots[seq % NV_FIFO_SLOTS].nreqs));
}
