/*
 * p2p.c - the data path: irecv / test / iflush, CQ polling and completion
 * dispatch, the liveness check (isend: p2p_send.c; protocol in comm.h).
 *
 * Rules kept here: no allocation, no lock and no system call per operation
 * (the peer's liveness is checked by the HCA's event thread; only without
 * one, a rate-limited socket check runs here while a caller is waiting
 * without progress); send queues never overflow because every
 * post first checks the QP's outstanding-WR count, and every chain ends
 * with a signalled WR that retires the count; errors are sticky.
 */
#include "config.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "failover.h"
#include "ibv.h"
#include "mr.h"
#include "nv_api.h"
#include "p2p.h"
#include "param.h"
#include "prof.h"

/*
 * The slow path of nv_comm_check: the health word is non-zero. Turns a fatal
 * async event (on one of the comm's QPs/CQs, or device-wide on one of its
 * HCAs) into the sticky error, or repeats the sticky error.
 */
__attribute__((noinline, cold)) nv_status_t nv_comm_check_slow(struct nv_comm *c, const char *fn)
{
	int dev_wide = atomic_load_explicit(&c->sink.fatal, memory_order_acquire) & NV_SINK_DEVICE;
	char id[256];
	int d;

	if (c->fo && c->error == NV_OK)
		return nv_fo_check(c); /* failover.c: NV_OK, NV_FO_BUSY or the sticky error */
	if (c->error == NV_OK) {
		if (!dev_wide && nv_async_sink_failed(&c->sink))
			nv_comm_fail(c, NV_ERR_SYSTEM, "connection %s: fatal asynchronous event: %s; "
				     "hint: the QP or CQ was moved to error by the device, see the "
				     "event text", nv_comm_ident(c, id, sizeof(id)), c->sink.what);
		for (d = 0; d < c->ndevs && c->error == NV_OK; d++)
			if (nv_unlikely(nv_hca_failed(c->dev[d].hca)))
				nv_comm_fail(c, NV_ERR_SYSTEM,
					     "connection %s: device %s failed: %s; hint: check the "
					     "port and driver state (ibv_devinfo, dmesg)",
					     nv_comm_ident(c, id, sizeof(id)), c->dev[d].hca->name,
					     c->dev[d].hca->sink.what);
		return c->error;
	}
	NV_WARN("%s on the failed connection to %s: %s", fn, c->peer, c->why);
	return c->error;
}

/* ---- completions ------------------------------------------------------- */

/* always_inline here and below: the cold error path has its own copy (nv_comm_progress_errors) */
static inline __attribute__((always_inline)) void nv_send_done(struct nv_send_comm *s,
							       const struct ibv_wc *wc)
{
	struct nv_comm *c = &s->base;
	struct nv_send_slot *sl = &s->slots[NV_WRID_IDX(wc->wr_id) % NV_FIFO_SLOTS];
	int r;

	c->qps[NV_WRID_QP(wc->wr_id)].outstanding -= (int)NV_WRID_NWR(wc->wr_id);
	if (--sl->pending > 0)
		return;
	if (nv_likely(sl->nreqs == 1))
		c->reqs[sl->req[0]].done = 1;
	else
		for (r = 0; r < sl->nreqs; r++)
			c->reqs[sl->req[r]].done = 1;
}

/*
 * The last completion of a grouped receive: the sizes the sender recorded,
 * checked against what was posted. Out of line: the one-buffer receive, the
 * common case, keeps nv_comm_progress's loop small.
 */
static __attribute__((noinline)) nv_status_t nv_recv_done_grouped(struct nv_comm *c,
								  struct nv_request *r)
{
	const uint32_t *rec = ((const struct nv_recv_ctrl *)c->ctrl)->records[r->seq % NV_FIFO_SLOTS];
	char why[128], id[256];
	int i;

	if (nv_records_check(rec, r->sizes, r->nreqs, why, sizeof(why))) {
		nv_comm_fail(c, NV_ERR_REMOTE, "connection %s: the peer's sizes: %s (protocol "
			     "violation)", nv_comm_ident(c, id, sizeof(id)), why);
		return c->error;
	}
	for (i = 0; i < r->nreqs; i++)
		r->sizes[i] = rec[i];
	r->done = 1;
	return NV_OK;
}

/* A RECV taken by something other than our peer's WRITE_WITH_IMM (a SEND, say). */
static __attribute__((noinline, cold)) nv_status_t nv_recv_no_imm(struct nv_comm *c)
{
	char id[256];

	nv_comm_fail(c, NV_ERR_REMOTE, "connection %s: the peer wrote data without an immediate "
		     "(protocol violation)", nv_comm_ident(c, id, sizeof(id)));
	return c->error;
}

__attribute__((noinline, cold)) nv_status_t nv_recv_too_big(struct nv_comm *c, uint32_t n,
							     uint32_t size)
{
	char id[256];

	nv_comm_fail(c, NV_ERR_REMOTE, "connection %s: the peer sent %u bytes into a %u-byte "
		     "receive (protocol violation)", nv_comm_ident(c, id, sizeof(id)), n, size);
	return c->error;
}

/* NV_OK, or the sticky error when the completion breaks the protocol. */
static inline __attribute__((always_inline)) nv_status_t nv_recv_done(struct nv_recv_comm *rc,
								      const struct ibv_wc *wc)
{
	struct nv_comm *c = &rc->base;
	struct nv_request *r;

	if (nv_unlikely(rc->eager.max)) /* matched by order there, not by wr_id */
		return nv_eager_recv_cqe(rc, wc);
	r = &c->reqs[NV_WRID_IDX(wc->wr_id) % (uint32_t)c->nreq];
	c->qps[nv_qp_of(NV_WRID_QP(wc->wr_id), c->nqps)].recv_outstanding--;

	if (r->nreqs == 1 && (wc->wc_flags & IBV_WC_WITH_IMM)) {
		uint32_t n = ntohl(wc->imm_data);

		if (n > r->sizes[0])
			return nv_recv_too_big(c, n, r->sizes[0]);
		r->sizes[0] = n;
	} else if (nv_unlikely(!(wc->wc_flags & IBV_WC_WITH_IMM))) {
		return nv_recv_no_imm(c); /* every message of ours ends in a WRITE_WITH_IMM */
	}
	if (--r->pending > 0)
		return NV_OK;
	if (r->nreqs > 1)
		return nv_recv_done_grouped(c, r);
	r->done = 1;
	return NV_OK;
}

/*
 * Handles one successful completion; NV_OK, or the sticky error when it
 * breaks the protocol. The two kinds every message completes (DATA on a send
 * comm, RECV on a receive comm) are tested first.
 */
static inline __attribute__((always_inline)) nv_status_t nv_wc_dispatch(struct nv_comm *c,
									 const struct ibv_wc *wc)
{
	unsigned kind = NV_WRID_KIND(wc->wr_id);

	if (nv_likely(kind == NV_WR_RECV))
		return nv_recv_done((struct nv_recv_comm *)c, wc);
	if (nv_likely(kind == NV_WR_DATA)) {
		nv_send_done((struct nv_send_comm *)c, wc);
		return NV_OK;
	}
	switch (kind) {
	case NV_WR_CTS:
		c->qps[NV_WRID_QP(wc->wr_id)].outstanding -= (int)NV_WRID_NWR(wc->wr_id);
		break;
	case NV_WR_FLUSH: {
		struct nv_request *r = &c->reqs[NV_WRID_IDX(wc->wr_id) % (uint32_t)c->nreq];

		c->dev[NV_WRID_QP(wc->wr_id) % (unsigned)c->ndevs].flush_outstanding--;

		if (--r->pending == 0)
			r->done = 1;
		break;
	}
	case NV_WR_EAGER: {
		struct nv_request *r = &c->reqs[NV_WRID_IDX(wc->wr_id) % (uint32_t)c->nreq];

		c->qps[NV_WRID_QP(wc->wr_id) % (unsigned)c->nqps].outstanding -=
			(int)NV_WRID_NWR(wc->wr_id);
		r->done = 1;
		break;
	}
	case NV_WR_ECOPY:
		return nv_eager_copy_done((struct nv_recv_comm *)c, wc);
	default: /* late probe completion: nothing to do */
		break;
	}
	return NV_OK;
}

static __attribute__((noinline, cold)) nv_status_t nv_comm_poll_failed(struct nv_comm *c, int d)
{
	nv_comm_fail(c, NV_ERR_SYSTEM, "polling the CQ of %s (connection to %s) failed",
		     c->dev[d].hca->name, c->peer);
	return c->error;
}

/*
 * nv_comm_progress met an error completion on device d's CQ, wc[0] of the
 * n it has not handled yet. Without failover it is the sticky error. With failover
 * (failover.c takes transport errors) the rest of the batch and then every
 * CQ are polled here as nv_comm_progress does, so its loop stays as it was.
 */
/* noinline but not cold: `cold` here changes nv_comm_progress's register allocation
 * (+7 instructions per message in scripts/cpu-cost.sh loopback). */
static __attribute__((noinline)) nv_status_t
nv_comm_progress_errors(struct nv_comm *c, int d, struct ibv_wc *wc, int n)
{
	struct ibv_wc more[NV_CQ_POLL_BATCH];
	int k;

	for (;;) {
		for (k = 0; k < n; k++) {
			if (wc[k].status == IBV_WC_SUCCESS) {
				if (nv_wc_dispatch(c, &wc[k]) != NV_OK)
					return c->error;
			} else if (!c->fo || !nv_fo_wc_error(c, d, &wc[k])) {
				nv_comm_wc_error(c, d, &wc[k]);
				return c->error;
			}
		}
		/* then this CQ and the next ones until they are empty, as nv_comm_progress */
		if (wc == more && n < NV_CQ_POLL_BATCH && ++d >= c->ndevs)
			return NV_OK;
		wc = more;
		if (nv_ibv_poll_cq(c->dev[d].cq, NV_CQ_POLL_BATCH, wc, &n) != NV_OK)
			return nv_comm_poll_failed(c, d);
	}
}

/* Polls every CQ of the comm in batches until they are empty. */
nv_status_t nv_comm_progress(struct nv_comm *c)
{
	struct ibv_wc wc[NV_CQ_POLL_BATCH];
	int d = 0, k, n;

	do {
		do {
			if (nv_ibv_poll_cq(c->dev[d].cq, NV_CQ_POLL_BATCH, wc, &n) != NV_OK)
				return nv_comm_poll_failed(c, d);
			for (k = 0; k < n; k++) {
				if (nv_unlikely(wc[k].status != IBV_WC_SUCCESS))
					return nv_comm_progress_errors(c, d, &wc[k], n - k);
				if (nv_unlikely(nv_wc_dispatch(c, &wc[k]) != NV_OK))
					return c->error;
			}
		} while (n == NV_CQ_POLL_BATCH);
	} while (++d < c->ndevs);
	return NV_OK;
}

/*
 * The peer's handshake socket reads EOF or failed: an error, unless the
 * request waited for completed in the meantime (the peer may have finished
 * and closed after its last completion reached us).
 */
__attribute__((noinline, cold)) nv_status_t nv_comm_peer_closed(struct nv_comm *c,
							       const struct nv_request *waiting)
{
	char id[256];

	if (nv_comm_progress(c) != NV_OK || (waiting && waiting->done))
		return c->error;
	nv_comm_fail(c, NV_ERR_REMOTE, "connection %s: the peer closed its side (its process "
		     "exited or was killed, or it closed the comm) while we were waiting for it; "
		     "hint: look for the first error on that peer", nv_comm_ident(c, id, sizeof(id)));
	return c->error;
}

/*
 * Without an event thread watching the comm: at most every NV_LIVENESS_NS,
 * check the handshake socket, so a dead peer turns into an error instead of
 * a hang even when nothing is in flight on the wire.
 */
__attribute__((noinline)) nv_status_t nv_comm_liveness(struct nv_comm *c,
						 const struct nv_request *waiting)
{
	uint64_t now;

	if (++c->idle_polls < c->live_stride)
		return NV_OK; /* a busy poller reads the clock only every few polls */
	c->idle_polls = 0;
	now = nv_now_ns();
	c->live_stride = nv_liveness_stride(c->live_stride, now - c->last_clock_ns);
	c->last_clock_ns = now;
	if (now - c->last_alive_ns < NV_LIVENESS_NS)
		return NV_OK;
	c->last_alive_ns = now;
	if (c->fo && nv_fo_peer_spoke(c))
		return NV_OK; /* a failover round starts at the next call */
	if (nv_sock_alive(c->fd))
		return NV_OK;
	return nv_comm_peer_closed(c, waiting);
}

/* isend's and irecv's waits: out of line, so their fast paths keep their registers. */
__attribute__((noinline)) nv_status_t nv_comm_idle_call(struct nv_comm *c)
{
	return nv_comm_idle(c, NULL);
}

/* ---- receive --------------------------------------------------------------- */

static nv_status_t nv_recv_post_cts(struct nv_recv_comm *rc, struct nv_request *req, int n)
{
	uint32_t qi = (uint32_t)(req->seq % (uint64_t)rc->base.nqps);

	uint32_t slot = (uint32_t)(req->seq % NV_FIFO_SLOTS);

	return nv_recv_post_cts_q(rc, &rc->base.qps[qi], qi, slot,
				  ((struct nv_recv_ctrl *)rc->base.ctrl)->shadow[slot], n);
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
	e = &((struct nv_recv_ctrl *)c->ctrl)->shadow[req->seq % NV_FIFO_SLOTS][0];
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
		if (nv_likely(n == 1 && mhandles && mhandles[0] && nv_eager_room(rc, 1)))
			return nv_eager_irecv_one(rc, data[0], sizes[0], tags[0], mhandles[0],
						  phandles ? phandles[0] : NULL, request);
		return nv_eager_irecv(rc, n, data, sizes, tags, mhandles, phandles, request);
	}
	/* one registered buffer: the check below has nothing to refuse */
	if (nv_likely(n == 1 && c->nq == 1 && c->ndevs == 1 && mhandles && mhandles[0]))
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
	if (nv_unlikely(nv_prof_cb != NULL))
		for (i = 0; i < n; i++)
			req->phandle[i] = phandles ? phandles[i] : NULL;
	req->seq = rc->head;
	req->nreqs = (uint8_t)n;
	req->mem_kind = (uint8_t)(mhandles && mhandles[0] ? ((struct nv_mhandle *)mhandles[0])->kind
							  : NV_MEM_HOST);
	e = ((struct nv_recv_ctrl *)c->ctrl)->shadow[req->seq % NV_FIFO_SLOTS];
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
	/* A NULL request would mean "no flush needed", so wait for room instead (the
	 * loopback READs complete in microseconds; bounded by the connect timeout). */
	st = nv_flush_room(c);
	if (st != NV_OK)
		return st;
	req = nv_req_get(c, NV_REQ_FLUSH); /* nv_flush_room made sure there is one */
	req->mem_kind = (uint8_t)mh->kind;
	for (d = 0; d < c->ndevs; d++) {
		memset(&wr, 0, sizeof(wr));
		sge.addr = (uintptr_t)&((struct nv_recv_ctrl *)c->ctrl)->flush_word;
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

/* ---- test --------------------------------------------------------------------- */

static __attribute__((noinline, cold)) nv_status_t nv_test_bad_request(void *request)
{
	NV_WARN("test: %p is not an outstanding request", request);
	return NV_ERR_INTERNAL;
}

nv_status_t nv_net_test(void *request, int *done, int *sizes)
{
	struct nv_request *r = request;
	struct nv_comm *c;
	nv_status_t st;
	int i;

	*done = 0;
	if (nv_unlikely(!r || r->type == NV_REQ_FREE))
		return nv_test_bad_request(request);
	c = r->comm;
	st = nv_comm_check(c, "test");
	if (st != NV_OK)
		return st == NV_FO_BUSY ? NV_OK : st; /* not done yet */
	if (!r->done) {
		st = nv_comm_progress(c);
		if (st != NV_OK)
			return st;
		if (r->type == NV_REQ_RECV && ((struct nv_recv_comm *)c)->eager.max && !r->done &&
		    (st = nv_eager_test_poll((struct nv_recv_comm *)c, r)) != NV_OK)
			return st;
		if (!r->done) {
			st = nv_comm_idle(c, r);
			if (st != NV_OK || !r->done)
				return st;
		}
	}
	*done = 1;
	c->live_stride = 1; /* progress: the next wait starts reading the clock at once */
	/* test's sizes are int in every ABI version: exact up to INT_MAX, then INT_MAX */
	if (sizes) {
		if (r->type == NV_REQ_SEND)
			sizes[0] = r->size > INT_MAX ? INT_MAX : (int)r->size;
		else if (r->type == NV_REQ_RECV && nv_likely(r->nreqs == 1))
			sizes[0] = r->sizes[0] > INT_MAX ? INT_MAX : (int)r->sizes[0];
		else if (r->type == NV_REQ_RECV)
			for (i = 0; i < r->nreqs; i++)
				sizes[i] = r->sizes[i] > INT_MAX ? INT_MAX : (int)r->sizes[i];
	}
	nv_req_put(c, r);
	return NV_OK;
}

/* ---- for failover.c: the same steps, outside the fast path ------------------ */

nv_status_t nv_p2p_progress(struct nv_comm *c)
{
	return nv_comm_progress(c);
}

nv_status_t nv_p2p_recv_repost(struct nv_recv_comm *rc, struct nv_request *req)
{
	return nv_recv_post(rc, req);
}
