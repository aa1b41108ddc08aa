/*
 * Extended CQs: ibv_create_cq_ex (verbs_context.create_cq_ex) with the
 * standard work-completion fields, polled through ibv_start_poll /
 * ibv_next_poll / ibv_end_poll and the ibv_wc_read_* accessors.  Each poll
 * takes one entry through the same ring read as ibv_poll_cq.  Timestamps,
 * CVLAN, flow tags and parent domains are not emulated (EOPNOTSUPP).
 */
#include <errno.h>

#include "sv.h"

static struct sv_cq *sv_cqx(struct ibv_cq_ex *x)
{
	return (struct sv_cq *)x;
}

static int sv_cqx_next(struct ibv_cq_ex *x)
{
	struct sv_cq *cq = sv_cqx(x);
	int n = sv_poll_cq(&cq->ibv, 1, &cq->cur);

	if (n <= 0)
		return n < 0 ? EINVAL : ENOENT;
	x->status = cq->cur.status;
	x->wr_id = cq->cur.wr_id;
	return 0;
}

static int sv_cqx_start(struct ibv_cq_ex *x, struct ibv_poll_cq_attr *attr)
{
	if (attr && attr->comp_mask)
		return EINVAL;
	return sv_cqx_next(x);
}

static void sv_cqx_end(struct ibv_cq_ex *x)
{
	(void)x;
}

static enum ibv_wc_opcode sv_rd_opcode(struct ibv_cq_ex *x)
{
	return sv_cqx(x)->cur.opcode;
}

static uint32_t sv_rd_vendor_err(struct ibv_cq_ex *x)
{
	return sv_cqx(x)->cur.vendor_err;
}

static uint32_t sv_rd_byte_len(struct ibv_cq_ex *x)
{
	return sv_cqx(x)->cur.byte_len;
}

static __be32 sv_rd_imm(struct ibv_cq_ex *x)
{
	return sv_cqx(x)->cur.imm_data;
}

static uint32_t sv_rd_qp_num(struct ibv_cq_ex *x)
{
	return sv_cqx(x)->cur.qp_num;
}

static uint32_t sv_rd_src_qp(struct ibv_cq_ex *x)
{
	return sv_cqx(x)->cur.src_qp;
}

static unsigned int sv_rd_wc_flags(struct ibv_cq_ex *x)
{
	return sv_cqx(x)->cur.wc_flags;
}

static uint32_t sv_rd_slid(struct ibv_cq_ex *x)
{
	return sv_cqx(x)->cur.slid;
}

static uint8_t sv_rd_sl(struct ibv_cq_ex *x)
{
	return sv_cqx(x)->cur.sl;
}

static uint8_t sv_rd_dlid_path_bits(struct ibv_cq_ex *x)
{
	return sv_cqx(x)->cur.dlid_path_bits;
}

struct ibv_cq_ex *sv_create_cq_ex(struct ibv_context *ibctx, struct ibv_cq_init_attr_ex *a)
{
	struct ibv_cq *ibcq;
	struct ibv_cq_ex *x;

	if ((a->comp_mask & ~(uint32_t)IBV_CQ_INIT_ATTR_MASK_FLAGS) ||
	    (a->wc_flags & ~(uint64_t)IBV_WC_STANDARD_FLAGS) ||
	    (a->flags & ~(uint32_t)IBV_CREATE_CQ_ATTR_SINGLE_THREADED)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (a->cqe > (uint32_t)INT32_MAX) {
		errno = EINVAL;
		return NULL;
	}
	ibcq = ibv_create_cq(ibctx, (int)a->cqe, a->cq_context, a->channel, (int)a->comp_vector);
	if (!ibcq)
		return NULL;
	x = &((struct sv_cq *)ibcq)->ibvx;
	x->start_poll = sv_cqx_start;
	x->next_poll = sv_cqx_next;
	x->end_poll = sv_cqx_end;
	x->read_opcode = sv_rd_opcode;
	x->read_vendor_err = sv_rd_vendor_err;
	x->read_byte_len = sv_rd_byte_len;
	x->read_imm_data = sv_rd_imm;
	x->read_qp_num = sv_rd_qp_num;
	x->read_src_qp = sv_rd_src_qp;
	x->read_wc_flags = sv_rd_wc_flags;
	x->read_slid = sv_rd_slid;
	x->read_sl = sv_rd_sl;
	x->read_dlid_path_bits = sv_rd_dlid_path_bits;
	return x;
}
