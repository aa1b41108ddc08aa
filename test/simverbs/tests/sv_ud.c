/*
 * sv_ud: UD QPs and address handles (one process, two QPs per device).
 * State machine with UD's masks (RESET->INIT needs QKEY, RTR needs nothing,
 * RTS needs SQ_PSN); AH checks (port, IB DLID, RoCE GRH and sgid_index, PD
 * held); a datagram lands after the 40-byte GRH area with byte_len = 40 +
 * payload, src_qp, slid, immediate; on RoCE the GRH area holds the IPv4
 * header of a RoCE v2 IPv4-mapped pair and IBV_WC_GRH is set; dropped
 * silently (the send still succeeds): Q_Key mismatch, wrong DLID, no receive
 * posted; the Q_Key high bit takes the sender's own Q_Key; a receive smaller
 * than GRH + payload completes with LOC_LEN_ERR and the QP stays usable;
 * post_send EINVAL beyond the path MTU, for RDMA opcodes and without an AH.
 * The ibv_wr_* API on UD (ibv_create_qp_ex): SEND and SEND_WITH_IMM only (other
 * SEND_OPS_FLAGS EOPNOTSUPP, as rxe), no RDMA builders, ibv_wr_set_ud_addr gives
 * the destination of each WR of a batch (AH, QPN, Q_Key).
 */
#include "svt.h"

#define QKEY 0x11110000u

/* RESET -> RTS with UD's masks (each missing or RC attribute refused) */
static struct ibv_qp *ud_rts(struct ibv_qp *q)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };

	SVT_CHECK(q);
	SVT_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), EINVAL);
	SVT_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			     IBV_QP_ACCESS_FLAGS | IBV_QP_QKEY), EINVAL);	/* RC attribute */
	SVT_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
	a.qp_state = IBV_QPS_RTR;
	SVT_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE), 0);
	a.qp_state = IBV_QPS_RTS;
	SVT_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE), EINVAL);	/* SQ_PSN required */
	SVT_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
	return q;
}

static struct ibv_qp *ud_qp(struct svt_ep *e)
{
	struct ibv_qp_init_attr qa = { .send_cq = e->cq, .recv_cq = e->cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 } };

	return ud_rts(ibv_create_qp(e->pd, &qa));
}

static int post_ud(struct svt_ep *e, struct ibv_qp *q, struct ibv_ah *ah, uint32_t qpn,
		   uint32_t qkey, uint32_t len, enum ibv_wr_opcode op)
{
	struct ibv_sge sge = { .addr = (uintptr_t)e->buf, .length = len, .lkey = e->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(0xabcd) },
			   *bad = NULL;

	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = qkey;
	return ibv_post_send(q, &wr, &bad);
}

static void post_rcv(struct svt_ep *e, struct ibv_qp *q, uint32_t off, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)e->buf + off, .length = len, .lkey = e->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = off, .sg_list = &sge, .num_sge = 1 }, *bad = NULL;

	SVT_EQ(ibv_post_recv(q, &wr, &bad), 0);
}

/* one send; returns how many completions the receiver got (0 or 1) in *rwc */
static int send_one(struct svt_ep *e, struct ibv_qp *a, struct ibv_ah *ah, uint32_t qpn,
		    uint32_t qkey, uint32_t len, struct ibv_wc *rwc)
{
	struct ibv_wc wc[2];
	int got = 0, n;

	SVT_EQ(post_ud(e, a, ah, qpn, qkey, len, IBV_WR_SEND_WITH_IMM), 0);
	n = svt_poll_for(e->cq, wc, 2, 100);
	for (int i = 0; i < n; i++) {
		if (wc[i].qp_num == a->qp_num) {
			SVT_EQ(wc[i].status, IBV_WC_SUCCESS);	/* sent, delivered or not */
			SVT_EQ(wc[i].opcode, IBV_WC_SEND);
		} else {
			*rwc = wc[i];
			got++;
		}
	}
	return got;
}

/* ibv_wr_* on a UD QP: a batch of two sends to b (two receives posted), the second with a
 * wrong Q_Key (dropped), then ibv_post_send on the same QP takes the receive left */
static void check_wr_api(struct svt_ep *e, struct ibv_ah *ah, struct ibv_qp *b)
{
	struct ibv_qp_init_attr_ex xa = { .send_cq = e->cq, .recv_cq = e->cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = e->pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE };
	struct ibv_qp_ex *x;
	struct ibv_qp *q;
	struct ibv_wc wc[4], rwc;
	int n, sent = 0, got = 0;

	errno = 0;
	SVT_CHECK(!ibv_create_qp_ex(e->ctx, &xa) && errno == EOPNOTSUPP);	/* no RDMA on UD */
	xa.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
	q = ud_rts(ibv_create_qp_ex(e->ctx, &xa));
	x = ibv_qp_to_qp_ex(q);
	SVT_CHECK(x && x->wr_set_ud_addr && x->wr_send_imm && !x->wr_rdma_write);
	post_rcv(e, b, 8192, 40 + 64);
	post_rcv(e, b, 8192, 40 + 64);
	memset(e->buf, 'x', 64);
	ibv_wr_start(x);
	x->wr_id = 21;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_imm(x, htonl(0x5151));
	ibv_wr_set_ud_addr(x, ah, b->qp_num, QKEY);
	ibv_wr_set_sge(x, e->mr->lkey, (uintptr_t)e->buf, 64);
	x->wr_id = 22;
	ibv_wr_send(x);
	ibv_wr_set_ud_addr(x, ah, b->qp_num, QKEY + 1);
	ibv_wr_set_sge(x, e->mr->lkey, (uintptr_t)e->buf, 8);
	SVT_EQ(ibv_wr_complete(x), 0);
	n = svt_poll_for(e->cq, wc, 4, 100);
	for (int i = 0; i < n; i++) {
		SVT_EQ(wc[i].status, IBV_WC_SUCCESS);
		if (wc[i].qp_num == q->qp_num) {
			SVT_EQ(wc[i].wr_id, 21u + (unsigned)sent++);
			continue;
		}
		got++;
		SVT_EQ(wc[i].src_qp, q->qp_num);
		SVT_EQ(wc[i].byte_len, 40 + 64);
		SVT_EQ(ntohl(wc[i].imm_data), 0x5151);
		SVT_EQ(e->buf[8192 + 40 + 63], 'x');
	}
	SVT_EQ(sent, 2);
	SVT_EQ(got, 1);	/* the second: Q_Key mismatch, dropped; a receive is left */
	SVT_EQ(send_one(e, q, ah, b->qp_num, QKEY, 10, &rwc), 1);	/* ibv_post_send too */
	SVT_EQ(rwc.byte_len, 40 + 10);
	SVT_EQ(ibv_destroy_qp(q), 0);
}

static void check_dev(const char *dev)
{
	struct svt_ep e;
	struct ibv_qp *a, *b;
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;
	struct ibv_wc rwc;
	bool eth;

	svt_ep_init(&e, dev, 32, 4, 16384, IBV_ACCESS_LOCAL_WRITE);
	eth = e.pattr.link_layer == IBV_LINK_LAYER_ETHERNET;
	a = ud_qp(&e);
	b = ud_qp(&e);
	memset(&aa, 0, sizeof(aa));
	aa.port_num = 2;
	errno = 0;
	SVT_CHECK(!ibv_create_ah(e.pd, &aa) && errno == EINVAL);	/* no port 2 */
	aa.port_num = 1;
	errno = 0;
	SVT_CHECK(!ibv_create_ah(e.pd, &aa) && errno == EINVAL);	/* IB: DLID 0; RoCE: no GRH */
	aa.dlid = e.pattr.lid;
	if (eth) {
		aa.is_global = 1;
		aa.grh.sgid_index = 200;
		errno = 0;
		SVT_CHECK(!ibv_create_ah(e.pd, &aa) && errno == EINVAL);
		aa.grh.sgid_index = (uint8_t)e.gid_index;
		aa.grh.hop_limit = 64;
		SVT_EQ(ibv_query_gid(e.ctx, 1, e.gid_index, &aa.grh.dgid), 0);
	}
	ah = ibv_create_ah(e.pd, &aa);
	SVT_CHECK(ah);
	SVT_EQ(ibv_dealloc_pd(e.pd), EBUSY);
	/* delivered after the GRH area */
	post_rcv(&e, b, 8192, 40 + 200);
	memset(e.buf, 'u', 200);
	SVT_EQ(send_one(&e, a, ah, b->qp_num, QKEY, 200, &rwc), 1);
	SVT_EQ(rwc.status, IBV_WC_SUCCESS);
	SVT_EQ(rwc.opcode, IBV_WC_RECV);
	SVT_EQ(rwc.byte_len, 240);
	SVT_EQ(rwc.src_qp, a->qp_num);
	SVT_EQ(rwc.qp_num, b->qp_num);
	SVT_EQ(rwc.slid, e.pattr.lid);
	SVT_EQ(ntohl(rwc.imm_data), 0xabcd);
	SVT_EQ(rwc.wc_flags & (IBV_WC_WITH_IMM | IBV_WC_GRH),
	       IBV_WC_WITH_IMM | (eth ? IBV_WC_GRH : 0));
	SVT_EQ(e.buf[8192 + 40], 'u');
	SVT_EQ(e.buf[8192 + 239], 'u');
	if (eth) {	/* RoCE v2, IPv4-mapped GID: an IPv4 header in the last 20 bytes */
		SVT_EQ((unsigned char)e.buf[8192 + 20], 0x45);
		SVT_CHECK(!memcmp(e.buf + 8192 + 36, aa.grh.dgid.raw + 12, 4));
	}
	/* dropped: wrong Q_Key, no receive posted (then the next one lands) */
	post_rcv(&e, b, 8192, 40 + 200);
	SVT_EQ(send_one(&e, a, ah, b->qp_num, QKEY + 1, 10, &rwc), 0);
	SVT_EQ(send_one(&e, a, ah, b->qp_num, 0x80000000u, 10, &rwc), 1);	/* own Q_Key */
	SVT_EQ(rwc.byte_len, 50);
	SVT_EQ(send_one(&e, a, ah, b->qp_num, QKEY, 10, &rwc), 0);	/* no receive */
	/* a receive smaller than GRH + payload: LOC_LEN_ERR, the QP still works */
	post_rcv(&e, b, 8192, 40 + 4);
	SVT_EQ(send_one(&e, a, ah, b->qp_num, QKEY, 10, &rwc), 1);
	SVT_EQ(rwc.status, IBV_WC_LOC_LEN_ERR);
	post_rcv(&e, b, 8192, 40 + 10);
	SVT_EQ(send_one(&e, a, ah, b->qp_num, QKEY, 10, &rwc), 1);
	SVT_EQ(rwc.status, IBV_WC_SUCCESS);
	/* post_send refusals */
	SVT_EQ(post_ud(&e, a, ah, b->qp_num, QKEY, 4097, IBV_WR_SEND), EINVAL);	/* > MTU */
	SVT_EQ(post_ud(&e, a, ah, b->qp_num, QKEY, 8, IBV_WR_RDMA_WRITE), EINVAL);
	SVT_EQ(post_ud(&e, a, NULL, b->qp_num, QKEY, 8, IBV_WR_SEND), EINVAL);
	check_wr_api(&e, ah, b);
	if (!eth) {	/* IB: a DLID that is not the port's: dropped */
		struct ibv_ah *bad;

		aa.dlid = (uint16_t)(e.pattr.lid + 100);
		bad = ibv_create_ah(e.pd, &aa);
		SVT_CHECK(bad);
		post_rcv(&e, b, 8192, 40 + 10);
		SVT_EQ(send_one(&e, a, bad, b->qp_num, QKEY, 10, &rwc), 0);
		SVT_EQ(ibv_destroy_ah(bad), 0);
	}
	SVT_EQ(ibv_destroy_qp(a), 0);
	SVT_EQ(ibv_destroy_qp(b), 0);
	SVT_EQ(ibv_destroy_ah(ah), 0);
	svt_ep_fini(&e);
	printf("UD on %s: ok\n", dev);
}

int main(void)
{
	(void)svt_control_fn_get();
	check_dev("simib0");
	check_dev("simroce0");
	return 0;
}
