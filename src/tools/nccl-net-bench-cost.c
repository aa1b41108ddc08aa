/*
 * nccl-net-bench-cost.c - what connecting a test's comms cost each process:
 * the time from the first listen to the last comm up, and what the comms
 * added to the process (resident memory, registered bytes, QPs, CQs, file
 * descriptors, threads; verbs figures on simverbs only). With many ranks
 * (an all-to-all opens a comm pair per peer) these are the per-peer costs
 * that grow with the job. Rank 0 prints, per transport, the minimum, median
 * and maximum over the ranks, per process and per comm pair (a send comm plus
 * a receive comm), and a `conncost:` line for scripts.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/nccl-net-bench.h"

void nb_cost_begin(struct nb_cost *k)
{
	memset(k, 0, sizeof(*k));
	nb_usage_now(&k->before);
	k->t0 = nb_now();
}

void nb_cost_end(struct nb_cost *k, const struct nb_engine *e)
{
	long pg = sysconf(_SC_PAGESIZE);
	int i;

	k->connect_s = nb_now() - k->t0;
	nb_usage_now(&k->after);
	k->nconns = e->nconns;
	for (i = 0; i < e->nconns; i++) {	/* page-rounded, as pinning counts them */
		const struct nb_conn *c = &e->conns[i];
		uintptr_t a = (uintptr_t)c->buf, end = a + c->buffsize * (size_t)c->ngroup;

		a &= ~(uintptr_t)(pg - 1);
		end = (end + (uintptr_t)pg - 1) & ~(uintptr_t)(pg - 1);
		k->buf_bytes += (long long)(end - a);
	}
}

static int nb_cost_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* min, median, max of v[0..n) (sorted in place) into out; -1s when any is unknown */
static void nb_cost_stats(double *v, int n, double out[3])
{
	int i;

	for (i = 0; i < n; i++)
		if (v[i] < 0) {
			out[0] = out[1] = out[2] = -1;
			return;
		}
	qsort(v, (size_t)n, sizeof(*v), nb_cost_cmp);
	out[0] = v[0];
	out[1] = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	out[2] = v[n - 1];
}

enum { NB_K_CONN, NB_K_RSS, NB_K_PIN, NB_K_QP, NB_K_CQ, NB_K_FD, NB_K_THR, NB_K_N };

static double nb_cost_get(const struct nb_cost *k, int what)
{
	const struct nb_usage *b = &k->before, *a = &k->after;

	switch (what) {
	case NB_K_CONN: return k->connect_s;
	case NB_K_RSS:	/* the transport's own: the benchmark's buffers (resident, registered) out */
		return a->rss_kib < 0 || b->rss_kib < 0 ? -1
			: (double)(a->rss_kib - b->rss_kib) - (double)k->buf_bytes / 1024.0;
	case NB_K_PIN:
		return a->pinned < 0 || b->pinned < 0 ? -1
			: (double)(a->pinned - b->pinned - k->buf_bytes) / 1024.0;
	case NB_K_QP: return a->qp < 0 || b->qp < 0 ? -1 : (double)(a->qp - b->qp);
	case NB_K_CQ: return a->cq < 0 || b->cq < 0 ? -1 : (double)(a->cq - b->cq);
	case NB_K_FD: return a->fds < 0 || b->fds < 0 ? -1 : (double)(a->fds - b->fds);
	default: return a->threads < 0 || b->threads < 0 ? -1 : (double)(a->threads - b->threads);
	}
}

static void nb_cost_print(const struct nb_ctx *c, const struct nb_cost *all)
{
	static const char *const names[NB_K_N] = { "connect_s", "rss_kib", "pinned_kib", "qp", "cq",
						   "fd", "threads" };
	int n = c->nranks, i, w;
	double *v = calloc((size_t)n, sizeof(*v)), st[NB_K_N][3];
	double pairs = all[0].nconns / 2.0;

	if (!v)
		return;
	for (w = 0; w < NB_K_N; w++) {
		for (i = 0; i < n; i++)
			v[i] = nb_cost_get(&all[i], w);
		nb_cost_stats(v, n, st[w]);
	}
	free(v);
	printf("# connect: %s (ncclNet v%d), %d ranks, %d comms per rank (%.0f comm pairs); what "
	       "the comms added to each process (the benchmark's buffers not counted in "
	       "rss and pinned), min / median / max over the ranks:\n", c->e->net->name,
	       c->e->net->version, n, all[0].nconns, pairs);
	printf("#   %-10s %12s %12s %12s %14s\n", "", "min", "median", "max", "median per pair");
	for (w = 0; w < NB_K_N; w++)
		printf("#   %-10s %12.3f %12.3f %12.3f %14.3f\n", names[w], st[w][0], st[w][1],
		       st[w][2], w == NB_K_CONN || pairs <= 0 ? st[w][1] * 1e3 / (pairs > 0 ? pairs : 1)
							      : st[w][1] / pairs);
	printf("#   (connect_s per pair in ms; -1: not known without simverbs)\n");
	printf("conncost: plugin=%s ranks=%d comms=%d", c->e->net->name, n, all[0].nconns);
	for (w = 0; w < NB_K_N; w++)
		printf(" %s=%.3f/%.3f/%.3f", names[w], st[w][0], st[w][1], st[w][2]);
	printf("\n");
	fflush(stdout);
}

int nb_cost_report(const struct nb_ctx *c, const struct nb_cost *k)
{
	struct nb_cost *all = calloc((size_t)c->nranks, sizeof(*all));
	int rc = -1;

	if (!all) {
		nb_err("out of memory");
		return -1;
	}
	if (nb_oob_allgather(c->e->oob, k, all, sizeof(*k)) == 0) {
		if (c->rank == 0)
			nb_cost_print(c, all);
		rc = 0;
	}
	free(all);
	return rc;
}
