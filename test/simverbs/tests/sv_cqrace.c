/*
 * Many producers, one consumer on a CQ that never legitimately fills: NP
 * threads each drive a QP pair whose responders share one receive CQ, with
 * at most CREDITS receives posted per responder (NP * CREDITS < cqe), while
 * the main thread polls that CQ and reposts.  No CQ overrun may ever be
 * reported.  (Regression: a producer that read the tail, was preempted
 * while other producers pushed and the consumer polled past that tail, then
 * read the head, computed tail - head as a huge unsigned number and declared
 * a false overrun - the intermittent CQ_ERR of the long soak.)  The race
 * needs a preemption at one instruction, so a second run (in a child) sets
 * the test knob SIMVERBS_TEST_CQ_PUSH_DELAY_US, which pauses every push
 * between reading the tail and the head: the old code failed that at once.
 */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>

#include "svt.h"

#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)
#define NP 3
#define CREDITS 16
#define CQE 64
#define RUN_MS 1500

struct prod {
	pthread_t th;
	struct svt_ep a, b;		/* a writes with imm into b */
	struct ibv_cq *scq;
	_Atomic int credits;
	uint64_t sent;
};

static _Atomic int stop;

static void *producer(void *arg)
{
	struct prod *p = arg;
	struct ibv_wc wc[16];
	uint64_t n = 0;

	while (!atomic_load(&stop)) {
		int rc;

		if (ibv_poll_cq(p->scq, 16, wc) < 0)
			break;
		if (atomic_load(&p->credits) <= 0)
			continue;
		rc = svt_post_write(&p->a, IBV_WR_RDMA_WRITE_WITH_IMM, (uintptr_t)p->a.buf, 8,
				    p->a.mr->lkey, (uintptr_t)p->b.buf, p->b.mr->rkey, 1,
				    (n % 8) == 7 ? IBV_SEND_SIGNALED : 0, n);
		if (rc == ENOMEM)
			continue;	/* send queue full until a signalled one is polled */
		SVT_EQ(rc, 0);
		atomic_fetch_sub(&p->credits, 1);
		n++;
	}
	p->sent = n;
	return NULL;
}

static struct ibv_qp *mkqp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq)
{
	struct ibv_qp *qp = ibv_create_qp(pd, &(struct ibv_qp_init_attr){
		.send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = CREDITS, .max_send_sge = 1,
			 .max_recv_sge = 1 } });

	SVT_CHECK(qp);
	return qp;
}

static int run_phase(int run_ms)
{
	struct svt_ep base;
	struct prod p[NP];
	struct ibv_wc wc[32];
	struct svt_info ai, bi;
	struct pollfd pfd;
	uint64_t end, got = 0, sent = 0;

	/* base: context, PD, the shared receive CQ, one MR */
	svt_ep_init(&base, "simib0", CQE, 16, 1 << 16, ACC);
	for (int i = 0; i < NP; i++) {
		p[i].a = base;
		p[i].b = base;
		p[i].scq = ibv_create_cq(base.ctx, CQE, NULL, NULL, 0);
		SVT_CHECK(p[i].scq);
		p[i].a.qp = mkqp(base.pd, p[i].scq, p[i].scq);
		p[i].b.qp = mkqp(base.pd, base.cq, base.cq);
		ai = svt_ep_info(&p[i].a);
		bi = svt_ep_info(&p[i].b);
		svt_connect(&p[i].a, &bi, 14, 7);
		svt_connect(&p[i].b, &ai, 14, 7);
		for (int k = 0; k < CREDITS; k++)
			SVT_EQ(svt_post_recv(&p[i].b, 0, 0, 0, (uint64_t)i), 0);
		atomic_store(&p[i].credits, CREDITS);
	}
	atomic_store(&stop, 0);
	for (int i = 0; i < NP; i++)
		SVT_EQ(pthread_create(&p[i].th, NULL, producer, &p[i]), 0);
	end = svt_now_ns() + (uint64_t)run_ms * 1000000ull;
	while (svt_now_ns() < end) {
		int n = ibv_poll_cq(base.cq, 32, wc);

		SVT_CHECK(n >= 0);
		for (int k = 0; k < n; k++) {
			struct prod *q = &p[wc[k].wr_id % NP];

			if (wc[k].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "completion %llu: %s (false CQ overrun?)\n",
					(unsigned long long)got, ibv_wc_status_str(wc[k].status));
				return 1;
			}
			SVT_EQ(wc[k].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
			SVT_EQ(svt_post_recv(&q->b, 0, 0, 0, wc[k].wr_id), 0);
			atomic_fetch_add(&q->credits, 1);
			got++;
		}
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < NP; i++) {
		SVT_EQ(pthread_join(p[i].th, NULL), 0);
		sent += p[i].sent;
	}
	pfd = (struct pollfd){ .fd = base.ctx->async_fd, .events = POLLIN };
	if (poll(&pfd, 1, 0) == 1) {
		struct ibv_async_event ev;

		SVT_EQ(ibv_get_async_event(base.ctx, &ev), 0);
		fprintf(stderr, "async event %s\n", ibv_event_type_str(ev.event_type));
		ibv_ack_async_event(&ev);
		return 1;
	}
	for (int i = 0; i < NP; i++) {
		while (ibv_poll_cq(p[i].scq, 32, wc) > 0)
			;
		SVT_EQ(ibv_destroy_qp(p[i].a.qp), 0);
		SVT_EQ(ibv_destroy_qp(p[i].b.qp), 0);
		SVT_EQ(ibv_destroy_cq(p[i].scq), 0);
	}
	while (ibv_poll_cq(base.cq, 32, wc) > 0)
		;
	svt_ep_fini(&base);
	printf("%d producers, one consumer: %llu completions, %llu writes, no overrun: ok\n", NP,
	       (unsigned long long)got, (unsigned long long)sent);
	return 0;
}

int main(void)
{
	pid_t pid;

	svt_control_fn_get();
	alarm(60);
	if (run_phase(RUN_MS))
		return 1;
	/* again with every push pausing between reading the tail and the head
	 * (a test knob, read at attach: a child), so the race happens for sure */
	fflush(stdout);
	pid = fork();
	SVT_CHECK(pid >= 0);
	if (!pid) {
		setenv("SIMVERBS_TEST_CQ_PUSH_DELAY_US", "100", 1);
		exit(run_phase(RUN_MS));	/* exit: simverbs detaches, leak check */
	}
	SVT_EQ(svt_wait_child(pid), 0);
	printf("with a widened push window: ok\n");
	return 0;
}
