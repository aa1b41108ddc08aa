/*
 * Event lifetime (rdma-core semantics): ibv_destroy_qp / ibv_destroy_cq do
 * not return while an event handed out for the object by
 * ibv_get_async_event (QP_FATAL, CQ_ERR) or ibv_get_cq_event is still
 * unacknowledged, so an event handler never sees a freed object.  Each case
 * holds an event, destroys the object in another thread, checks that the
 * destroy is still blocked a while later, then acknowledges and checks that
 * the destroy completes.  (One process, loopback QP pairs.)
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>

#include "svt.h"

#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define HOLD_MS 300

struct pair {
	struct svt_ep a, b;
	struct svt_info ai, bi;
};

struct destroyer {
	pthread_t th;
	struct ibv_qp *qp;		/* destroy this QP, or */
	struct ibv_cq *cq;		/* this CQ */
	_Atomic int done;
	int rc;
};

static void *destroy_main(void *arg)
{
	struct destroyer *d = arg;

	d->rc = d->qp ? ibv_destroy_qp(d->qp) : ibv_destroy_cq(d->cq);
	atomic_store(&d->done, 1);
	return NULL;
}

static void destroy_start(struct destroyer *d, struct ibv_qp *qp, struct ibv_cq *cq)
{
	memset(d, 0, sizeof(*d));
	d->qp = qp;
	d->cq = cq;
	SVT_EQ(pthread_create(&d->th, NULL, destroy_main, d), 0);
}

/* The destroy must still be waiting for the acknowledgement. */
static void destroy_blocked(struct destroyer *d)
{
	usleep(HOLD_MS * 1000);
	if (atomic_load(&d->done)) {
		fprintf(stderr, "destroy returned (%d) while an event for the object was "
			"unacknowledged\n", d->rc);
		exit(1);
	}
}

static void destroy_finish(struct destroyer *d)
{
	SVT_EQ(pthread_join(d->th, NULL), 0);
	SVT_EQ(atomic_load(&d->done), 1);
	SVT_EQ(d->rc, 0);
}

/* With bch: b's CQ reports to a completion channel created in *bch. */
static void pair_up(struct pair *p, int cqe, struct ibv_comp_channel **bch)
{
	svt_ep_init(&p->a, "simib0", cqe, 16, 1 << 16, ACC);
	svt_ep_init(&p->b, "simib0", cqe, 16, 1 << 16, ACC);
	if (bch) {
		*bch = ibv_create_comp_channel(p->b.ctx);
		SVT_CHECK(*bch);
		SVT_EQ(ibv_destroy_qp(p->b.qp), 0);
		SVT_EQ(ibv_destroy_cq(p->b.cq), 0);
		p->b.cq = ibv_create_cq(p->b.ctx, cqe, p, *bch, 0);
		SVT_CHECK(p->b.cq);
		p->b.qp = ibv_create_qp(p->b.pd, &(struct ibv_qp_init_attr){
			.send_cq = p->b.cq, .recv_cq = p->b.cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
				 .max_recv_sge = 1 } });
		SVT_CHECK(p->b.qp);
	}
	p->ai = svt_ep_info(&p->a);
	p->bi = svt_ep_info(&p->b);
	svt_connect(&p->a, &p->bi, 14, 7);
	svt_connect(&p->b, &p->ai, 14, 7);
}

static void drain(struct ibv_cq *cq)
{
	struct ibv_wc wc[16];

	while (ibv_poll_cq(cq, 16, wc) > 0)
		;
}

/* Waits for the next async event of `type` on ctx, polling cq meanwhile
 * (an owner learns of a remote error on its next verbs call). */
static void get_event(struct ibv_context *ctx, struct ibv_cq *cq, enum ibv_event_type type,
		      struct ibv_async_event *ev)
{
	uint64_t end = svt_now_ns() + 20000000000ull;

	for (;;) {
		struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };

		SVT_CHECK(svt_now_ns() < end);
		ibv_poll_cq(cq, 0, NULL);
		if (poll(&pfd, 1, 10) != 1)
			continue;
		SVT_EQ(ibv_get_async_event(ctx, ev), 0);
		if (ev->event_type == type)
			return;
		ibv_ack_async_event(ev);
	}
}

/* QP_FATAL held by "the event thread" (here: main) while the QP is destroyed. */
static void check_qp_event(void)
{
	struct pair p;
	struct ibv_async_event ev;
	struct destroyer d;
	char cmd[64];

	pair_up(&p, 64, NULL);
	snprintf(cmd, sizeof(cmd), "qp-error %u", p.a.qp->qp_num);
	SVT_EQ(svt_control(cmd), 0);
	get_event(p.a.ctx, p.a.cq, IBV_EVENT_QP_FATAL, &ev);
	SVT_CHECK(ev.element.qp == p.a.qp);
	drain(p.a.cq);
	destroy_start(&d, p.a.qp, NULL);
	destroy_blocked(&d);
	SVT_EQ(ev.element.qp->qp_num, p.ai.qpn);	/* still valid memory */
	ibv_ack_async_event(&ev);
	destroy_finish(&d);
	p.a.qp = NULL;
	drain(p.b.cq);
	svt_ep_fini(&p.a);
	svt_ep_fini(&p.b);
	printf("destroy_qp waits for the QP_FATAL ack: ok\n");
}

/* CQ_ERR (overrun) held while the CQ is destroyed. */
static void check_cq_async_event(void)
{
	struct pair p;
	struct ibv_async_event ev;
	struct destroyer d;

	pair_up(&p, 4, NULL);
	for (uint64_t i = 0; i < 6; i++)
		SVT_EQ(svt_post_write(&p.a, IBV_WR_RDMA_WRITE, (uintptr_t)p.a.buf, 8,
				      p.a.mr->lkey, p.bi.addr, p.bi.rkey, 0, IBV_SEND_SIGNALED, i),
		       0);
	get_event(p.a.ctx, p.a.cq, IBV_EVENT_CQ_ERR, &ev);
	SVT_CHECK(ev.element.cq == p.a.cq);
	drain(p.a.cq);
	SVT_EQ(ibv_destroy_qp(p.a.qp), 0);	/* no event of its own was handed out */
	p.a.qp = NULL;
	destroy_start(&d, NULL, p.a.cq);
	destroy_blocked(&d);
	SVT_EQ(ev.element.cq->cqe, 4);
	ibv_ack_async_event(&ev);
	destroy_finish(&d);
	p.a.cq = NULL;
	drain(p.b.cq);
	svt_ep_fini(&p.a);
	svt_ep_fini(&p.b);
	printf("destroy_cq waits for the CQ_ERR ack: ok\n");
}

/* A completion event from ibv_get_cq_event held while the CQ is destroyed. */
static void check_comp_event(void)
{
	struct pair p;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct destroyer d;
	struct ibv_wc wc;
	void *cctx;

	pair_up(&p, 16, &ch);
	SVT_EQ(svt_post_recv(&p.b, 0, 0, 0, 7), 0);
	SVT_EQ(ibv_req_notify_cq(p.b.cq, 0), 0);
	SVT_EQ(svt_post_write(&p.a, IBV_WR_RDMA_WRITE_WITH_IMM, (uintptr_t)p.a.buf, 8,
			      p.a.mr->lkey, p.bi.addr, p.bi.rkey, htonl(5), IBV_SEND_SIGNALED, 1),
	       0);
	SVT_EQ(ibv_get_cq_event(ch, &cq, &cctx), 0);
	SVT_CHECK(cq == p.b.cq && cctx == &p);
	wc = svt_poll1(p.b.cq, 20000);
	SVT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	SVT_EQ(ibv_destroy_qp(p.b.qp), 0);
	p.b.qp = NULL;
	destroy_start(&d, NULL, p.b.cq);
	destroy_blocked(&d);
	ibv_ack_cq_events(cq, 1);
	destroy_finish(&d);
	p.b.cq = NULL;
	drain(p.a.cq);
	svt_ep_fini(&p.a);
	SVT_EQ(ibv_destroy_comp_channel(ch), 0);
	svt_ep_fini(&p.b);
	printf("destroy_cq waits for the completion-event ack: ok\n");
}

/* Acknowledged before the destroy: nothing to wait for. */
static void check_acked_first(void)
{
	struct pair p;
	struct ibv_async_event ev;
	char cmd[64];

	pair_up(&p, 64, NULL);
	snprintf(cmd, sizeof(cmd), "qp-error %u", p.a.qp->qp_num);
	SVT_EQ(svt_control(cmd), 0);
	get_event(p.a.ctx, p.a.cq, IBV_EVENT_QP_FATAL, &ev);
	ibv_ack_async_event(&ev);
	drain(p.a.cq);
	drain(p.b.cq);
	svt_ep_fini(&p.a);
	svt_ep_fini(&p.b);
	printf("acknowledged events do not block destroy: ok\n");
}

/* An event still queued for a destroyed CQ is dropped, also once a new CQ
 * has taken the old one's slot (events name slot + generation). */
static void check_stale_cq_event(void)
{
	struct pair p;
	struct ibv_async_event ev;
	struct ibv_cq *cq = NULL, *held[256];
	uint32_t slot;
	int n = 0, fl;

	pair_up(&p, 4, NULL);
	for (uint64_t i = 0; i < 6; i++)
		SVT_EQ(svt_post_write(&p.a, IBV_WR_RDMA_WRITE, (uintptr_t)p.a.buf, 8,
				      p.a.mr->lkey, p.bi.addr, p.bi.rkey, 0, IBV_SEND_SIGNALED, i),
		       0);
	drain(p.a.cq);		/* CQ_ERR (and QP_FATALs) now wait, unread, in the async fd */
	slot = p.a.cq->handle;
	SVT_EQ(ibv_destroy_qp(p.a.qp), 0);
	p.a.qp = NULL;
	SVT_EQ(ibv_destroy_cq(p.a.cq), 0);
	p.a.cq = NULL;
	/* until a new CQ reuses the slot: new CQs take the lowest free slot
	 * (SIMVERBS_TEST_CQ_LOWEST_SLOT, main), those below it are held meanwhile */
	while (n < (int)(sizeof(held) / sizeof(held[0]))) {
		cq = ibv_create_cq(p.a.ctx, 4, NULL, NULL, 0);
		SVT_CHECK(cq);
		if (cq->handle == slot)
			break;
		held[n++] = cq;
		cq = NULL;
	}
	SVT_CHECK(cq);
	for (int i = 0; i < n; i++)
		SVT_EQ(ibv_destroy_cq(held[i]), 0);
	fl = fcntl(p.a.ctx->async_fd, F_GETFL);
	SVT_EQ(fcntl(p.a.ctx->async_fd, F_SETFL, fl | O_NONBLOCK), 0);
	errno = 0;
	if (ibv_get_async_event(p.a.ctx, &ev) == 0) {
		fprintf(stderr, "stale event %s delivered%s\n", ibv_event_type_str(ev.event_type),
			ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == cq ?
			" for the new CQ in the old slot" : "");
		exit(1);
	}
	SVT_EQ(errno, EAGAIN);
	SVT_EQ(ibv_destroy_cq(cq), 0);
	drain(p.b.cq);
	svt_ep_fini(&p.a);
	svt_ep_fini(&p.b);
	printf("events of a destroyed CQ are dropped, also after its slot is reused (%d CQs "
	       "held below it): ok\n", n);
}

int main(void)
{
	setenv("SIMVERBS_TEST_CQ_LOWEST_SLOT", "1", 1);	/* read at attach */
	svt_control_fn_get();
	alarm(120);	/* a destroy that never returns fails instead of hanging */
	check_qp_event();
	check_cq_async_event();
	check_comp_event();
	check_acked_first();
	check_stale_cq_event();
	return 0;
}
