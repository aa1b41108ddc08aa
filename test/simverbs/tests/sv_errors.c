/*
 * Error completions (one process, a loopback QP pair): local key/range/PD
 * checks (LOC_PROT_ERR), remote key/range/rights/QP-access checks
 * (REM_ACCESS_ERR, which also moves the responder QP to error and flushes
 * its receives), SEND larger than the receive (REM_INV_REQ_ERR at the
 * requester, LOC_LEN_ERR at the responder), the QP moving to error and every
 * outstanding WR (signalled or not) flushing with WR_FLUSH_ERR, post-time
 * limits (SGE count, inline size), RNR retry exhaustion and rnr_retry=7,
 * send-queue occupancy, CQ overrun.
 */
#include "svt.h"

#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

struct pair {
	struct svt_ep a, b;
	struct svt_info ai, bi;
};

static void pair_up(struct pair *p, int wr, int cqe, int rnr_retry, int qp_access)
{
	struct ibv_qp_attr at;

	svt_ep_init(&p->a, "simib0", cqe, wr, 1 << 20, ACC);
	svt_ep_init(&p->b, "simib0", cqe, wr, 1 << 20, ACC);
	p->ai = svt_ep_info(&p->a);
	p->bi = svt_ep_info(&p->b);
	svt_connect(&p->a, &p->bi, 14, rnr_retry);
	SVT_EQ(svt_to_init(&p->b, qp_access), 0);
	svt_rtr_attr(&p->b, &p->ai, &at);
	SVT_EQ(ibv_modify_qp(p->b.qp, &at, SVT_RTR_MASK), 0);
	svt_rts_attr(&at, 14, 7, rnr_retry);
	SVT_EQ(ibv_modify_qp(p->b.qp, &at, SVT_RTS_MASK), 0);
}

static void pair_down(struct pair *p)
{
	struct ibv_wc wc[16];

	while (ibv_poll_cq(p->a.cq, 16, wc) > 0 || ibv_poll_cq(p->b.cq, 16, wc) > 0)
		;
	svt_ep_fini(&p->a);
	svt_ep_fini(&p->b);
}

/* First WR fails with `status`; the 3 after it (unsignalled) flush. */
static void expect_fail_then_flush(struct pair *p, enum ibv_wc_status status)
{
	struct ibv_wc wc = svt_poll1(p->a.cq, 20000);

	SVT_EQ(wc.status, status);
	SVT_EQ(wc.wr_id, 1);
	for (int i = 0; i < 3; i++) {
		wc = svt_poll1(p->a.cq, 20000);
		SVT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
		SVT_EQ(wc.wr_id, 2 + (uint64_t)i);
	}
	SVT_EQ(ibv_poll_cq(p->a.cq, 1, &wc), 0);
	SVT_EQ(p->a.qp->state, IBV_QPS_ERR);
	/* posting in ERR completes at once with a flush */
	SVT_EQ(svt_post_write(&p->a, IBV_WR_RDMA_WRITE, (uintptr_t)p->a.buf, 8, p->a.mr->lkey,
			      p->bi.addr, p->bi.rkey, 0, 0, 9), 0);
	wc = svt_poll1(p->a.cq, 20000);
	SVT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
	SVT_EQ(wc.wr_id, 9);
}

static void post4(struct pair *p, uint64_t laddr, uint32_t lkey, uint64_t raddr, uint32_t rkey,
		  enum ibv_wr_opcode op)
{
	SVT_EQ(svt_post_write(&p->a, op, laddr, 64, lkey, raddr, rkey, 0, 0, 1), 0);
	for (uint64_t i = 2; i <= 4; i++)
		SVT_EQ(svt_post_write(&p->a, IBV_WR_RDMA_WRITE, (uintptr_t)p->a.buf, 8,
				      p->a.mr->lkey, p->bi.addr, p->bi.rkey, 0, 0, i), 0);
}

/* A remote access error is also the responder's: its QP moves to error and
 * the receive it had posted (wr_id 77, from post4r) is flushed, as the IB spec
 * and rxe have it, so a receiver never waits forever on a dead connection. */
static void expect_responder_flushed(struct pair *p)
{
	struct ibv_qp_attr at;
	struct ibv_qp_init_attr ia;
	struct ibv_wc wc = svt_poll1(p->b.cq, 20000);

	SVT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
	SVT_EQ(wc.wr_id, 77);
	SVT_EQ(ibv_query_qp(p->b.qp, &at, IBV_QP_STATE, &ia), 0);
	SVT_EQ(at.qp_state, IBV_QPS_ERR);
}

static void post4r(struct pair *p, uint64_t laddr, uint32_t lkey, uint64_t raddr, uint32_t rkey,
		   enum ibv_wr_opcode op)
{
	SVT_EQ(svt_post_recv(&p->b, (uintptr_t)p->b.buf, 64, p->b.mr->lkey, 77), 0);
	post4(p, laddr, lkey, raddr, rkey, op);
}

static void check_keys(void)
{
	struct pair p;
	struct ibv_pd *pd2;
	struct ibv_mr *other;

	pair_up(&p, 16, 64, 7, ACC);
	post4(&p, (uintptr_t)p.a.buf, p.a.mr->lkey + 1, p.bi.addr, p.bi.rkey, IBV_WR_RDMA_WRITE);
	expect_fail_then_flush(&p, IBV_WC_LOC_PROT_ERR);
	pair_down(&p);

	pair_up(&p, 16, 64, 7, ACC);
	post4(&p, (uintptr_t)p.a.buf + (1 << 20) - 8, p.a.mr->lkey, p.bi.addr, p.bi.rkey,
	      IBV_WR_RDMA_WRITE);	/* local range */
	expect_fail_then_flush(&p, IBV_WC_LOC_PROT_ERR);
	pair_down(&p);

	pair_up(&p, 16, 64, 7, ACC);
	post4r(&p, (uintptr_t)p.a.buf, p.a.mr->lkey, p.bi.addr, p.bi.rkey ^ 0x100,
	      IBV_WR_RDMA_WRITE);	/* bad rkey */
	expect_fail_then_flush(&p, IBV_WC_REM_ACCESS_ERR);
	expect_responder_flushed(&p);
	pair_down(&p);

	pair_up(&p, 16, 64, 7, ACC);
	post4r(&p, (uintptr_t)p.a.buf, p.a.mr->lkey, p.bi.addr + (1 << 20) - 32, p.bi.rkey,
	      IBV_WR_RDMA_WRITE);	/* remote range */
	expect_fail_then_flush(&p, IBV_WC_REM_ACCESS_ERR);
	expect_responder_flushed(&p);
	pair_down(&p);

	pair_up(&p, 16, 64, 7, IBV_ACCESS_REMOTE_WRITE);	/* responder QP: no READ */
	post4r(&p, (uintptr_t)p.a.buf, p.a.mr->lkey, p.bi.addr, p.bi.rkey, IBV_WR_RDMA_READ);
	expect_fail_then_flush(&p, IBV_WC_REM_ACCESS_ERR);
	expect_responder_flushed(&p);
	pair_down(&p);

	/* an MR of another PD of the responder */
	pair_up(&p, 16, 64, 7, ACC);
	pd2 = ibv_alloc_pd(p.b.ctx);
	SVT_CHECK(pd2);
	other = ibv_reg_mr(pd2, p.b.buf, 4096, ACC);
	SVT_CHECK(other);
	post4r(&p, (uintptr_t)p.a.buf, p.a.mr->lkey, p.bi.addr, other->rkey, IBV_WR_RDMA_WRITE);
	expect_fail_then_flush(&p, IBV_WC_REM_ACCESS_ERR);
	expect_responder_flushed(&p);
	/* MR without REMOTE_WRITE */
	SVT_EQ(ibv_dereg_mr(other), 0);
	SVT_EQ(ibv_dealloc_pd(pd2), 0);
	pair_down(&p);

	pair_up(&p, 16, 64, 7, ACC);
	other = ibv_reg_mr(p.b.pd, p.b.buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	SVT_CHECK(other);
	post4r(&p, (uintptr_t)p.a.buf, p.a.mr->lkey, p.bi.addr, other->rkey, IBV_WR_RDMA_WRITE);
	expect_fail_then_flush(&p, IBV_WC_REM_ACCESS_ERR);
	expect_responder_flushed(&p);
	SVT_EQ(ibv_dereg_mr(other), 0);
	pair_down(&p);
	/* an MR the responder deregistered */
	pair_up(&p, 16, 64, 7, ACC);
	other = ibv_reg_mr(p.b.pd, p.b.buf, 4096, ACC);
	SVT_CHECK(other);
	{
		uint32_t rkey = other->rkey;

		SVT_EQ(ibv_dereg_mr(other), 0);
		post4r(&p, (uintptr_t)p.a.buf, p.a.mr->lkey, p.bi.addr, rkey, IBV_WR_RDMA_WRITE);
	}
	expect_fail_then_flush(&p, IBV_WC_REM_ACCESS_ERR);
	expect_responder_flushed(&p);
	pair_down(&p);
	printf("key, range, PD and access checks with error + flush completions, responder "
	       "QP to error with its receives flushed: ok\n");
}

static void check_send_len_and_limits(void)
{
	struct pair p;
	struct ibv_wc wc;
	struct ibv_sge sg[5];
	struct ibv_send_wr wr, *bad = NULL;
	char big[100];

	pair_up(&p, 16, 64, 7, ACC);
	SVT_EQ(svt_post_recv(&p.b, (uintptr_t)p.b.buf, 16, p.b.mr->lkey, 50), 0);
	SVT_EQ(svt_post_recv(&p.b, (uintptr_t)p.b.buf, 16, p.b.mr->lkey, 51), 0);
	SVT_EQ(svt_post_write(&p.a, IBV_WR_SEND, (uintptr_t)p.a.buf, 64, p.a.mr->lkey, 0, 0, 0,
			      IBV_SEND_SIGNALED, 1), 0);
	wc = svt_poll1(p.a.cq, 20000);
	SVT_EQ(wc.status, IBV_WC_REM_INV_REQ_ERR);
	wc = svt_poll1(p.b.cq, 20000);
	SVT_EQ(wc.status, IBV_WC_LOC_LEN_ERR);
	SVT_EQ(wc.wr_id, 50);
	wc = svt_poll1(p.b.cq, 20000);	/* responder QP went to error: flush */
	SVT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
	SVT_EQ(wc.wr_id, 51);
	pair_down(&p);

	pair_up(&p, 16, 64, 7, ACC);
	memset(&wr, 0, sizeof(wr));
	for (int i = 0; i < 5; i++)
		sg[i] = (struct ibv_sge){ (uintptr_t)p.a.buf, 8, p.a.mr->lkey };
	wr.sg_list = sg;
	wr.num_sge = 5;	/* max_send_sge is 4 */
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = p.bi.addr;
	wr.wr.rdma.rkey = p.bi.rkey;
	SVT_EQ(ibv_post_send(p.a.qp, &wr, &bad), EINVAL);
	SVT_CHECK(bad == &wr);
	sg[0] = (struct ibv_sge){ (uintptr_t)big, sizeof(big), 0 };
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_INLINE;	/* max_inline_data is 64 */
	SVT_EQ(ibv_post_send(p.a.qp, &wr, &bad), EINVAL);
	sg[0].length = 64;
	memset(big, 0x5a, sizeof(big));
	wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
	SVT_EQ(ibv_post_send(p.a.qp, &wr, &bad), 0);
	memset(big, 0, sizeof(big));	/* inline data was copied at post */
	SVT_EQ(svt_poll1(p.a.cq, 20000).status, IBV_WC_SUCCESS);
	SVT_EQ(p.b.buf[63], 0x5a);
	wr.opcode = (enum ibv_wr_opcode)99;
	SVT_EQ(ibv_post_send(p.a.qp, &wr, &bad), EINVAL);
	pair_down(&p);
	printf("send length, SGE and inline limits: ok\n");
}

static void check_rnr(void)
{
	struct pair p;
	struct ibv_wc wc;
	uint64_t t0;

	pair_up(&p, 16, 64, 2, ACC);
	SVT_EQ(svt_post_write(&p.a, IBV_WR_RDMA_WRITE_WITH_IMM, (uintptr_t)p.a.buf, 8,
			      p.a.mr->lkey, p.bi.addr, p.bi.rkey, 5, 0, 1), 0);
	SVT_EQ(svt_post_write(&p.a, IBV_WR_RDMA_WRITE, (uintptr_t)p.a.buf, 8,
			      p.a.mr->lkey, p.bi.addr, p.bi.rkey, 5, 0, 2), 0);
	wc = svt_poll1(p.a.cq, 20000);
	SVT_EQ(wc.status, IBV_WC_RNR_RETRY_EXC_ERR);
	SVT_EQ(svt_poll1(p.a.cq, 20000).status, IBV_WC_WR_FLUSH_ERR);
	pair_down(&p);

	pair_up(&p, 16, 64, 7, ACC);	/* 7: retry forever */
	SVT_EQ(svt_post_write(&p.a, IBV_WR_RDMA_WRITE_WITH_IMM, (uintptr_t)p.a.buf, 8,
			      p.a.mr->lkey, p.bi.addr, p.bi.rkey, htonl(77), IBV_SEND_SIGNALED,
			      1), 0);
	t0 = svt_now_ns();
	SVT_EQ(svt_poll_for(p.a.cq, &wc, 1, 200), 0);
	SVT_CHECK(svt_now_ns() - t0 >= 200000000ull);
	SVT_EQ(svt_post_recv(&p.b, 0, 0, 0, 60), 0);
	wc = svt_poll1(p.a.cq, 20000);
	SVT_EQ(wc.status, IBV_WC_SUCCESS);
	wc = svt_poll1(p.b.cq, 20000);
	SVT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	SVT_EQ(wc.imm_data, htonl(77));
	SVT_EQ(wc.wr_id, 60);
	pair_down(&p);
	printf("RNR: retry exhaustion and rnr_retry=7: ok\n");
}

static void check_sq_occupancy(void)
{
	struct pair p;
	struct ibv_wc wc;

	pair_up(&p, 4, 64, 7, ACC);
	for (uint64_t i = 0; i < 3; i++)
		SVT_EQ(svt_post_write(&p.a, IBV_WR_RDMA_WRITE, (uintptr_t)p.a.buf, 8,
				      p.a.mr->lkey, p.bi.addr, p.bi.rkey, 0, 0, i), 0);
	SVT_EQ(svt_post_write(&p.a, IBV_WR_RDMA_WRITE, (uintptr_t)p.a.buf, 8, p.a.mr->lkey,
			      p.bi.addr, p.bi.rkey, 0, 0, 3), 0);
	/* 4 slots used by unsignalled writes: they stay occupied */
	SVT_EQ(svt_post_write(&p.a, IBV_WR_RDMA_WRITE, (uintptr_t)p.a.buf, 8, p.a.mr->lkey,
			      p.bi.addr, p.bi.rkey, 0, IBV_SEND_SIGNALED, 4), ENOMEM);
	SVT_EQ(ibv_poll_cq(p.a.cq, 1, &wc), 0);
	pair_down(&p);

	pair_up(&p, 4, 64, 7, ACC);
	for (uint64_t i = 0; i < 3; i++)
		SVT_EQ(svt_post_write(&p.a, IBV_WR_RDMA_WRITE, (uintptr_t)p.a.buf, 8,
				      p.a.mr->lkey, p.bi.addr, p.bi.rkey, 0, 0, i), 0);
	SVT_EQ(svt_post_write(&p.a, IBV_WR_RDMA_WRITE, (uintptr_t)p.a.buf, 8, p.a.mr->lkey,
			      p.bi.addr, p.bi.rkey, 0, IBV_SEND_SIGNALED, 3), 0);
	SVT_EQ(svt_post_write(&p.a, IBV_WR_RDMA_WRITE, (uintptr_t)p.a.buf, 8, p.a.mr->lkey,
			      p.bi.addr, p.bi.rkey, 0, IBV_SEND_SIGNALED, 4), ENOMEM);
	wc = svt_poll1(p.a.cq, 20000);	/* polling the signalled one frees all four */
	SVT_EQ(wc.wr_id, 3);
	for (uint64_t i = 0; i < 4; i++)
		SVT_EQ(svt_post_write(&p.a, IBV_WR_RDMA_WRITE, (uintptr_t)p.a.buf, 8,
				      p.a.mr->lkey, p.bi.addr, p.bi.rkey, 0,
				      i == 3 ? IBV_SEND_SIGNALED : 0, 10 + i), 0);
	SVT_EQ(svt_poll1(p.a.cq, 20000).wr_id, 13);
	pair_down(&p);
	printf("send-queue occupancy: ok\n");
}

static void check_cq_overrun(void)
{
	struct pair p;
	struct ibv_async_event ev;
	struct ibv_wc wc;
	int n = 0;

	pair_up(&p, 16, 4, 7, ACC);
	for (uint64_t i = 0; i < 6; i++)
		SVT_EQ(svt_post_write(&p.a, IBV_WR_RDMA_WRITE, (uintptr_t)p.a.buf, 8,
				      p.a.mr->lkey, p.bi.addr, p.bi.rkey, 0, IBV_SEND_SIGNALED, i),
		       0);
	SVT_EQ(ibv_get_async_event(p.a.ctx, &ev), 0);
	SVT_EQ(ev.event_type, IBV_EVENT_CQ_ERR);
	SVT_CHECK(ev.element.cq == p.a.cq);
	ibv_ack_async_event(&ev);
	while (ibv_poll_cq(p.a.cq, 1, &wc) > 0)
		n++;
	SVT_EQ(n, 4);
	SVT_EQ(p.a.qp->state, IBV_QPS_ERR);
	pair_down(&p);
	printf("CQ overrun: CQ_ERR event, QP in error: ok\n");
}

int main(void)
{
	svt_control_fn_get();
	check_keys();
	check_send_len_and_limits();
	check_rnr();
	check_sq_occupancy();
	check_cq_overrun();
	return 0;
}
