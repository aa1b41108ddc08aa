/*
 * The extended QP API: ibv_create_qp_ex (verbs_context.create_qp_ex) and the
 * ibv_wr_* builder (ibv_qp_to_qp_ex).  A batch between wr_start and
 * wr_complete is built as an ibv_send_wr chain and posted through the same
 * path as ibv_post_send, so every rule applies unchanged.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sv.h"

#define SV_OPS_UD (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM)
#define SV_OPS_RC (SV_OPS_UD | IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
		   IBV_QP_EX_WITH_RDMA_READ)
#define SV_OPS_ATOMIC (IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)

static struct sv_qp *sv_qpx(struct ibv_qp_ex *x)
{
	return (struct sv_qp *)x;
}

static uint32_t sv_msge(const struct sv_qp *qp)
{
	return qp->cap.max_send_sge ? qp->cap.max_send_sge : 1;
}

/* Starts the next WR of the batch (ENOMEM once the batch is full). */
static struct ibv_send_wr *sv_wb_new(struct ibv_qp_ex *x, enum ibv_wr_opcode op)
{
	struct sv_qp *qp = sv_qpx(x);
	struct sv_wrbatch *b = &qp->wb;
	struct ibv_send_wr *w;

	if (b->n >= qp->sq_cap) {
		b->err = ENOMEM;
		return NULL;
	}
	w = &b->wr[b->n];
	memset(w, 0, sizeof(*w));
	w->wr_id = x->wr_id;
	w->send_flags = x->wr_flags;
	w->opcode = op;
	w->sg_list = &b->sge[(size_t)b->n * sv_msge(qp)];
	if (b->n)
		b->wr[b->n - 1].next = w;
	b->n++;
	return w;
}

static struct ibv_send_wr *sv_wb_cur(struct ibv_qp_ex *x)
{
	struct sv_wrbatch *b = &sv_qpx(x)->wb;

	return b->n && !b->err ? &b->wr[b->n - 1] : NULL;
}

static void sv_wr_rdma_write(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr)
{
	struct ibv_send_wr *w = sv_wb_new(x, IBV_WR_RDMA_WRITE);

	if (w) {
		w->wr.rdma.rkey = rkey;
		w->wr.rdma.remote_addr = addr;
	}
}

static void sv_wr_rdma_write_imm(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr, __be32 imm)
{
	struct ibv_send_wr *w = sv_wb_new(x, IBV_WR_RDMA_WRITE_WITH_IMM);

	if (w) {
		w->wr.rdma.rkey = rkey;
		w->wr.rdma.remote_addr = addr;
		w->imm_data = imm;
	}
}

static void sv_wr_rdma_read(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr)
{
	struct ibv_send_wr *w = sv_wb_new(x, IBV_WR_RDMA_READ);

	if (w) {
		w->wr.rdma.rkey = rkey;
		w->wr.rdma.remote_addr = addr;
	}
}

static void sv_wr_atomic(struct ibv_qp_ex *x, enum ibv_wr_opcode op, uint32_t rkey,
			 uint64_t addr, uint64_t compare_add, uint64_t swap)
{
	struct ibv_send_wr *w = sv_wb_new(x, op);

	if (w) {
		w->wr.atomic.rkey = rkey;
		w->wr.atomic.remote_addr = addr;
		w->wr.atomic.compare_add = compare_add;
		w->wr.atomic.swap = swap;
	}
}

static void sv_wr_atomic_cmp_swp(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr,
				 uint64_t compare, uint64_t swap)
{
	sv_wr_atomic(x, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, addr, compare, swap);
}

static void sv_wr_atomic_fetch_add(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr,
				   uint64_t add)
{
	sv_wr_atomic(x, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, addr, add, 0);
}

static void sv_wr_send(struct ibv_qp_ex *x)
{
	sv_wb_new(x, IBV_WR_SEND);
}

static void sv_wr_send_imm(struct ibv_qp_ex *x, __be32 imm)
{
	struct ibv_send_wr *w = sv_wb_new(x, IBV_WR_SEND_WITH_IMM);

	if (w)
		w->imm_data = imm;
}

/* UD: the destination of the current WR (the post checks the AH, as ibv_post_send's) */
static void sv_wr_set_ud_addr(struct ibv_qp_ex *x, struct ibv_ah *ah, uint32_t remote_qpn,
			      uint32_t remote_qkey)
{
	struct ibv_send_wr *w = sv_wb_cur(x);

	if (w) {
		w->wr.ud.ah = ah;
		w->wr.ud.remote_qpn = remote_qpn;
		w->wr.ud.remote_qkey = remote_qkey;
	}
}

static void sv_wr_set_sge_list(struct ibv_qp_ex *x, size_t n, const struct ibv_sge *sg)
{
	struct ibv_send_wr *w = sv_wb_cur(x);

	if (!w)
		return;
	if (n > sv_msge(sv_qpx(x))) {
		sv_qpx(x)->wb.err = EINVAL;
		return;
	}
	memcpy(w->sg_list, sg, n * sizeof(*sg));
	w->num_sge = (int)n;
}

static void sv_wr_set_sge(struct ibv_qp_ex *x, uint32_t lkey, uint64_t addr, uint32_t len)
{
	struct ibv_sge sg = { .addr = addr, .length = len, .lkey = lkey };

	sv_wr_set_sge_list(x, 1, &sg);
}

static void sv_wr_set_inline_data_list(struct ibv_qp_ex *x, size_t n,
				       const struct ibv_data_buf *bufs)
{
	struct sv_qp *qp = sv_qpx(x);
	struct ibv_send_wr *w = sv_wb_cur(x);
	unsigned char *dst;
	size_t tot = 0;

	if (!w)
		return;
	for (size_t i = 0; i < n; i++)
		tot += bufs[i].length;
	if (tot > qp->cap.max_inline_data) {
		qp->wb.err = EINVAL;
		return;
	}
	dst = qp->wb.inl + (size_t)(w - qp->wb.wr) * ((size_t)qp->cap.max_inline_data + 1);
	w->sg_list[0].addr = (uintptr_t)dst;
	w->sg_list[0].length = (uint32_t)tot;
	w->sg_list[0].lkey = 0;
	w->num_sge = tot ? 1 : 0;
	w->send_flags |= IBV_SEND_INLINE;
	for (size_t i = 0; i < n; i++) {
		memcpy(dst, bufs[i].addr, bufs[i].length);
		dst += bufs[i].length;
	}
}

static void sv_wr_set_inline_data(struct ibv_qp_ex *x, void *addr, size_t len)
{
	struct ibv_data_buf b = { .addr = addr, .length = len };

	sv_wr_set_inline_data_list(x, 1, &b);
}

static void sv_wr_start(struct ibv_qp_ex *x)
{
	sv_qpx(x)->wb.n = 0;
	sv_qpx(x)->wb.err = 0;
}

static int sv_wr_complete(struct ibv_qp_ex *x)
{
	struct sv_wrbatch *b = &sv_qpx(x)->wb;
	struct ibv_send_wr *bad = NULL;
	int rc = b->err;

	if (!rc && b->n)
		rc = sv_post_send(&x->qp_base, b->wr, &bad);
	b->n = 0;
	b->err = 0;
	return rc;
}

static void sv_wr_abort(struct ibv_qp_ex *x)
{
	sv_qpx(x)->wb.n = 0;
	sv_qpx(x)->wb.err = 0;
}

static int sv_qpx_setup(struct sv_qp *qp)
{
	struct ibv_qp_ex *x = &qp->ibvx;
	struct sv_wrbatch *b = &qp->wb;

	b->wr = calloc(qp->sq_cap, sizeof(*b->wr));
	b->sge = calloc((size_t)qp->sq_cap * sv_msge(qp), sizeof(*b->sge));
	b->inl = calloc(qp->sq_cap, (size_t)qp->cap.max_inline_data + 1);
	if (!b->wr || !b->sge || !b->inl)
		return ENOMEM;
	if (qp->ibv.qp_type == IBV_QPT_UD) {	/* as mlx5: only UD's builders and setters */
		x->wr_set_ud_addr = sv_wr_set_ud_addr;
	} else {
		x->wr_rdma_write = sv_wr_rdma_write;
		x->wr_rdma_write_imm = sv_wr_rdma_write_imm;
		x->wr_rdma_read = sv_wr_rdma_read;
		if (!qp->ctx->dev->no_atomics) {
			x->wr_atomic_cmp_swp = sv_wr_atomic_cmp_swp;
			x->wr_atomic_fetch_add = sv_wr_atomic_fetch_add;
		}
	}
	x->wr_send = sv_wr_send;
	x->wr_send_imm = sv_wr_send_imm;
	x->wr_set_sge = sv_wr_set_sge;
	x->wr_set_sge_list = sv_wr_set_sge_list;
	x->wr_set_inline_data = sv_wr_set_inline_data;
	x->wr_set_inline_data_list = sv_wr_set_inline_data_list;
	x->wr_start = sv_wr_start;
	x->wr_complete = sv_wr_complete;
	x->wr_abort = sv_wr_abort;
	qp->has_qpx = true;
	return 0;
}

void sv_qpx_free(struct sv_qp *qp)
{
	free(qp->wb.wr);
	free(qp->wb.sge);
	free(qp->wb.inl);
	qp->wb.wr = NULL;
	qp->wb.sge = NULL;
	qp->wb.inl = NULL;
}

struct ibv_qp *sv_create_qp_ex(struct ibv_context *ibctx, struct ibv_qp_init_attr_ex *a)
{
	uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
			 IBV_QP_INIT_ATTR_CREATE_FLAGS;
	uint64_t rc_ops = SV_OPS_RC | (sv_ctx(ibctx)->dev->no_atomics ? 0 : SV_OPS_ATOMIC);
	struct ibv_qp_init_attr ia;
	struct ibv_qp *ibqp;
	int rc;

	if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd || a->pd->context != ibctx) {
		errno = EINVAL;
		return NULL;
	}
	/* As rxe: CREATE_FLAGS is a known mask bit, but no flag is supported,
	 * so any set bit (known to verbs.h or not) is EOPNOTSUPP; create_flags
	 * is read only when the mask bit says it is valid. */
	if ((a->comp_mask & ~known) ||
	    ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a->create_flags) ||
	    ((a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	     (a->send_ops_flags & ~(a->qp_type == IBV_QPT_RC ? rc_ops :
				    a->qp_type == IBV_QPT_UD ? SV_OPS_UD : 0)))) {	/* as rxe */
		errno = EOPNOTSUPP;
		return NULL;
	}
	memset(&ia, 0, sizeof(ia));
	ia.qp_context = a->qp_context;
	ia.send_cq = a->send_cq;
	ia.recv_cq = a->recv_cq;
	ia.srq = a->srq;
	ia.cap = a->cap;
	ia.qp_type = a->qp_type;
	ia.sq_sig_all = a->sq_sig_all;
	ibqp = ibv_create_qp(a->pd, &ia);
	if (!ibqp)
		return NULL;
	a->cap = ia.cap;
	if (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		rc = sv_qpx_setup((struct sv_qp *)ibqp);
		if (rc) {
			ibv_destroy_qp(ibqp);
			errno = rc;
			return NULL;
		}
	}
	return ibqp;
}

SV_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp);
struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	struct sv_qp *q = (struct sv_qp *)qp;

	if (!q || !q->has_qpx) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	return &q->ibvx;
}
