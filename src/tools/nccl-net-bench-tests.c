/*
 * nccl-net-bench-tests.c - the point-to-point test plans: sendrecv (uni- and
 * bidirectional), latency (ping-pong) and multirecv (one receiver, several
 * tags grouped into one irecv per step, from every other rank), alltoall (every
 * rank to every other through a comm pair per peer, as NCCL's ncclAllToAll
 * posts a send and a receive per peer), and the data patterns that let every
 * received byte be checked.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/nccl-net-bench.h"

static const char *const nb_test_names[NB_T_COUNT] = {
	[NB_T_SENDRECV] = "sendrecv",
	[NB_T_SENDRECV_BI] = "sendrecv-bi",
	[NB_T_LATENCY] = "latency",
	[NB_T_ALLREDUCE] = "allreduce",
	[NB_T_MULTIRECV] = "multirecv",
	[NB_T_ALLTOALL] = "alltoall",
};

const char *nb_test_name(int t)
{
	return t >= 0 && t < NB_T_COUNT ? nb_test_names[t] : "?";
}

int nb_test_parse(const char *list, unsigned *mask)
{
	char buf[256], *tok, *save = NULL;
	int t;

	*mask = 0;
	snprintf(buf, sizeof(buf), "%s", list);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "all")) {
			*mask |= (1U << NB_T_COUNT) - 1;
			continue;
		}
		for (t = 0; t < NB_T_COUNT; t++)
			if (!strcmp(tok, nb_test_names[t]))
				break;
		if (t == NB_T_COUNT) {
			nb_err("unknown test '%s' (sendrecv, sendrecv-bi, latency, allreduce, "
			       "multirecv, alltoall, all)", tok);
			return -1;
		}
		*mask |= 1U << t;
	}
	return *mask ? 0 : -1;
}

/* ---- patterns --------------------------------------------------------------- */

static inline unsigned char nb_pat(uint32_t seed, size_t x)
{
	uint32_t v = (uint32_t)x * 2654435761U + seed * 40503U;

	return (unsigned char)((v >> 24) ^ (uint32_t)(x >> 12));
}

void nb_fill(char *p, size_t n, uint32_t seed, size_t off)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (char)nb_pat(seed, off + i);
}

/* Wrong elements of esize bytes (an element counts once however many bytes differ). */
static long nb_verify_el(const char *p, size_t n, uint32_t seed, size_t off, size_t esize)
{
	long wrong = 0;
	size_t i, j;

	for (i = 0; i < n; i += esize)
		for (j = i; j < i + esize && j < n; j++)
			if ((unsigned char)p[j] != nb_pat(seed, off + j)) {
				wrong++;
				break;
			}
	return wrong;
}

long nb_verify(const char *p, size_t n, uint32_t seed, size_t off)
{
	return nb_verify_el(p, n, seed, off, 1);
}

static uint32_t nb_seed(int rank, int g, int iter)
{
	return (uint32_t)rank * 1000003U + (uint32_t)g * 7919U + (uint32_t)iter * 31U + 1U;
}

/* ---- p2p streams ------------------------------------------------------------- */

enum nb_p2p_mode { NB_P_SEND, NB_P_RECV, NB_P_PING, NB_P_PONG };

struct nb_p2p {
	int mode;
	struct nb_conn *sconn, *rconn;
	size_t size, unit, esize;
	int iters, check, me, peer;
	uint32_t ssalt, rsalt;		/* alltoall: the receiving rank, mixed into the seed */
	int it, phase;
	size_t off;
};

static int nb_p2p_next(struct nb_stream *s, struct nb_step *st)
{
	struct nb_p2p *p = s->state;
	size_t len;

	memset(st, 0, sizeof(*st));
	if (p->it >= p->iters)
		return 0;
	len = p->size - p->off < p->unit ? p->size - p->off : p->unit;
	st->iter = p->it;
	st->off = p->off;
	/* ping: send the whole message, then receive the reply; pong: the reverse */
	if (p->mode == NB_P_SEND || (p->mode == NB_P_PING && !p->phase) ||
	    (p->mode == NB_P_PONG && p->phase))
		st->sconn = p->sconn, st->ssize = len;
	if (p->mode == NB_P_RECV || (p->mode == NB_P_PING && p->phase) ||
	    (p->mode == NB_P_PONG && !p->phase))
		st->rconn = p->rconn, st->rsize = len;
	p->off += p->unit;
	if (p->off >= p->size) {
		p->off = 0;
		if ((p->mode == NB_P_PING || p->mode == NB_P_PONG) && !p->phase) {
			p->phase = 1;
		} else {
			p->phase = 0;
			p->it++;
		}
	}
	return 1;
}

static void nb_p2p_reset(struct nb_stream *s)
{
	struct nb_p2p *p = s->state;

	p->it = p->phase = 0;
	p->off = 0;
}

static int nb_p2p_exec(struct nb_stream *s, const struct nb_step *st, char **rptr, char **sptr)
{
	struct nb_p2p *p = s->state;
	int g;

	if (!p->check)
		return 0;
	for (g = 0; st->sconn && g < st->sconn->ngroup; g++)
		nb_fill(sptr[g], st->ssize, nb_seed(p->me, g, st->iter) + p->ssalt, st->off);
	for (g = 0; st->rconn && g < st->rconn->ngroup; g++)
		s->wrong += nb_verify_el(rptr[g], st->rsize,
					 nb_seed(p->peer, g, st->iter) + p->rsalt, st->off, p->esize);
	return 0;
}

static int nb_p2p_add(struct nb_ctx *c, struct nb_stream *s, struct nb_p2p *p, int mode,
		      int peer, size_t size, int iters, int check)
{
	memset(p, 0, sizeof(*p));
	memset(s, 0, sizeof(*s));
	p->mode = mode;
	p->sconn = mode == NB_P_RECV ? NULL : nb_engine_find(c->e, peer, 1);
	p->rconn = mode == NB_P_SEND ? NULL : nb_engine_find(c->e, peer, 0);
	if ((mode != NB_P_RECV && !p->sconn) || (mode != NB_P_SEND && !p->rconn)) {
		nb_err("internal: no connection to rank %d for this test", peer);
		return -1;
	}
	p->size = size;
	p->unit = c->e->buffsize / NB_STEPS;
	p->esize = size % 4 == 0 ? 4 : 1;
	p->iters = iters;
	p->check = check;
	p->me = c->rank;
	p->peer = peer;
	s->state = p;
	s->next = nb_p2p_next;
	s->exec = nb_p2p_exec;
	s->reset = nb_p2p_reset;
	nb_stream_count(s);
	return 0;
}

int nb_test_edges(int t, const struct nb_ctx *c, struct nb_edge *edges, int max)
{
	int n = 0, r, s;

	for (r = 0; r < c->nranks && n + 2 <= max; r++) {
		int pair = (r % 2 == 0 && r + 1 < c->nranks);

		if (t == NB_T_SENDRECV && pair)
			edges[n++] = (struct nb_edge){ r, r + 1, 1, 1 };
		else if ((t == NB_T_SENDRECV_BI || t == NB_T_LATENCY) && pair) {
			edges[n++] = (struct nb_edge){ r, r + 1, 1, 1 };
			edges[n++] = (struct nb_edge){ r + 1, r, 1, 1 };
		} else if (t == NB_T_ALLREDUCE)
			edges[n++] = (struct nb_edge){ r, (r + 1) % c->nranks, 1, 2 };
		else if (t == NB_T_MULTIRECV && r > 0)
			edges[n++] = (struct nb_edge){ r, 0, c->groups, 1 };
		else if (t == NB_T_ALLTOALL)
			for (s = 0; s < c->nranks && n < max; s++)
				if (s != r)
					edges[n++] = (struct nb_edge){ r, s, 1, 1 };
	}
	return n;
}

int nb_test_max_edges(int t, int nranks)
{
	return (t == NB_T_ALLTOALL ? nranks * (nranks - 1) : 2 * nranks) + 2;
}

size_t nb_test_size(int t, const struct nb_ctx *c, size_t size)
{
	if (t == NB_T_ALLREDUCE)
		return size < sizeof(float) ? 0 : size;
	if (t == NB_T_ALLTOALL)
		return size / (size_t)c->nranks * (size_t)c->nranks;
	return size;
}

/*
 * alltoall: a send stream to every other rank and a receive stream from every
 * other rank, size / nranks bytes each (the rank's own share stays local, as in
 * alltoall_perf). Peers in NCCL's p2p order: the i-th send goes to rank + i,
 * the i-th receive comes from rank - i, so no rank is everyone's first peer.
 * The seed mixes in the receiving rank: a byte delivered on the wrong comm
 * pair is found wrong.
 */
static int nb_alltoall_streams(struct nb_ctx *c, struct nb_stream *ss, struct nb_p2p *ps,
			       size_t size, int iters, int check)
{
	size_t per = size / (size_t)c->nranks;
	int i, n = 0;

	for (i = 1; i < c->nranks; i++) {
		int to = (c->rank + i) % c->nranks, from = (c->rank - i + c->nranks) % c->nranks;

		if (nb_p2p_add(c, &ss[n], &ps[n], NB_P_SEND, to, per, iters, check) != 0)
			return -1;
		ps[n++].ssalt = (uint32_t)to * 65537U;
		if (nb_p2p_add(c, &ss[n], &ps[n], NB_P_RECV, from, per, iters, check) != 0)
			return -1;
		ps[n++].rsalt = (uint32_t)c->rank * 65537U;
	}
	return n;
}

/* Builds this rank's streams for test t; returns how many. */
static int nb_test_streams(int t, struct nb_ctx *c, struct nb_stream *ss, struct nb_p2p *ps,
			   size_t size, int iters, int check)
{
	int partner = c->rank ^ 1, n = 0, r, even = c->rank % 2 == 0;
	int paired = partner < c->nranks;

	if (t == NB_T_ALLTOALL)
		return nb_alltoall_streams(c, ss, ps, size, iters, check);
	if (t == NB_T_MULTIRECV) {
		for (r = 1; c->rank == 0 && r < c->nranks; r++, n++)
			if (nb_p2p_add(c, &ss[n], &ps[n], NB_P_RECV, r, size, iters, check) != 0)
				return -1;
		if (c->rank != 0 &&
		    nb_p2p_add(c, &ss[n++], &ps[0], NB_P_SEND, 0, size, iters, check) != 0)
			return -1;
		return n;
	}
	if (!paired)
		return 0;
	if (t == NB_T_LATENCY)
		return nb_p2p_add(c, &ss[0], &ps[0], even ? NB_P_PING : NB_P_PONG, partner, size,
				  iters, check) == 0 ? 1 : -1;
	if ((t == NB_T_SENDRECV_BI || even) &&
	    nb_p2p_add(c, &ss[n++], &ps[0], NB_P_SEND, partner, size, iters, check) != 0)
		return -1;
	if ((t == NB_T_SENDRECV_BI || !even) &&
	    nb_p2p_add(c, &ss[n++], &ps[1], NB_P_RECV, partner, size, iters, check) != 0)
		return -1;
	return n;
}

int nb_test_run(int t, struct nb_ctx *c, size_t size, int iters, int check, long *wrong)
{
	struct nb_stream *ss = calloc(2 * (size_t)c->nranks + 2, sizeof(*ss));
	struct nb_p2p *ps = calloc(2 * (size_t)c->nranks + 2, sizeof(*ps));
	int n, i, rc = -1;

	*wrong = 0;
	if (!ss || !ps)
		goto out;
	if (t == NB_T_ALLREDUCE) {
		rc = nb_ar_run(c, size / sizeof(float), iters, check, wrong);
		goto out;
	}
	nb_engine_reset(c->e);
	n = nb_test_streams(t, c, ss, ps, size, iters, check);
	if (n < 0)
		goto out;
	rc = nb_run(c->e, ss, n);
	for (i = 0; i < n; i++)
		*wrong += ss[i].wrong;
out:
	free(ss);
	free(ps);
	return rc;
}

/* Bytes that make up algbw, and the bus-bandwidth factor, per test. */
double nb_test_bytes(int t, const struct nb_ctx *c, size_t size, double *busfactor)
{
	*busfactor = 1.0;
	switch (t) {
	case NB_T_SENDRECV_BI:
		*busfactor = 2.0;	/* both directions together */
		return (double)size;
	case NB_T_ALLREDUCE:
		*busfactor = 2.0 * (c->nranks - 1) / c->nranks;
		return (double)(size / sizeof(float) * sizeof(float));
	case NB_T_MULTIRECV:
		return (double)size * (c->nranks - 1) * c->groups;
	case NB_T_ALLTOALL:
		/* alltoall_perf: algbw = a rank's whole buffer per second, busbw
		 * (n - 1) / n of it, what leaves the rank */
		*busfactor = (double)(c->nranks - 1) / c->nranks;
		return (double)size;
	default:
		return (double)size;
	}
}

void nb_test_describe(int t, const struct nb_ctx *c, size_t size, struct nb_result *r)
{
	(void)c;
	memset(r, 0, sizeof(*r));
	r->test = t;
	r->size = size;
	if (t == NB_T_ALLREDUCE || size % 4 == 0) {
		r->count = size / 4;
		r->type = "float";
	} else {
		r->count = size;
		r->type = "int8";
	}
	r->redop = t == NB_T_ALLREDUCE ? "sum" : "none";
}
