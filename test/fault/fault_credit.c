/*
 * fault_credit - the eager path's credit (comm.h "Eager protocol"): grants
 * ride on the clear-to-sends, and the receiver writes its credit word only
 * when messages go eager.
 *
 * Cases (loopback pair, InfiniBand and RoCE, eager on):
 *   posted-ahead   400 messages whose receives are posted 8 ahead (the CTS
 *                  path throughout): no credit word is written (the grants
 *                  on the CTSs are enough), and afterwards the 32 - 8 small
 *                  sends the last CTS's grant allows (posted 8 ahead, its
 *                  tail was 8 behind) go eager at once with no receive
 *                  posted (the sender takes its credit from that CTS), data
 *                  checked;
 *   send-first     600 small messages each sent before its receive (all
 *                  eager): the credit word keeps the sender going (no send
 *                  ever has to wait for a CTS), data checked;
 *   alternating    phases of both, each followed by a burst of what its
 *                  credit allows (24 after CTSs, 16 after credit words),
 *                  5 times: no send waits, data checked.
 *   first-release  the receiver of a sender that does not read CTS grants
 *                  (a first-release eager sender; emulated by clearing the
 *                  receiver's flag after connect): it writes the credit
 *                  word every 16 freed entries, 400 posted-ahead messages
 *                  still leave a burst of 16 eager ones possible;
 *   hostile-grant  a CTS whose grant reaches past the ring (as a broken or
 *                  hostile receiver would write it): the sender's next
 *                  eager attempt fails the comm naming the connection and
 *                  the cause, and the error is sticky.
 * Each ends with both sides idle and closes; simverbs' leak check at exit.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "eager.h"
#include "fh.h"

#define BOUND (20.0 * fh_scale())
#define MSG 64
#define DEPTH 8

struct pair {
	struct fh_conn c;	/* buffers: NV_EAGER_SLOTS slots of MSG bytes each */
	struct nv_send_comm *s;	/* c.s and c.r, as the plugin's comms */
	struct nv_recv_comm *r;
	uint64_t next_send, next_recv;	/* message numbers */
};

static char *slot(char *buf, uint64_t i)
{
	return buf + (i % NV_EAGER_SLOTS) * MSG;
}

static void wait_done(struct pair *p, void *req, int *size)
{
	double end = fh_now() + BOUND;
	int done = 0;

	while (!done) {
		FH_OK(p->c.f->net->test(req, &done, size));
		FH_CHECK(fh_now() < end, "a request did not complete within %.0f s", BOUND);
	}
}

static void *post_recv(struct pair *p)
{
	void *data = slot(p->c.rbuf, p->next_recv), *req = NULL;
	size_t size = MSG;
	int tag = 7;

	memset(data, 0, MSG);
	FH_OK(p->c.f->net->irecv(p->r, 1, &data, &size, &tag, &p->c.rmh, NULL, &req));
	FH_CHECK(req != NULL, "irecv %lu returned no request", (unsigned long)p->next_recv);
	p->next_recv++;
	return req;
}

/* isend of the next message; must_go: it may not wait (eager credit expected). */
static void *post_send(struct pair *p, int must_go)
{
	char *data = slot(p->c.sbuf, p->next_send);
	void *req = NULL;
	double end = fh_now() + BOUND;

	fh_fill(data, MSG, p->next_send + 1);
	for (;;) {
		FH_OK(p->c.f->net->isend(p->s, data, MSG, 7, p->c.smh, NULL, &req));
		if (req)
			break;
		FH_CHECK(!must_go, "message %lu waited for its CTS: the sender had no eager credit "
			 "(grant %lu)", (unsigned long)p->next_send,
			 (unsigned long)p->s->eager.grant);
		FH_CHECK(fh_now() < end, "isend %lu never went", (unsigned long)p->next_send);
	}
	p->next_send++;
	return req;
}

static void check_recv(struct pair *p, void *req, uint64_t i)
{
	int size = -1;

	wait_done(p, req, &size);
	FH_CHECK(size == MSG, "message %lu: %d bytes", (unsigned long)i, size);
	FH_CHECK(fh_check_pattern(slot(p->c.rbuf, i), MSG, i + 1) == 0, "message %lu corrupt",
		 (unsigned long)i);
}

/* n messages with receives DEPTH ahead; returns the credit words written meanwhile. */
static uint32_t phase_posted(struct pair *p, int n)
{
	void *rq[DEPTH], *sq;
	uint32_t before = p->r->eager.ngrant;
	uint64_t first = p->next_recv;
	int i;

	for (i = 0; i < DEPTH; i++)
		rq[i] = post_recv(p);
	for (i = 0; i < n; i++) {
		sq = post_send(p, 0);
		wait_done(p, sq, NULL);
		check_recv(p, rq[i % DEPTH], first + (uint64_t)i);
		if (i + DEPTH < n)
			rq[i % DEPTH] = post_recv(p);
	}
	return p->r->eager.ngrant - before;
}

/* n messages, each sent (eager) before its receive is posted. */
static void phase_send_first(struct pair *p, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		uint64_t m = p->next_send;
		void *sq = post_send(p, 1);

		check_recv(p, post_recv(p), m);
		wait_done(p, sq, NULL);
	}
}

/* n sends with no receive posted: all must go at once. */
static void burst(struct pair *p, int n)
{
	void *sq[NV_EAGER_SLOTS];
	uint64_t first = p->next_send;
	int i;

	for (i = 0; i < n; i++)
		sq[i] = post_send(p, 1);
	for (i = 0; i < n; i++)
		check_recv(p, post_recv(p), first + (uint64_t)i);
	for (i = 0; i < n; i++)
		wait_done(p, sq[i], NULL);
}

/* What the last CTS of a DEPTH-ahead phase grants beyond it; what credit words keep. */
#define AFTER_CTS (NV_EAGER_SLOTS - DEPTH)
#define AFTER_WORDS NV_EAGER_GRANT_BATCH

static void pair_open(struct fh *f, int dev, struct pair *p)
{
	memset(p, 0, sizeof(*p));
	fh_conn_open(f, dev, NV_EAGER_SLOTS * MSG, &p->c);
	p->s = p->c.s;
	p->r = p->c.r;
	FH_CHECK(p->s->eager.max >= MSG && p->r->eager.max >= MSG,
		 "eager is off on this comm (send %u, recv %u)", p->s->eager.max, p->r->eager.max);
	FH_CHECK(p->r->eager.cts_grant, "the sender did not ask for grants on the CTSs");
}

static void run_dev(struct fh *f, int dev, const char *name)
{
	struct pair p;
	uint32_t words, g0;
	int k;

	pair_open(f, dev, &p);
	words = phase_posted(&p, 400);
	FH_CHECK(words == 0, "%s posted-ahead: %u credit words written while every message "
		 "took its CTS (the CTS grants should do)", name, words);
	burst(&p, AFTER_CTS);
	fh_log("%s posted-ahead: 400 messages, 0 credit words; a burst of %d went eager", name,
	       AFTER_CTS);
	fh_conn_close(&p.c);

	pair_open(f, dev, &p);
	g0 = p.r->eager.ngrant;
	phase_send_first(&p, 600);
	FH_CHECK(p.r->eager.ngrant - g0 >= 600 / NV_EAGER_GRANT_BATCH - 2,
		 "%s send-first: only %u credit words for 600 eager messages", name,
		 p.r->eager.ngrant - g0);
	fh_log("%s send-first: 600 eager messages, %u credit words", name, p.r->eager.ngrant - g0);
	for (k = 0; k < 5; k++) {
		(void)phase_posted(&p, 50 + 17 * k);
		burst(&p, AFTER_CTS);
		phase_send_first(&p, 40 + 13 * k);
		burst(&p, AFTER_WORDS);
	}
	fh_log("%s alternating: 5 rounds, no send waited", name);
	fh_conn_close(&p.c);
}

static void first_release(struct fh *f, int dev, const char *name)
{
	struct pair p;
	uint32_t words;

	pair_open(f, dev, &p);
	p.r->eager.cts_grant = 0;
	words = phase_posted(&p, 400);
	FH_CHECK(words >= 400 / NV_EAGER_GRANT_BATCH - 2, "%s first-release: only %u credit words "
		 "for 400 messages to a sender that reads none on the CTSs", name, words);
	burst(&p, AFTER_WORDS);
	phase_send_first(&p, 100);
	fh_log("%s first-release: 400 messages, %u credit words; a burst of %d went eager", name,
	       words, AFTER_WORDS);
	fh_conn_close(&p.c);
}

static void hostile_grant(struct fh *f, int dev, const char *name)
{
	struct pair p;
	struct nv_cts_entry *e;
	void *req = NULL;
	int w;

	pair_open(f, dev, &p);
	(void)phase_posted(&p, 40);
	/* the last CTS the sender used, where a peer's RDMA write lands (comm.h) */
	e = &((struct nv_send_ctrl *)p.s->base.ctrl)->fifo[p.s->eager.cts_seq % NV_FIFO_SLOTS][0];
	FH_CHECK(e->seq == p.s->eager.cts_seq + 1, "the last CTS is not in its slot");
	fh_warn_reset();
	p.s->eager.grant = p.s->head; /* spent: the next isend reads the CTS's grant */
	e->eager.grant = 1000;
	FH_CHECK(p.c.f->net->isend(p.s, p.c.sbuf, MSG, 7, p.c.smh, NULL, &req) != ncclSuccess,
		 "%s hostile-grant: isend accepted a grant of 1000 past message %lu", name,
		 (unsigned long)p.s->eager.cts_seq);
	w = fh_warn_find(0, "connection", "grants eager messages up to", "protocol violation",
			 NULL);
	FH_CHECK(w >= 0, "%s hostile-grant: no WARN naming the connection and the cause", name);
	FH_CHECK(p.c.f->net->isend(p.s, p.c.sbuf, MSG, 7, p.c.smh, NULL, &req) != ncclSuccess,
		 "%s hostile-grant: the error is not sticky", name);
	fh_log("%s hostile-grant: %s", name, fh_warn_get(w));
	fh_conn_close(&p.c);
}

int main(void)
{
	struct fh f;
	int d, rc;

	fh_watchdog(120);
	rc = fh_open(&f);
	if (rc)
		return rc;
	for (d = 0; d < e2e_ndevs(FH_SIM_NDEVS); d++) {
		int dev = fh_sim_dev(&f, d);
		const char *name = e2e_dev(fh_sim_devs[d]);

		run_dev(&f, dev, name);
		first_release(&f, dev, name);
		hostile_grant(&f, dev, name);
	}
	fh_close(&f);
	fh_log("PASS");
	return 0;
}
