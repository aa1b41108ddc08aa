/*
 * e2e_loopback - one process connects to itself on every simverbs device,
 * connect and accept driven alternately from one thread (as NCCL's GDR probe
 * and OOB bootstrap do), through the v12 and v6 tables: single and grouped
 * receives, tags, truncation, zero bytes, and close with requests outstanding.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e.h"

#define BUF (1 << 20)
#define T 20.0

static void one(struct e2e_net *n, void *sc, void *rc, void *smh, void *rmh, char *sbuf,
		char *rbuf, size_t ssize, size_t rsize, uint32_t id)
{
	void *sreq, *rreq, *data = rbuf;
	int tag = 7, ssz = -1, rsz[8] = { -1 };
	size_t expect = ssize < rsize ? ssize : rsize;

	e2e_fill(sbuf, ssize, id);
	memset(rbuf, 0xee, rsize + 64);
	rreq = e2e_irecv_wait(n, rc, 1, &data, &rsize, &tag, &rmh, T);
	sreq = e2e_isend_wait(n, sc, sbuf, ssize, tag, smh, T);
	E2E_OK(e2e_wait(n, sreq, &ssz, T));
	E2E_OK(e2e_wait(n, rreq, rsz, T));
	if ((size_t)rsz[0] != expect || (size_t)ssz != expect)
		E2E_FAIL("v%d: sent %zu into %zu: receiver saw %d, sender %d, expected %zu", n->ver,
			 ssize, rsize, rsz[0], ssz, expect);
	if (e2e_verify(rbuf, expect, id) >= 0)
		E2E_FAIL("v%d: %zu bytes: content wrong at %ld", n->ver, ssize,
			 e2e_verify(rbuf, expect, id));
	if ((unsigned char)rbuf[rsize] != 0xee)
		E2E_FAIL("v%d: wrote past a %zu-byte receive", n->ver, rsize);
}

static void grouped(struct e2e_net *n, void *sc, void *rc, void *smh, void *rmh, char *sbuf,
		    char *rbuf)
{
	void *data[3] = { rbuf, rbuf + 4096, rbuf + 8192 }, *mh[3] = { rmh, rmh, rmh };
	size_t sizes[3] = { 4096, 4096, 4096 }, ssize[3] = { 100, 0, 3000 };
	int tags[3] = { 11, 12, 13 }, order[3] = { 2, 0, 1 }, rs[8] = { 0 }, i;
	void *rreq, *sreq[3];

	rreq = e2e_irecv_wait(n, rc, 3, data, sizes, tags, mh, T);
	for (i = 0; i < 3; i++) {
		int k = order[i];

		e2e_fill(sbuf + 16384 * k, ssize[k], 100 + (uint32_t)k);
		sreq[i] = e2e_isend_wait(n, sc, sbuf + 16384 * k, ssize[k], tags[k], smh, T);
	}
	for (i = 0; i < 3; i++)
		E2E_OK(e2e_wait(n, sreq[i], NULL, T));
	E2E_OK(e2e_wait(n, rreq, rs, T));
	for (i = 0; i < 3; i++) {
		if ((size_t)rs[i] != ssize[i])
			E2E_FAIL("v%d grouped: receive %d got size %d, sent %zu", n->ver, i, rs[i],
				 ssize[i]);
		if (e2e_verify(data[i], ssize[i], 100 + (uint32_t)i) >= 0)
			E2E_FAIL("v%d grouped: receive %d content wrong", n->ver, i);
	}
}

/*
 * The GPU flush path without a GPU: a registration typed NCCL_PTR_CUDA (of host
 * memory, which the plugin cannot tell apart) must get a real flush request
 * when GPUDirect is on and NCCL_GDR_FLUSH_DISABLE is not set, and a NULL
 * request otherwise; host-typed or empty receives never need a flush.
 */
static void flush_path(struct e2e_net *n, int dev, void *rc, char *rbuf, void *rmh)
{
	int disabled = getenv("NCCL_GDR_FLUSH_DISABLE") && atoi(getenv("NCCL_GDR_FLUSH_DISABLE"));
	struct e2e_props p;
	void *gmh, *req = (void *)1, *data = rbuf;
	int size = 100, zero = 0;

	E2E_OK(e2e_props(n, dev, &p));
	if (!(p.ptr_support & NCCL_PTR_CUDA))
		return;
	E2E_OK(e2e_reg_mr(n, rc, rbuf, BUF, NCCL_PTR_CUDA, &gmh));
	E2E_OK(e2e_iflush(n, rc, 1, &data, &size, &gmh, &req));
	if (disabled ? req != NULL : req == NULL)
		E2E_FAIL("v%d: flush of a CUDA-typed receive gave request %p (flush %s)", n->ver, req,
			 disabled ? "disabled" : "enabled");
	if (req)
		E2E_OK(e2e_wait(n, req, NULL, T));
	req = (void *)1;
	E2E_OK(e2e_iflush(n, rc, 1, &data, &size, &rmh, &req));
	E2E_CHECK(req == NULL);
	req = (void *)1;
	E2E_OK(e2e_iflush(n, rc, 1, &data, &zero, &gmh, &req));
	E2E_CHECK(req == NULL);
	E2E_OK(e2e_dereg_mr(n, rc, gmh));
}

static void run(int ver, const char *devname)
{
	static char sbuf[BUF + 4096], rbuf[BUF + 4096];
	static const size_t sizes[] = { 0, 1, 127, 128, 129, 4096, 65537, BUF };
	struct e2e_net n;
	void *sc, *rc, *smh, *rmh, *req, *data = rbuf;
	size_t i, rsize = 64;
	int dev, tag = 1, rc_open;

	rc_open = e2e_open(&n, ver);
	if (rc_open)
		exit(rc_open);
	dev = e2e_find_dev(&n, devname);
	if (dev < 0)
		E2E_FAIL("no device %s", devname);
	e2e_pair(&n, dev, &sc, &rc, T);
	E2E_OK(e2e_reg_mr(&n, sc, sbuf, sizeof(sbuf), NCCL_PTR_HOST, &smh));
	E2E_OK(e2e_reg_mr(&n, rc, rbuf, sizeof(rbuf), NCCL_PTR_HOST, &rmh));
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		one(&n, sc, rc, smh, rmh, sbuf, rbuf, sizes[i], sizes[i], (uint32_t)i);
	one(&n, sc, rc, smh, rmh, sbuf, rbuf, 5000, 1000, 77); /* truncation */
	one(&n, sc, rc, smh, rmh, sbuf, rbuf, 0, 0, 78);
	grouped(&n, sc, rc, smh, rmh, sbuf, rbuf);
	flush_path(&n, dev, rc, rbuf, rmh);
	/* close with requests outstanding (a matched send and receive never tested, and
	 * one more receive): must neither hang nor leak */
	req = e2e_irecv_wait(&n, rc, 1, &data, &rsize, &tag, &rmh, T);
	(void)e2e_isend_wait(&n, sc, sbuf, 64, tag, smh, T);
	req = e2e_irecv_wait(&n, rc, 1, &data, &rsize, &tag, &rmh, T);
	(void)req;
	E2E_OK(e2e_dereg_mr(&n, sc, smh));
	E2E_OK(e2e_dereg_mr(&n, rc, rmh));
	E2E_OK(e2e_close_send(&n, sc));
	E2E_OK(e2e_close_recv(&n, rc));
	if (e2e_warn_count())
		E2E_FAIL("unexpected warnings:\n%s", e2e_warn_text());
	e2e_close(&n);
	e2e_note("v%d %s: loopback ok", ver, devname);
}

static int flush_disabled(void *arg)
{
	(void)arg;
	setenv("NCCL_GDR_FLUSH_DISABLE", "1", 1);
	run(12, e2e_dev("simroce0"));
	return 0;
}

int main(void)
{
	static const int vers[] = { 12, 6 };
	size_t v;

	alarm(120);
	/* first, before this process loads the plugin: the child must read its own knobs */
	if (e2e_reap(e2e_spawn(NULL, flush_disabled, NULL), 60))
		E2E_FAIL("run with NCCL_GDR_FLUSH_DISABLE=1 failed");
	for (v = 0; v < sizeof(vers) / sizeof(vers[0]); v++) {
		run(vers[v], e2e_dev("simib0"));
		if (!e2e_real())
			run(vers[v], "simroce0");
	}
	return 0;
}
