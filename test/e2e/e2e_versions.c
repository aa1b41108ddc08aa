/*
 * e2e_versions - two processes per case, one receiving (listen/accept), one
 * sending (connect), through every exported table ncclNetPlugin_v6 .. v12, on
 * the InfiniBand and the RoCE simverbs device (chosen with NCCL_IB_HCA, as a
 * user would). The handle travels through a pipe, as through NCCL's bootstrap.
 * Traffic: e2e_script.c (0 B .. 1 MiB everywhere, up to 64 MiB on v12).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e.h"
#include "e2e_script.h"

#define T 60.0

struct pair {
	int ver, big;
	const char *dev;
	int handle_pipe[2], done_pipe[2];
};

static char *e2e_buf(size_t len)
{
	char *b = aligned_alloc(4096, len);

	if (!b)
		E2E_FAIL("out of memory (%zu bytes)", len);
	memset(b, 0, len);
	return b;
}

static void check_device(struct e2e_net *n, const char *dev, int *maxrecvs)
{
	struct e2e_props p;
	int ndev = 0;

	E2E_OK(e2e_devices(n, &ndev));
	if (ndev != 1)
		E2E_FAIL("NCCL_IB_HCA=%s: %d devices, expected 1", getenv("NCCL_IB_HCA"), ndev);
	E2E_OK(e2e_props(n, 0, &p));
	if (strncmp(p.name, dev, strlen(dev)) || !(p.ptr_support & NCCL_PTR_HOST))
		E2E_FAIL("device 0 is %s (ptrSupport 0x%x), expected %s", p.name, p.ptr_support, dev);
	*maxrecvs = p.max_recvs;
	e2e_script_max(p.max_p2p);
}

static int receiver(void *arg)
{
	struct pair *pr = arg;
	struct e2e_net n;
	char handle[E2E_HANDLE_SIZE], ok = 1;
	void *lc, *rc, *mh;
	size_t len = e2e_script_bufsize(pr->big);
	char *buf;
	int maxrecvs, r = e2e_open(&n, pr->ver);

	if (r)
		return r;
	check_device(&n, pr->dev, &maxrecvs);
	buf = e2e_buf(len);
	E2E_OK(e2e_listen(&n, 0, handle, &lc));
	e2e_pipe_write(pr->handle_pipe[1], handle, sizeof(handle));
	E2E_OK(e2e_accept_wait(&n, lc, &rc, T));
	E2E_CHECK(rc != NULL);
	E2E_OK(e2e_close_listen(&n, lc)); /* NCCL closes it right after the accept */
	E2E_OK(e2e_reg_mr(&n, rc, buf, len, NCCL_PTR_HOST, &mh));
	e2e_script_recv(&n, rc, buf, mh, pr->big, maxrecvs, (uint32_t)pr->ver * 7919u);
	e2e_pipe_write(pr->done_pipe[1], &ok, 1);
	E2E_OK(e2e_dereg_mr(&n, rc, mh));
	E2E_OK(e2e_close_recv(&n, rc));
	if (e2e_warn_count())
		E2E_FAIL("receiver warnings:\n%s", e2e_warn_text());
	e2e_close(&n);
	free(buf);
	return 0;
}

static int sender(void *arg)
{
	struct pair *pr = arg;
	struct e2e_net n;
	char handle[E2E_HANDLE_SIZE], ok;
	void *sc, *mh;
	size_t len = e2e_script_bufsize(pr->big);
	char *buf;
	int maxrecvs, r = e2e_open(&n, pr->ver);

	if (r)
		return r;
	check_device(&n, pr->dev, &maxrecvs);
	buf = e2e_buf(len);
	e2e_pipe_read(pr->handle_pipe[0], handle, sizeof(handle), T);
	E2E_OK(e2e_connect_wait(&n, 0, handle, &sc, T));
	E2E_CHECK(sc != NULL);
	E2E_OK(e2e_reg_mr(&n, sc, buf, len, NCCL_PTR_HOST, &mh));
	e2e_script_send(&n, sc, buf, mh, pr->big, (uint32_t)pr->ver * 7919u);
	e2e_pipe_read(pr->done_pipe[0], &ok, 1, T); /* keep the comm until the peer checked */
	E2E_OK(e2e_dereg_mr(&n, sc, mh));
	E2E_OK(e2e_close_send(&n, sc));
	if (e2e_warn_count())
		E2E_FAIL("sender warnings:\n%s", e2e_warn_text());
	e2e_close(&n);
	free(buf);
	return 0;
}

static int run_pair(int ver, const char *dev, int big)
{
	struct pair pr = { .ver = ver, .big = big, .dev = dev };
	char hca[64];
	pid_t rp, sp;
	int rs, ss;
	double t0 = e2e_now();

	if (pipe(pr.handle_pipe) || pipe(pr.done_pipe))
		E2E_FAIL("pipe");
	snprintf(hca, sizeof(hca), "=%s", dev);
	rp = e2e_spawn(hca, receiver, &pr);
	sp = e2e_spawn(hca, sender, &pr);
	close(pr.handle_pipe[0]);
	close(pr.handle_pipe[1]);
	close(pr.done_pipe[0]);
	close(pr.done_pipe[1]);
	rs = e2e_reap(rp, T);
	ss = e2e_reap(sp, T);
	e2e_note("v%d %s%s: receiver %d, sender %d (%.2f s)", ver, dev, big ? " (big)" : "", rs, ss,
		 e2e_now() - t0);
	if (rs == 77 && ss == 77)
		return 77;
	return rs || ss;
}

int main(int argc, char **argv)
{
	static const char *const devs[] = { "simib0", "simroce0" };
	int first = E2E_FIRST_VERSION, last = E2E_LAST_VERSION, v, d, r, failed = 0, skipped = 0;

	alarm(300);
	if (argc == 2)
		first = last = atoi(argv[1]);
	for (v = first; v <= last; v++) {
		for (d = 0; d < e2e_ndevs(2); d++) {
			r = run_pair(v, e2e_dev(devs[d]), v == E2E_LAST_VERSION);
			failed += r != 0 && r != 77;
			skipped += r == 77;
		}
	}
	/* A device whose messages are smaller (rxe: max_msg_sz 8 MiB, maxP2pBytes 32 MiB):
	 * the big sizes must stay within maxP2pBytes, as NCCL's do. A fabric of its own:
	 * limits are device config. */
	if (argc != 2 && !e2e_real()) {
		char fabric[256];

		snprintf(fabric, sizeof(fabric), "%s-msg8m", getenv("SIMVERBS_FABRIC") ?
			 getenv("SIMVERBS_FABRIC") : "e2e-versions");
		setenv("SIMVERBS_FABRIC", fabric, 1);
		setenv("SIMVERBS_LIMITS", "max_msg_sz=8388608", 1);
		r = run_pair(E2E_LAST_VERSION, "simroce0", 1);
		failed += r != 0 && r != 77;
	}
	if (failed)
		return 1;
	return skipped ? 77 : 0;
}
