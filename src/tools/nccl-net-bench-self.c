/*
 * nccl-net-bench-self.c - `--self`: one process, one loopback send/recv comm
 * pair on one device, N rounds of irecv + isend + test until both are done.
 *
 * This is the load-independent pattern of scripts/cpu-cost.sh: on a fabric
 * that completes loopback work inside ibv_post_send (simverbs) each round
 * takes the same calls whatever the machine's load, so the instructions a
 * plugin executes per round, measured at two values of N and differenced,
 * are repeatable to the instruction. Every round's data is checked.
 *
 * --idle KIND measures, the same way, what one call costs that finds nothing
 * to do: test() of a receive nothing is sent to, or isend() before the
 * receiver posted anything (returns no request; sends an eager path takes
 * come before those calls). A proxy thread pays that
 * on every poll of an idle connection, and it is the part of a two-process
 * count that moves with load (scripts/cpu-cost.sh subtracts it).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/nccl-net-bench.h"

struct nb_self {
	struct nb_net *net;
	void *lcomm, *scomm, *rcomm;
	void *smh, *rmh;
	char *sbuf, *rbuf;
	size_t size;
	int send_first;		/* --send-first: each round tries its isend before its irecv */
};

static int nb_self_connect(struct nb_self *s, int dev)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];

	memset(handle, 0, sizeof(handle));
	if (nb_net_listen(s->net, dev, handle, &s->lcomm) != 0)
		return -1;
	while (!s->scomm || !s->rcomm) {
		if (!s->scomm && nb_net_connect(s->net, dev, handle, &s->scomm) != 0)
			return -1;
		if (!s->rcomm && nb_net_accept(s->net, s->lcomm, &s->rcomm) != 0)
			return -1;
		if (nb_past_deadline("--self connect"))
			return -1;
	}
	return 0;
}

/*
 * Both requests posted (irecv first, so isend finds the receiver's CTS; with
 * --send-first one isend comes first, which an eager plugin takes at once)
 * and tested done.
 */
static int nb_self_round(struct nb_self *s, int tag)
{
	void *rreq = NULL, *sreq = NULL;
	int rdone = 0, sdone = 0, got = 0;
	size_t sz = s->size;

	if (s->send_first &&
	    nb_net_isend(s->net, s->scomm, s->sbuf, s->size, tag, s->smh, &sreq) != 0)
		return -1;

	while (!rreq) {
		if (nb_net_irecv(s->net, s->rcomm, 1, (void **)&s->rbuf, &sz, &tag, &s->rmh,
				 &rreq) != 0 || (!rreq && nb_past_deadline("--self irecv")))
			return -1;
	}
	while (!sreq) {
		if (nb_net_isend(s->net, s->scomm, s->sbuf, s->size, tag, s->smh, &sreq) != 0 ||
		    (!sreq && nb_past_deadline("--self isend")))
			return -1;
	}
	while (!rdone || !sdone) {
		if (!sdone && nb_net_test(s->net, sreq, &sdone, NULL) != 0)
			return -1;
		if (!rdone && nb_net_test(s->net, rreq, &rdone, &got) != 0)
			return -1;
		if ((!rdone || !sdone) && nb_past_deadline("--self test"))
			return -1;
	}
	if ((size_t)got != s->size) {
		nb_err("--self: received %d bytes, sent %zu", got, s->size);
		return -1;
	}
	return 0;
}

/* noinline: scripts/cpu-cost.sh counts inside it (callgrind --toggle-collect) */
static __attribute__((noinline)) int nb_self_rounds(struct nb_self *s, int rounds)
{
	long wrong;
	int i;

	for (i = 0; i < rounds; i++) {
		if (nb_self_round(s, 1 + i % 7) != 0)
			return -1;
	}
	/* one checked round with fresh data */
	nb_fill(s->sbuf, s->size, 0x5e1f, 0);
	memset(s->rbuf, 0, s->size);
	if (nb_self_round(s, 1) != 0)
		return -1;
	wrong = nb_verify(s->rbuf, s->size, 0x5e1f, 0);
	if (wrong) {
		nb_err("--self: %ld wrong values received", wrong);
		return -1;
	}
	return 0;
}

int nb_idle_parse(const char *arg, int *idle)
{
	if (!strcmp(arg, "test"))
		*idle = NB_IDLE_TEST;
	else if (!strcmp(arg, "isend"))
		*idle = NB_IDLE_ISEND;
	else {
		nb_err("--idle must be test or isend, not '%s'", arg);
		return -1;
	}
	return 0;
}

#define NB_EAGER_MAX_SENDS 256 /* sends an eager plugin may take before any receive */

/*
 * The sends an eager plugin took before any receive was posted: received
 * and completed, in order, so the comm pair is back to where it started.
 */
static int nb_self_drain(struct nb_self *s, void **sreqs, int k)
{
	size_t sz = s->size;
	int i, tag = 1, done, sdone, got;

	for (i = 0; i < k; i++) {
		void *rreq = NULL;

		while (!rreq)
			if (nb_net_irecv(s->net, s->rcomm, 1, (void **)&s->rbuf, &sz, &tag, &s->rmh,
					 &rreq) != 0 || (!rreq && nb_past_deadline("--idle irecv")))
				return -1;
		for (done = sdone = 0; !done || !sdone;)
			if ((!sdone && nb_net_test(s->net, sreqs[i], &sdone, NULL) != 0) ||
			    (!done && nb_net_test(s->net, rreq, &done, &got) != 0) ||
			    ((!done || !sdone) && nb_past_deadline("--idle test")))
				return -1;
	}
	return 0;
}

/*
 * n calls that must find nothing to do, then a round that completes what they
 * left. isend: a plugin with an eager path (ours: NCCL_VERBS_EAGER_MAX) takes
 * small sends before any receive until its receiver's ring is full; those come
 * first and are not counted as idle (they cancel out of a difference of two
 * runs); every call after the first one without a request must have none.
 * noinline: scripts/cpu-cost.sh counts inside it (--toggle-collect).
 */
static __attribute__((noinline)) int nb_self_idle(struct nb_self *s, int kind, int n)
{
	void *rreq = NULL, *sreq = NULL;
	static void *eager[NB_EAGER_MAX_SENDS];
	size_t sz = s->size;
	int i, k = 0, tag = 1, done = 0, sdone = 0, got = 0;

	for (i = 0; kind == NB_IDLE_ISEND && i < n;) {
		if (nb_net_isend(s->net, s->scomm, s->sbuf, s->size, tag, s->smh, &sreq) != 0)
			return -1;
		if (sreq && (i > 0 || k == NB_EAGER_MAX_SENDS)) {
			nb_err("--idle isend: isend returned a request before any receive was posted%s",
			       i ? " after one without" : " (more than an eager path would take)");
			return -1;
		}
		if (sreq)
			eager[k++] = sreq, sreq = NULL;
		else
			i++;
	}
	if (kind == NB_IDLE_ISEND)
		return nb_self_drain(s, eager, k) != 0 ? -1 : nb_self_rounds(s, 0);
	while (!rreq) {
		if (nb_net_irecv(s->net, s->rcomm, 1, (void **)&s->rbuf, &sz, &tag, &s->rmh,
				 &rreq) != 0 || (!rreq && nb_past_deadline("--idle irecv")))
			return -1;
	}
	for (i = 0; i < n; i++) {
		if (nb_net_test(s->net, rreq, &done, &got) != 0)
			return -1;
		if (done) {
			nb_err("--idle test: a receive completed with nothing sent");
			return -1;
		}
	}
	while (!sreq) {
		if (nb_net_isend(s->net, s->scomm, s->sbuf, s->size, tag, s->smh, &sreq) != 0 ||
		    (!sreq && nb_past_deadline("--idle isend")))
			return -1;
	}
	while (!done || !sdone) {
		if ((!sdone && nb_net_test(s->net, sreq, &sdone, NULL) != 0) ||
		    (!done && nb_net_test(s->net, rreq, &done, &got) != 0) ||
		    ((!done || !sdone) && nb_past_deadline("--idle test")))
			return -1;
	}
	if ((size_t)got != s->size) {
		nb_err("--idle: received %d bytes, sent %zu", got, s->size);
		return -1;
	}
	return 0;
}

int nb_self_run(struct nb_net *net, int dev, size_t size, int warmup, int rounds, int idle,
		int send_first)
{
	struct nb_self s = { .net = net, .size = size, .send_first = send_first };
	size_t alloc = size ? (size + 4095) & ~(size_t)4095 : 4096;
	int rc = -1;

	s.sbuf = aligned_alloc(4096, alloc);
	s.rbuf = aligned_alloc(4096, alloc);
	if (!s.sbuf || !s.rbuf) {
		nb_err("--self: out of memory for %zu bytes", size);
		goto free_bufs;
	}
	memset(s.sbuf, 0x3c, alloc);
	if (nb_self_connect(&s, dev) != 0 ||
	    nb_net_regmr(net, s.scomm, s.sbuf, alloc, &s.smh) != 0 ||
	    nb_net_regmr(net, s.rcomm, s.rbuf, alloc, &s.rmh) != 0)
		goto close;
	if (nb_self_rounds(&s, warmup) != 0 ||
	    (idle ? nb_self_idle(&s, idle, rounds) : nb_self_rounds(&s, rounds)) != 0)
		goto close;
	printf("# --self: %s, device %d, %zu B, %d %s: ok\n", net->name, dev, size, rounds,
	       idle == NB_IDLE_TEST ? "idle test() calls" : idle == NB_IDLE_ISEND ?
	       "idle isend() calls" : "rounds");
	rc = 0;
close:
	if (s.smh)
		nb_net_deregmr(net, s.scomm, s.smh);
	if (s.rmh)
		nb_net_deregmr(net, s.rcomm, s.rmh);
	if (s.scomm)
		nb_net_close_send(net, s.scomm);
	if (s.rcomm)
		nb_net_close_recv(net, s.rcomm);
	if (s.lcomm)
		nb_net_close_listen(net, s.lcomm);
free_bufs:
	free(s.sbuf);
	free(s.rbuf);
	return rc;
}
