/*
 * sv_srq: shared receive queues, two processes on simib0.  The parent owns an
 * SRQ and two RC QPs bound to it; the child sends to both.  Checks: device
 * limits (max_srq, max_srq_wr, max_srq_sge: EINVAL beyond, ENOMEM past
 * max_srq), modify/query (LIMIT arms, MAX_WR EINVAL without resize, limit >
 * max_wr EINVAL), post_srq_recv (ENOMEM when full, EINVAL past max_sge,
 * *bad_wr), QPs bound (post_recv EINVAL, receive caps 0, query_qp names the
 * SRQ), receives of both QPs served from the one SRQ in FIFO order with the
 * data in place, IBV_EVENT_SRQ_LIMIT_REACHED once below the limit (then
 * disarmed), a bound QP in error: IBV_EVENT_QP_LAST_WQE_REACHED and the SRQ's
 * WQEs stay for the other QP (no flush), destroy_srq EBUSY while bound.
 */
#include "svt.h"

#define NRECV 8
#define SLOT 256

static struct svt_pipe P;

static struct ibv_qp *srq_qp(struct svt_ep *e, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr qa;
	struct ibv_qp *q;

	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = e->cq;
	qa.srq = srq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 4;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_wr = 99999999;	/* ignored with an SRQ */
	qa.cap.max_recv_sge = 99;
	q = ibv_create_qp(e->pd, &qa);
	SVT_CHECK(q);
	SVT_EQ(qa.cap.max_recv_wr, 0);
	SVT_EQ(qa.cap.max_recv_sge, 0);
	return q;
}

static void connect_qp(struct svt_ep *e, struct ibv_qp *q, const struct svt_info *r)
{
	struct ibv_qp *keep = e->qp;

	e->qp = q;
	svt_connect(e, r, 14, 7);
	e->qp = keep;
}

static struct svt_info info_of(struct svt_ep *e, struct ibv_qp *q)
{
	struct svt_info i = svt_ep_info(e);

	i.qpn = q->qp_num;
	return i;
}

static void check_limits(struct svt_ep *e)
{
	struct ibv_device_attr da;
	struct ibv_srq_init_attr sa;

	SVT_EQ(ibv_query_device(e->ctx, &da), 0);
	SVT_CHECK(da.max_srq > 0 && da.max_srq_wr > 0 && da.max_srq_sge > 0);
	SVT_CHECK(!(da.device_cap_flags & IBV_DEVICE_SRQ_RESIZE));
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_sge = 1;
	sa.attr.max_wr = (uint32_t)da.max_srq_wr + 1;
	errno = 0;
	SVT_CHECK(!ibv_create_srq(e->pd, &sa) && errno == EINVAL);
	sa.attr.max_wr = 4;
	sa.attr.max_sge = (uint32_t)da.max_srq_sge + 1;
	errno = 0;
	SVT_CHECK(!ibv_create_srq(e->pd, &sa) && errno == EINVAL);
}

/* A fabric of its own with max_srq=1: the second SRQ is ENOMEM. */
static void max_srq_child(void)
{
	char fab[200];
	struct svt_ep e;
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 2, .max_sge = 1 } };
	struct ibv_srq *s;

	snprintf(fab, sizeof(fab), "%s-lim", getenv("SIMVERBS_FABRIC") ?
		 getenv("SIMVERBS_FABRIC") : "svt");
	setenv("SIMVERBS_FABRIC", fab, 1);
	setenv("SIMVERBS_LIMITS", "max_srq=1", 1);
	svt_ep_init(&e, "simib0", 4, 4, 0, 0);
	s = ibv_create_srq(e.pd, &sa);
	SVT_CHECK(s);
	errno = 0;
	SVT_CHECK(!ibv_create_srq(e.pd, &sa) && errno == ENOMEM);
	SVT_EQ(ibv_dealloc_pd(e.pd), EBUSY);	/* the SRQ holds the PD */
	SVT_EQ(ibv_destroy_srq(s), 0);
	svt_ep_fini(&e);
	exit(0);
}

static int post_srq(struct ibv_srq *s, struct svt_ep *e, int idx, int nsge)
{
	struct ibv_sge sge[2] = {
		{ .addr = (uintptr_t)e->buf + (size_t)idx * SLOT, .length = SLOT,
		  .lkey = e->mr->lkey },
		{ .addr = (uintptr_t)e->buf, .length = 1, .lkey = e->mr->lkey },
	};
	struct ibv_recv_wr wr = { .wr_id = 1000u + (unsigned)idx, .sg_list = sge,
				  .num_sge = nsge }, *bad = NULL;
	int rc = ibv_post_srq_recv(s, &wr, &bad);

	SVT_CHECK(rc ? bad == &wr : bad == NULL);
	return rc;
}

static struct ibv_async_event get_event(struct ibv_context *c, enum ibv_event_type t)
{
	struct ibv_async_event ev;

	SVT_EQ(ibv_get_async_event(c, &ev), 0);
	SVT_EQ(ev.event_type, t);
	return ev;
}

static void child(void)
{
	struct svt_ep e;
	struct ibv_qp *q2;
	struct svt_info mine[2], peer[2];
	struct ibv_wc wc;
	static const int plan[] = { 0, 0, 1, 0, 1 };	/* QP of each of the 5 sends */

	svt_ep_init(&e, "simib0", 64, 8, 8 * SLOT, IBV_ACCESS_LOCAL_WRITE);
	q2 = ibv_create_qp(e.pd, &(struct ibv_qp_init_attr){ .send_cq = e.cq, .recv_cq = e.cq,
		.qp_type = IBV_QPT_RC, .cap = { .max_send_wr = 8, .max_send_sge = 1,
						.max_recv_wr = 1, .max_recv_sge = 1 } });
	SVT_CHECK(q2);
	mine[0] = info_of(&e, e.qp);
	mine[1] = info_of(&e, q2);
	svt_send(&P, mine, sizeof(mine));
	svt_recv(&P, peer, sizeof(peer));
	connect_qp(&e, e.qp, &peer[0]);
	connect_qp(&e, q2, &peer[1]);
	svt_sync(&P);	/* parent: QPs at RTR, receives posted */
	for (int i = 0; i < 5; i++) {
		struct ibv_qp *q = plan[i] ? q2 : e.qp;
		struct ibv_qp *keep = e.qp;

		memset(e.buf, 'a' + i, SLOT);
		e.qp = q;
		SVT_EQ(svt_post_write(&e, IBV_WR_SEND, (uintptr_t)e.buf, 100, e.mr->lkey, 0, 0, 0,
				      IBV_SEND_SIGNALED, (uint64_t)i), 0);
		e.qp = keep;
		wc = svt_poll1(e.cq, 5000);
		SVT_EQ(wc.status, IBV_WC_SUCCESS);
	}
	svt_sync(&P);	/* parent: QP 1 moved to error */
	memset(e.buf, 'z', SLOT);
	{
		struct ibv_qp *keep = e.qp;

		e.qp = q2;
		SVT_EQ(svt_post_write(&e, IBV_WR_SEND, (uintptr_t)e.buf, 10, e.mr->lkey, 0, 0, 0,
				      IBV_SEND_SIGNALED, 99), 0);
		e.qp = keep;
	}
	wc = svt_poll1(e.cq, 5000);
	SVT_EQ(wc.status, IBV_WC_SUCCESS);
	svt_sync(&P);	/* done */
	SVT_EQ(ibv_destroy_qp(q2), 0);
	svt_ep_fini(&e);
	exit(0);
}

static void parent(pid_t pid)
{
	struct svt_ep e;
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = NRECV, .max_sge = 1, .srq_limit = 3 } };
	struct ibv_srq_attr at;
	struct ibv_srq *srq;
	struct ibv_qp *q[2];
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	struct svt_info mine[2], peer[2];
	struct ibv_async_event ev;
	struct ibv_wc wc;
	struct ibv_recv_wr rwr = { 0 }, *bad = NULL;
	static const int plan[] = { 0, 0, 1, 0, 1 };

	svt_ep_init(&e, "simib0", 64, 4, (NRECV + 1) * SLOT, IBV_ACCESS_LOCAL_WRITE);
	check_limits(&e);
	srq = ibv_create_srq(e.pd, &sa);
	SVT_CHECK(srq);
	SVT_EQ(ibv_query_srq(srq, &at), 0);
	SVT_EQ(at.max_wr, NRECV);
	SVT_EQ(at.srq_limit, 0);	/* not armed by create */
	SVT_EQ(ibv_modify_srq(srq, &(struct ibv_srq_attr){ .max_wr = 16 }, IBV_SRQ_MAX_WR), EINVAL);
	SVT_EQ(ibv_modify_srq(srq, &(struct ibv_srq_attr){ .srq_limit = NRECV + 1 }, IBV_SRQ_LIMIT),
	       EINVAL);
	SVT_EQ(ibv_modify_srq(srq, &at, 1 << 5), EINVAL);
	q[0] = srq_qp(&e, srq);
	q[1] = srq_qp(&e, srq);
	SVT_EQ(ibv_post_recv(q[0], &rwr, &bad), EINVAL);
	SVT_CHECK(bad == &rwr);
	SVT_EQ(ibv_query_qp(q[0], &qa, IBV_QP_CAP, &qi), 0);
	SVT_CHECK(qi.srq == srq);
	SVT_EQ(ibv_destroy_srq(srq), EBUSY);
	for (int i = 0; i < NRECV; i++)
		SVT_EQ(post_srq(srq, &e, i, 1), 0);
	SVT_EQ(post_srq(srq, &e, 0, 1), ENOMEM);	/* full */
	SVT_EQ(post_srq(srq, &e, 0, 2), EINVAL);	/* max_sge 1 */
	SVT_EQ(ibv_modify_srq(srq, &(struct ibv_srq_attr){ .srq_limit = 4 }, IBV_SRQ_LIMIT), 0);
	SVT_EQ(ibv_query_srq(srq, &at), 0);
	SVT_EQ(at.srq_limit, 4);
	mine[0] = info_of(&e, q[0]);
	mine[1] = info_of(&e, q[1]);
	svt_recv(&P, peer, sizeof(peer));
	svt_send(&P, mine, sizeof(mine));
	connect_qp(&e, q[0], &peer[0]);
	connect_qp(&e, q[1], &peer[1]);
	svt_sync(&P);
	for (int i = 0; i < 5; i++) {	/* FIFO: the i-th receive takes the i-th WQE */
		wc = svt_poll1(e.cq, 5000);
		SVT_EQ(wc.status, IBV_WC_SUCCESS);
		SVT_EQ(wc.opcode, IBV_WC_RECV);
		SVT_EQ(wc.wr_id, 1000 + i);
		SVT_EQ(wc.byte_len, 100);
		SVT_EQ(wc.qp_num, q[plan[i]]->qp_num);
		SVT_EQ(e.buf[(size_t)i * SLOT], 'a' + i);
		SVT_EQ(e.buf[(size_t)i * SLOT + 99], 'a' + i);
		SVT_EQ(e.buf[(size_t)i * SLOT + 100], 0);
	}
	ev = get_event(e.ctx, IBV_EVENT_SRQ_LIMIT_REACHED);	/* 3 left < 4 */
	SVT_CHECK(ev.element.srq == srq);
	ibv_ack_async_event(&ev);
	SVT_EQ(ibv_query_srq(srq, &at), 0);
	SVT_EQ(at.srq_limit, 0);	/* disarmed */
	/* a bound QP in error: last-WQE event, no flush of the SRQ's WQEs */
	SVT_EQ(ibv_modify_qp(q[0], &(struct ibv_qp_attr){ .qp_state = IBV_QPS_ERR }, IBV_QP_STATE), 0);
	ev = get_event(e.ctx, IBV_EVENT_QP_LAST_WQE_REACHED);
	SVT_CHECK(ev.element.qp == q[0]);
	ibv_ack_async_event(&ev);
	SVT_EQ(svt_poll_for(e.cq, &wc, 1, 50), 0);
	svt_sync(&P);
	wc = svt_poll1(e.cq, 5000);
	SVT_EQ(wc.status, IBV_WC_SUCCESS);
	SVT_EQ(wc.wr_id, 1005);
	SVT_EQ(wc.qp_num, q[1]->qp_num);
	SVT_EQ(e.buf[5 * SLOT], 'z');
	svt_sync(&P);
	SVT_EQ(svt_wait_child(pid), 0);
	SVT_EQ(ibv_destroy_qp(q[0]), 0);
	SVT_EQ(ibv_destroy_srq(srq), EBUSY);	/* q[1] still bound */
	SVT_EQ(ibv_destroy_qp(q[1]), 0);
	SVT_EQ(ibv_destroy_srq(srq), 0);
	svt_ep_fini(&e);
}

int main(void)
{
	pid_t pid;

	(void)svt_control_fn_get();
	fflush(stdout);
	pid = fork();
	SVT_CHECK(pid >= 0);
	if (!pid)
		max_srq_child();
	SVT_EQ(svt_wait_child(pid), 0);
	printf("SRQ limits (max_srq, max_srq_wr, max_srq_sge): ok\n");
	pid = svt_fork_peer(&P, child);
	parent(pid);
	printf("SRQ: shared by two QPs across processes, limit event, last-WQE, no flush, EBUSY: ok\n");
	return 0;
}
