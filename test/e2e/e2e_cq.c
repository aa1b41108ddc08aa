/*
 * e2e_cq - completion queues never overrun, even on a device whose max_cqe
 * is small (SIMVERBS_LIMITS) and while the receiver does not poll.
 *
 * Each wave: the receiver posts as many irecvs as the plugin accepts (up to
 * NCCL's 32), the sender sends them all and waits until every send has
 * completed, so every receive completion now sits unpolled in the
 * receiver's CQ; only then does the receiver test its requests. Every
 * message must arrive intact and nothing may be warned. A plugin that sizes
 * its CQs without regard to the WRs its QPs may have outstanding overruns the
 * CQ here (CQ error event, QPs in error).
 *
 * Cases (each in its own process and fabric, since the limits and knobs are
 * read at load): one QP per connection on IB with max_cqe 32, four QPs with
 * split data on RoCE with max_cqe 96 (four receive completions per message
 * on one CQ), and two split QPs on an IB device with its default limits (all
 * 32 receives of a wave unpolled at once).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e.h"

#define T 20.0
#define WAVE 32			/* NCCL_NET_MAX_REQUESTS */
#define SLOT (64u << 10)	/* bytes per in-flight message */
#define MESSAGES 300

struct cq_case {
	const char *name;
	const char *dev;	/* device name prefix */
	const char *limits;	/* SIMVERBS_LIMITS */
	const char *qps;	/* NCCL_IB_QPS_PER_CONNECTION */
	const char *split;	/* NCCL_IB_SPLIT_DATA_ON_QPS */
};

static size_t msg_size(int id)
{
	static const size_t sizes[] = { 0, 1, 100, 4096, 5000, SLOT };

	return sizes[id % 6] > 100 ? sizes[id % 6] - (size_t)(id % 3) : sizes[id % 6];
}

/* One wave of up to WAVE messages starting at id; returns how many were posted. */
static int wave(struct e2e_net *n, void *sc, void *rc, void *smh, void *rmh, char *sbuf,
		char *rbuf, int id, int left)
{
	void *rreq[WAVE], *sreq[WAVE], *data[WAVE];
	size_t cap = SLOT;
	int tags[WAVE], k, i, rs[8], ss;

	for (k = 0; k < WAVE && k < left; k++) {
		rreq[k] = NULL;
		data[k] = rbuf + (size_t)k * SLOT;
		tags[k] = id + k;
		if (k == 0) /* the first must be accepted: everything earlier was polled */
			rreq[k] = e2e_irecv_wait(n, rc, 1, &data[k], &cap, &tags[k], &rmh, T);
		else
			E2E_OK(e2e_irecv(n, rc, 1, &data[k], &cap, &tags[k], &rmh, &rreq[k]));
		if (!rreq[k])
			break;
	}
	for (i = 0; i < k; i++) {
		e2e_fill(sbuf + (size_t)i * SLOT, msg_size(id + i), (uint32_t)(id + i));
		sreq[i] = e2e_isend_wait(n, sc, sbuf + (size_t)i * SLOT, msg_size(id + i), id + i,
					 smh, T);
	}
	for (i = 0; i < k; i++)
		E2E_OK(e2e_wait(n, sreq[i], &ss, T));
	/* Every receive completion of this wave has been delivered; none polled yet. */
	for (i = 0; i < k; i++) {
		E2E_OK(e2e_wait(n, rreq[i], rs, T));
		if ((size_t)rs[0] != msg_size(id + i) ||
		    e2e_verify(rbuf + (size_t)i * SLOT, msg_size(id + i), (uint32_t)(id + i)) >= 0)
			E2E_FAIL("message %d: received %d of %zu bytes or wrong content", id + i,
				 rs[0], msg_size(id + i));
	}
	return k;
}

static int run_case(void *arg)
{
	const struct cq_case *cc = arg;
	struct e2e_net n;
	const char *base = getenv("SIMVERBS_FABRIC");
	char fabric[128], *sbuf, *rbuf;
	void *sc, *rc, *smh, *rmh;
	int r, dev, id = 0, k, most = 0;

	snprintf(fabric, sizeof(fabric), "%s-%s", base ? base : "e2e-cq", cc->name);
	setenv("SIMVERBS_FABRIC", fabric, 1);
	if (cc->limits)
		setenv("SIMVERBS_LIMITS", cc->limits, 1);
	else
		unsetenv("SIMVERBS_LIMITS");
	setenv("NCCL_IB_QPS_PER_CONNECTION", cc->qps, 1);
	setenv("NCCL_IB_SPLIT_DATA_ON_QPS", cc->split, 1);
	r = e2e_open(&n, 12);
	if (r)
		return r;
	dev = e2e_find_dev(&n, cc->dev);
	if (dev < 0)
		E2E_FAIL("%s: no device %s", cc->name, cc->dev);
	sbuf = aligned_alloc(4096, (size_t)WAVE * SLOT);
	rbuf = aligned_alloc(4096, (size_t)WAVE * SLOT);
	E2E_CHECK(sbuf && rbuf);
	e2e_pair(&n, dev, &sc, &rc, T);
	E2E_OK(e2e_reg_mr(&n, sc, sbuf, (size_t)WAVE * SLOT, NCCL_PTR_HOST, &smh));
	E2E_OK(e2e_reg_mr(&n, rc, rbuf, (size_t)WAVE * SLOT, NCCL_PTR_HOST, &rmh));
	while (id < MESSAGES) {
		k = wave(&n, sc, rc, smh, rmh, sbuf, rbuf, id, MESSAGES - id);
		most = k > most ? k : most;
		id += k;
	}
	E2E_OK(e2e_dereg_mr(&n, sc, smh));
	E2E_OK(e2e_dereg_mr(&n, rc, rmh));
	E2E_OK(e2e_close_send(&n, sc));
	E2E_OK(e2e_close_recv(&n, rc));
	if (e2e_warn_count())
		E2E_FAIL("%s: warnings:\n%s", cc->name, e2e_warn_text());
	e2e_close(&n);
	free(sbuf);
	free(rbuf);
	e2e_note("%s: %d messages, up to %d unpolled receives per wave: ok", cc->name, id, most);
	return 0;
}

int main(void)
{
	static const struct cq_case cases[] = {
		{ "ib-1qp-cqe32", "simib0", "max_cqe=32", "1", "0" },
		{ "roce-4qp-split-cqe96", "simroce0", "max_cqe=96", "4", "1" },
		{ "ib-2qp-split-default", "simib0", NULL, "2", "1" },
	};
	unsigned i;
	int st, failed = 0, skipped = 0;

	alarm(150);
	setenv("SIMVERBS_DEVICES", "simib0:ll=ib;simroce0:ll=eth", 1);
	unsetenv("NCCL_IB_HCA");
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		st = e2e_reap(e2e_spawn(NULL, run_case, (void *)&cases[i]), 60.0);
		if (st == 77)
			skipped++;
		else if (st != 0) {
			e2e_note("case %s failed (status %d)", cases[i].name, st);
			failed++;
		}
	}
	if (failed)
		return 1;
	return skipped == (int)i ? 77 : 0;
}
