/*
 * rma_ops.c - the RMA data path: puts (with or without a signal), gets,
 * flushes, completion handling and the sticky per-context errors.
 *
 * A request is one slot of its context's pool; every WR it posts carries the
 * slot index as wr_id, only its last WR is signalled (so an error on any of
 * them still names the request: errors always complete). A QP's WRs complete
 * in order, so when a request's signalled WR completes, its earlier WRs and
 * every earlier request on that QP are done too (`outstanding` counts WRs
 * per QP to keep the send queue within NV_RMA_QP_DEPTH).
 */
#include "config.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "device.h"
#include "ibv.h"
#include "rma.h"
#include "nccl/rma.h"

#define NV_RMA_MAX_WRS 64	/* WRs of one operation: data chunks + a signal */

static const char *nv_rma_op_str(int op)
{
	return op == IBV_WC_RDMA_WRITE ? "write" : op == IBV_WC_RDMA_READ ? "read" :
	       op == IBV_WC_FETCH_ADD ? "fetch-and-add" : "operation";
}

static nv_status_t nv_rma_cx_get(struct nv_rma_ctx *x, int cxi, uint32_t rank, const char *what,
				 struct nv_rma_cx **out)
{
	if (cxi < 0 || cxi >= x->ncx) {
		NV_WARN("RMA %s: context %d does not exist (nContexts %d)", what, cxi, x->ncx);
		return NV_ERR_INVALID;
	}
	if (rank >= (uint32_t)x->coll->nranks) {
		NV_WARN("RMA %s: rank %u does not exist (%d ranks)", what, rank, x->coll->nranks);
		return NV_ERR_INVALID;
	}
	*out = &x->cx[cxi];
	if (nv_unlikely((*out)->err != NV_OK)) {
		NV_WARN("RMA %s on context %d refused: it failed earlier (%s)", what, cxi,
			(*out)->why);
		return (*out)->err;
	}
	return NV_OK;
}

/* [off, off + len) inside rank r's part of window w? */
static nv_status_t nv_rma_bound(struct nv_rma_ctx *x, const struct nv_rma_win *w, uint32_t r,
				uint64_t off, uint64_t len, const char *what, const char *which)
{
	if (nv_unlikely(!w || w->coll != x->coll)) {
		NV_WARN("RMA %s: the %s window handle %p is not a window of this collective", what,
			which, (const void *)w);
		return NV_ERR_INVALID;
	}
	if (nv_unlikely(off > w->size[r] || len > w->size[r] - off)) {
		NV_WARN("RMA %s: %s range [%llu, +%llu) outside rank %u's window of %llu bytes", what,
			which, (unsigned long long)off, (unsigned long long)len, r,
			(unsigned long long)w->size[r]);
		return NV_ERR_INVALID;
	}
	return NV_OK;
}

/* A free slot of context cxi, or NULL (pool full). */
static struct nv_rma_req *nv_rma_slot(struct nv_rma_ctx *x, int cxi, struct nv_rma_cx *cx)
{
	for (uint32_t i = 0; i < NV_RMA_POOL; i++) {
		uint32_t s = (cx->next_slot + i) % NV_RMA_POOL;
		struct nv_rma_req *r = &x->pool[(size_t)cxi * NV_RMA_POOL + s];

		if (!r->in_use) {
			cx->next_slot = s + 1;
			memset(&r->qp_rank, 0, sizeof(*r) - offsetof(struct nv_rma_req, qp_rank));
			r->ctx = x;
			r->in_use = 1;
			return r;
		}
	}
	return NULL;
}

static void nv_rma_wr(struct ibv_send_wr *wr, struct ibv_sge *sg, enum ibv_wr_opcode op,
		      uint64_t laddr, uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
	memset(wr, 0, sizeof(*wr));
	sg->addr = laddr;
	sg->length = len;
	sg->lkey = lkey;
	wr->sg_list = sg;
	wr->num_sge = 1;
	wr->opcode = op;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr->wr.atomic.remote_addr = raddr;
		wr->wr.atomic.rkey = rkey;
	} else {
		wr->wr.rdma.remote_addr = raddr;
		wr->wr.rdma.rkey = rkey;
	}
}

/* Appends data WRs for size bytes, each at most the device's message size. */
static int nv_rma_chunks(struct nv_rma_ctx *x, struct ibv_send_wr *wr, struct ibv_sge *sg, int n,
			 enum ibv_wr_opcode op, uint64_t laddr, uint32_t lkey, uint64_t raddr,
			 uint32_t rkey, uint64_t size)
{
	uint64_t max = x->coll->dev->max_msg_sz ? x->coll->dev->max_msg_sz : (1u << 30);

	for (uint64_t done = 0; done < size && n < NV_RMA_MAX_WRS; n++) {
		uint64_t c = size - done < max ? size - done : max;

		nv_rma_wr(&wr[n], &sg[n], op, laddr + done, (uint32_t)c, lkey, raddr + done, rkey);
		done += c;
		if (done < size && n + 1 == NV_RMA_MAX_WRS)
			return -1;
	}
	return n;
}

/* Posts wr[0..n) on the context's QP to rank as request slot r (the last signalled). */
static nv_status_t nv_rma_post(struct nv_rma_ctx *x, struct nv_rma_cx *cx, uint32_t rank,
			       struct nv_rma_req *r, struct ibv_send_wr *wr, int n)
{
	struct ibv_send_wr *bad = NULL;
	uint64_t id = (uint64_t)(r - x->pool);
	nv_status_t st;

	for (int i = 0; i < n; i++) {
		wr[i].wr_id = id;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	wr[n - 1].send_flags = IBV_SEND_SIGNALED;
	r->qp_rank = rank;
	r->nwr = (uint16_t)n;
	st = nv_ibv_post_send(cx->qps[rank], wr, &bad);
	if (st != NV_OK) {
		r->in_use = 0;
		cx->err = st;
		snprintf(cx->why, sizeof(cx->why), "posting to rank %u failed", rank);
		return st;
	}
	cx->outstanding[rank] += (uint32_t)n;
	return NV_OK;
}

/* A request with nothing to post: done at once. */
static void *nv_rma_done_now(struct nv_rma_req *r)
{
	r->done = 1;
	return r;
}

nv_status_t nv_rma_put(struct nv_rma_ctx *x, int cxi, uint64_t src_off, struct nv_rma_win *src,
		       size_t size, uint64_t dst_off, struct nv_rma_win *dst, uint32_t rank,
		       uint64_t sig_off, struct nv_rma_win *sig, uint64_t sig_value, uint32_t sig_op,
		       void **req)
{
	const char *what = sig_op ? "iputSignal" : "iput";
	struct ibv_send_wr wr[NV_RMA_MAX_WRS];
	struct ibv_sge sg[NV_RMA_MAX_WRS];
	int me = x->coll->rank, n = 0;
	struct nv_rma_cx *cx;
	struct nv_rma_req *r;
	nv_status_t st;

	*req = NULL;
	if ((st = nv_rma_cx_get(x, cxi, rank, what, &cx)) != NV_OK)
		return st;
	if (size && ((st = nv_rma_bound(x, src, (uint32_t)me, src_off, size, what, "source")) != NV_OK ||
		     (st = nv_rma_bound(x, dst, rank, dst_off, size, what, "destination")) != NV_OK))
		return st;
	if (sig_op) {
		if (sig_op != NCCL_NET_SIGNAL_OP_INC && sig_op != NCCL_NET_SIGNAL_OP_ADD) {
			NV_WARN("RMA iputSignal: signal operation %u unknown (INC %d, ADD %d)", sig_op,
				NCCL_NET_SIGNAL_OP_INC, NCCL_NET_SIGNAL_OP_ADD);
			return NV_ERR_INVALID;
		}
		if ((st = nv_rma_bound(x, sig, rank, sig_off, 8, what, "signal")) != NV_OK)
			return st;
		if ((sig->base[rank] + sig_off) & 7) {
			NV_WARN("RMA iputSignal: signal at rank %u's address 0x%llx (offset %llu) is "
				"not 8-byte aligned", rank,
				(unsigned long long)(sig->base[rank] + sig_off),
				(unsigned long long)sig_off);
			return NV_ERR_INVALID;
		}
	}
	if (cx->outstanding[rank] + NV_RMA_MAX_WRS > NV_RMA_QP_DEPTH || !(r = nv_rma_slot(x, cxi, cx)))
		return NV_OK; /* full: NCCL calls again */
	if (size)
		n = nv_rma_chunks(x, wr, sg, 0, IBV_WR_RDMA_WRITE, src->base[me] + src_off,
				  src->mr->lkey, dst->base[rank] + dst_off, dst->rkey[rank], size);
	if (n < 0 || (sig_op && n == NV_RMA_MAX_WRS)) {
		r->in_use = 0;
		NV_WARN("RMA %s: %zu bytes need more than %d writes of at most %u bytes", what, size,
			NV_RMA_MAX_WRS - 1, x->coll->dev->max_msg_sz);
		return NV_ERR_INVALID;
	}
	if (sig_op) {
		size_t slot = (size_t)(r - x->pool);

		nv_rma_wr(&wr[n], &sg[n], IBV_WR_ATOMIC_FETCH_AND_ADD, (uintptr_t)&x->scratch[slot],
			  8, x->scratch_mr->lkey, sig->base[rank] + sig_off, sig->rkey[rank]);
		wr[n].wr.atomic.compare_add = sig_op == NCCL_NET_SIGNAL_OP_INC ? 1 : sig_value;
		n++;
	}
	if (!n) {
		*req = nv_rma_done_now(r);
		return NV_OK;
	}
	st = nv_rma_post(x, cx, rank, r, wr, n);
	if (st == NV_OK)
		*req = r;
	return st;
}

nv_status_t nv_rma_get(struct nv_rma_ctx *x, int cxi, uint64_t remote_off, struct nv_rma_win *remote,
		       size_t size, uint64_t local_off, struct nv_rma_win *local, uint32_t rank,
		       void **req)
{
	struct ibv_send_wr wr[NV_RMA_MAX_WRS];
	struct ibv_sge sg[NV_RMA_MAX_WRS];
	int me = x->coll->rank, n;
	struct nv_rma_cx *cx;
	struct nv_rma_req *r;
	nv_status_t st;

	*req = NULL;
	if ((st = nv_rma_cx_get(x, cxi, rank, "iget", &cx)) != NV_OK)
		return st;
	if (size && ((st = nv_rma_bound(x, remote, rank, remote_off, size, "iget", "remote")) != NV_OK ||
		     (st = nv_rma_bound(x, local, (uint32_t)me, local_off, size, "iget", "local")) != NV_OK))
		return st;
	if (cx->outstanding[rank] + NV_RMA_MAX_WRS > NV_RMA_QP_DEPTH || !(r = nv_rma_slot(x, cxi, cx)))
		return NV_OK;
	if (!size) {
		*req = nv_rma_done_now(r);
		return NV_OK;
	}
	n = nv_rma_chunks(x, wr, sg, 0, IBV_WR_RDMA_READ, local->base[me] + local_off,
			  local->mr->lkey, remote->base[rank] + remote_off, remote->rkey[rank], size);
	if (n < 0) {
		r->in_use = 0;
		NV_WARN("RMA iget: %zu bytes need more than %d reads", size, NV_RMA_MAX_WRS);
		return NV_ERR_INVALID;
	}
	st = nv_rma_post(x, cx, rank, r, wr, n);
	if (st == NV_OK)
		*req = r;
	return st;
}

/*
 * A read of the first bytes of rank's window on the context's QP to rank: it
 * completes after every earlier write on that QP has completed at rank, so
 * the puts before it are in rank's memory (and, read through the HCA, past
 * any PCIe write buffering of a GPU window).
 */
nv_status_t nv_rma_flush(struct nv_rma_ctx *x, int cxi, struct nv_rma_win *w, uint32_t rank,
			 void **req)
{
	struct ibv_send_wr wr;
	struct ibv_sge sg;
	struct nv_rma_cx *cx;
	struct nv_rma_req *r;
	nv_status_t st;
	size_t slot;

	*req = NULL;
	if ((st = nv_rma_cx_get(x, cxi, rank, "iflush", &cx)) != NV_OK ||
	    (st = nv_rma_bound(x, w, rank, 0, 0, "iflush", "flushed")) != NV_OK)
		return st;
	if (cx->outstanding[rank] + 1 > NV_RMA_QP_DEPTH || !(r = nv_rma_slot(x, cxi, cx)))
		return NV_OK;
	if (!w->size[rank]) {
		*req = nv_rma_done_now(r);
		return NV_OK;
	}
	slot = (size_t)(r - x->pool);
	nv_rma_wr(&wr, &sg, IBV_WR_RDMA_READ, (uintptr_t)&x->scratch[slot],
		  w->size[rank] < 8 ? (uint32_t)w->size[rank] : 8, x->scratch_mr->lkey,
		  w->base[rank], w->rkey[rank]);
	st = nv_rma_post(x, cx, rank, r, &wr, 1);
	if (st == NV_OK)
		*req = r;
	return st;
}

/* One completion: its request done (or failed, and the context with it). */
static void nv_rma_complete(struct nv_rma_ctx *x, struct nv_rma_cx *cx, const struct ibv_wc *wc)
{
	struct nv_rma_req *r;

	if (wc->wr_id >= (uint64_t)x->ncx * NV_RMA_POOL)
		return;
	r = &x->pool[wc->wr_id];
	if (wc->status == IBV_WC_SUCCESS) {
		cx->outstanding[r->qp_rank] -= r->nwr;
		r->done = 1;
		return;
	}
	r->done = 1;
	r->status = NV_ERR_REMOTE;
	if (cx->err == NV_OK) {
		cx->err = NV_ERR_REMOTE;
		snprintf(cx->why, sizeof(cx->why), "%s to rank %u completed with %s (status %d, "
			 "vendor error 0x%x, QP 0x%x)", nv_rma_op_str(wc->opcode), r->qp_rank,
			 nv_ibv_wc_status_str(wc->status), wc->status, wc->vendor_err, wc->qp_num);
		NV_WARN("RMA: context %d of rank %d: %s; the context is failed from now on",
			(int)(cx - x->cx), x->coll->rank, cx->why);
	}
}

static nv_status_t nv_rma_poll(struct nv_rma_ctx *x, struct nv_rma_cx *cx)
{
	struct ibv_wc wc[16];
	int n;
	nv_status_t st = nv_ibv_poll_cq(cx->cq, 16, wc, &n);

	if (st != NV_OK)
		return st;
	for (int i = 0; i < n; i++)
		nv_rma_complete(x, cx, &wc[i]);
	return NV_OK;
}

nv_status_t nv_rma_test(void *req, int *done)
{
	struct nv_rma_req *r = req;
	nv_status_t st;

	*done = 0;
	if (!r || !r->in_use) {
		NV_WARN("RMA test: request %p is not in use", req);
		return NV_ERR_INTERNAL;
	}
	if (!r->done) {
		struct nv_rma_ctx *x = r->ctx;

		st = nv_rma_poll(x, &x->cx[(r - x->pool) / NV_RMA_POOL]);
		if (st != NV_OK)
			return st;
	}
	if (!r->done)
		return NV_OK;
	*done = 1;
	st = r->status;
	r->in_use = 0;
	return st;
}

nv_status_t nv_rma_progress(struct nv_rma_ctx *x)
{
	nv_status_t st = NV_OK;

	for (int i = 0; i < x->ncx && st == NV_OK; i++)
		st = nv_rma_poll(x, &x->cx[i]);
	return st;
}

bool nv_rma_has_error(struct nv_rma_ctx *x)
{
	int dead;

	(void)nv_rma_progress(x);
	dead = nv_rma_ring_dead(x->coll);
	for (int i = 0; dead >= 0 && i < x->ncx; i++) {
		if (x->cx[i].err != NV_OK)
			continue;
		x->cx[i].err = NV_ERR_REMOTE;
		snprintf(x->cx[i].why, sizeof(x->cx[i].why),
			 "rank %d closed its connection to rank %d (exited or killed)", dead,
			 x->coll->rank);
		NV_WARN("RMA: context %d: %s", i, x->cx[i].why);
	}
	for (int i = 0; i < x->ncx; i++)
		if (x->cx[i].err != NV_OK)
			return true;
	return false;
}
