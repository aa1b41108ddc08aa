/*
 * Fault injection and events between two processes: port down/up (async
 * events, QP failure), a dropped peer QP and an unreachable GID (retry
 * exceeded after the scaled timeout), error after N operations, a far QP
 * forced into error, added latency, a bandwidth cap, and completion channels
 * woken by a remote write-with-immediate.  Timing checks are lower bounds
 * only (a knob can only make things slower).
 */
#include <poll.h>

#include "svt.h"

#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define BUF (16u << 20)

static struct svt_pipe P;

struct peer {
	pid_t pid;
	struct svt_info info;
};

/* Child: a target endpoint; obeys one command byte from the parent. */
static void child_main(const char *dev, bool with_channel)
{
	struct svt_ep e;
	struct svt_info me, peer;
	struct ibv_comp_channel *ch = NULL;
	char cmd;

	svt_ep_init(&e, dev, 64, 32, BUF, ACC);
	if (with_channel) {
		SVT_EQ(ibv_destroy_qp(e.qp), 0);
		SVT_EQ(ibv_destroy_cq(e.cq), 0);
		ch = ibv_create_comp_channel(e.ctx);
		SVT_CHECK(ch);
		e.cq = ibv_create_cq(e.ctx, 64, &e, ch, 0);
		SVT_CHECK(e.cq);
		e.qp = ibv_create_qp(e.pd, &(struct ibv_qp_init_attr){
			.send_cq = e.cq, .recv_cq = e.cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 32, .max_recv_wr = 32, .max_send_sge = 1,
				 .max_recv_sge = 1 } });
		SVT_CHECK(e.qp);
	}
	me = svt_ep_info(&e);
	svt_send(&P, &me, sizeof(me));
	svt_recv(&P, &peer, sizeof(peer));
	svt_connect(&e, &peer, 18, 7);
	for (int i = 0; i < 16; i++)
		SVT_EQ(svt_post_recv(&e, 0, 0, 0, 100 + (uint64_t)i), 0);
	svt_sync(&P);
	svt_recv(&P, &cmd, 1);
	if (cmd == 'e') {	/* block on the channel until the parent's imm */
		struct ibv_cq *cq;
		void *cctx;

		SVT_EQ(ibv_req_notify_cq(e.cq, 0), 0);
		svt_send(&P, &cmd, 1);
		SVT_EQ(ibv_get_cq_event(ch, &cq, &cctx), 0);
		SVT_CHECK(cq == e.cq && cctx == &e);
		ibv_ack_cq_events(cq, 1);
		SVT_EQ(svt_poll1(e.cq, 20000).opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	} else if (cmd == 'q') {	/* our QP was forced into error */
		struct ibv_async_event ev;
		struct ibv_wc wc;

		wc = svt_poll1(e.cq, 20000);
		SVT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
		SVT_EQ(ibv_get_async_event(e.ctx, &ev), 0);
		SVT_EQ(ev.event_type, IBV_EVENT_QP_FATAL);
		SVT_CHECK(ev.element.qp == e.qp);
		ibv_ack_async_event(&ev);
	} else if (cmd == 'p') {	/* port down then up: events */
		struct ibv_async_event ev;

		SVT_EQ(ibv_get_async_event(e.ctx, &ev), 0);
		SVT_EQ(ev.event_type, IBV_EVENT_PORT_ERR);
		SVT_EQ(ev.element.port_num, 1);
		ibv_ack_async_event(&ev);
		SVT_EQ(ibv_get_async_event(e.ctx, &ev), 0);
		SVT_EQ(ev.event_type, IBV_EVENT_PORT_ACTIVE);
	}
	svt_sync(&P);
	while (ibv_poll_cq(e.cq, 1, &(struct ibv_wc){ 0 }) > 0)
		;
	svt_ep_fini(&e);
	if (ch)
		SVT_EQ(ibv_destroy_comp_channel(ch), 0);
	exit(0);
}

static void start(struct svt_ep *e, struct peer *pr, const char *dev, bool channel)
{
	struct svt_info me;

	svt_pipe_init(&P);
	fflush(stdout);
	pr->pid = fork();
	SVT_CHECK(pr->pid >= 0);
	if (!pr->pid) {
		svt_pipe_side(&P, 1);
		child_main(dev, channel);
	}
	svt_pipe_side(&P, 0);
	svt_ep_init(e, dev, 64, 32, BUF, ACC);
	me = svt_ep_info(e);
	svt_recv(&P, &pr->info, sizeof(pr->info));
	svt_send(&P, &me, sizeof(me));
	svt_connect(e, &pr->info, 18, 7);
	svt_sync(&P);
}

static void finish(struct svt_ep *e, struct peer *pr, char cmd)
{
	svt_send(&P, &cmd, 1);
	svt_sync(&P);
	SVT_EQ(svt_wait_child(pr->pid), 0);
	close(P.rd);
	close(P.wr);
	while (ibv_poll_cq(e->cq, 1, &(struct ibv_wc){ 0 }) > 0)
		;
	svt_ep_fini(e);
}

static struct ibv_wc write1(struct svt_ep *e, struct peer *pr, enum ibv_wr_opcode op,
			    uint32_t len)
{
	SVT_EQ(svt_post_write(e, op, (uintptr_t)e->buf, len, e->mr->lkey, pr->info.addr,
			      pr->info.rkey, 1, IBV_SEND_SIGNALED, 1), 0);
	return svt_poll1(e->cq, 10000);
}

static void check_port_down(void)
{
	struct svt_ep e;
	struct peer pr;
	struct ibv_async_event ev;
	struct ibv_port_attr pa;
	char cmd = 'p';

	start(&e, &pr, "simib0", false);
	svt_send(&P, &cmd, 1);
	SVT_EQ(svt_control("port-down simib0 1"), 0);
	{	/* the async fd is pollable */
		struct pollfd pfd = { .fd = e.ctx->async_fd, .events = POLLIN };

		SVT_EQ(poll(&pfd, 1, 5000), 1);
	}
	SVT_EQ(ibv_get_async_event(e.ctx, &ev), 0);
	SVT_EQ(ev.event_type, IBV_EVENT_PORT_ERR);
	ibv_ack_async_event(&ev);
	SVT_EQ(ibv_query_port(e.ctx, 1, &pa), 0);
	SVT_EQ(pa.state, IBV_PORT_DOWN);
	SVT_CHECK(write1(&e, &pr, IBV_WR_RDMA_WRITE, 8).status != IBV_WC_SUCCESS);
	SVT_EQ(e.qp->state, IBV_QPS_ERR);
	SVT_EQ(svt_control("port-up simib0 1"), 0);
	SVT_EQ(ibv_get_async_event(e.ctx, &ev), 0);
	SVT_EQ(ev.event_type, IBV_EVENT_PORT_ACTIVE);
	SVT_EQ(ibv_query_port(e.ctx, 1, &pa), 0);
	SVT_EQ(pa.state, IBV_PORT_ACTIVE);
	svt_sync(&P);
	SVT_EQ(svt_wait_child(pr.pid), 0);
	close(P.rd);
	close(P.wr);
	while (ibv_poll_cq(e.cq, 1, &(struct ibv_wc){ 0 }) > 0)
		;
	svt_ep_fini(&e);
	printf("port down/up: events, port state, QP failure: ok\n");
}

static void check_unreachable(const char *dev, const char *how)
{
	struct svt_ep e;
	struct peer pr;
	char cmd[128], gid[64];
	uint64_t t0;
	struct ibv_wc wc;

	start(&e, &pr, dev, false);
	SVT_EQ(write1(&e, &pr, IBV_WR_RDMA_WRITE, 8).status, IBV_WC_SUCCESS);
	if (!strcmp(how, "drop-qp")) {
		snprintf(cmd, sizeof(cmd), "drop-qp %u", pr.info.qpn);
	} else {
		inet_ntop(AF_INET6, pr.info.gid.raw, gid, sizeof(gid));
		snprintf(cmd, sizeof(cmd), "gid-unreachable %s", gid);
	}
	SVT_EQ(svt_control(cmd), 0);
	t0 = svt_now_ns();
	wc = write1(&e, &pr, IBV_WR_RDMA_WRITE, 8);
	SVT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR);
	/* timeout 18, retry_cnt 7: 4.096us * 2^18 * 8 * 0.01 = 86 ms */
	SVT_CHECK(svt_now_ns() - t0 >= 80000000ull);
	SVT_EQ(svt_control("reset"), 0);	/* clears unreachable GIDs */
	finish(&e, &pr, 'x');
	printf("%s on %s: retry exceeded after the scaled timeout: ok\n", how, dev);
}

static void check_err_after_and_far_error(void)
{
	struct svt_ep e;
	struct peer pr;
	char cmd[64];

	start(&e, &pr, "simib0", false);
	snprintf(cmd, sizeof(cmd), "qp-err-after 3 %u", e.qp->qp_num);
	SVT_EQ(svt_control(cmd), 0);
	SVT_EQ(write1(&e, &pr, IBV_WR_RDMA_WRITE, 8).status, IBV_WC_SUCCESS);
	SVT_EQ(write1(&e, &pr, IBV_WR_RDMA_WRITE, 8).status, IBV_WC_SUCCESS);
	SVT_EQ(write1(&e, &pr, IBV_WR_RDMA_WRITE, 8).status, IBV_WC_RETRY_EXC_ERR);
	finish(&e, &pr, 'x');

	start(&e, &pr, "simroce0", false);
	SVT_EQ(svt_control("qp-err-after 1 simroce0"), 0);	/* per device */
	SVT_EQ(write1(&e, &pr, IBV_WR_RDMA_WRITE, 8).status, IBV_WC_SUCCESS);
	SVT_EQ(write1(&e, &pr, IBV_WR_RDMA_WRITE, 8).status, IBV_WC_RETRY_EXC_ERR);
	SVT_EQ(svt_control("reset"), 0);
	finish(&e, &pr, 'x');

	start(&e, &pr, "simib0", false);
	snprintf(cmd, sizeof(cmd), "qp-error %u", pr.info.qpn);
	svt_send(&P, &(char){ 'q' }, 1);
	SVT_EQ(svt_control(cmd), 0);
	SVT_EQ(write1(&e, &pr, IBV_WR_RDMA_WRITE, 8).status, IBV_WC_RETRY_EXC_ERR);
	svt_sync(&P);
	SVT_EQ(svt_wait_child(pr.pid), 0);
	close(P.rd);
	close(P.wr);
	while (ibv_poll_cq(e.cq, 1, &(struct ibv_wc){ 0 }) > 0)
		;
	svt_ep_fini(&e);
	printf("qp-err-after, far QP in error (flush + QP_FATAL there): ok\n");
}

static void check_latency_bw_channel(void)
{
	struct svt_ep e;
	struct peer pr;
	uint64_t t0;
	char c;

	start(&e, &pr, "simib0", true);
	SVT_EQ(svt_control("latency 50000000"), 0);
	t0 = svt_now_ns();
	SVT_EQ(write1(&e, &pr, IBV_WR_RDMA_WRITE, 8).status, IBV_WC_SUCCESS);
	SVT_CHECK(svt_now_ns() - t0 >= 50000000ull);
	SVT_EQ(svt_control("latency 0"), 0);
	SVT_EQ(svt_control("bw-cap simib0 100"), 0);	/* 100 MB/s: 10 MB >= 100 ms */
	t0 = svt_now_ns();
	SVT_EQ(write1(&e, &pr, IBV_WR_RDMA_WRITE, 10000000).status, IBV_WC_SUCCESS);
	SVT_CHECK(svt_now_ns() - t0 >= 100000000ull);
	SVT_EQ(svt_control("bw-cap simib0 0"), 0);
	/* completion channel in the child, woken by our write-with-imm */
	svt_send(&P, &(char){ 'e' }, 1);
	svt_recv(&P, &c, 1);
	SVT_EQ(write1(&e, &pr, IBV_WR_RDMA_WRITE_WITH_IMM, 8).status, IBV_WC_SUCCESS);
	svt_sync(&P);
	SVT_EQ(svt_wait_child(pr.pid), 0);
	close(P.rd);
	close(P.wr);
	svt_ep_fini(&e);
	printf("latency knob, bandwidth cap, completion channel across processes: ok\n");
}

int main(void)
{
	svt_control_fn_get();
	check_port_down();
	check_unreachable("simib0", "drop-qp");
	check_unreachable("simroce0", "gid-unreachable");
	check_err_after_and_far_error();
	check_latency_bw_channel();
	return 0;
}
