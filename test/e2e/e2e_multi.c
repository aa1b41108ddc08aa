/*
 * e2e_multi - several connections at once between two processes, each side
 * driving all its connects (or accepts) interleaved from one thread, then
 * traffic interleaved across the connections. The sender uses 3 QPs per
 * connection and splits every message over them (NCCL_IB_QPS_PER_CONNECTION=3,
 * NCCL_IB_SPLIT_DATA_ON_QPS=1) while the receiver's own settings differ: the
 * receiver must follow the sender. A second run uses 4 QPs without split
 * (messages rotate over QPs). Last, both again with 18-entry queues, inline
 * clear-to-send entries and adaptive-routing-style separate immediates.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e.h"

#define T 60.0
#define NCONN 4
#define ROUNDS 24
#define MAXMSG (1u << 20)

struct multi {
	int handle_pipe[2], done_pipe[2];
	const char *qps, *split;
};

static size_t msg_size(int round, int c)
{
	size_t s = ((size_t)round * 7919u + (size_t)c * 104729u) % MAXMSG;

	return round % 5 == 0 ? (size_t)round % 3 : s; /* some 0, 1, 2-byte messages too */
}

static int receiver(void *arg)
{
	struct multi *m = arg;
	struct e2e_net n;
	char handles[NCONN][E2E_HANDLE_SIZE], ok = 1;
	void *lc[NCONN], *rc[NCONN] = { 0 }, *mh[NCONN], *req[NCONN];
	char *buf[NCONN];
	int c, round, left = NCONN, r = e2e_open(&n, 12), sizes[8], tag = 3;
	double t0;

	if (r)
		return r;
	for (c = 0; c < NCONN; c++) {
		E2E_OK(e2e_listen(&n, 0, handles[c], &lc[c]));
		buf[c] = aligned_alloc(4096, MAXMSG);
		E2E_CHECK(buf[c] != NULL);
		memset(buf[c], 0, MAXMSG); /* defined for memcheck: the data arrive by RDMA */
	}
	e2e_pipe_write(m->handle_pipe[1], handles, sizeof(handles));
	for (t0 = e2e_now(); left > 0; ) {
		for (c = 0; c < NCONN; c++) {
			if (rc[c])
				continue;
			E2E_OK(e2e_accept(&n, lc[c], &rc[c]));
			if (rc[c]) {
				left--;
				E2E_OK(e2e_close_listen(&n, lc[c]));
				E2E_OK(e2e_reg_mr(&n, rc[c], buf[c], MAXMSG, NCCL_PTR_HOST, &mh[c]));
			}
		}
		if (e2e_now() - t0 > T)
			E2E_FAIL("%d accepts still pending after %.0f s", left, T);
	}
	for (round = 0; round < ROUNDS; round++) {
		for (c = 0; c < NCONN; c++) {
			void *d = buf[c];
			size_t cap = MAXMSG;

			req[c] = e2e_irecv_wait(&n, rc[c], 1, &d, &cap, &tag, &mh[c], T);
		}
		for (c = NCONN - 1; c >= 0; c--) {
			size_t want = msg_size(round, c);

			E2E_OK(e2e_wait(&n, req[c], sizes, T));
			if ((size_t)sizes[0] != want ||
			    e2e_verify(buf[c], want, (uint32_t)(round * NCONN + c)) >= 0)
				E2E_FAIL("round %d conn %d: %d bytes (expected %zu) or bad content", round,
					 c, sizes[0], want);
		}
	}
	e2e_pipe_write(m->done_pipe[1], &ok, 1);
	for (c = 0; c < NCONN; c++) {
		E2E_OK(e2e_dereg_mr(&n, rc[c], mh[c]));
		E2E_OK(e2e_close_recv(&n, rc[c]));
		free(buf[c]);
	}
	if (e2e_warn_count())
		E2E_FAIL("receiver warnings:\n%s", e2e_warn_text());
	e2e_close(&n);
	return 0;
}

static int sender(void *arg)
{
	struct multi *m = arg;
	struct e2e_net n;
	char handles[NCONN][E2E_HANDLE_SIZE], ok;
	void *sc[NCONN] = { 0 }, *mh[NCONN], *req[NCONN];
	char *buf[NCONN];
	int c, round, left = NCONN, r;
	double t0;

	setenv("NCCL_IB_QPS_PER_CONNECTION", m->qps, 1);
	setenv("NCCL_IB_SPLIT_DATA_ON_QPS", m->split, 1);
	r = e2e_open(&n, 12);
	if (r)
		return r;
	e2e_pipe_read(m->handle_pipe[0], handles, sizeof(handles), T);
	for (t0 = e2e_now(); left > 0; ) {
		for (c = 0; c < NCONN; c++) {
			if (sc[c])
				continue;
			E2E_OK(e2e_connect(&n, 0, handles[c], &sc[c]));
			if (sc[c]) {
				left--;
				buf[c] = aligned_alloc(4096, MAXMSG);
				E2E_CHECK(buf[c] != NULL);
				memset(buf[c], 0, MAXMSG);
				E2E_OK(e2e_reg_mr(&n, sc[c], buf[c], MAXMSG, NCCL_PTR_HOST, &mh[c]));
			}
		}
		if (e2e_now() - t0 > T)
			E2E_FAIL("%d connects still pending after %.0f s", left, T);
	}
	for (round = 0; round < ROUNDS; round++) {
		for (c = 0; c < NCONN; c++) {
			size_t size = msg_size(round, c);

			e2e_fill(buf[c], size, (uint32_t)(round * NCONN + c));
			req[c] = e2e_isend_wait(&n, sc[c], buf[c], size, 3, mh[c], T);
		}
		for (c = 0; c < NCONN; c++)
			E2E_OK(e2e_wait(&n, req[c], NULL, T));
	}
	e2e_pipe_read(m->done_pipe[0], &ok, 1, T);
	for (c = 0; c < NCONN; c++) {
		E2E_OK(e2e_dereg_mr(&n, sc[c], mh[c]));
		E2E_OK(e2e_close_send(&n, sc[c]));
		free(buf[c]);
	}
	if (e2e_warn_count())
		E2E_FAIL("sender warnings:\n%s", e2e_warn_text());
	e2e_close(&n);
	return 0;
}

static int run(const char *hca, const char *qps, const char *split)
{
	struct multi m = { .qps = qps, .split = split };
	pid_t rp, sp;
	int rs, ss;
	double t0 = e2e_now();

	if (pipe(m.handle_pipe) || pipe(m.done_pipe))
		E2E_FAIL("pipe");
	rp = e2e_spawn(hca, receiver, &m);
	sp = e2e_spawn(hca, sender, &m);
	rs = e2e_reap(rp, T);
	ss = e2e_reap(sp, T);
	e2e_note("%d connections %s, sender %s QPs split=%s: receiver %d, sender %d (%.2f s)",
		 NCONN, hca, qps, split, rs, ss, e2e_now() - t0);
	close(m.handle_pipe[0]);
	close(m.handle_pipe[1]);
	close(m.done_pipe[0]);
	close(m.done_pipe[1]);
	if (rs == 77 && ss == 77)
		return 77;
	return rs || ss;
}

int main(void)
{
	static const char *const devs[] = { "simib0", "simroce0" };
	char fabric[256], hca[2][64];
	int failed = 0, d, nd = e2e_ndevs(2);

	alarm(200);
	for (d = 0; d < nd; d++)
		snprintf(hca[d], sizeof(hca[d]), "=%s", e2e_dev(devs[d]));
	/* the receiver's own (different) settings must not matter */
	setenv("NCCL_IB_QPS_PER_CONNECTION", "2", 1);
	setenv("NCCL_IB_SPLIT_DATA_ON_QPS", "0", 1);
	for (d = 0; d < nd; d++)
		failed += run(hca[d], "3", "1") != 0;
	for (d = 0; d < nd; d++)
		failed += run(hca[d], "4", "0") != 0;
	/* Send/receive queues of 18 WRs (the smallest the plugin accepts): posting must wait
	 * for room instead of overflowing. A fabric of its own: limits are device config.
	 * On real devices the queues keep the device's sizes (its limits are its own). */
	if (!e2e_skip_real("queues of 18 WRs", "SIMVERBS_LIMITS lowers the device's max_qp_wr")) {
		snprintf(fabric, sizeof(fabric), "%s-q18", getenv("SIMVERBS_FABRIC") ?
			 getenv("SIMVERBS_FABRIC") : "e2e-multi");
		setenv("SIMVERBS_FABRIC", fabric, 1);
		setenv("SIMVERBS_LIMITS", "max_qp_wr=18", 1);
	}
	/* and the optional protocol variants: inline clear-to-send, AR-style separate
	 * immediate (forced on, also for RoCE, from 4 KiB) */
	setenv("NCCL_IB_USE_INLINE", "1", 1);
	setenv("NCCL_IB_ADAPTIVE_ROUTING", "1", 1);
	setenv("NCCL_IB_AR_THRESHOLD", "4096", 1);
	failed += run(hca[nd - 1], "3", "1") != 0;
	failed += run(hca[0], "4", "0") != 0;
	return failed ? 1 : 0;
}
