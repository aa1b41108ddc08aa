/*
 * fault_abandon - nothing is left behind by connects and accepts their
 * caller stops calling (as an aborting communicator does), and the connect
 * state never lives in the caller's handle buffer.
 *  1. v12, per-communicator context: 10 connects stepped into the middle of
 *     their handshake (QPs created, metadata sent) and one accept in
 *     progress are abandoned; after closeListen and finalize of THAT
 *     context every fd is back (counted here, while the test's own context
 *     lives on), and simverbs' leak report at exit finds no QP, CQ, MR or
 *     PD (SIMVERBS_LEAK_CHECK=1 under make check: a leak exits 99).
 *  2. v10, per-process context (no finalize): the same in a child process;
 *     the plugin gives it all back at unload, so the child's leak report is
 *     clean (exit status 0, not 99).
 *  3. A copied handle: a connect started on buffer A is finished through a
 *     copy B; calling connect on A again gets a clear error ("stale copy")
 *     every time, never a read of freed state or NULL forever (run under
 *     valgrind by make check-valgrind).
 */
#include "config.h"

#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fh.h"

#define NCONN 10
#define TIMEOUT_MS 3000

/* Steps NCONN connects on copies of handle (and the listener) into mid-handshake. */
static void abandon_connects(ncclResult_t (*conn)(void *ctx, int dev, void *h, void **s),
			     ncclResult_t (*acc)(void *lc, void **r), void *ctx, int dev,
			     const char *handle, void *lc)
{
	static char hs[NCONN][NCCL_NET_HANDLE_MAXSIZE];
	void *s = NULL, *r = NULL;
	int i, round;

	for (i = 0; i < NCONN; i++)
		memcpy(hs[i], handle, NCCL_NET_HANDLE_MAXSIZE);
	for (round = 0; round < 4; round++) {
		for (i = 0; i < NCONN; i++) {
			FH_CHECK(conn(ctx, dev, hs[i], &s) == ncclSuccess && !s,
				 "connect %d finished or failed in round %d", i, round);
		}
		if (round == 0) /* one accept step: it stays in progress too */
			FH_CHECK(acc(lc, &r) == ncclSuccess && !r, "accept finished");
		usleep(2000);
	}
}

/* ---- 1: v12 context ---------------------------------------------------------- */
static struct fh *g_f;

static ncclResult_t conn12(void *ctx, int dev, void *h, void **s)
{
	ncclNetDeviceHandle_v12_t *dh = NULL;

	return g_f->net->connect(ctx, dev, h, s, &dh);
}

static ncclResult_t acc12(void *lc, void **r)
{
	ncclNetDeviceHandle_v12_t *dh = NULL;

	return g_f->net->accept(lc, r, &dh);
}

static void per_context(struct fh *f)
{
	ncclNetCommConfig_v12_t cfg = { .trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF };
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	void *ctx2 = NULL, *lc;
	int fds0, fds1;

	g_f = f;
	fds0 = fh_count_fds();
	FH_OK(f->net->init(&ctx2, 0x77, &cfg, e2e_logger, NULL));
	FH_OK(f->net->listen(ctx2, 0, handle, &lc));
	abandon_connects(conn12, acc12, ctx2, 0, handle, lc);
	fds1 = fh_count_fds();
	FH_CHECK(fds1 > fds0 + NCONN, "the connects hold only %d fds", fds1 - fds0);
	FH_OK(f->net->closeListen(lc));
	FH_OK(f->net->finalize(ctx2));
	FH_CHECK(fh_count_fds() == fds0, "%d fds still open after closeListen and finalize "
		 "(%d during the handshakes)", fh_count_fds() - fds0, fds1 - fds0);
	fh_log("v12: %d abandoned connects (%d fds) reclaimed at finalize of their context",
	       NCONN, fds1 - fds0);
}

/* ---- 2: v10 in a child --------------------------------------------------------- */
static struct e2e_net g_n;

static ncclResult_t conn10(void *ctx, int dev, void *h, void **s)
{
	(void)ctx;
	return e2e_connect(&g_n, dev, h, s);
}

static ncclResult_t acc10(void *lc, void **r)
{
	return e2e_accept(&g_n, lc, r);
}

static int legacy_child(void *arg)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	void *lc;
	int rc = e2e_open(&g_n, 10);

	(void)arg;
	if (rc)
		return rc;
	E2E_OK(e2e_listen(&g_n, 0, handle, &lc));
	abandon_connects(conn10, acc10, NULL, 0, handle, lc);
	E2E_OK(e2e_close_listen(&g_n, lc));
	return 0; /* exit: the plugin's unload reclaims, then simverbs reports leaks */
}

static void per_process(void)
{
	pid_t pid = e2e_spawn(NULL, legacy_child, NULL);
	int st = e2e_reap(pid, 60 * fh_scale());

	FH_CHECK(st == 0, "v10 child with abandoned connects exited with %d (99: simverbs found "
		 "leaked objects at exit)", st);
	fh_log("v10: abandoned connects reclaimed at unload (leak report clean)");
}

/* ---- 3: copied handle ---------------------------------------------------------- */
static void copied_handle(struct fh *f)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE], a[NCCL_NET_HANDLE_MAXSIZE], b[NCCL_NET_HANDLE_MAXSIZE];
	ncclNetDeviceHandle_v12_t *dh = NULL;
	void *lc, *s = NULL, *r = NULL;
	int i, w0;

	FH_OK(f->net->listen(f->ctx, 0, handle, &lc));
	memcpy(a, handle, sizeof(a));
	for (i = 0; i < 3; i++) {
		FH_OK(f->net->connect(f->ctx, 0, a, &s, &dh));
		FH_CHECK(!s, "connect finished without accept");
	}
	memcpy(b, a, sizeof(b)); /* the copy carries the in-progress reference */
	fh_join(f, lc, 0, b, &s, &r, 20, "connect through the copy did not finish");
	w0 = fh_warn_count();
	for (i = 0; i < 3; i++) {
		void *s2 = NULL;
		ncclResult_t res = f->net->connect(f->ctx, 0, a, &s2, &dh);

		FH_CHECK(res != ncclSuccess && !s2, "connect on the stale original buffer returned "
			 "%d, comm %p (call %d): expected a clear error", res, s2, i);
	}
	FH_CHECK(fh_warn_find(w0, "stale copy", "fresh copy", NULL) >= 0,
		 "the error does not say the buffer is a stale copy");
	fh_log("stale handle: %s", fh_warn_get(fh_warn_find(w0, "stale copy", NULL)));
	FH_OK(f->net->closeSend(s));
	FH_OK(f->net->closeRecv(r));
	FH_OK(f->net->closeListen(lc));
}

int main(void)
{
	struct fh f;
	char tmo[16];
	int rc;

	fh_watchdog(120);
	snprintf(tmo, sizeof(tmo), "%d", (int)(TIMEOUT_MS * fh_scale()));
	setenv("NCCL_VERBS_CONNECT_TIMEOUT_MS", tmo, 1);
	per_process(); /* first: the child must not inherit a loaded plugin */
	rc = fh_open(&f);
	if (rc)
		return rc;
	per_context(&f);
	copied_handle(&f);
	fh_close(&f);
	fh_log("PASS");
	return 0;
}
