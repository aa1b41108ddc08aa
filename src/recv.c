/*
 * recv.c - the data path's receive side: irecv (the clear-to-send and its
 * RECVs), iflush, and the receive repost of a failover round. Completions
 * are handled by the engine (engine.c); the eager path's irecv is in eager.c.
 * The rules of engine.c hold here too.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "eager.h"
#include "engine.h"
#include "ibv.h"
#include "mr.h"
#include "nv_api.h"
#include "prof.h"

static nv_status_t nv_recv_post_cts(struct nv_recv_comm *rc, struct nv_request *req, int n)
{
	uint32_t qi = (uint32_t)(req->seq % (uint64_t)rc->base.nqps);

	uint32_t slot = (uint32_t)(req->seq % NV_FIFO_SLOTS);

	return nv_recv_post_cts_q(rc, &rc->base.qps[qi], qi, slot,
				  nv_recv_ctrl_of(&rc->base)->shadow[slot], n);
}

static inline __attribute__((always_inline)) nv_status_t nv_recv_post(struct nv_recv_comm *rc,
								      struct nv_request *req)
{
	struct nv_comm *c = &rc->base;
	struct ibv_recv_wr *wr = &rc->recv_wr, *bad;	/* zero-length: only wr_id varies */
	int i;

	for (i = 0; i < c->nq; i++) {
		uint32_t qi = (uint32_t)((req->seq * (uint64_t)c->nq + (uint64_t)i) % (uint64_t)c->nqps);
		struct nv_comm_qp *q = &c->qps[qi];

		wr->wr_id = NV_WRID(NV_WR_RECV, 0, qi, req->idx);
		q->recv_outstanding++;
		if (nv_unlikely(nv_prof_cb != NULL))
			for (int k = 0; k < req->nreqs; k++)
				nv_prof_qp_start(req, req->phandle[k], q->dev, q->qp->qp_num,
						 IBV_WC_RECV_RDMA_WITH_IMM, (size_t)req->sizes[k],
						 wr->wr_id);
		if (nv_ibv_post_recv(q->qp, wr, &bad) != NV_OK) {
			nv_comm_fail(c, NV_ERR_SYSTEM, "posting a receive on QP 0x%x (from %s) "
				     "failed", q->qp->qp_num, c->peer);
			return c->error;
		}
	}
	req->pending = c->nq;
	/* The RECVs are posted before the CTS, so data never finds an empty queue. */
	return NV_OK;
}

/* Room for the next irecv: one CTS on its CTS QP, one RECV on each data QP. */
static inline int nv_recv_room(const struct nv_recv_comm *rc)
{
	const struct nv_comm *c = &rc->base;
	const struct nv_comm_qp *q = &c->qps[nv_qp_of(rc->head, c->nqps)];
	int i;

	if (q->outstanding + 1 > q->max_wr)
		return 0;
	if (nv_likely(c->nq == 1)) /* the data QP is the CTS QP */
		return q->recv_outstanding + 1 <= q->max_recv;
	for (i = 0; i < c->nq; i++) {
		q = &c->qps[(rc->head * (uint64_t)c->nq + (uint64_t)i) % (uint64_t)c->nqps];
		if (q->recv_outstanding + 1 > q->max_recv)
			return 0;
	}
	return 1;
}

/*
 * irecv of one buffer on a one-QP one-device comm: the same entry, RECV
 * and clear-to-send as the general path below, without its loops.
 * NCCL_VERBS_FAST_PATHS=0 (one_recvs 0) takes the general path for every
 * receive (test/reruns.mk).
 */
static inline nv_status_t nv_irecv_single(struct nv_recv_comm *rc, void *data, size_t size,
					  int tag, const struct nv_mhandle *mh, void *phandle,
					  void **request)
{
	struct nv_comm *c = &rc->base;
	uint32_t qi = nv_qp_of(rc->head, c->nqps);
	struct nv_comm_qp *q = &c->qps[qi];
	struct ibv_recv_wr *wr = &rc->recv_wr, *bad;
	struct nv_cts_entry *e;
	struct nv_request *req;
	nv_status_t st;

	if (!nv_recv_room(rc) && (nv_comm_progress(c) != NV_OK || !nv_recv_room(rc)))
		return c->error;
	req = nv_req_get(c, NV_REQ_RECV);
	if (!req)
		return nv_comm_idle_call(c);
	req->phandle[0] = phandle;
	req->seq = rc->head;
	req->mem_kind = (uint8_t)mh->kind;
	/* capacity above 4 GiB - 1 is told as UINT32_MAX (see the general path) */
	req->sizes[0] = size > UINT32_MAX ? UINT32_MAX : (uint32_t)size;
	e = &nv_recv_ctrl_of(c)->shadow[req->seq % NV_FIFO_SLOTS][0];
	e->addr = (uintptr_t)data;
	e->size = (uint64_t)req->sizes[0];
	e->rkey[0] = mh->rkey[0];
	e->tag = (uint32_t)tag;
	e->nreqs = 1;
	e->seq = req->seq + 1;
	wr->wr_id = NV_WRID(NV_WR_RECV, 0, qi, req->idx);
	q->recv_outstanding++;
	if (nv_unlikely(nv_prof_cb != NULL))
		nv_prof_qp_start(req, phandle, q->dev, q->qp->qp_num, IBV_WC_RECV_RDMA_WITH_IMM,
				 (size_t)req->sizes[0], wr->wr_id);
	if (nv_ibv_post_recv(q->qp, wr, &bad) != NV_OK) {
		nv_comm_fail(c, NV_ERR_SYSTEM, "posting a receive on QP 0x%x (from %s) failed",
			     q->qp->qp_num, c->peer);
		nv_req_put(c, req);
		return c->error;
	}
	req->pending = 1;
	st = nv_recv_post_cts_q(rc, q, qi, (uint32_t)(req->seq % NV_FIFO_SLOTS), e, 1);
	if (st != NV_OK) {
		nv_req_put(c, req);
		return st;
	}
	rc->head++;
	*request = req;
	return NV_OK;
}

nv_status_t nv_net_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
			 void **mhandles, void **phandles, void **request)
{
	struct nv_recv_comm *rc = recv_comm;
	struct nv_comm *c = &rc->base;
	struct nv_cts_entry *e;
	struct nv_request *req;
	nv_status_t st;
	int i, d;

	*request = NULL;
	/* misuse by the NCCL core (n outside 1..the maxRecvs we report): ncclInternalError */
	if (nv_unlikely(n < 1 || n > NV_MAX_RECVS)) {
		NV_WARN("irecv: %d grouped receives requested, maxRecvs is %d", n, NV_MAX_RECVS);
		return NV_ERR_INTERNAL;
	}
	st = nv_comm_check(c, "irecv");
	if (st != NV_OK)
		return st == NV_FO_BUSY ? NV_OK : st;
	if (rc->eager.max) { /* every entry its own sequence (comm.h) */
		if (nv_likely(n == rc->one_recvs && mhandles && mhandles[0] && nv_eager_room(rc, 1)))
			return nv_eager_irecv_one(rc, data[0], sizes[0], tags[0], mhandles[0],
						  phandles ? phandles[0] : NULL, request);
		return nv_eager_irecv(rc, n, data, sizes, tags, mhandles, phandles, request);
	}
	/* one registered buffer: the check below has nothing to refuse */
	if (nv_likely(n == rc->one_recvs && c->nq == 1 && c->ndevs == 1 && mhandles && mhandles[0]))
		return nv_irecv_single(rc, data[0], sizes[0], tags[0], mhandles[0],
				       phandles ? phandles[0] : NULL, request);
	for (i = 0; i < n; i++) {
		if (nv_unlikely(sizes[i] && (!mhandles || !mhandles[i]))) {
			NV_WARN("irecv from %s: buffer %d of %zu bytes has no registration", c->peer,
				i, sizes[i]);
			return NV_ERR_INVALID;
		}
	}
	if (!nv_recv_room(rc) && (nv_comm_progress(c) != NV_OK || !nv_recv_room(rc)))
		return c->error;
	req = nv_req_get(c, NV_REQ_RECV);
	if (!req)
		return nv_comm_idle_call(c);
	rc->gen_irecv++;
	if (nv_unlikely(nv_prof_cb != NULL))
		for (i = 0; i < n; i++)
			req->phandle[i] = phandles ? phandles[i] : NULL;
	req->seq = rc->head;
	req->nreqs = (uint8_t)n;
	req->mem_kind = (uint8_t)(mhandles && mhandles[0] ? ((struct nv_mhandle *)mhandles[0])->kind
							  : NV_MEM_HOST);
	e = nv_recv_ctrl_of(c)->shadow[req->seq % NV_FIFO_SLOTS];
	for (i = 0; i < n; i++) {
		const struct nv_mhandle *mh = mhandles ? mhandles[i] : NULL;

		/* no message is longer than maxP2pBytes (<= 4 GiB - 1): a larger
		 * buffer takes any of them, so its capacity is told as UINT32_MAX */
		req->sizes[i] = sizes[i] > UINT32_MAX ? UINT32_MAX : (uint32_t)sizes[i];
		e[i].addr = (uintptr_t)data[i];
		e[i].size = (uint64_t)req->sizes[i];
		/* rkey[d >= ndevs] stay 0 from the control region's creation */
		for (d = 0; d < c->ndevs; d++)
			e[i].rkey[d] = mh ? mh->rkey[d] : 0;
		e[i].tag = (uint32_t)tags[i];
		e[i].nreqs = (uint32_t)n;
		e[i].seq = req->seq + 1;
	}
	st = nv_recv_post(rc, req);
	if (st == NV_OK)
		st = nv_recv_post_cts(rc, req, n);
	if (st != NV_OK) {
		nv_req_put(c, req);
		return st;
	}
	rc->head++;
	*request = req;
	return NV_OK;
}

static nv_status_t nv_flush_room(struct nv_comm *c)
{
	uint64_t deadline = 0;
	int d;

	for (d = 0; d < c->ndevs; d++) {
		while (c->dev[d].flush_outstanding >= c->dev[d].flush_max ||
		       c->free_head < 0) {
			if (nv_comm_progress(c) != NV_OK)
				return c->error;
			if (!deadline)
				deadline = nv_now_ns() + (uint64_t)nv_connect_timeout_ms() * 1000000ull;
			if (nv_now_ns() > deadline) {
				nv_comm_fail(c, NV_ERR_SYSTEM, "GPU flush on %s: %d flushes or all "
					     "requests still outstanding after %d ms",
					     c->dev[d].hca->name, c->dev[d].flush_outstanding,
					     nv_connect_timeout_ms());
				return c->error;
			}
		}
	}
	return NV_OK;
}

nv_status_t nv_net_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
			  void **request)
{
	struct nv_recv_comm *rc = recv_comm;
	struct nv_comm *c = &rc->base;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct nv_request *req;
	const struct nv_mhandle *mh = NULL;
	nv_status_t st;
	int i, last = -1, d;

	*request = NULL;
	st = nv_comm_check(c, "iflush");
	if (st == NV_FO_BUSY) /* the flush QPs are not part of a failover round */
		st = NV_OK;
	if (st != NV_OK || !rc->gdr_flush)
		return st;
	for (i = 0; i < n; i++) {
		mh = mhandles[i];
		if (sizes[i] > 0 && mh && (mh->kind & (NV_MEM_CUDA | NV_MEM_DMABUF)))
			last = i;
	}
	if (last < 0)
		return NV_OK; /* nothing in GPU memory: no flush needed */
	mh = mhandles[last];
	if (nv_unlikely(!c->dev[c->ndevs - 1].flush_qp) && nv_comm_flush_qps(c) != NV_OK) {
		nv_comm_fail(c, NV_ERR_SYSTEM, "creating the GPU flush QP of the connection from %s "
			     "at its first flush failed (see above)", c->peer);
		return c->error;
	}
	/* A NULL request would mean "no flush needed", so wait for room instead (the
	 * loopback READs complete in microseconds; bounded by the connect timeout). */
	st = nv_flush_room(c);
	if (st != NV_OK)
		return st;
	req = nv_req_get(c, NV_REQ_FLUSH); /* nv_flush_room made sure there is one */
	req->mem_kind = (uint8_t)mh->kind;
	nv_req_stamp(req); /* its seq is whatever it last had: stamped here, not by test() */
	for (d = 0; d < c->ndevs; d++) {
		memset(&wr, 0, sizeof(wr));
		sge.addr = (uintptr_t)&nv_recv_ctrl_of(c)->flush_word;
		sge.length = 1;
		sge.lkey = c->dev[d].ctrl_mr->lkey;
		wr.wr_id = NV_WRID(NV_WR_FLUSH, 1, d, req->idx);
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_READ;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = (uintptr_t)data[last];
		wr.wr.rdma.rkey = mh->rkey[d];
		if (nv_ibv_post_send(c->dev[d].flush_qp, &wr, &bad) != NV_OK) {
			nv_comm_fail(c, NV_ERR_SYSTEM, "posting the GPU flush read on %s failed",
				     c->dev[d].hca->name);
			return c->error;
		}
		req->pending++;
		c->dev[d].flush_outstanding++;
	}
	*request = req;
	return NV_OK;
}

/* ---- for failover.c: the same steps, outside the fast path ------------------ */

nv_status_t nv_recv_repost(struct nv_recv_comm *rc, struct nv_request *req)
{
	return nv_recv_post(rc, req);
}
