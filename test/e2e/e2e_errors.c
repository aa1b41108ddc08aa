/*
 * e2e_errors - failures injected with simverbs' fault control, in loopback:
 *  - an unreachable path at connect time fails connect AND accept in bounded
 *    time with a message naming both NICs and GIDs (the path probe);
 *  - an error completion on the data path: the message carries the status
 *    text, vendor_err, device:port, both GIDs and QPNs, the peer, the buffer
 *    kind and exactly one hint, never the fields undefined for errors
 *    (opcode, byte_len); the error is sticky;
 *  - a port going down turns outstanding requests into errors, not hangs.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e.h"

#define T 20.0
#define BOUND 10.0

static int (*sv_control)(const char *cmd);

static void control(const char *verb, const char *what)
{
	char cmd[128];
	int r;

	snprintf(cmd, sizeof(cmd), "%s %s", verb, what);
	r = sv_control(cmd);
	if (r)
		E2E_FAIL("simverbs_control(\"%s\") = %d", cmd, r);
}

static const char *mypid(void)
{
	static char buf[32];

	snprintf(buf, sizeof(buf), "%ld", (long)getpid());
	return buf;
}

static int count(const char *hay, const char *needle)
{
	int n = 0;

	while ((hay = strstr(hay, needle)) != NULL) {
		n++;
		hay += strlen(needle);
	}
	return n;
}

static int probe_failure(void *arg)
{
	const char *dev = arg;
	struct e2e_net n;
	char handle[E2E_HANDLE_SIZE];
	void *lc, *sc = NULL, *rc = NULL;
	ncclResult_t rs = ncclSuccess, rr = ncclSuccess;
	double t0;
	int d, r = e2e_open(&n, 12);

	if (r)
		return r;
	d = e2e_find_dev(&n, dev);
	E2E_OK(e2e_listen(&n, d, handle, &lc));
	/* cut the connector's QPs as soon as they exist (before any accept call) */
	for (t0 = e2e_now(); !sc; ) {
		char cmd[64];

		E2E_OK(e2e_connect(&n, d, handle, &sc));
		snprintf(cmd, sizeof(cmd), "drop-pid %s", mypid());
		if (sv_control(cmd) == 0)
			break;
		if (e2e_now() - t0 > T)
			E2E_FAIL("the connector created no QP in %.0f s", T);
	}
	E2E_CHECK(sc == NULL);
	for (t0 = e2e_now(); (rs == ncclSuccess || rr == ncclSuccess) && e2e_now() - t0 < T;) {
		if (rs == ncclSuccess && !sc)
			rs = e2e_connect(&n, d, handle, &sc);
		if (rr == ncclSuccess && !rc)
			rr = e2e_accept(&n, lc, &rc);
		if (sc || rc)
			E2E_FAIL("a comm was returned over a dead path (send %p recv %p)", sc, rc);
	}
	(void)sv_control("reset"); /* the cut QPs are gone already */
	if (rs == ncclSuccess || rr == ncclSuccess || e2e_now() - t0 > BOUND)
		E2E_FAIL("path failure not reported on both sides within %.0f s (connect %d, accept "
			 "%d, %.1f s)", BOUND, (int)rs, (int)rr, e2e_now() - t0);
	if (!e2e_warned("connect-time path check") || !e2e_warned("cannot reach each other") ||
	    !e2e_warned("local ") || !e2e_warned("remote ") || !e2e_warned(dev) ||
	    !e2e_warned("GID") || !e2e_warned("path-proving RDMA write to us failed"))
		E2E_FAIL("probe failure message incomplete:\n%s", e2e_warn_text());
	E2E_OK(e2e_close_listen(&n, lc));
	e2e_close(&n);
	e2e_note("%s: dead path refused at connect time in %.2f s", dev, e2e_now() - t0);
	return 0;
}

static int data_error(void *arg)
{
	const char *dev = arg;
	static char sbuf[1 << 16], rbuf[1 << 16];
	struct e2e_net n;
	void *sc, *rc, *smh, *rmh, *rreq, *sreq = NULL, *data = rbuf;
	size_t size = sizeof(rbuf);
	int d, tag = 1, done = 0, r = e2e_open(&n, 12);
	ncclResult_t res = ncclSuccess;
	const char *w;
	double t0;

	if (r)
		return r;
	d = e2e_find_dev(&n, dev);
	e2e_pair(&n, d, &sc, &rc, T);
	E2E_OK(e2e_reg_mr(&n, sc, sbuf, sizeof(sbuf), NCCL_PTR_HOST, &smh));
	E2E_OK(e2e_reg_mr(&n, rc, rbuf, sizeof(rbuf), NCCL_PTR_HOST, &rmh));
	rreq = e2e_irecv_wait(&n, rc, 1, &data, &size, &tag, &rmh, T);
	control("drop-pid", mypid());
	for (t0 = e2e_now(); res == ncclSuccess && e2e_now() - t0 < T;) {
		if (!sreq)
			res = e2e_isend(&n, sc, sbuf, sizeof(sbuf), tag, smh, &sreq);
		else
			res = e2e_test(&n, sreq, &done, NULL);
		E2E_CHECK(!done);
	}
	control("heal-pid", mypid());
	if (res == ncclSuccess)
		E2E_FAIL("no error on a dead path after %.0f s", T);
	w = e2e_warn_text();
	if (!strstr(w, "RDMA write of data failed: status") || !strstr(w, "vendor_err") ||
	    !strstr(w, "QPN") || !strstr(w, "GID") || !strstr(w, "peer ") ||
	    !strstr(w, "buffer host") || count(w, "hint:") != 1 || strstr(w, "opcode") ||
	    strstr(w, "byte_len"))
		E2E_FAIL("error completion message incomplete or with undefined fields:\n%s", w);
	/* sticky */
	res = e2e_test(&n, sreq, &done, NULL);
	if (res == ncclSuccess || !e2e_warned("on the failed connection"))
		E2E_FAIL("the error is not sticky:\n%s", e2e_warn_text());
	(void)rreq;
	E2E_OK(e2e_dereg_mr(&n, sc, smh));
	E2E_OK(e2e_dereg_mr(&n, rc, rmh));
	E2E_OK(e2e_close_send(&n, sc));
	E2E_OK(e2e_close_recv(&n, rc));
	e2e_close(&n);
	e2e_note("%s: data-path error reported in %.2f s", dev, e2e_now() - t0);
	return 0;
}

static int port_down(void *arg)
{
	const char *dev = arg;
	static char rbuf[4096];
	struct e2e_net n;
	void *sc, *rc, *rmh, *rreq, *data = rbuf;
	size_t size = sizeof(rbuf);
	int d, tag = 1, done = 0, r = e2e_open(&n, 12);
	ncclResult_t res = ncclSuccess;
	double t0;

	if (r)
		return r;
	d = e2e_find_dev(&n, dev);
	e2e_pair(&n, d, &sc, &rc, T);
	E2E_OK(e2e_reg_mr(&n, rc, rbuf, sizeof(rbuf), NCCL_PTR_HOST, &rmh));
	rreq = e2e_irecv_wait(&n, rc, 1, &data, &size, &tag, &rmh, T);
	control("port-down", dev);
	for (t0 = e2e_now(); res == ncclSuccess && !done && e2e_now() - t0 < T;)
		res = e2e_test(&n, rreq, &done, NULL);
	control("port-up", dev);
	if (res == ncclSuccess || e2e_now() - t0 > BOUND)
		E2E_FAIL("port down: outstanding receive not failed within %.0f s (done=%d)", BOUND,
			 done);
	E2E_OK(e2e_dereg_mr(&n, rc, rmh));
	E2E_OK(e2e_close_send(&n, sc));
	E2E_OK(e2e_close_recv(&n, rc));
	e2e_close(&n);
	e2e_note("%s: port down reported in %.2f s:\n%s", dev, e2e_now() - t0, e2e_warn_text());
	return 0;
}

static int run(int (*fn)(void *), const char *dev)
{
	int r = e2e_reap(e2e_spawn(NULL, fn, (void *)dev), 60);

	return r == 77 ? 0 : r;
}

int main(void)
{
	void *iv;
	int failed = 0;

	alarm(200);
	iv = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_GLOBAL);
	sv_control = iv ? (int (*)(const char *))dlsym(iv, "simverbs_control") : NULL;
	if (!sv_control) {
		e2e_note("not running over simverbs (no simverbs_control): skipping");
		return 77;
	}
	failed += run(probe_failure, "simroce0") != 0;
	failed += run(probe_failure, "simib0") != 0;
	failed += run(data_error, "simroce0") != 0;
	failed += run(data_error, "simib0") != 0;
	failed += run(port_down, "simroce0") != 0;
	failed += run(port_down, "simib0") != 0;
	return failed ? 1 : 0;
}
