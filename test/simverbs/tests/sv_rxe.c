/*
 * The device keys that make simverbs fail as rdma_rxe does
 * (link_down=local, err_post=drop), on two connected QPs of one process:
 *  - the port goes down: PORT_ERR, but the QPs stay in RTS (no QP_FATAL) and
 *    their posted RECVs are not flushed;
 *  - the next WR completes with LOC_QP_OP_ERR and that QP is in ERR;
 *  - a WR or RECV posted to it then is accepted and never completes, and
 *    holds its queue slot: a full send queue refuses the next post (ENOMEM)
 *    (rxe before its flush fixes, early Linux 6.1);
 *  - RESET empties the queues, writes no completion, and the QP comes back
 *    (INIT, RTR, RTS) with all its slots.
 * Without the keys (sv_faults) the QPs go to error at once and all is flushed.
 */
#include <fcntl.h>

#include "svt.h"

#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define WR 8

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	SVT_EQ(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia), 0);
	return a.qp_state;
}

static int write1(struct svt_ep *a, const struct svt_info *b, uint64_t id)
{
	return svt_post_write(a, IBV_WR_RDMA_WRITE, (uintptr_t)a->buf, 64, a->mr->lkey, b->addr,
			      b->rkey, 0, IBV_SEND_SIGNALED, id);
}

/* Async events of ctx so far (non-blocking): 1 when one of type t was among them. */
static int saw_event(struct ibv_context *ctx, enum ibv_event_type t)
{
	struct ibv_async_event ev;
	int seen = 0;

	while (ibv_get_async_event(ctx, &ev) == 0) {
		seen |= ev.event_type == t;
		ibv_ack_async_event(&ev);
	}
	return seen;
}

int main(void)
{
	struct svt_ep a, b;
	struct svt_info ia, ib;
	struct ibv_wc wc[4];
	int i, n, fl;

	setenv("SIMVERBS_DEVICES", "simib0:ll=ib,link_down=local,err_post=drop", 1);
	svt_control_fn_get();
	svt_ep_init(&a, "simib0", 64, WR, 4096, ACC);
	svt_ep_init(&b, "simib0", 64, WR, 4096, ACC);
	fl = fcntl(a.ctx->async_fd, F_GETFL);
	SVT_EQ(fcntl(a.ctx->async_fd, F_SETFL, fl | O_NONBLOCK), 0);
	ia = svt_ep_info(&a);
	ib = svt_ep_info(&b);
	svt_connect(&a, &ib, 14, 7);
	svt_connect(&b, &ia, 14, 7);
	SVT_EQ(svt_post_recv(&a, (uintptr_t)a.buf, 64, a.mr->lkey, 7), 0);
	SVT_EQ(write1(&a, &ib, 1), 0);
	SVT_EQ(svt_poll_for(a.cq, wc, 1, 2000), 1);
	SVT_EQ(wc[0].status, IBV_WC_SUCCESS);

	SVT_EQ(svt_control("port-down simib0 1"), 0);
	usleep(20000);
	SVT_EQ(svt_poll_for(a.cq, wc, 1, 50), 0); /* the RECV is not flushed */
	SVT_EQ(qp_state(a.qp), IBV_QPS_RTS);
	SVT_EQ(write1(&a, &ib, 2), 0);
	SVT_EQ(svt_poll_for(a.cq, wc, 1, 2000), 1);
	SVT_EQ(wc[0].wr_id, 2);
	SVT_EQ(wc[0].status, IBV_WC_LOC_QP_OP_ERR);
	SVT_EQ(qp_state(a.qp), IBV_QPS_ERR);
	/* the QP's own RECV, queued when it entered ERR, is flushed (rxe too) */
	SVT_EQ(svt_poll_for(a.cq, wc, 1, 2000), 1);
	SVT_EQ(wc[0].wr_id, 7);
	SVT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
	SVT_CHECK(saw_event(a.ctx, IBV_EVENT_PORT_ERR));
	SVT_CHECK(!saw_event(a.ctx, IBV_EVENT_QP_FATAL));

	/* posted to the QP in ERR: accepted, never completed, slots held */
	for (i = 0; i < WR; i++)
		SVT_EQ(write1(&a, &ib, 10 + (uint64_t)i), 0);
	SVT_EQ(write1(&a, &ib, 99), ENOMEM);
	SVT_EQ(svt_post_recv(&a, (uintptr_t)a.buf, 64, a.mr->lkey, 8), 0);
	n = svt_poll_for(a.cq, wc, 4, 100);
	SVT_EQ(n, 0);
	SVT_CHECK(!saw_event(a.ctx, IBV_EVENT_QP_FATAL));

	/* RESET: nothing completes, and the QP works again with every slot */
	{
		struct ibv_qp_attr r = { .qp_state = IBV_QPS_RESET };

		SVT_EQ(ibv_modify_qp(a.qp, &r, IBV_QP_STATE), 0);
	}
	SVT_EQ(svt_poll_for(a.cq, wc, 4, 50), 0);
	SVT_EQ(svt_control("port-up simib0 1"), 0);
	svt_connect(&a, &ib, 14, 7); /* INIT -> RTR -> RTS */
	for (i = 0; i < WR; i++)
		SVT_EQ(write1(&a, &ib, 100 + (uint64_t)i), 0);
	SVT_EQ(svt_poll_for(a.cq, wc, 4, 2000), 4);
	SVT_EQ(svt_poll_for(a.cq, wc, 4, 2000), 4);
	for (i = 0; i < 4; i++)
		SVT_EQ(wc[i].status, IBV_WC_SUCCESS);
	SVT_EQ(wc[3].wr_id, 107);
	svt_ep_fini(&a);
	svt_ep_fini(&b);
	printf("sv_rxe: link_down=local and err_post=drop behave as rdma_rxe\n");
	return 0;
}
