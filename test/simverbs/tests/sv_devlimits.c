/*
 * sv_devlimits - a device's max_qp and max_cq bound what every process of
 * the simulated host holds on it, as a NIC's resource tables do, and
 * nothing else (no fabric-wide cap below them):
 *   - the parent holds 3 of max_qp=6 QPs: a second process of the same host
 *     gets 3, not 6 (counting per process gave it 6), and then the parent
 *     none; the same for max_cq;
 *   - once that process exits, its QPs are the device's again;
 *   - a process that dies holding QPs (SIGKILL) gives them back when the
 *     device runs out;
 *   - a process of another host (SIMVERBS_HOST) has its own device: 6 QPs.
 */
#include <signal.h>

#include "svt.h"

#define MAX_QP 6
#define MAX_CQ 6

static struct svt_pipe P;

static struct ibv_qp *qp_on(struct svt_ep *e)
{
	struct ibv_qp_init_attr qa = { .send_cq = e->cq, .recv_cq = e->cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 4, .max_recv_wr = 4,
						.max_send_sge = 1, .max_recv_sge = 1 } };

	return ibv_create_qp(e->pd, &qa);
}

/* Creates QPs (or CQs) until the device refuses with ENOMEM; returns how many. */
static int fill(struct svt_ep *e, int cq, void **keep, int max)
{
	int n = 0;

	for (;;) {
		void *o = cq ? (void *)ibv_create_cq(e->ctx, 4, NULL, NULL, 0) : (void *)qp_on(e);

		if (!o) {
			SVT_EQ(errno, ENOMEM);
			return n;
		}
		SVT_CHECK(n < max);
		keep[n++] = o;
	}
}

static void drop(void **keep, int n, int cq)
{
	for (int i = 0; i < n; i++)
		SVT_EQ(cq ? ibv_destroy_cq(keep[i]) : ibv_destroy_qp(keep[i]), 0);
}

/* Same host as the parent: fills what is left, reports it, waits. */
static void same_host(void)
{
	struct svt_ep e;
	void *qps[MAX_QP], *cqs[MAX_CQ];
	int nq, nc;

	svt_ep_init(&e, "simib0", 4, 4, 0, 0);	/* 1 CQ, 1 QP */
	nq = fill(&e, 0, qps, MAX_QP);
	nc = fill(&e, 1, cqs, MAX_CQ);
	svt_send(&P, &nq, sizeof(nq));
	svt_send(&P, &nc, sizeof(nc));
	svt_recv(&P, &nq, sizeof(nq));	/* the parent tried; now let go */
	drop(qps, nq, 0);
	drop(cqs, nc, 1);
	svt_ep_fini(&e);
	exit(0);
}

/* Same host, killed while it holds QPs. */
static void dies(void)
{
	struct svt_ep e;
	void *qps[MAX_QP];
	int nq;

	svt_ep_init(&e, "simib0", 4, 4, 0, 0);
	nq = fill(&e, 0, qps, MAX_QP);
	svt_send(&P, &nq, sizeof(nq));
	pause();
	exit(0);
}

/* Another host: a device of its own. */
static void other_host(void)
{
	struct svt_ep e;
	void *qps[MAX_QP];
	int nq;

	setenv("SIMVERBS_HOST", "devlimits-other", 1);
	svt_ep_init(&e, "simib0", 4, 4, 0, 0);
	nq = 1 + fill(&e, 0, qps, MAX_QP);
	svt_send(&P, &nq, sizeof(nq));
	drop(qps, nq - 1, 0);
	svt_ep_fini(&e);
	exit(0);
}

int main(void)
{
	char fab[200];
	struct svt_ep e;
	void *qps[MAX_QP], *more[MAX_QP];
	int nq = 0, nc = 0, n;
	pid_t pid;

	snprintf(fab, sizeof(fab), "%s-devlim", getenv("SIMVERBS_FABRIC") ?
		 getenv("SIMVERBS_FABRIC") : "svt");
	setenv("SIMVERBS_FABRIC", fab, 1);
	setenv("SIMVERBS_LIMITS", "max_qp=6,max_cq=6", 1);
	(void)svt_control_fn_get();
	svt_ep_init(&e, "simib0", 4, 4, 0, 0);	/* 1 CQ, 1 QP */
	for (n = 0; n < 2; n++)
		SVT_CHECK((qps[n] = qp_on(&e)));	/* 3 QPs, 1 CQ */

	pid = svt_fork_peer(&P, same_host);
	svt_recv(&P, &nq, sizeof(nq));
	svt_recv(&P, &nc, sizeof(nc));
	if (nq != 2 || nc != MAX_CQ - 2) {
		fprintf(stderr, "a second process of the host got %d more QPs and %d more CQs "
			"while the first holds 3 QPs and 1 CQ of max_qp=%d, max_cq=%d: expected "
			"2 and %d (the limits count every process's objects)\n", nq, nc, MAX_QP,
			MAX_CQ, MAX_CQ - 2);
		exit(1);
	}
	errno = 0;
	SVT_CHECK(!qp_on(&e) && errno == ENOMEM);	/* the device is full */
	errno = 0;
	SVT_CHECK(!ibv_create_cq(e.ctx, 4, NULL, NULL, 0) && errno == ENOMEM);
	svt_send(&P, &nq, sizeof(nq));
	SVT_EQ(svt_wait_child(pid), 0);
	SVT_EQ(fill(&e, 0, more, MAX_QP), 3);	/* its QPs are back */
	drop(more, 3, 0);
	printf("max_qp, max_cq counted over both processes of a host: ok\n");

	pid = svt_fork_peer(&P, dies);
	svt_recv(&P, &nq, sizeof(nq));
	SVT_EQ(nq, 2);
	SVT_EQ(kill(pid, SIGKILL), 0);
	SVT_EQ(svt_wait_child(pid), 128 + SIGKILL);
	SVT_EQ(fill(&e, 0, more, MAX_QP), 3);	/* reclaimed at the limit */
	drop(more, 3, 0);
	printf("a killed process's QPs go back to the device: ok\n");

	pid = svt_fork_peer(&P, other_host);
	svt_recv(&P, &nq, sizeof(nq));
	SVT_EQ(svt_wait_child(pid), 0);
	SVT_EQ(nq, MAX_QP);
	printf("another host's device has its own max_qp: ok\n");

	drop(qps, 2, 0);
	svt_ep_fini(&e);
	return 0;
}
