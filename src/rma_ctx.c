/*
 * rma_ctx.c - RMA contexts: per context index a CQ and one RC QP per rank
 * (this rank's own QP is connected to itself), their QP numbers exchanged by
 * one allgather, then every QP taken through INIT, RTR and RTS. A device
 * without RDMA atomics is refused here: signals are fetch-and-adds, and an
 * emulation (read, add, write back) would lose concurrent signals from
 * different ranks onto one word.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "ibv.h"
#include "param.h"
#include "rma.h"

/* What each rank publishes at createContext, followed by its QP numbers
 * qpn[cx * nranks + peer]. */
struct nv_rma_qp_hdr {
	uint8_t gid[16];
	uint16_t lid;
	uint8_t mtu;
	uint8_t link_layer;
	uint32_t pad;
};

static int nv_rma_rd_atom(const struct nv_rma_coll *c)
{
	int n = c->hca->attr.max_qp_rd_atom;

	return n < 1 ? 1 : n > 16 ? 16 : n;
}

static nv_status_t nv_rma_qp_create(struct nv_rma_ctx *x, struct nv_rma_cx *cx, int peer)
{
	struct nv_rma_coll *c = x->coll;
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	nv_status_t st;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cx->cq;
	ia.recv_cq = cx->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = NV_RMA_QP_DEPTH;
	ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	st = nv_ibv_create_qp(c->pd, &ia, &cx->qps[peer]);
	if (st != NV_OK)
		return st;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = c->dev->port;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	return nv_ibv_modify_qp(cx->qps[peer], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
							   IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static nv_status_t nv_rma_qp_connect(struct nv_rma_ctx *x, struct ibv_qp *qp, int peer,
				     const struct nv_rma_qp_hdr *r, uint32_t rqpn, int gid_index)
{
	struct nv_rma_coll *c = x->coll;
	struct ibv_qp_attr a;
	nv_status_t st;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = c->dev->active_mtu < (enum ibv_mtu)r->mtu ? c->dev->active_mtu
								: (enum ibv_mtu)r->mtu;
	a.dest_qp_num = rqpn;
	a.max_dest_rd_atomic = (uint8_t)nv_rma_rd_atom(c);
	a.min_rnr_timer = 12;
	a.ah_attr.port_num = c->dev->port;
	a.ah_attr.sl = (uint8_t)nv_param_int(NV_PARAM_IB_SL);
	a.ah_attr.dlid = r->lid;
	if (c->dev->link_layer == IBV_LINK_LAYER_ETHERNET || c->dev->grh_required) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, r->gid, 16);
		a.ah_attr.grh.sgid_index = (uint8_t)(gid_index < 0 ? 0 : gid_index);
		a.ah_attr.grh.hop_limit = 255;
		a.ah_attr.grh.traffic_class = (uint8_t)(x->traffic_class >= 0 ?
			x->traffic_class : nv_param_int(NV_PARAM_IB_TC));
	}
	st = nv_ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				      IBV_QP_MIN_RNR_TIMER);
	if (st != NV_OK) {
		NV_WARN("RMA: RTR of QP 0x%x on %s:%u towards rank %d (QPN 0x%x) failed",
			qp->qp_num, c->hca->name, c->dev->port, peer, rqpn);
		return st;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = (uint8_t)nv_param_int(NV_PARAM_IB_TIMEOUT);
	a.retry_cnt = (uint8_t)nv_param_int(NV_PARAM_IB_RETRY_CNT);
	a.rnr_retry = 7;
	a.max_rd_atomic = (uint8_t)nv_rma_rd_atom(c);
	return nv_ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* Creates every context's CQ and QPs (INIT), allocations included. */
static nv_status_t nv_rma_ctx_alloc(struct nv_rma_ctx *x)
{
	struct nv_rma_coll *c = x->coll;
	size_t nslots = (size_t)x->ncx * NV_RMA_POOL;
	nv_status_t st;

	x->cx = calloc((size_t)x->ncx, sizeof(*x->cx));
	x->pool = calloc(nslots, sizeof(*x->pool));
	x->scratch = aligned_alloc(4096, NV_ALIGN_UP(nslots * sizeof(uint64_t), (size_t)4096));
	if (!x->cx || !x->pool || !x->scratch) {
		NV_WARN("RMA createContext: out of memory (%d contexts, %d ranks)", x->ncx,
			c->nranks);
		return NV_ERR_SYSTEM;
	}
	memset(x->scratch, 0, nslots * sizeof(uint64_t));
	st = nv_ibv_reg_mr(c->pd, x->scratch, nslots * sizeof(uint64_t), IBV_ACCESS_LOCAL_WRITE,
			   "RMA scratch", &x->scratch_mr);
	for (int i = 0; i < x->ncx && st == NV_OK; i++) {
		struct nv_rma_cx *cx = &x->cx[i];
		int cqe = c->nranks * NV_RMA_QP_DEPTH;

		if (cqe > c->hca->attr.max_cqe)
			cqe = c->hca->attr.max_cqe;
		cx->qps = calloc((size_t)c->nranks, sizeof(*cx->qps));
		cx->outstanding = calloc((size_t)c->nranks, sizeof(*cx->outstanding));
		if (!cx->qps || !cx->outstanding) {
			NV_WARN("RMA createContext: out of memory");
			return NV_ERR_SYSTEM;
		}
		st = nv_ibv_create_cq(c->hca->ctx, cqe, NULL, &cx->cq);
		for (int p = 0; p < c->nranks && st == NV_OK; p++)
			st = nv_rma_qp_create(x, cx, p);
	}
	return st;
}

/* Exchanges QP numbers and connects every QP. */
static nv_status_t nv_rma_ctx_wire(struct nv_rma_ctx *x)
{
	struct nv_rma_coll *c = x->coll;
	size_t nq = (size_t)x->ncx * (size_t)c->nranks;
	size_t blob = sizeof(struct nv_rma_qp_hdr) + nq * sizeof(uint32_t);
	uint8_t *mine = calloc(1, blob), *all = calloc((size_t)c->nranks, blob);
	struct nv_rma_qp_hdr *h = (struct nv_rma_qp_hdr *)mine;
	struct nv_gid_info gi;
	nv_status_t st = NV_ERR_SYSTEM;

	if (!mine || !all) {
		NV_WARN("RMA createContext: out of memory");
		goto out;
	}
	NV_CHECK_GOTO(nv_dev_gid(c->dev, &gi), st, out);
	memcpy(h->gid, gi.gid.raw, 16);
	h->lid = c->dev->lid;
	h->mtu = (uint8_t)c->dev->active_mtu;
	h->link_layer = c->dev->link_layer;
	for (int i = 0; i < x->ncx; i++)
		for (int p = 0; p < c->nranks; p++)
			((uint32_t *)(h + 1))[(size_t)i * c->nranks + p] = x->cx[i].qps[p]->qp_num;
	NV_CHECK_GOTO(nv_rma_allgather(c, mine, all, blob), st, out);
	for (int i = 0; i < x->ncx && st == NV_OK; i++) {
		for (int p = 0; p < c->nranks && st == NV_OK; p++) {
			const struct nv_rma_qp_hdr *r = (const void *)(all + (size_t)p * blob);
			uint32_t rqpn = ((const uint32_t *)(r + 1))[(size_t)i * c->nranks + c->rank];

			st = nv_rma_qp_connect(x, x->cx[i].qps[p], p, r, rqpn, gi.index);
		}
	}
out:
	free(mine);
	free(all);
	return st;
}

nv_status_t nv_rma_create_ctx(struct nv_rma_coll *c, int ncx, int traffic_class,
			      struct nv_rma_ctx **out)
{
	struct nv_rma_ctx *x;
	nv_status_t st;

	*out = NULL;
	if (ncx < 1 || ncx > NV_RMA_MAX_CONTEXTS) {
		NV_WARN("RMA createContext: nContexts %d outside 1..%d", ncx, NV_RMA_MAX_CONTEXTS);
		return NV_ERR_INVALID;
	}
	if (!c->atomics) {
		NV_WARN("RMA createContext: %s has no RDMA atomics (atomic_cap NONE): signals are "
			"fetch-and-adds, which an emulation could not make atomic across ranks; "
			"one-sided operations are not offered on this device", c->hca->name);
		return NV_ERR_USAGE;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		NV_WARN("RMA createContext: out of memory");
		return NV_ERR_SYSTEM;
	}
	x->coll = c;
	x->ncx = ncx;
	x->traffic_class = traffic_class;
	c->nctxs++;
	NV_CHECK_GOTO(nv_rma_ctx_alloc(x), st, fail);
	NV_CHECK_GOTO(nv_rma_ctx_wire(x), st, fail);
	for (int i = 0; i < ncx * NV_RMA_POOL; i++)
		x->pool[i].ctx = x;
	NV_INFO(NV_SUB_INIT | NV_SUB_NET, "RMA context: %d x %d QPs on %s:%u, rank %d", ncx,
		c->nranks, c->hca->name, c->dev->port, c->rank);
	*out = x;
	return NV_OK;
fail:
	nv_rma_destroy_ctx(x);
	return st;
}

nv_status_t nv_rma_destroy_ctx(struct nv_rma_ctx *x)
{
	nv_status_t first = NV_OK, st;

	if (!x)
		return NV_OK;
	for (int i = 0; x->cx && i < x->ncx; i++) {
		struct nv_rma_cx *cx = &x->cx[i];

		for (int p = 0; cx->qps && p < x->coll->nranks; p++) {
			if (!cx->qps[p])
				continue;
			st = nv_ibv_destroy_qp(cx->qps[p]);
			first = first != NV_OK ? first : st;
			cx->qps[p] = NULL;
		}
		if (cx->cq) {
			st = nv_ibv_destroy_cq(cx->cq);
			first = first != NV_OK ? first : st;
		}
		free(cx->qps);
		free(cx->outstanding);
	}
	if (x->scratch_mr) {
		st = nv_ibv_dereg_mr(x->scratch_mr);
		first = first != NV_OK ? first : st;
	}
	free(x->cx);
	free(x->pool);
	free(x->scratch);
	x->coll->nctxs--;
	free(x);
	return first;
}
