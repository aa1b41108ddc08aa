/*
 * nccl-net-bench-engine.c - connections and the proxy-like progress loop.
 *
 * Each connection works like one NCCL net proxy connection: one registered
 * buffer split into NB_STEPS slots, receives posted ahead into free slots,
 * sends posted as soon as the "kernel" (a stream's exec callback) filled a
 * slot, only the oldest request of each direction tested, an iflush after a
 * receive group when asked. One thread drives everything from nb_run().
 */
#include "config.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/nccl-net-bench.h"

#define NB_LOST_GRACE_S 3.0 /* s the plugin may take to report a lost peer itself */

static char *nb_slot(const struct nb_conn *c, uint64_t unit, int g)
{
	size_t slot = (size_t)(unit % (uint64_t)c->depth) * (size_t)c->slice_steps;

	return c->buf + (size_t)g * c->buffsize + slot * c->stepsize;
}

struct nb_conn *nb_engine_find(struct nb_engine *e, int peer, int is_send)
{
	int i;

	for (i = 0; i < e->nconns; i++)
		if (e->conns[i].peer == peer && e->conns[i].is_send == is_send)
			return &e->conns[i];
	return NULL;
}

static int nb_conn_setup(struct nb_engine *e, struct nb_conn *c, const struct nb_edge *ed,
			 int is_send)
{
	int g;

	memset(c, 0, sizeof(*c));
	c->is_send = is_send;
	c->peer = is_send ? ed->dst : ed->src;
	c->buffsize = e->buffsize;
	c->stepsize = e->buffsize / NB_STEPS;
	c->ngroup = ed->ngroup > 0 ? ed->ngroup : 1;
	c->slice_steps = ed->slice_steps > 0 ? ed->slice_steps : 1;
	c->depth = NB_STEPS / c->slice_steps;
	for (g = 0; g < c->ngroup; g++)
		c->tags[g] = g;
	if (posix_memalign((void **)&c->buf, 4096, c->buffsize * (size_t)c->ngroup) != 0) {
		nb_err("cannot allocate %zu bytes of connection buffer",
		       c->buffsize * (size_t)c->ngroup);
		return -1;
	}
	memset(c->buf, 0, c->buffsize * (size_t)c->ngroup);
	return 0;
}

/* Creates listen comms for this rank's incoming edges; the handle of edge i goes
 * into mine at its slot among this rank's incoming edges (slot[i]). */
static int nb_listen_all(struct nb_engine *e, const struct nb_edge *edges, int nedges,
			 const int *slot, char *mine, void **lcomms)
{
	int i, k = 0;

	for (i = 0; i < nedges; i++) {
		int me_src = edges[i].src == e->oob->rank, me_dst = edges[i].dst == e->oob->rank;

		if (!me_src && !me_dst)
			continue;
		if (me_dst) {
			if (nb_conn_setup(e, &e->conns[k], &edges[i], 0) != 0)
				return -1;
			if (nb_net_listen(e->net, e->dev, mine + (size_t)slot[i] * NCCL_NET_HANDLE_MAXSIZE,
					  &lcomms[k]) != 0)
				return -1;
		} else if (nb_conn_setup(e, &e->conns[k], &edges[i], 1) != 0) {
			return -1;
		}
		e->nconns = ++k;
	}
	return 0;
}

/* Step of the non-blocking connect/accept loop for connection k; 1 when it is up. */
static int nb_connect_step(struct nb_engine *e, int k, void **lcomms, char *handle)
{
	struct nb_conn *c = &e->conns[k];

	if (c->comm)
		return 1;
	if (c->is_send) {
		if (nb_net_connect(e->net, e->dev, handle, &c->comm) != 0)
			return -1;
	} else {
		if (nb_net_accept(e->net, lcomms[k], &c->comm) != 0)
			return -1;
		if (c->comm) {
			if (nb_net_close_listen(e->net, lcomms[k]) != 0)
				return -1;
			lcomms[k] = NULL;
		}
	}
	if (!c->comm)
		return 0;
	/* like NCCL: buffers are registered right after the comm appears */
	if (nb_net_regmr(e->net, c->comm, c->buf, c->buffsize * (size_t)c->ngroup, &c->mh) != 0)
		return -1;
	return 1;
}

static int nb_connect_loop(struct nb_engine *e, const struct nb_edge *edges, int nedges,
			   const int *slot, int per_rank, char *all, void **lcomms)
{
	uint64_t spins = 0;
	int k;

	for (;;) {
		int up = 0, i;

		for (k = 0, i = 0; i < nedges && k < e->nconns; i++) {
			int dst = edges[i].dst, rc;
			char *h;

			if (edges[i].src != e->oob->rank && dst != e->oob->rank)
				continue;
			h = all + ((size_t)dst * (size_t)per_rank + (size_t)slot[i]) *
				  NCCL_NET_HANDLE_MAXSIZE;
			rc = nb_connect_step(e, k, lcomms, h);
			if (rc < 0)
				return -1;
			up += rc;
			k++;
		}
		if (up == e->nconns)
			return 0;
		if ((++spins & 255) == 0 && (nb_past_deadline("connection establishment") ||
					     nb_oob_peer_lost(e->oob)))
			return -1;
	}
}

/*
 * Each rank publishes only the handles of its own incoming edges (slot[i]: edge
 * i's place among its receiver's), so the exchange grows with ranks x in-degree,
 * not ranks x all edges: 64 ranks all-to-all gather 0.5 MiB per rank instead of
 * 33 MiB (the root sent 2 GiB, and the first connects timed out waiting).
 */
int nb_engine_connect(struct nb_engine *e, const struct nb_edge *edges, int nedges)
{
	int n = e->oob->nranks, per_rank = 1, i, rc = -1;
	int *slot = calloc((size_t)nedges + 1, sizeof(int)), *indeg = calloc((size_t)n, sizeof(int));
	void **lcomms = calloc((size_t)nedges + 1, sizeof(void *));
	char *mine = NULL, *all = NULL;
	size_t hsz;

	e->conns = calloc((size_t)nedges + 1, sizeof(*e->conns));
	e->nconns = 0;
	for (i = 0; slot && indeg && i < nedges; i++) {
		slot[i] = indeg[edges[i].dst]++;
		per_rank = indeg[edges[i].dst] > per_rank ? indeg[edges[i].dst] : per_rank;
	}
	hsz = (size_t)per_rank * NCCL_NET_HANDLE_MAXSIZE;
	mine = calloc(1, hsz);
	all = calloc((size_t)n, hsz);
	if (!slot || !indeg || !mine || !all || !lcomms || !e->conns) {
		nb_err("out of memory setting up connections");
		goto out;
	}
	if (nb_listen_all(e, edges, nedges, slot, mine, lcomms) != 0)
		goto out;
	if (nb_oob_allgather(e->oob, mine, all, hsz) != 0)
		goto out;
	if (nb_connect_loop(e, edges, nedges, slot, per_rank, all, lcomms) != 0)
		goto out;
	rc = nb_oob_barrier(e->oob);
out:
	free(mine);
	free(all);
	free(lcomms);
	free(slot);
	free(indeg);
	return rc;
}

void nb_engine_close(struct nb_engine *e)
{
	int i;

	for (i = 0; i < e->nconns; i++) {
		struct nb_conn *c = &e->conns[i];

		if (c->mh)
			nb_net_deregmr(e->net, c->comm, c->mh);
		if (c->comm && c->is_send)
			nb_net_close_send(e->net, c->comm);
		else if (c->comm)
			nb_net_close_recv(e->net, c->comm);
		free(c->buf);
	}
	free(e->conns);
	e->conns = NULL;
	e->nconns = 0;
}

void nb_engine_reset(struct nb_engine *e)
{
	int i;

	for (i = 0; i < e->nconns; i++) {
		struct nb_conn *c = &e->conns[i];

		c->total = c->posted = c->done = c->ready = 0;
		memset(c->unit, 0, sizeof(c->unit));
	}
}

/* ---- proxy side ----------------------------------------------------------- */

static int nb_recv_post(struct nb_engine *e, struct nb_conn *c)
{
	/* --recv-depth: fewer receives ahead than the slots allow */
	uint64_t ahead = (uint64_t)(e->recv_depth > 0 && e->recv_depth < c->depth ? e->recv_depth
										 : c->depth);

	while (c->posted < c->total && c->posted < c->ready + ahead) {
		struct nb_unit *u = &c->unit[c->posted % (uint64_t)c->depth];
		void *data[NB_MAX_GROUP], *mhs[NB_MAX_GROUP], *req = NULL;
		size_t sizes[NB_MAX_GROUP];
		int g;

		for (g = 0; g < c->ngroup; g++) {
			data[g] = nb_slot(c, c->posted, g);
			sizes[g] = c->stepsize * (size_t)c->slice_steps;
			mhs[g] = c->mh;
		}
		if (nb_net_irecv(e->net, c->comm, c->ngroup, data, sizes, c->tags, mhs, &req) != 0)
			return -1;
		if (!req)
			return 0;	/* plugin not ready: retry on a later pass */
		memset(u, 0, sizeof(*u));
		u->req[0] = req;
		c->posted++;
		e->events++;
	}
	return 0;
}

static int nb_recv_flush(struct nb_engine *e, struct nb_conn *c, struct nb_unit *u)
{
	void *data[NB_MAX_GROUP], *mhs[NB_MAX_GROUP];
	int sizes[NB_MAX_GROUP], g;
	size_t total = 0;

	for (g = 0; g < c->ngroup; g++) {
		data[g] = nb_slot(c, c->done, g);
		sizes[g] = (int)u->size[g];
		mhs[g] = c->mh;
		total += u->size[g];
	}
	u->flush_req = NULL;
	if (total == 0)
		return 0;
	if (nb_net_iflush(e->net, c->comm, c->ngroup, data, sizes, mhs, &u->flush_req) != 0)
		return -1;
	u->flushing = u->flush_req != NULL;
	return 0;
}

static int nb_recv_test(struct nb_engine *e, struct nb_conn *c)
{
	while (c->done < c->posted) {
		struct nb_unit *u = &c->unit[c->done % (uint64_t)c->depth];
		int *sizes = c->sizes;
		int done = 0, g;

		if (u->flushing) {
			if (nb_net_test(e->net, u->flush_req, &done, NULL) != 0)
				return -1;
			if (!done)
				return 0;
			u->flushing = 0;
			c->done++;
			e->events++;
			continue;
		}
		if (nb_net_test(e->net, u->req[0], &done, sizes) != 0)
			return -1;
		if (!done)
			return 0;
		for (g = 0; g < c->ngroup; g++) {
			u->size[g] = sizes[g] < 0 ? (size_t)-1 : (size_t)sizes[g];
			sizes[g] = 0;	/* pre-zeroed for the next test(), as NCCL passes it */
		}
		if (e->flush && nb_recv_flush(e, c, u) != 0)
			return -1;
		if (!u->flushing)
			c->done++;
		e->events++;
	}
	return 0;
}

static int nb_send_post(struct nb_engine *e, struct nb_conn *c)
{
	while (c->posted < c->ready) {
		struct nb_unit *u = &c->unit[c->posted % (uint64_t)c->depth];

		while (u->nposted < c->ngroup) {
			int g = u->nposted;
			void *req = NULL;

			if (nb_net_isend(e->net, c->comm, nb_slot(c, c->posted, g), u->size[g],
					 c->tags[g], c->mh, &req) != 0)
				return -1;
			if (!req)
				return 0;
			u->req[g] = req;
			u->nposted++;
			e->events++;
		}
		c->posted++;
	}
	return 0;
}

static int nb_send_test(struct nb_engine *e, struct nb_conn *c)
{
	while (c->done < c->posted) {
		struct nb_unit *u = &c->unit[c->done % (uint64_t)c->depth];

		while (u->ndone < c->ngroup) {
			int done = 0, size = 0;

			if (nb_net_test(e->net, u->req[u->ndone], &done, &size) != 0)
				return -1;
			if (!done)
				return 0;
			u->ndone++;
			e->events++;
		}
		c->done++;
	}
	return 0;
}

/* ---- slot warm-up ---------------------------------------------------------- */

/*
 * A unit of `bytes` goes through slot unit % depth: what the slot had not carried before
 * is its first use. A first use can cost far more than the later ones: on simverbs each
 * process's first copy into or out of a peer's page through the kernel takes a page-table
 * fault under some hypervisors (10-40 ms per 4 MiB measured here, docs/bench-warmup.md),
 * so the timed iterations must not be the first to use a slot.
 */
static void nb_slot_use(struct nb_conn *c, uint64_t unit, size_t bytes)
{
	size_t *w = &c->warm[unit % (uint64_t)c->depth];

	if (bytes > *w) {
		c->first_use += (uint64_t)(bytes - *w) * (uint64_t)c->ngroup;
		*w = bytes;
	}
}

/* Every run starts at slot 0 (nb_engine_reset) and repeats the same units per
 * iteration, so a run of ceil(depth / units per iteration) iterations uses every slot
 * with the sizes of this test and size, as a longer run would. */
int nb_warm_iters(const struct nb_engine *e, int iters)
{
	int need = 0, i;

	for (i = 0; i < e->nconns && iters > 0; i++) {
		const struct nb_conn *c = &e->conns[i];
		uint64_t per = c->total / (uint64_t)iters;
		int k;

		if (per == 0)
			continue;
		k = (int)(((uint64_t)c->depth + per - 1) / per);
		if (k > need)
			need = k;
	}
	return need;
}

uint64_t nb_first_use(const struct nb_engine *e)
{
	uint64_t n = 0;
	int i;

	for (i = 0; i < e->nconns; i++)
		n += e->conns[i].first_use;
	return n;
}

/* ---- kernel side ---------------------------------------------------------- */

static int nb_step_ready(const struct nb_step *st)
{
	const struct nb_conn *rc = st->rconn, *sc = st->sconn;

	if (rc && rc->ready >= rc->done)
		return 0;
	if (sc && sc->ready >= sc->done + (uint64_t)sc->depth)
		return 0;
	return 1;
}

static int nb_step_exec(struct nb_stream *s, struct nb_step *st)
{
	char *rptr[NB_MAX_GROUP] = { NULL }, *sptr[NB_MAX_GROUP] = { NULL };
	struct nb_conn *rc = st->rconn, *sc = st->sconn;
	int g;

	for (g = 0; rc && g < rc->ngroup; g++) {
		const struct nb_unit *u = &rc->unit[rc->ready % (uint64_t)rc->depth];

		if (u->size[g] != st->rsize) {
			nb_err("receive from rank %d (tag %d) completed with %zu bytes, expected %zu",
			       rc->peer, rc->tags[g], u->size[g], st->rsize);
			return -1;
		}
		rptr[g] = nb_slot(rc, rc->ready, g);
	}
	for (g = 0; sc && g < sc->ngroup; g++)
		sptr[g] = nb_slot(sc, sc->ready, g);
	if (s->exec(s, st, rptr, sptr) != 0)
		return -1;
	if (rc) {
		nb_slot_use(rc, rc->ready, st->rsize);
		rc->ready++;
	}
	if (sc) {
		struct nb_unit *u = &sc->unit[sc->ready % (uint64_t)sc->depth];

		memset(u, 0, sizeof(*u));
		for (g = 0; g < sc->ngroup; g++)
			u->size[g] = st->ssize;
		nb_slot_use(sc, sc->ready, st->ssize);
		sc->ready++;
	}
	return 0;
}

static int nb_stream_advance(struct nb_engine *e, struct nb_stream *s)
{
	while (!s->finished) {
		if (!s->have_cur) {
			if (!s->next(s, &s->cur)) {
				s->finished = 1;
				break;
			}
			s->have_cur = 1;
		}
		if (!nb_step_ready(&s->cur))
			break;
		if (nb_step_exec(s, &s->cur) != 0)
			return -1;
		s->have_cur = 0;
		e->events++;
	}
	return 0;
}

void nb_stream_count(struct nb_stream *s)
{
	struct nb_step st;

	while (s->next(s, &st)) {
		if (st.rconn)
			st.rconn->total++;
		if (st.sconn)
			st.sconn->total++;
	}
	s->reset(s);
}

static int nb_all_done(struct nb_engine *e, struct nb_stream *streams, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (!streams[i].finished)
			return 0;
	for (i = 0; i < e->nconns; i++) {
		const struct nb_conn *c = &e->conns[i];

		if (c->done != c->total || (!c->is_send && c->ready != c->total))
			return 0;
	}
	return 1;
}

static int nb_progress_recv_post(struct nb_engine *e)
{
	int i;

	for (i = 0; i < e->nconns; i++)
		if (!e->conns[i].is_send && nb_recv_post(e, &e->conns[i]) != 0)
			return -1;
	return 0;
}

static int nb_progress_rest(struct nb_engine *e)
{
	int i;

	for (i = 0; i < e->nconns; i++) {
		struct nb_conn *c = &e->conns[i];

		if (c->is_send && (nb_send_post(e, c) != 0 || nb_send_test(e, c) != 0))
			return -1;
		if (!c->is_send && nb_recv_test(e, c) != 0)
			return -1;
	}
	return 0;
}

/*
 * One pass: run the streams ("kernel": consume received slots, fill send
 * slots), post sends, test, then post receives into the slots freed. The
 * receive depth keeps receives ahead of the sends; posting them last keeps
 * the clear-to-send of the next step off the critical path of a reply.
 */
static int nb_progress(struct nb_engine *e, struct nb_stream *streams, int n)
{
	double t0 = 0, t1 = 0;
	int i;

	if (e->stats)
		t0 = nb_now();
	for (i = 0; i < n; i++)
		if (nb_stream_advance(e, &streams[i]) != 0)
			return -1;
	if (e->stats)
		t1 = nb_now();
	if (nb_progress_rest(e) != 0 || nb_progress_recv_post(e) != 0)
		return -1;
	if (e->stats) {
		e->t_exec += t1 - t0;
		e->t_net += nb_now() - t1;
	}
	return 0;
}

/*
 * Poll until done. After yield_us of passes without progress, yield the CPU
 * on every idle pass (NCCL's proxy thread yields at once when idle; a short
 * spin first keeps small-message latency when the CPU is free).
 */
__attribute__((noinline)) int nb_run(struct nb_engine *e, struct nb_stream *streams, int n)
{
	double idle_since = 0, lost_at = 0;

	if (nb_progress_recv_post(e) != 0)	/* receives first, before any send */
		return -1;
	for (;;) {
		uint64_t events = e->events;

		if (nb_progress(e, streams, n) != 0)
			return -1;
		if (nb_all_done(e, streams, n))
			return 0;
		if (events != e->events) {
			idle_since = 0;
		} else {
			e->idle++;
			if (e->yield_us >= 0) {
				double now = e->yield_us > 0 ? nb_now() : 0;

				if (idle_since == 0)
					idle_since = now;
				if (now - idle_since >= e->yield_us * 1e-6)
					sched_yield();
			}
		}
		e->polls++;
		if ((e->polls & 1023) == 0 && nb_past_deadline("data transfer"))
			return -1;
		/*
		 * A peer rank that is gone: its side of the fabric failed or it was
		 * killed. The plugin names device, peer and cause, the out-of-band
		 * socket only the rank: keep polling for NB_LOST_GRACE_S so that the
		 * plugin's own error (peer death is found within about 0.1 s) is the
		 * one reported, then give the rank's.
		 */
		if ((e->polls & 16383) == 0 && lost_at == 0 && nb_oob_peer_gone(e->oob) >= 0)
			lost_at = nb_now();
		if (lost_at != 0 && nb_now() - lost_at > NB_LOST_GRACE_S) {
			nb_oob_peer_lost(e->oob);
			return -1;
		}
	}
}
