/*
 * e2e_sources - the plugin never rewrites a buffer that a work request it
 * posted without IBV_SEND_INLINE may still be reading: the NIC reads such a
 * source by DMA at some time before the WR completes, so a rewrite in between
 * sends a torn mix of old and new bytes on hardware. simverbs catches it with
 * SIMVERBS_CHECK_SOURCES=1 (the WR completes with an error and the plugin's
 * comm fails). The receiver is on simib0 with 20 ms of latency per operation,
 * so its clear-to-send and credit writes stay queued, the sender on simib1
 * without latency, so small sends go eager before their clear-to-send lands;
 * each case runs more than 64 sequences (two reuses of every slot), every
 * byte, size and tag checked:
 *  - grouped receives of 2 and 3 on an eager comm (clear-to-send of several
 *    64-byte entries: never inline), small sends racing their clear-to-send;
 *    regression: the receiver rewrote the shadow copy of sequence s for
 *    s + 32 while the clear-to-send of s (not needed: its message came
 *    eager) was still queued;
 *  - single receives on an eager comm (NCCL_IB_USE_INLINE=0, the default: a
 *    one-entry clear-to-send is not inline either), and with
 *    NCCL_IB_USE_INLINE=1;
 *  - grouped receives whose messages are larger than the eager limit (the
 *    sender's size records) mixed with small ones;
 *  - the same grouped pattern with eager off (plain clear-to-send);
 *  - the latency on the sender's device (its eager trailers and size
 *    records stay queued), and on both;
 *  - receives typed NCCL_PTR_CUDA (SIMVERBS_GPUDIRECT=1): eager messages
 *    reach them by a loopback write from the ring, queued on the slow device.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e.h"

#define T 30.0
#define BUF (1u << 20)
#define ENTRY 16384 /* per receive entry in the buffers */
#define SEQS 100    /* messages per case: > 2 * 32 */

struct sources_case {
	const char *name;
	int nrecv;		/* entries per receive */
	size_t big;		/* every other message of a receive this large (0: all small) */
	const char *eager_max;	/* NCCL_VERBS_EAGER_MAX (NULL: default) */
	const char *use_inline;	/* NCCL_IB_USE_INLINE (NULL: default 0) */
	const char *latency;	/* SIMVERBS_CONTROL (NULL: 20 ms on the receiver's simib0) */
	int cuda;		/* receive buffers typed NCCL_PTR_CUDA (SIMVERBS_GPUDIRECT=1) */
};

static char *sbuf, *rbuf;

/* isend, testing rreq while it waits (one thread: the receiver's queued WRs progress then). */
static void *send_polling(struct e2e_net *n, void *sc, void *mh, size_t off, size_t size, int tag,
			  void *rreq, int *rdone, int *rs)
{
	double t0 = e2e_now();
	void *req = NULL;

	for (;;) {
		E2E_OK(e2e_isend(n, sc, sbuf + off, size, tag, mh, &req));
		if (req)
			return req;
		if (!*rdone)
			E2E_OK(e2e_test(n, rreq, rdone, rs));
		if (e2e_now() - t0 > T)
			E2E_FAIL("isend of %zu bytes got no request in %.0f s", size, T);
	}
}

static size_t msg_size(const struct sources_case *k, int seq, int i)
{
	if (k->big && i % 2 == 1)
		return k->big + (size_t)seq;
	return 8 + (size_t)(seq * 13 + i * 5) % 200;
}

static int run_case(void *arg)
{
	const struct sources_case *k = arg;
	struct e2e_net n;
	void *sc, *rc, *smh, *rmh, *data[8], *mh[8], *rreq, *sreq[8];
	size_t sz[8], want[8];
	int tags[8], rs[8], rdone, seq = 0, i, r, rdev, sdev;
	struct e2e_props pr;
	char root[256];

	setenv("SIMVERBS_DEVICES", "simib0:ll=ib;simib1:ll=ib", 1);
	setenv("SIMVERBS_CONTROL", k->latency ? k->latency : "latency 20000000 simib0", 1);
	setenv("SIMVERBS_CHECK_SOURCES", "1", 1);
	if (k->eager_max)
		setenv("NCCL_VERBS_EAGER_MAX", k->eager_max, 1);
	if (k->use_inline)
		setenv("NCCL_IB_USE_INLINE", k->use_inline, 1);
	if (k->cuda) {
		snprintf(root, sizeof(root), "/tmp/simverbs-%u/%s", (unsigned)getuid(),
			 getenv("SIMVERBS_FABRIC") ? getenv("SIMVERBS_FABRIC") : "default");
		setenv("SIMVERBS_GPUDIRECT", "1", 1);
		setenv("NCCL_VERBS_GDR_SYSFS_ROOT", root, 1);
	}
	r = e2e_open(&n, 12);
	if (r)
		return r;
	rdev = e2e_find_dev(&n, "simib0");
	sdev = e2e_find_dev(&n, "simib1");
	if (rdev < 0 || sdev < 0)
		E2E_FAIL("devices simib0 and simib1 expected");
	E2E_OK(e2e_props(&n, rdev, &pr));
	if (k->cuda && !(pr.ptr_support & NCCL_PTR_CUDA)) {
		e2e_note("%s: no GPUDirect offered (ptrSupport 0x%x): not run", k->name, pr.ptr_support);
		e2e_close(&n);
		return 0;
	}
	e2e_pair2(&n, rdev, sdev, &sc, &rc, T);
	E2E_OK(e2e_reg_mr(&n, sc, sbuf, BUF, NCCL_PTR_HOST, &smh));
	E2E_OK(e2e_reg_mr(&n, rc, rbuf, BUF, k->cuda ? NCCL_PTR_CUDA : NCCL_PTR_HOST, &rmh));
	while (seq < SEQS) {
		memset(rbuf, 0xee, (size_t)k->nrecv * ENTRY);
		for (i = 0; i < k->nrecv; i++) {
			data[i] = rbuf + (size_t)i * ENTRY;
			mh[i] = rmh;
			sz[i] = ENTRY - 64;
			tags[i] = 10 + i;
			want[i] = msg_size(k, seq, i);
			e2e_fill(sbuf + (size_t)i * ENTRY, want[i], (uint32_t)(seq * 8 + i));
		}
		rreq = e2e_irecv_wait(&n, rc, k->nrecv, data, sz, tags, mh, T);
		rdone = 0;
		for (i = 0; i < k->nrecv; i++) { /* right after the receive: ahead of its CTS */
			sreq[i] = send_polling(&n, sc, smh, (size_t)i * ENTRY, want[i], tags[i], rreq,
					       &rdone, rs);
		}
		for (i = 0; i < k->nrecv; i++)
			E2E_OK(e2e_wait(&n, sreq[i], NULL, T));
		if (!rdone)
			E2E_OK(e2e_wait(&n, rreq, rs, T));
		for (i = 0; i < k->nrecv; i++)
			if ((size_t)rs[i] != want[i] ||
			    e2e_verify(data[i], want[i], (uint32_t)(seq * 8 + i)) >= 0 ||
			    (unsigned char)((char *)data[i])[want[i]] != 0xee)
				E2E_FAIL("%s: receive at message %d, entry %d: %d bytes (sent %zu) or "
					 "wrong content", k->name, seq, i, rs[i], want[i]);
		seq += k->nrecv;
	}
	E2E_OK(e2e_dereg_mr(&n, sc, smh));
	E2E_OK(e2e_dereg_mr(&n, rc, rmh));
	E2E_OK(e2e_close_send(&n, sc));
	E2E_OK(e2e_close_recv(&n, rc));
	if (e2e_warn_count())
		E2E_FAIL("%s: unexpected warnings:\n%s", k->name, e2e_warn_text());
	e2e_close(&n);
	e2e_note("%s: %d messages: ok", k->name, seq);
	return 0;
}

int main(void)
{
	static const struct sources_case cases[] = {
		{ "eager, grouped receives of 2", 2, 0, NULL, NULL, NULL, 0 },
		{ "eager, grouped receives of 3", 3, 0, NULL, NULL, NULL, 0 },
		{ "eager, single receives", 1, 0, NULL, NULL, NULL, 0 },
		{ "eager, single receives, inline clear-to-send", 1, 0, NULL, "1", NULL, 0 },
		{ "eager, grouped receives of 2 with large messages", 2, 9000, NULL, NULL, NULL, 0 },
		{ "eager off, grouped receives of 2", 2, 0, "0", NULL, NULL, 0 },
		/* the sender's sources: trailers, size records */
		{ "slow sender, eager, grouped receives of 2 with large messages", 2, 9000, NULL, NULL,
		  "latency 20000000 simib1", 0 },
		{ "both slow, eager, grouped receives of 3", 3, 0, NULL, NULL, "latency 10000000", 0 },
		/* the receiver's loopback copy of eager messages into GPU buffers (ring entry source) */
		{ "eager into CUDA-typed receives, grouped of 2", 2, 0, NULL, NULL, NULL, 1 },
	};
	int fails = 0;

	alarm(300);
	if (getenv("NCCL_VERBS_EAGER_MAX")) {
		e2e_note("NCCL_VERBS_EAGER_MAX is set: this test sets its own");
		return 77;
	}
	sbuf = aligned_alloc(4096, BUF);
	rbuf = aligned_alloc(4096, BUF);
	if (!sbuf || !rbuf)
		E2E_FAIL("out of memory");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (e2e_reap(e2e_spawn(NULL, run_case, (void *)&cases[i]), 120)) {
			e2e_note("case '%s' failed", cases[i].name);
			fails++;
		}
	}
	free(sbuf);
	free(rbuf);
	if (fails)
		E2E_FAIL("%d of %zu cases failed", fails, sizeof(cases) / sizeof(cases[0]));
	e2e_note("sources: ok");
	return 0;
}
