/*
 * e2e_vnic - a virtual NIC merged from two ports (makeVDevice, v12) carries
 * traffic: every message is split over one QP per device, with the right
 * per-device keys, both merged<->merged and merged<->single (asymmetric: the
 * side with fewer devices spreads its QPs over what it has).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e.h"

#define T 20.0
#define BUF (4u << 20)

static void traffic(struct e2e_net *n, void *sc, void *rc, const char *what)
{
	static char sbuf[BUF], rbuf[BUF];
	static const size_t sizes[] = { 0, 1, 200, 4096, 100000, BUF };
	void *smh, *rmh, *data = rbuf;
	size_t i, cap = BUF;
	int tag = 4, rs[8], ss;

	E2E_OK(e2e_reg_mr(n, sc, sbuf, BUF, NCCL_PTR_HOST, &smh));
	E2E_OK(e2e_reg_mr(n, rc, rbuf, BUF, NCCL_PTR_HOST, &rmh));
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		void *rreq, *sreq;

		e2e_fill(sbuf, sizes[i], (uint32_t)i + 900);
		rreq = e2e_irecv_wait(n, rc, 1, &data, &cap, &tag, &rmh, T);
		sreq = e2e_isend_wait(n, sc, sbuf, sizes[i], tag, smh, T);
		E2E_OK(e2e_wait(n, sreq, &ss, T));
		E2E_OK(e2e_wait(n, rreq, rs, T));
		if ((size_t)rs[0] != sizes[i] || (size_t)ss != sizes[i] ||
		    e2e_verify(rbuf, sizes[i], (uint32_t)i + 900) >= 0)
			E2E_FAIL("%s: %zu bytes: got %d/%d or bad content", what, sizes[i], rs[0], ss);
	}
	E2E_OK(e2e_dereg_mr(n, sc, smh));
	E2E_OK(e2e_dereg_mr(n, rc, rmh));
	E2E_OK(e2e_close_send(n, sc));
	E2E_OK(e2e_close_recv(n, rc));
	e2e_note("%s: ok", what);
}

int main(void)
{
	struct e2e_net n;
	char handle[E2E_HANDLE_SIZE];
	int devs[2], vdev, r, d0, d1;
	void *lc, *sc = NULL, *rc = NULL;
	double t0;

	alarm(120);
	if (e2e_real() == 1) {
		e2e_note("one device in NV_TEST_DEVICES: a vNIC needs two");
		return 77;
	}
	if (!e2e_real()) {
		setenv("SIMVERBS_DEVICES", "simib0:ll=ib;simib1:ll=ib", 1);
		unsetenv("NCCL_IB_HCA");
	}
	r = e2e_open(&n, 12);
	if (r)
		return r;
	d0 = e2e_find_dev(&n, e2e_real() ? e2e_real_dev(0) : "simib0");
	d1 = e2e_find_dev(&n, e2e_real() ? e2e_real_dev(1) : "simib1");
	if (d0 < 0 || d1 < 0)
		E2E_FAIL("no two devices (%s and %s)", e2e_real() ? e2e_real_dev(0) : "simib0",
			 e2e_real() ? e2e_real_dev(1) : "simib1");
	devs[0] = d0;
	devs[1] = d1;
	E2E_OK(e2e_make_vdevice(&n, 2, devs, &vdev));
	e2e_pair(&n, vdev, &sc, &rc, T);
	traffic(&n, sc, rc, "merged -> merged");
	sc = rc = NULL;
	/* asymmetric: listen on the merged device, connect from a single port */
	E2E_OK(e2e_listen(&n, vdev, handle, &lc));
	for (t0 = e2e_now(); !sc || !rc;) {
		if (!sc)
			E2E_OK(e2e_connect(&n, d1, handle, &sc));
		if (!rc)
			E2E_OK(e2e_accept(&n, lc, &rc));
		if (e2e_now() - t0 > T)
			E2E_FAIL("asymmetric connect did not finish");
	}
	E2E_OK(e2e_close_listen(&n, lc));
	traffic(&n, sc, rc, "single -> merged");
	if (e2e_warn_count())
		E2E_FAIL("warnings:\n%s", e2e_warn_text());
	e2e_close(&n);
	return 0;
}
