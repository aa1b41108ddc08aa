/*
 * test_fast_paths - NCCL_VERBS_FAST_PATHS is not a no-op: the general paths of
 * isend, irecv and the eager completion count the work they do that a
 * one-buffer one-QP fast path also does (the send comm's gen_isend and
 * gen_chain, the receive comm's gen_irecv and gen_cqe). On a loopback pair over simverbs, one-buffer
 * messages (receive posted first: 8 B .. 64 KiB, over and under the adaptive
 * routing split, truncated; then eager ones, sent before their receive) with
 * eager on and off: with the fast paths on they count nothing (every message
 * went through a fast path), with NCCL_VERBS_FAST_PATHS=0 every message counts
 * (none did), and in both modes every byte and size arrives as sent. A grouped
 * receive counts in both modes (the counters are live). The reruns of the
 * data-path tests in that mode (test/reruns.mk) then prove the general paths
 * do what the fast ones do.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "device.h"
#include "devset.h"
#include "nv_api.h"
#include "param.h"

#include "nvcomm.h"
#include "nvtest.h"

#define BUF (64 * 1024)

static char sbuf[BUF], rbuf[2][BUF];

/* Tests req until done (bounded); its sizes into got. */
static int wait_done(void *req, int *got)
{
	int done = 0, i;

	for (i = 0; !done && i < 1000000; i++)
		if (nv_net_test(req, &done, got) != NV_OK)
			return 0;
	return done;
}

static void *isend_until(void *s, size_t size, int tag, void *mh, void *rreq)
{
	void *req = NULL;
	int i, done;

	for (i = 0; !req && i < 1000000; i++) {
		if (nv_net_isend(s, sbuf, size, tag, mh, NULL, &req) != NV_OK)
			return NULL;
		if (!req && rreq) /* progress for the receiver's side of the loopback */
			(void)nv_net_test(rreq, &done, NULL);
	}
	return req;
}

/*
 * One message of size bytes into a receive of cap bytes; the receive posted
 * first (its clear-to-send there before isend), or after the send (eager).
 */
static void one(void *s, void *r, void *smh, void *rmh, size_t size, size_t cap, int send_first)
{
	void *sreq = NULL, *rreq = NULL, *data = rbuf[0], *mhs[1] = { rmh };
	int tag = (int)size + 1, got = -1, sent = -1;
	size_t i, want = size < cap ? size : cap;

	for (i = 0; i < size; i++)
		sbuf[i] = (char)(size * 7 + i);
	memset(rbuf[0], 0, cap);
	if (send_first)
		sreq = isend_until(s, size, tag, smh, NULL);
	CHECK(nv_net_irecv(r, 1, &data, &cap, &tag, mhs, NULL, &rreq) == NV_OK && rreq);
	if (!send_first)
		sreq = isend_until(s, size, tag, smh, rreq);
	CHECK(sreq != NULL);
	if (!sreq || !rreq)
		exit(1);
	CHECK(wait_done(rreq, &got) && got == (int)want);
	CHECK(wait_done(sreq, &sent) && sent == (int)(send_first ? size : want));
	CHECK(memcmp(rbuf[0], sbuf, want) == 0);
}

/* A grouped receive of two buffers: the general path in every mode. */
static void grouped(void *s, void *r, void *smh, void *rmh)
{
	void *sreq[2] = { NULL, NULL }, *rreq = NULL, *data[2] = { rbuf[0], rbuf[1] };
	void *mhs[2] = { rmh, rmh };
	size_t caps[2] = { 100, 100 };
	int tags[2] = { 7, 8 }, got[2] = { -1, -1 }, k;

	CHECK(nv_net_irecv(r, 2, data, caps, tags, mhs, NULL, &rreq) == NV_OK && rreq);
	for (k = 0; k < 2; k++)
		sreq[k] = isend_until(s, 50, tags[k], smh, rreq);
	CHECK(sreq[0] && sreq[1]);
	if (!sreq[0] || !sreq[1] || !rreq)
		exit(1);
	CHECK(wait_done(rreq, got) && got[0] == 50 && got[1] == 50);
	CHECK(wait_done(sreq[0], NULL) && wait_done(sreq[1], NULL));
}

/*
 * Clear-to-send sizes: 8 B, 8 KiB and 8 KiB + 1 (the adaptive-routing split
 * on InfiniBand), 64 KiB, and 200 B into 100 (truncated); then eager sizes
 * sent before their receive when eager is on.
 */
static void mode(const char *fast, const char *eager)
{
	const char *env[] = { fast, eager, NULL };
	static const size_t cts_sizes[] = { 8, 8192, 8193, BUF };
	int ncts = (int)(sizeof(cts_sizes) / sizeof(cts_sizes[0])), neager = 0, i, on, d;
	struct nv_comm *s, *r;
	struct nv_send_comm *sc;
	struct nv_recv_comm *rc;
	void *smh, *rmh;
	uint64_t msgs0;

	if (nv_param_load_from(nvt_env, (void *)env) != NV_OK)
		exit(1);
	on = nv_param_int(NV_PARAM_VERBS_FAST_PATHS);
	d = nvt_find_dev("simib0");
	nvt_pair(d, d, -1, &s, &r);
	sc = (struct nv_send_comm *)s;
	rc = (struct nv_recv_comm *)r;
	CHECK(nv_net_reg_mr(s, sbuf, sizeof(sbuf), NV_MEM_HOST, 0, -1, &smh) == NV_OK);
	CHECK(nv_net_reg_mr(r, rbuf, sizeof(rbuf), NV_MEM_HOST, 0, -1, &rmh) == NV_OK);
	for (i = 0; i < ncts; i++)
		one(s, r, smh, rmh, cts_sizes[i], cts_sizes[i], 0);
	one(s, r, smh, rmh, 200, 100, 0);
	ncts++;
	CHECK(s->st.eager == 0); /* the receives were posted first: no message went eager */
	if (rc->eager.max) {
		one(s, r, smh, rmh, 8, 8, 1);
		one(s, r, smh, rmh, 4096, 4096, 1);
		neager = 2;
		CHECK(s->st.eager == 2 && r->st.eager == 2);
	}
	printf("test_fast_paths: %s %s: %d + %d messages, general path: isend %u chain %u "
	       "irecv %u eager cqe %u\n", fast, eager, ncts, neager, sc->gen_isend,
	       sc->gen_chain, rc->gen_irecv, rc->gen_cqe);
	/* every message through a fast path, or none */
	CHECK(sc->gen_isend == (on ? 0u : (unsigned)ncts));
	CHECK(sc->gen_chain == (on ? 0u : (unsigned)ncts));
	CHECK(rc->gen_irecv == (on ? 0u : (unsigned)(ncts + neager)));
	CHECK(rc->gen_cqe == (on || !rc->eager.max ? 0u : (unsigned)ncts));
	msgs0 = nv_comm_msgs(r);
	CHECK(msgs0 == (uint64_t)(ncts + neager) && nv_comm_msgs(s) == msgs0);
	/* the counters count in either mode: a grouped receive takes the general paths */
	grouped(s, r, smh, rmh);
	CHECK(rc->gen_irecv == (on ? 1u : (unsigned)(ncts + neager + 1)));
	CHECK(sc->gen_isend == (on ? 2u : (unsigned)(ncts + 2)));
	CHECK(nv_comm_msgs(r) == msgs0 + 2);
	CHECK(nv_net_dereg_mr(s, smh) == NV_OK && nv_net_dereg_mr(r, rmh) == NV_OK);
	CHECK(nv_net_close_send(s) == NV_OK && nv_net_close_recv(r) == NV_OK);
}

int main(void)
{
	alarm(60);
	setenv("SIMVERBS_DEVICES", "simib0:ll=ib", 1);
	if (nv_param_load() != NV_OK || nv_devices_init() != NV_OK) {
		fprintf(stderr, "test_fast_paths: no simverbs devices; skipping\n");
		return 77;
	}
	mode("NCCL_VERBS_FAST_PATHS=1", "NCCL_VERBS_EAGER_MAX=4096");
	mode("NCCL_VERBS_FAST_PATHS=0", "NCCL_VERBS_EAGER_MAX=4096");
	mode("NCCL_VERBS_FAST_PATHS=1", "NCCL_VERBS_EAGER_MAX=0");
	mode("NCCL_VERBS_FAST_PATHS=0", "NCCL_VERBS_EAGER_MAX=0");
	nv_devices_fini();
	return nvt_exit("test_fast_paths");
}
