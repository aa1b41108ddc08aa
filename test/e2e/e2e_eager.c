/*
 * e2e_eager - the eager path (NCCL_VERBS_EAGER_MAX) on a loopback pair:
 *  - a small send before its receive is posted gets a request at once (eager;
 *    with NCCL_VERBS_EAGER_MAX=0, in a child, it waits for the receive);
 *  - credit exhaustion: with no receive posted, exactly one ring's worth
 *    (32) of small sends goes; the rest wait (no request) and go, in order
 *    and intact, once receives free the ring;
 *  - eager and clear-to-send messages interleaved on one comm (sizes around
 *    the limit, receives posted before and after their sends, grouped
 *    receives whose sends come in another tag order): every byte, size and
 *    tag checked, order kept;
 *  - truncation (an eager message longer than its receive) and zero bytes;
 *  - receives typed NCCL_PTR_CUDA (SIMVERBS_GPUDIRECT=1): eager messages go
 *    into them by the loopback RDMA write, not a CPU copy;
 *  - eager crossing its clear-to-send (2 ms fabric latency): the surplus
 *    receive is reused, more crossings than the receive queue holds;
 *  - eager off on one side only (as with a peer of wire version 3): the
 *    handshake falls back to clear-to-send for every message;
 *  - limits that differ between the sides (4096/1024, 1024/4096, 4096/1):
 *    the smaller one holds, a message past it waits for its clear-to-send;
 *  - a sender killed with eager messages sent: the ones that arrived are
 *    delivered, the next receive fails within a bound, naming the peer.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e.h"

#define BUF (4u << 20)
#define T 20.0
#define SLOTS 32 /* NV_EAGER_SLOTS */
#define EAGER 4096 /* the default NCCL_VERBS_EAGER_MAX */

static char *sbuf, *rbuf;

struct pair {
	struct e2e_net n;
	void *sc, *rc, *smh, *rmh;
};

static void pair_open(struct pair *p, const char *dev)
{
	int d, r = e2e_open(&p->n, 12);

	if (r)
		exit(r);
	d = e2e_find_dev(&p->n, dev);
	if (d < 0)
		E2E_FAIL("no device %s", dev);
	e2e_pair(&p->n, d, &p->sc, &p->rc, T);
	E2E_OK(e2e_reg_mr(&p->n, p->sc, sbuf, BUF, NCCL_PTR_HOST, &p->smh));
	E2E_OK(e2e_reg_mr(&p->n, p->rc, rbuf, BUF, NCCL_PTR_HOST, &p->rmh));
}

static void pair_close(struct pair *p)
{
	E2E_OK(e2e_dereg_mr(&p->n, p->sc, p->smh));
	E2E_OK(e2e_dereg_mr(&p->n, p->rc, p->rmh));
	E2E_OK(e2e_close_send(&p->n, p->sc));
	E2E_OK(e2e_close_recv(&p->n, p->rc));
	if (e2e_warn_count())
		E2E_FAIL("unexpected warnings:\n%s", e2e_warn_text());
	e2e_close(&p->n);
}

/* One isend attempt: the request, or NULL when it has to wait. */
static void *try_send(struct pair *p, size_t off, size_t size, int tag)
{
	void *req = NULL;

	E2E_OK(e2e_isend(&p->n, p->sc, sbuf + off, size, tag, p->smh, &req));
	return req;
}

static void *recv_one(struct pair *p, size_t off, size_t size, int tag)
{
	void *data = rbuf + off;

	return e2e_irecv_wait(&p->n, p->rc, 1, &data, &size, &tag, &p->rmh, T);
}

/* The receive of message id: size and content, and nothing past its end. */
static void check_recv(struct pair *p, void *rreq, size_t off, size_t cap, size_t sent,
		       uint32_t id)
{
	int rs[8] = { -1 };
	size_t want = sent < cap ? sent : cap;

	E2E_OK(e2e_wait(&p->n, rreq, rs, T));
	if ((size_t)rs[0] != want)
		E2E_FAIL("message %u: %zu bytes sent into %zu, receiver saw %d", id, sent, cap,
			 rs[0]);
	if (e2e_verify(rbuf + off, want, id) >= 0)
		E2E_FAIL("message %u (%zu bytes): content wrong at %ld", id, want,
			 e2e_verify(rbuf + off, want, id));
	if ((unsigned char)rbuf[off + cap] != 0xee)
		E2E_FAIL("message %u: written past its %zu-byte receive", id, cap);
}

/* Eager on: a small send needs no receive. Off (child): it waits for one. */
static void early_send(struct pair *p, int eager)
{
	void *sreq, *rreq;
	int i;

	memset(rbuf, 0xee, 4096);
	e2e_fill(sbuf, 8, 1);
	for (i = 0, sreq = NULL; i < 50 && !sreq; i++, usleep(1000))
		sreq = try_send(p, 0, 8, 5);
	if (eager != (sreq != NULL))
		E2E_FAIL("eager %s: an 8-byte send before its receive %s", eager ? "on" : "off",
			 sreq ? "got a request" : "got none in 50 tries");
	rreq = recv_one(p, 0, 64, 5);
	if (!sreq)
		sreq = e2e_isend_wait(&p->n, p->sc, sbuf, 8, 5, p->smh, T);
	E2E_OK(e2e_wait(&p->n, sreq, NULL, T));
	check_recv(p, rreq, 0, 64, 8, 1);
}

/* 3 * SLOTS small sends with no receive: SLOTS go, then none until receives free the ring. */
static void credits(struct pair *p)
{
	enum { N = 3 * SLOTS, SZ = 24 };
	void *sreq[N] = { 0 }, *rreq;
	int sent = 0, recvd = 0, i;

	memset(rbuf, 0xee, (size_t)N * 64 + 64);
	for (i = 0; i < N; i++)
		e2e_fill(sbuf + (size_t)i * 64, SZ, 1000 + (uint32_t)i);
	while (sent < N && (sreq[sent] = try_send(p, (size_t)sent * 64, SZ, 9)))
		sent++;
	if (sent != SLOTS)
		E2E_FAIL("with no receive posted %d eager sends went, the ring holds %d", sent,
			 SLOTS);
	for (i = 0; i < 200; i++, usleep(500)) /* stays stalled: no credit, no CTS */
		if (try_send(p, (size_t)sent * 64, SZ, 9))
			E2E_FAIL("a send beyond the ring's %d entries went without a receive", SLOTS);
	for (i = 0; i < sent; i++)
		E2E_OK(e2e_wait(&p->n, sreq[i], NULL, T));
	/* receive them all, sending the rest as the receiver frees entries */
	while (recvd < N) {
		rreq = recv_one(p, (size_t)recvd * 64, SZ + 8, 9);
		while (sent < N && (sreq[sent] = try_send(p, (size_t)sent * 64, SZ, 9)))
			sent++;
		if (recvd >= sent && sent < N) /* its clear-to-send is out now */
			sreq[sent] = e2e_isend_wait(&p->n, p->sc, sbuf + (size_t)sent * 64, SZ, 9,
						    p->smh, T), sent++;
		check_recv(p, rreq, (size_t)recvd * 64, SZ + 8, SZ, 1000 + (uint32_t)recvd);
		recvd++;
	}
	for (i = SLOTS; i < N; i++)
		E2E_OK(e2e_wait(&p->n, sreq[i], NULL, T));
}

/*
 * Mixed sizes on one comm; with eager on, receive i of a small message is
 * posted before (even i, odd in round 2) or after its send (one thread: a
 * message above the limit needs its receive first).
 */
static void interleave(struct pair *p, int eager)
{
	static const size_t sizes[] = { 0,	  8,	  EAGER - 1, EAGER,  EAGER + 1, 1,
					65536,	  100,	  1 << 20,   3000,   0,		EAGER,
					EAGER + 1, 17,	  200000,    4000 };
	enum { N = sizeof(sizes) / sizeof(sizes[0]) };
	void *sreq[N], *rreq[N];
	size_t off[N], o = 0;
	int i, round;

	for (i = 0; i < N; i++) {
		off[i] = o;
		o += (sizes[i] + 4096 + 64) & ~(size_t)63;
	}
	if (o > BUF)
		E2E_FAIL("buffers too small");
	for (round = 0; round < 2; round++) {
		memset(rbuf, 0xee, o);
		for (i = 0; i < N; i++)
			e2e_fill(sbuf + off[i], sizes[i], 2000 + (uint32_t)(i + N * round));
		for (i = 0; i < N; i++) {
			int before = !eager || sizes[i] > EAGER || (i + round) % 2 == 0;
			int tag = 100 + i;

			if (before)
				rreq[i] = recv_one(p, off[i], sizes[i] + 64, tag);
			sreq[i] = e2e_isend_wait(&p->n, p->sc, sbuf + off[i], sizes[i], tag, p->smh,
						 T);
			if (!before)
				rreq[i] = recv_one(p, off[i], sizes[i] + 64, tag);
		}
		for (i = 0; i < N; i++) {
			E2E_OK(e2e_wait(&p->n, sreq[i], NULL, T));
			check_recv(p, rreq[i], off[i], sizes[i] + 64, sizes[i],
				   2000 + (uint32_t)(i + N * round));
		}
	}
}

/* A grouped receive posted after its eager sends, which came in another tag order. */
static void grouped_late(struct pair *p)
{
	void *data[3] = { rbuf, rbuf + 8192, rbuf + 16384 }, *mh[3] = { p->rmh, p->rmh, p->rmh };
	size_t sz[3] = { 4096, 4096, 4096 }, ssize[3] = { 100, 0, 3000 };
	int tags[3] = { 11, 12, 13 }, order[3] = { 2, 0, 1 }, rs[8] = { 0 }, i, late;
	void *rreq, *sreq[3];

	for (late = 0; late < 3; late++) { /* 0, 1, 2 of the 3 sends before the receive */
		memset(rbuf, 0xee, 32768);
		for (i = 0; i < 3; i++)
			e2e_fill(sbuf + 8192 * i, ssize[i], 300 + (uint32_t)i);
		for (i = 0; i < late; i++)
			sreq[i] = e2e_isend_wait(&p->n, p->sc, sbuf + 8192 * order[i],
						 ssize[order[i]], tags[order[i]], p->smh, T);
		rreq = e2e_irecv_wait(&p->n, p->rc, 3, data, sz, tags, mh, T);
		for (; i < 3; i++)
			sreq[i] = e2e_isend_wait(&p->n, p->sc, sbuf + 8192 * order[i],
						 ssize[order[i]], tags[order[i]], p->smh, T);
		for (i = 0; i < 3; i++)
			E2E_OK(e2e_wait(&p->n, sreq[i], NULL, T));
		E2E_OK(e2e_wait(&p->n, rreq, rs, T));
		for (i = 0; i < 3; i++) {
			if ((size_t)rs[i] != ssize[i] || e2e_verify(data[i], ssize[i], 300 + (uint32_t)i) >= 0)
				E2E_FAIL("grouped (%d sent before): entry %d got %d bytes (sent %zu) "
					 "or wrong content", late, i, rs[i], ssize[i]);
			if ((unsigned char)((char *)data[i])[ssize[i]] != 0xee)
				E2E_FAIL("grouped: entry %d written past its data", i);
		}
	}
}

/* An eager message longer than its receive: the receive gets what fits. */
static void truncation(struct pair *p)
{
	void *sreq, *rreq;

	memset(rbuf, 0xee, 4096);
	e2e_fill(sbuf, 1000, 77);
	sreq = e2e_isend_wait(&p->n, p->sc, sbuf, 1000, 3, p->smh, T);
	rreq = recv_one(p, 0, 100, 3);
	E2E_OK(e2e_wait(&p->n, sreq, NULL, T));
	check_recv(p, rreq, 0, 100, 1000, 77);
	/* zero bytes into a zero-byte receive, posted after the send */
	memset(rbuf, 0xee, 4096);
	sreq = e2e_isend_wait(&p->n, p->sc, sbuf, 0, 4, p->smh, T);
	rreq = recv_one(p, 0, 0, 4);
	E2E_OK(e2e_wait(&p->n, sreq, NULL, T));
	check_recv(p, rreq, 0, 0, 0, 0);
}

/*
 * With 2 ms of fabric latency a clear-to-send takes that long to land, so a
 * small send right after its receive goes eager and crosses the CTS (the
 * receiver's RECV becomes a surplus one): small and large messages, single
 * and grouped receives, every message checked, in order.
 */
/* isend, testing rreq while it waits (one thread: delayed CTS writes progress on its polls). */
static void *send_polling(struct pair *p, size_t off, size_t size, void *rreq, int *rdone, int *rs)
{
	double t0 = e2e_now();
	void *req;

	while (!(req = try_send(p, off, size, 1))) {
		if (!*rdone)
			E2E_OK(e2e_test(&p->n, rreq, rdone, rs));
		if (e2e_now() - t0 > T)
			E2E_FAIL("isend of %zu bytes got no request in %.0f s", size, T);
	}
	return req;
}

static int crossing(void *arg)
{
	static const size_t sizes[] = { 8, 8, 70000, 100, 0, 5000, 4096, 1, 300000, 64 };
	enum { N = sizeof(sizes) / sizeof(sizes[0]) };
	void *sreq[N], *rreq[N], *data[2] = { rbuf, rbuf + 8192 }, *mh[2];
	size_t off[N], o = 0, gsz[2] = { 4096, 4096 };
	int i, r, crossed = 0, tags[2] = { 1, 1 }, rs[8], rdone[N], rsz[N][8];
	struct pair p;

	(void)arg;
	setenv("SIMVERBS_LATENCY_NS", "2000000", 1);
	pair_open(&p, e2e_dev("simib0"));
	for (r = 0; r < 12; r++) { /* more crossings than the receive queue holds (64) */
		memset(rbuf, 0xee, 1 << 20);
		for (i = 0, o = 0; i < N; o += (sizes[i] + 4096 + 64) & ~(size_t)63, i++) {
			off[i] = o;
			e2e_fill(sbuf + o, sizes[i], 700 + (uint32_t)(i + N * r));
			rreq[i] = recv_one(&p, o, sizes[i] + 64, 1);
			rdone[i] = 0;
			sreq[i] = try_send(&p, o, sizes[i], 1);
			crossed += sreq[i] != NULL && sizes[i] <= EAGER;
			if (!sreq[i])
				sreq[i] = send_polling(&p, o, sizes[i], rreq[i], &rdone[i], rsz[i]);
		}
		for (i = 0; i < N; i++) {
			size_t want = sizes[i];

			E2E_OK(e2e_wait(&p.n, sreq[i], NULL, T));
			if (!rdone[i])
				E2E_OK(e2e_wait(&p.n, rreq[i], rsz[i], T));
			if ((size_t)rsz[i][0] != want ||
			    e2e_verify(rbuf + off[i], want, 700 + (uint32_t)(i + N * r)) >= 0 ||
			    (unsigned char)rbuf[off[i] + want + 64] != 0xee)
				E2E_FAIL("crossing: message %d of %zu bytes: got %d, or content wrong", i,
					 want, rsz[i][0]);
		}
		/* a grouped receive of two, its two small sends right after it */
		mh[0] = mh[1] = p.rmh;
		memset(rbuf, 0xee, 16384);
		e2e_fill(sbuf, 50, 800);
		e2e_fill(sbuf + 8192, 60, 801);
		rreq[0] = e2e_irecv_wait(&p.n, p.rc, 2, data, gsz, tags, mh, T);
		rdone[0] = 0;
		sreq[0] = send_polling(&p, 0, 50, rreq[0], &rdone[0], rs);
		sreq[1] = send_polling(&p, 8192, 60, rreq[0], &rdone[0], rs);
		E2E_OK(e2e_wait(&p.n, sreq[0], NULL, T));
		E2E_OK(e2e_wait(&p.n, sreq[1], NULL, T));
		if (!rdone[0])
			E2E_OK(e2e_wait(&p.n, rreq[0], rs, T));
		if (rs[0] != 50 || rs[1] != 60 || e2e_verify(rbuf, 50, 800) >= 0 ||
		    e2e_verify(rbuf + 8192, 60, 801) >= 0)
			E2E_FAIL("crossing grouped receive: sizes %d %d or content wrong", rs[0], rs[1]);
	}
	/* the count needs the 2 ms latency simverbs adds; a real device has its own */
	if (crossed < 64 && !e2e_real())
		E2E_FAIL("only %d small sends went eager right after their receive (2 ms fabric "
			 "latency)", crossed);
	e2e_note("crossing: %d small sends went eager across their clear-to-send", crossed);
	pair_close(&p);
	return 0;
}

/*
 * Receives into a registration typed NCCL_PTR_CUDA (of host memory, which the
 * plugin cannot tell apart; SIMVERBS_GPUDIRECT=1 makes the device offer
 * GPUDirect): eager messages reach it by the loopback RDMA write on the flush
 * QP, not by a CPU copy; content, sizes and order checked, then an iflush.
 */
static int gpu_typed(void *arg)
{
	static const size_t sizes[] = { 8, 100, 0, EAGER, 1, 3000, 70000, 64 };
	enum { N = sizeof(sizes) / sizeof(sizes[0]) };
	void *sreq[N], *rreq[N], *gmh, *data, *freq = NULL;
	char root[256];
	struct e2e_props pr;
	struct pair p;
	int i, rs[8], fsz = 64, d;

	(void)arg;
	if (e2e_skip_real("gpu-typed", "SIMVERBS_GPUDIRECT offers GPUDirect for host memory"))
		return 0;
	snprintf(root, sizeof(root), "/tmp/simverbs-%u/%s", (unsigned)getuid(),
		 getenv("SIMVERBS_FABRIC") ? getenv("SIMVERBS_FABRIC") : "default");
	setenv("SIMVERBS_GPUDIRECT", "1", 1);
	setenv("NCCL_VERBS_GDR_SYSFS_ROOT", root, 1);
	pair_open(&p, e2e_dev("simib0"));
	d = e2e_find_dev(&p.n, "simib0");
	E2E_OK(e2e_props(&p.n, d, &pr));
	if (!(pr.ptr_support & NCCL_PTR_CUDA)) {
		e2e_note("gpu-typed: no GPUDirect offered (ptrSupport 0x%x): not run", pr.ptr_support);
		pair_close(&p);
		return 0;
	}
	E2E_OK(e2e_reg_mr(&p.n, p.rc, rbuf + BUF / 2, BUF / 2, NCCL_PTR_CUDA, &gmh));
	memset(rbuf + BUF / 2, 0xee, BUF / 2);
	for (i = 0; i < N; i++) { /* small ones before their receive: eager, then the copy */
		size_t o = BUF / 2 + (size_t)i * 81920;
		size_t cap = sizes[i] + 64;

		e2e_fill(sbuf + (size_t)i * 81920, sizes[i], 600 + (uint32_t)i);
		sreq[i] = sizes[i] <= EAGER ? e2e_isend_wait(&p.n, p.sc, sbuf + (size_t)i * 81920,
							      sizes[i], 2, p.smh, T) : NULL;
		data = rbuf + o;
		rreq[i] = e2e_irecv_wait(&p.n, p.rc, 1, &data, &cap, (int[]){ 2 }, &gmh, T);
		if (!sreq[i])
			sreq[i] = e2e_isend_wait(&p.n, p.sc, sbuf + (size_t)i * 81920, sizes[i], 2,
						 p.smh, T);
	}
	for (i = 0; i < N; i++) {
		size_t o = BUF / 2 + (size_t)i * 81920;

		E2E_OK(e2e_wait(&p.n, sreq[i], NULL, T));
		E2E_OK(e2e_wait(&p.n, rreq[i], rs, T));
		if ((size_t)rs[0] != sizes[i] || e2e_verify(rbuf + o, sizes[i], 600 + (uint32_t)i) >= 0 ||
		    (unsigned char)rbuf[o + sizes[i]] != 0xee)
			E2E_FAIL("gpu-typed: message %d of %zu bytes: got %d, or content wrong", i,
				 sizes[i], rs[0]);
	}
	data = rbuf + BUF / 2;
	E2E_OK(e2e_iflush(&p.n, p.rc, 1, &data, &fsz, &gmh, &freq));
	if (freq)
		E2E_OK(e2e_wait(&p.n, freq, NULL, T));
	E2E_OK(e2e_dereg_mr(&p.n, p.rc, gmh));
	e2e_note("gpu-typed: %d messages into a CUDA-typed buffer: ok", N);
	pair_close(&p);
	return 0;
}

static int eager_off(void *arg)
{
	struct pair p;

	(void)arg;
	setenv("NCCL_VERBS_EAGER_MAX", "0", 1);
	pair_open(&p, e2e_dev("simib0"));
	early_send(&p, 0);
	interleave(&p, 0);
	pair_close(&p);
	return 0;
}

/* ---- limits that differ between the two sides: the smaller one holds ---------- */

/*
 * The sender and the receiver each set their own NCCL_VERBS_EAGER_MAX ("0":
 * eager off on that side, as with a peer of wire version 3). The comm must
 * use the smaller limit m: before any receive is posted, a message of m
 * bytes goes eager (m > 0) and one of m + 1 (2 KiB when m < 2 KiB) waits for
 * its clear-to-send; every message arrives whole. A sender that went eager
 * past the receiver's limit would write beyond the receiver's ring entry:
 * the receiver's trailer check fails the comm, and so this test.
 */
struct mixed_ctx {
	int handle_pipe[2], sent_pipe[2];
	const char *max[2]; /* NCCL_VERBS_EAGER_MAX of the sender, of the receiver */
	size_t m;	    /* the smaller: what the comm must use */
};

#define MIXED_N 24

/* Message i's size in the stream after the early sends (limits around m). */
static size_t mixed_size(const struct mixed_ctx *k, int i)
{
	static const size_t fixed[] = { 0, 1, 1023, 1024, 1025, 2048, 4095, 4096, 4097, 8000 };

	if (i < 3)
		return k->m ? k->m - 1 + (size_t)i : (size_t)i * 700; /* m - 1, m, m + 1 */
	if (i < 3 + (int)(sizeof(fixed) / sizeof(fixed[0])))
		return fixed[i - 3];
	return (size_t)(i * 533);
}

static const char *mixed_name(const struct mixed_ctx *k, char *b, size_t len)
{
	snprintf(b, len, "sender %s, receiver %s", k->max[0] ? k->max[0] : "default",
		 k->max[1] ? k->max[1] : "default");
	return b;
}

/* Up to 100 isend tries of one message, 1 ms apart: its request or NULL. */
static void *mixed_try(struct e2e_net *n, void *sc, void *mh, size_t off, size_t size)
{
	void *req = NULL;
	int i;

	for (i = 0; i < 100 && !req; i++, usleep(1000))
		E2E_OK(e2e_isend(n, sc, sbuf + off, size, 1, mh, &req));
	return req;
}

static int mixed_send(void *arg)
{
	struct mixed_ctx *k = arg;
	char handle[E2E_HANDLE_SIZE], name[96], one = 1;
	struct e2e_net n;
	void *sc, *mh, *req[3] = { NULL, NULL, NULL };
	size_t big = k->m < 2048 ? 2048 : k->m + 1, early[3] = { k->m < 8 ? k->m : 8, k->m, big };
	int i, neager = k->m ? 2 : 0;

	if (k->max[0])
		setenv("NCCL_VERBS_EAGER_MAX", k->max[0], 1);
	if (e2e_open(&n, 12))
		E2E_FAIL("open");
	e2e_pipe_read(k->handle_pipe[0], handle, sizeof(handle), T);
	E2E_OK(e2e_connect_wait(&n, 0, handle, &sc, T));
	E2E_OK(e2e_reg_mr(&n, sc, sbuf, BUF, NCCL_PTR_HOST, &mh));
	mixed_name(k, name, sizeof(name));
	/* the receiver posts nothing yet: what goes now went eager */
	for (i = 0; i < 3; i++)
		e2e_fill(sbuf + 16384 * (size_t)i, early[i], 800 + (uint32_t)i);
	for (i = 0; i < neager; i++)
		if (!(req[i] = mixed_try(&n, sc, mh, 16384 * (size_t)i, early[i])))
			E2E_FAIL("%s: a %zu-byte send within the limit %zu did not go before its "
				 "receive", name, early[i], k->m);
	if (mixed_try(&n, sc, mh, 16384 * (size_t)neager, early[neager]))
		E2E_FAIL("%s: a %zu-byte send went before its receive (limit %zu)", name,
			 early[neager], k->m);
	e2e_pipe_write(k->sent_pipe[1], &one, 1);
	req[neager] = e2e_isend_wait(&n, sc, sbuf + 16384 * (size_t)neager, early[neager], 1, mh, T);
	for (i = 0; i <= neager; i++)
		E2E_OK(e2e_wait(&n, req[i], NULL, T));
	for (i = 0; i < MIXED_N; i++) {
		size_t off = 16384 * (size_t)(i % 64), sz = mixed_size(k, i);

		e2e_fill(sbuf + off, sz, 900 + (uint32_t)i);
		E2E_OK(e2e_wait(&n, e2e_isend_wait(&n, sc, sbuf + off, sz, 1, mh, T), NULL, T));
	}
	E2E_OK(e2e_dereg_mr(&n, sc, mh));
	E2E_OK(e2e_close_send(&n, sc));
	if (e2e_warn_count())
		E2E_FAIL("%s: sender warnings:\n%s", name, e2e_warn_text());
	e2e_close(&n);
	return 0;
}

static void mixed_recv_one(struct e2e_net *n, void *rc, void *mh, const char *name, int i,
			   size_t sent, uint32_t id)
{
	void *data = rbuf + 16384 * (size_t)(i % 64);
	size_t size = 16384;
	int tag = 1, rs[8] = { -1 };

	memset(data, 0xee, 16384);
	E2E_OK(e2e_wait(n, e2e_irecv_wait(n, rc, 1, &data, &size, &tag, &mh, T), rs, T));
	if ((size_t)rs[0] != sent || e2e_verify(data, sent, id) >= 0)
		E2E_FAIL("%s: message %u (%zu bytes) arrived wrong: %d bytes, first bad byte %ld",
			 name, id, sent, rs[0], e2e_verify(data, sent, id));
	if ((unsigned char)((char *)data)[sent] != 0xee)
		E2E_FAIL("%s: message %u written past its %zu bytes", name, id, sent);
}

static int mixed_recv(void *arg)
{
	struct mixed_ctx *k = arg;
	char handle[E2E_HANDLE_SIZE], name[96], one;
	struct e2e_net n;
	void *lc, *rc, *mh;
	size_t big = k->m < 2048 ? 2048 : k->m + 1, early[3] = { k->m < 8 ? k->m : 8, k->m, big };
	int i, neager = k->m ? 2 : 0;

	if (k->max[1])
		setenv("NCCL_VERBS_EAGER_MAX", k->max[1], 1);
	if (e2e_open(&n, 12))
		E2E_FAIL("open");
	E2E_OK(e2e_listen(&n, 0, handle, &lc));
	e2e_pipe_write(k->handle_pipe[1], handle, sizeof(handle));
	E2E_OK(e2e_accept_wait(&n, lc, &rc, T));
	E2E_OK(e2e_close_listen(&n, lc));
	E2E_OK(e2e_reg_mr(&n, rc, rbuf, BUF, NCCL_PTR_HOST, &mh));
	mixed_name(k, name, sizeof(name));
	e2e_pipe_read(k->sent_pipe[0], &one, 1, T);
	for (i = 0; i <= neager; i++)
		mixed_recv_one(&n, rc, mh, name, i, early[i], 800 + (uint32_t)i);
	for (i = 0; i < MIXED_N; i++)
		mixed_recv_one(&n, rc, mh, name, i, mixed_size(k, i), 900 + (uint32_t)i);
	E2E_OK(e2e_dereg_mr(&n, rc, mh));
	E2E_OK(e2e_close_recv(&n, rc));
	if (e2e_warn_count())
		E2E_FAIL("%s: receiver warnings:\n%s", name, e2e_warn_text());
	e2e_close(&n);
	return 0;
}

/* smax, rmax: the two sides' NCCL_VERBS_EAGER_MAX (NULL: the default); m: the smaller. */
static void mixed(const char *smax, const char *rmax, size_t m)
{
	struct mixed_ctx k = { .max = { smax, rmax }, .m = m };
	char name[96];
	pid_t rp, sp;

	mixed_name(&k, name, sizeof(name));
	if (pipe(k.handle_pipe) || pipe(k.sent_pipe))
		E2E_FAIL("pipe");
	rp = e2e_spawn(NULL, mixed_recv, &k);
	sp = e2e_spawn(NULL, mixed_send, &k);
	if (e2e_reap(sp, 60) || e2e_reap(rp, 60))
		E2E_FAIL("eager limits %s: failed", name);
	e2e_note("eager limits %s: limit %zu, every message intact", name, m);
}

/* ---- a sender killed with eager messages sent ---------------------------------- */

struct kill_ctx {
	int handle_pipe[2], ready_pipe[2];
};

static int victim_send(void *arg)
{
	struct kill_ctx *k = arg;
	char handle[E2E_HANDLE_SIZE], one = 1;
	struct e2e_net n;
	void *sc, *mh, *req;
	int i, r = e2e_open(&n, 12);

	if (r)
		return r;
	e2e_pipe_read(k->handle_pipe[0], handle, sizeof(handle), T);
	E2E_OK(e2e_connect_wait(&n, 0, handle, &sc, T));
	E2E_OK(e2e_reg_mr(&n, sc, sbuf, BUF, NCCL_PTR_HOST, &mh));
	for (i = 0; i < 3; i++) { /* completed: in the receiver's ring */
		e2e_fill(sbuf + 64 * i, 40, 500 + (uint32_t)i);
		req = NULL;
		E2E_OK(e2e_isend(&n, sc, sbuf + 64 * i, 40, 1, mh, &req));
		if (!req)
			E2E_FAIL("eager send %d with no receive posted got no request", i);
		E2E_OK(e2e_wait(&n, req, NULL, T));
	}
	e2e_fill(sbuf + 64 * 3, 40, 503);
	E2E_OK(e2e_isend(&n, sc, sbuf + 64 * 3, 40, 1, mh, &req)); /* maybe still in flight */
	e2e_pipe_write(k->ready_pipe[1], &one, 1);
	for (;;)
		pause(); /* SIGKILLed */
}

static int killed_sender(void *arg)
{
	struct kill_ctx k;
	char handle[E2E_HANDLE_SIZE], one;
	struct e2e_net n;
	void *lc, *rc, *mh, *req, *data;
	size_t size = 64;
	int tag = 1, i, done = 0, rs[8];
	ncclResult_t r = ncclSuccess;
	double t0;
	pid_t pid;

	(void)arg;
	if (pipe(k.handle_pipe) || pipe(k.ready_pipe))
		E2E_FAIL("pipe");
	pid = e2e_spawn(NULL, victim_send, &k);
	if (e2e_open(&n, 12))
		E2E_FAIL("open");
	E2E_OK(e2e_listen(&n, 0, handle, &lc));
	e2e_pipe_write(k.handle_pipe[1], handle, sizeof(handle));
	E2E_OK(e2e_accept_wait(&n, lc, &rc, T));
	E2E_OK(e2e_close_listen(&n, lc));
	E2E_OK(e2e_reg_mr(&n, rc, rbuf, BUF, NCCL_PTR_HOST, &mh));
	e2e_pipe_read(k.ready_pipe[0], &one, 1, T);
	kill(pid, SIGKILL);
	e2e_reap(pid, T);
	memset(rbuf, 0xee, 4096);
	for (i = 0; i < 3; i++) { /* arrived before the death: delivered */
		data = rbuf + 64 * i;
		req = e2e_irecv_wait(&n, rc, 1, &data, &size, &tag, &mh, T);
		E2E_OK(e2e_wait(&n, req, rs, T));
		if (rs[0] != 40 || e2e_verify(data, 40, 500 + (uint32_t)i) >= 0)
			E2E_FAIL("eager message %d that arrived before the sender died: %d bytes or "
				 "wrong content", i, rs[0]);
	}
	/* the 4th may have arrived; the 5th cannot: an error within the bound */
	t0 = e2e_now();
	for (i = 3; i < 5 && r == ncclSuccess; i++) {
		data = rbuf + 64 * i;
		req = NULL;
		while (r == ncclSuccess && !req && e2e_now() - t0 < 10.0)
			r = e2e_irecv(&n, rc, 1, &data, &size, &tag, &mh, &req);
		for (done = 0; r == ncclSuccess && req && !done && e2e_now() - t0 < 10.0;)
			r = e2e_test(&n, req, &done, rs);
		if (r == ncclSuccess && done && i == 3 && (rs[0] != 40 ||
							   e2e_verify(data, 40, 503) >= 0))
			E2E_FAIL("the in-flight eager message was delivered wrong");
	}
	if (r == ncclSuccess)
		E2E_FAIL("no error %.1f s after the eager sender was killed", e2e_now() - t0);
	if (!e2e_warned("peer"))
		E2E_FAIL("the error does not name the peer:\n%s", e2e_warn_text());
	e2e_note("killed eager sender: error after %.2f s", e2e_now() - t0);
	e2e_warn_reset();
	E2E_OK(e2e_dereg_mr(&n, rc, mh));
	E2E_OK(e2e_close_recv(&n, rc));
	e2e_close(&n);
	return 0;
}

int main(void)
{
	struct pair p;

	alarm(120);
	sbuf = aligned_alloc(4096, BUF);
	rbuf = aligned_alloc(4096, BUF);
	if (!sbuf || !rbuf)
		E2E_FAIL("out of memory");
	if (getenv("NCCL_VERBS_EAGER_MAX") && atoi(getenv("NCCL_VERBS_EAGER_MAX")) != EAGER) {
		e2e_note("NCCL_VERBS_EAGER_MAX is set: this test needs the default");
		return 77;
	}
	/* first, before this process loads the plugin: the child reads its own knobs */
	if (e2e_reap(e2e_spawn(NULL, eager_off, NULL), 60))
		E2E_FAIL("the run with NCCL_VERBS_EAGER_MAX=0 failed");
	if (e2e_reap(e2e_spawn(NULL, gpu_typed, NULL), 60))
		E2E_FAIL("the CUDA-typed receive case failed");
	if (e2e_reap(e2e_spawn(NULL, crossing, NULL), 60))
		E2E_FAIL("the crossing case failed");
	mixed("0", NULL, 0); /* eager off on one side only */
	mixed(NULL, "0", 0);
	mixed("4096", "1024", 1024);
	mixed("1024", "4096", 1024);
	mixed("4096", "1", 1);
	if (e2e_reap(e2e_spawn(NULL, killed_sender, NULL), 60))
		E2E_FAIL("the killed-sender case failed");
	pair_open(&p, e2e_dev("simib0"));
	credits(&p); /* first: the whole ring is free */
	early_send(&p, 1);
	interleave(&p, 1);
	grouped_late(&p);
	truncation(&p);
	early_send(&p, 1);
	pair_close(&p);
	e2e_note("eager: ok");
	free(sbuf);
	free(rbuf);
	return 0;
}
