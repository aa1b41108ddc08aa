/*
 * e2e_kill - a peer process killed (SIGKILL) while connecting, while the
 * survivor waits for data, while it has a send waiting for a clear-to-send,
 * and while data is in flight. The survivor must get an error, not a hang,
 * within a bounded time, naming the peer; every later call on that comm
 * must fail fast with the same explanation; closing the failed comm works.
 * A connector killed while the listener's accept waits for its path check
 * (both sides' QPs exist): the accept error names our device and QPN and
 * the peer's QPN too; a listener killed after the connector's metadata went
 * out: the connect error names the connector's device and QPN. A receiver
 * that polls only every 50 ms still finds a dead sender within a few polls
 * (the liveness check's clock-read stride adapts to the polling rate).
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e.h"

#define T 30.0
#define BOUND 15.0 /* the error must come within this many seconds */
#define BUF (16u << 20)

enum kcase {
	K_CONNECT, K_RECV_WAITS, K_SEND_WAITS, K_INFLIGHT, K_ACCEPT, K_LISTENER, K_SLOW_POLL,
	K_NCASES
};
static const char *const kcase_names[K_NCASES] = {
	"killed during connect", "sender killed, receiver waits for data",
	"receiver killed, send waits for a clear-to-send", "receiver killed with data in flight",
	"connector killed during accept", "listener killed after the connector's metadata",
	"sender killed, receiver polls every 50 ms",
};
#define SLOW_POLL_US 50000
/* Polls until the error: about 3 (100 ms liveness interval); a fixed one clock read
 * per NV_LIVENESS_POLLS (64) idle polls took up to 64 here. */
#define SLOW_POLL_MAX 24

struct kill_ctx {
	enum kcase kc;
	int handle_pipe[2], ready_pipe[2], go_pipe[2];
};

static char *buf;
static int slow_poll; /* K_SLOW_POLL: the survivor polls every SLOW_POLL_US */

/* Survivor side: `req` or the next call fails within BOUND; then fail-fast checks. */
static void expect_failure(struct e2e_net *n, void *req, void *comm, int is_send, void *mh)
{
	double t0 = e2e_now(), t1;
	int done = 0, sizes[8], polls = 0;
	ncclResult_t r = ncclSuccess;
	void *req2 = NULL, *data = buf;
	size_t size = 4096;
	int tag = 1;

	while (r == ncclSuccess && !done && e2e_now() - t0 < BOUND) {
		if (req)
			r = e2e_test(n, req, &done, sizes);
		else
			r = e2e_isend(n, comm, buf, BUF, 1, mh, &req); /* no CTS will come */
		polls++;
		if (slow_poll && r == ncclSuccess && !done)
			usleep(SLOW_POLL_US);
	}
	t1 = e2e_now();
	if (r == ncclSuccess)
		E2E_FAIL("no error %.1f s after the peer was killed (done=%d)", t1 - t0, done);
	if (slow_poll && polls > SLOW_POLL_MAX)
		E2E_FAIL("polling every %d ms, the dead peer was found only after %d polls",
			 SLOW_POLL_US / 1000, polls);
	if (slow_poll)
		e2e_note("polling every %d ms: error after %d polls, %.2f s", SLOW_POLL_US / 1000,
			 polls, t1 - t0);
	if (!e2e_warned("peer") && !e2e_warned("remote"))
		E2E_FAIL("the error does not name the peer:\n%s", e2e_warn_text());
	/* sticky: later calls fail fast with the same explanation */
	t0 = e2e_now();
	if (is_send)
		r = e2e_isend(n, comm, buf, 4096, 1, mh, &req2);
	else
		r = e2e_irecv(n, comm, 1, &data, &size, &tag, &mh, &req2);
	if (r == ncclSuccess || req2 || e2e_now() - t0 > 1.0 || !e2e_warned("failed connection"))
		E2E_FAIL("a later call on the failed comm did not fail fast (r=%d):\n%s", (int)r,
			 e2e_warn_text());
}

/* K_ACCEPT: answer the connector's metadata, then fail once it is killed. */
/* Whether a WARN holds what followed by the name of device 0 (the one the test
 * runs on: simverbs' simib0/simroce0, or a real device's). */
static int warned_dev(struct e2e_net *n, const char *what)
{
	struct e2e_props p;
	char want[96];

	E2E_OK(e2e_props(n, 0, &p));
	snprintf(want, sizeof(want), "%s%s", what, p.name);
	return e2e_warned(want);
}

static int survivor_accept(struct kill_ctx *k, struct e2e_net *n, void *lc)
{
	ncclResult_t r = ncclSuccess;
	void *rc = NULL;
	char one = 1;
	double t0;

	e2e_pipe_read(k->go_pipe[0], &one, 1, T); /* its hello and metadata are out */
	for (t0 = e2e_now(); e2e_now() - t0 < 0.3 && r == ncclSuccess && !rc; usleep(1000))
		r = e2e_accept(n, lc, &rc); /* QPs up, our metadata sent, then it waits */
	if (r != ncclSuccess || rc)
		E2E_FAIL("accept ended (%d, %p) without the connector's path check", (int)r, rc);
	e2e_pipe_write(k->ready_pipe[1], &one, 1);
	e2e_pipe_read(k->go_pipe[0], &one, 1, T); /* the connector is dead now */
	r = e2e_accept_wait(n, lc, &rc, BOUND);
	if (r == ncclSuccess)
		E2E_FAIL("accept from a killed connector: no error in %.0f s (comm %p)", BOUND, rc);
	if (!e2e_warned("accept on") || !warned_dev(n, " to ") || !warned_dev(n, "(peer "))
		E2E_FAIL("the accept error does not name our device, QPN and the peer's QPN:\n%s",
			 e2e_warn_text());
	E2E_OK(e2e_close_listen(n, lc));
	return 0;
}

static int survivor_recv(struct kill_ctx *k, struct e2e_net *n)
{
	char handle[E2E_HANDLE_SIZE], one = 1;
	void *lc, *rc, *mh, *data = buf, *req;
	size_t size = BUF;
	int tag = 1, rs[8];

	E2E_OK(e2e_listen(n, 0, handle, &lc));
	e2e_pipe_write(k->handle_pipe[1], handle, sizeof(handle));
	if (k->kc == K_ACCEPT)
		return survivor_accept(k, n, lc);
	slow_poll = k->kc == K_SLOW_POLL;
	E2E_OK(e2e_accept_wait(n, lc, &rc, T));
	E2E_CHECK(rc != NULL);
	E2E_OK(e2e_close_listen(n, lc));
	E2E_OK(e2e_reg_mr(n, rc, buf, BUF, NCCL_PTR_HOST, &mh));
	E2E_OK(e2e_wait(n, e2e_irecv_wait(n, rc, 1, &data, &size, &tag, &mh, T), rs, T));
	req = e2e_irecv_wait(n, rc, 1, &data, &size, &tag, &mh, T);
	e2e_pipe_write(k->ready_pipe[1], &one, 1); /* parent kills the sender now */
	expect_failure(n, req, rc, 0, mh);
	E2E_OK(e2e_dereg_mr(n, rc, mh));
	E2E_OK(e2e_close_recv(n, rc));
	return 0;
}

static int survivor_send(struct kill_ctx *k, struct e2e_net *n)
{
	char handle[E2E_HANDLE_SIZE], one;
	void *sc, *mh, *req = NULL;

	e2e_pipe_read(k->handle_pipe[0], handle, sizeof(handle), T);
	if (k->kc == K_LISTENER) {
		ncclResult_t r;
		int i;

		/* TCP up, hello and metadata sent (our QPs exist); no answer comes */
		for (i = 0, sc = NULL; i < 20 && !sc; i++, usleep(5000))
			E2E_OK(e2e_connect(n, 0, handle, &sc));
		E2E_CHECK(sc == NULL);
		one = 1;
		e2e_pipe_write(k->ready_pipe[1], &one, 1);
		e2e_pipe_read(k->go_pipe[0], &one, 1, T); /* the listener is dead now */
		r = e2e_connect_wait(n, 0, handle, &sc, BOUND);
		if (r == ncclSuccess)
			E2E_FAIL("connect to a killed listener: no error in %.0f s (comm %p)",
				 BOUND, sc);
		if (!e2e_warned("connect to") || !warned_dev(n, " from ") || !e2e_warned("QPN"))
			E2E_FAIL("the connect error does not name our device and QPN:\n%s",
				 e2e_warn_text());
		return 0;
	}
	if (k->kc == K_CONNECT) {
		ncclResult_t r;
		double t0 = e2e_now();

		e2e_pipe_read(k->go_pipe[0], &one, 1, T); /* the listener is dead now */
		r = e2e_connect_wait(n, 0, handle, &sc, BOUND);
		if (r == ncclSuccess)
			E2E_FAIL("connect to a killed listener: no error in %.0f s (comm %p)", BOUND, sc);
		e2e_note("connect failed %.2f s after the listener was killed", e2e_now() - t0);
		return 0;
	}
	E2E_OK(e2e_connect_wait(n, 0, handle, &sc, T));
	E2E_CHECK(sc != NULL);
	E2E_OK(e2e_reg_mr(n, sc, buf, BUF, NCCL_PTR_HOST, &mh));
	E2E_OK(e2e_wait(n, e2e_isend_wait(n, sc, buf, BUF, 1, mh, T), NULL, T));
	e2e_pipe_read(k->go_pipe[0], &one, 1, T); /* the receiver is dead now */
	if (k->kc == K_INFLIGHT)
		req = e2e_isend_wait(n, sc, buf, BUF, 1, mh, T); /* its CTS arrived before death */
	expect_failure(n, req, sc, 1, mh);
	E2E_OK(e2e_dereg_mr(n, sc, mh));
	E2E_OK(e2e_close_send(n, sc));
	return 0;
}

static int victim_recv(struct kill_ctx *k, struct e2e_net *n)
{
	char handle[E2E_HANDLE_SIZE], one = 1;
	void *lc, *rc, *mh, *data = buf;
	size_t size = BUF;
	int tag = 1, rs[8];

	E2E_OK(e2e_listen(n, 0, handle, &lc));
	e2e_pipe_write(k->handle_pipe[1], handle, sizeof(handle));
	if (k->kc != K_CONNECT && k->kc != K_LISTENER) {
		E2E_OK(e2e_accept_wait(n, lc, &rc, T));
		E2E_CHECK(rc != NULL);
		E2E_OK(e2e_reg_mr(n, rc, buf, BUF, NCCL_PTR_HOST, &mh));
		E2E_OK(e2e_wait(n, e2e_irecv_wait(n, rc, 1, &data, &size, &tag, &mh, T), rs, T));
		if (k->kc == K_INFLIGHT)
			(void)e2e_irecv_wait(n, rc, 1, &data, &size, &tag, &mh, T);
		usleep(100000); /* let the CTS land */
	}
	if (k->kc != K_LISTENER) /* there the connector says when to kill */
		e2e_pipe_write(k->ready_pipe[1], &one, 1);
	for (;;)
		pause(); /* SIGKILLed by the parent */
}

static int victim_send(struct kill_ctx *k, struct e2e_net *n)
{
	char handle[E2E_HANDLE_SIZE];
	void *sc, *mh;

	e2e_pipe_read(k->handle_pipe[0], handle, sizeof(handle), T);
	if (k->kc == K_ACCEPT) {
		char one = 1;
		int i;

		/* TCP up, hello and metadata sent; then it stops calling connect */
		for (i = 0, sc = NULL; i < 20 && !sc; i++, usleep(5000))
			E2E_OK(e2e_connect(n, 0, handle, &sc));
		E2E_CHECK(sc == NULL);
		e2e_pipe_write(k->ready_pipe[1], &one, 1);
		for (;;)
			pause();
	}
	E2E_OK(e2e_connect_wait(n, 0, handle, &sc, T));
	E2E_CHECK(sc != NULL);
	E2E_OK(e2e_reg_mr(n, sc, buf, BUF, NCCL_PTR_HOST, &mh));
	E2E_OK(e2e_wait(n, e2e_isend_wait(n, sc, buf, BUF, 1, mh, T), NULL, T));
	for (;;)
		pause();
}

static int child(void *arg, int is_recv)
{
	struct kill_ctx *k = arg;
	struct e2e_net n;
	int r = e2e_open(&n, 12);
	int victim_is_recv = k->kc != K_RECV_WAITS && k->kc != K_ACCEPT && k->kc != K_SLOW_POLL;

	if (r)
		return r;
	buf = aligned_alloc(4096, BUF);
	if (!buf)
		E2E_FAIL("out of memory");
	memset(buf, 1, BUF);
	if (is_recv == victim_is_recv)
		r = is_recv ? victim_recv(k, &n) : victim_send(k, &n);
	else
		r = is_recv ? survivor_recv(k, &n) : survivor_send(k, &n);
	e2e_close(&n);
	free(buf);
	return r;
}

static int recv_child(void *arg)
{
	return child(arg, 1);
}

static int send_child(void *arg)
{
	return child(arg, 0);
}

static int run(enum kcase kc, const char *hca)
{
	struct kill_ctx k = { .kc = kc };
	pid_t rp, sp, victim;
	char one = 1;
	int rs, ss;
	double t0 = e2e_now();

	if (pipe(k.handle_pipe) || pipe(k.ready_pipe) || pipe(k.go_pipe))
		E2E_FAIL("pipe");
	rp = e2e_spawn(hca, recv_child, &k);
	sp = e2e_spawn(hca, send_child, &k);
	victim = kc == K_RECV_WAITS || kc == K_ACCEPT || kc == K_SLOW_POLL ? sp : rp;
	e2e_pipe_read(k.ready_pipe[0], &one, 1, T);
	if (kc == K_ACCEPT) { /* the listener answers the metadata before the kill */
		e2e_pipe_write(k.go_pipe[1], &one, 1);
		e2e_pipe_read(k.ready_pipe[0], &one, 1, T);
	}
	kill(victim, SIGKILL);
	e2e_reap(victim, T);
	e2e_pipe_write(k.go_pipe[1], &one, 1);
	rs = victim == rp ? 0 : e2e_reap(rp, T + BOUND);
	ss = victim == sp ? 0 : e2e_reap(sp, T + BOUND);
	e2e_note("%s (%s): survivor %d (%.2f s)", kcase_names[kc], hca, victim == rp ? ss : rs,
		 e2e_now() - t0);
	close(k.handle_pipe[0]);
	close(k.handle_pipe[1]);
	close(k.ready_pipe[0]);
	close(k.ready_pipe[1]);
	close(k.go_pipe[0]);
	close(k.go_pipe[1]);
	return rs || ss;
}

int main(void)
{
	static const char *const devs[] = { "simib0", "simroce0" };
	char hca[64];
	int kc, d, failed = 0;

	alarm(240);
	setenv("NCCL_VERBS_CONNECT_TIMEOUT_MS", "3000", 1);
	for (kc = 0; kc < K_NCASES; kc++) {
		for (d = 0; d < e2e_ndevs(2); d++) {
			snprintf(hca, sizeof(hca), "=%s", e2e_dev(devs[d]));
			failed += run((enum kcase)kc, hca) != 0;
		}
	}
	return failed ? 1 : 0;
}
