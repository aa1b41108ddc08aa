/*
 * wqelat.c - the per-QP work-request latency monitor (contract in wqelat.h).
 * Nothing here runs unless NCCL_IB_WQE_LATENCY_THRESHOLD_NS > 0.
 */
#include "config.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os.h"
#include "param.h"
#include "wqelat.h"

#define NV_WQE_SUB_BITS 4
_Static_assert(NV_WQE_SUB == 1 << NV_WQE_SUB_BITS, "buckets per power of two");

int nv_wqe_bucket(uint64_t ns)
{
	int e;

	if (ns < NV_WQE_SUB)
		return (int)ns;
	e = 63 - __builtin_clzll(ns); /* >= NV_WQE_SUB_BITS */
	if (e > NV_WQE_TOP_EXP)
		return NV_WQE_BUCKETS - 1;
	return (e - NV_WQE_SUB_BITS + 1) * NV_WQE_SUB +
	       (int)((ns >> (e - NV_WQE_SUB_BITS)) & (NV_WQE_SUB - 1));
}

uint64_t nv_wqe_bucket_top(int b)
{
	int e;

	if (b < NV_WQE_SUB)
		return (uint64_t)b;
	if (b >= NV_WQE_BUCKETS - 1)
		return UINT64_MAX; /* the last bucket takes everything above */
	e = b / NV_WQE_SUB + NV_WQE_SUB_BITS - 1;
	return (((uint64_t)(NV_WQE_SUB + b % NV_WQE_SUB) + 1) << (e - NV_WQE_SUB_BITS)) - 1;
}

uint64_t nv_wqe_pctl(const struct nv_wqe_qp *q, unsigned permille)
{
	uint64_t rank, seen = 0;
	int b;

	if (!q->n)
		return 0;
	rank = (q->n * permille + 999) / 1000; /* the smallest value with this share at or below */
	if (!rank)
		rank = 1;
	for (b = 0; b < NV_WQE_BUCKETS; b++) {
		seen += q->hist[b];
		if (seen >= rank) {
			uint64_t top = nv_wqe_bucket_top(b);

			return top < q->max_ns ? top : q->max_ns;
		}
	}
	return q->max_ns;
}

int nv_wqe_add(struct nv_wqe_qp *q, uint64_t ns, uint64_t thr_ns)
{
	double x = (double)ns, d = x - q->mean;

	q->n++;
	q->mean += d / (double)q->n;
	q->m2 += d * (x - q->mean);
	if (ns > q->max_ns)
		q->max_ns = ns;
	q->hist[nv_wqe_bucket(ns)]++;
	if (ns <= thr_ns)
		return 0;
	q->slow++;
	return 1;
}

static double nv_wqe_stddev(const struct nv_wqe_qp *q)
{
	double v = q->n > 1 ? q->m2 / (double)(q->n - 1) : 0.0;

	return v > 0.0 ? sqrt(v) : 0.0;
}

struct nv_wqe_mon *nv_wqe_new(int nqp, const char *peer)
{
	int64_t thr = nv_param_int(NV_PARAM_IB_WQE_LATENCY_THRESHOLD_NS);
	struct nv_wqe_mon *m;

	if (thr <= 0 || nqp <= 0)
		return NULL;
	m = calloc(1, sizeof(*m) + (size_t)nqp * sizeof(m->qp[0]));
	if (!m) {
		NV_INFO(NV_SUB_NET, "NCCL_IB_WQE_LATENCY_THRESHOLD_NS: no memory for the monitor of "
			"%d QPs to %s; this comm goes without", nqp, peer);
		return NULL;
	}
	m->thr_ns = (uint64_t)thr;
	m->report = nv_param_int(NV_PARAM_IB_WQE_LATENCY_REPORT) != 0;
	m->nqp = nqp;
	snprintf(m->peer, sizeof(m->peer), "%s", peer);
	return m;
}

void nv_wqe_qp_set(struct nv_wqe_mon *m, int i, uint32_t qpn, const char *dev, int port,
		   const char *ident)
{
	struct nv_wqe_qp *q = &m->qp[i];

	q->qpn = qpn;
	q->port = (uint8_t)port;
	snprintf(q->dev, sizeof(q->dev), "%s", dev);
	snprintf(q->ident, sizeof(q->ident), "%s", ident);
}

void nv_wqe_post(struct nv_wqe_qp *q)
{
	uint32_t n = atomic_load_explicit(&q->inflight, memory_order_relaxed);

	if (atomic_load_explicit(&q->post_ns, memory_order_relaxed) == 0) {
		uint64_t now = nv_now_ns();

		q->before = n; /* the completions of these come first */
		atomic_store_explicit(&q->post_ns, now ? now : 1, memory_order_relaxed);
	}
	atomic_store_explicit(&q->inflight, n + 1, memory_order_relaxed);
}

static void nv_wqe_log_slow(const struct nv_wqe_mon *m, const struct nv_wqe_qp *q, uint64_t ns,
			    uint64_t t_post, uint64_t t_poll)
{
	NV_INFO(NV_SUB_NET, "WQE slow: %s | thr=%" PRIu64 "ns delta=%" PRIu64 "ns mean=%.0fns "
		"stddev=%.0fns p50=%" PRIu64 "ns p90=%" PRIu64 "ns p99=%" PRIu64 "ns p99.9=%"
		PRIu64 "ns max=%" PRIu64 "ns count=%" PRIu64 " | t_post=%" PRIu64 " t_poll=%" PRIu64,
		q->ident, m->thr_ns, ns, q->mean, nv_wqe_stddev(q), nv_wqe_pctl(q, 500),
		nv_wqe_pctl(q, 900), nv_wqe_pctl(q, 990), nv_wqe_pctl(q, 999), q->max_ns, q->n,
		t_post, t_poll);
}

void nv_wqe_done(struct nv_wqe_mon *m, int i)
{
	struct nv_wqe_qp *q;
	uint64_t t0, now;
	uint32_t n;

	if ((unsigned)i >= (unsigned)m->nqp)
		return;
	q = &m->qp[i];
	n = atomic_load_explicit(&q->inflight, memory_order_relaxed);
	if (n)
		atomic_store_explicit(&q->inflight, n - 1, memory_order_relaxed);
	t0 = atomic_load_explicit(&q->post_ns, memory_order_relaxed);
	if (!t0)
		return;
	if (q->before) {
		q->before--; /* a WR posted before the timed one */
		return;
	}
	now = nv_now_ns();
	atomic_store_explicit(&q->post_ns, 0, memory_order_relaxed);
	if (!nv_wqe_add(q, now > t0 ? now - t0 : 0, m->thr_ns))
		return;
	if (q->last_slow_ns && now - q->last_slow_ns < NV_WQE_EVERY_NS)
		return;
	q->last_slow_ns = now;
	nv_wqe_log_slow(m, q, now > t0 ? now - t0 : 0, t0, now);
}

void nv_wqe_reset(struct nv_wqe_mon *m, int i)
{
	if (!m || (unsigned)i >= (unsigned)m->nqp)
		return;
	atomic_store_explicit(&m->qp[i].post_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&m->qp[i].inflight, 0, memory_order_relaxed);
	m->qp[i].before = 0;
}

void nv_wqe_scan(struct nv_wqe_mon *m, uint64_t now, int polled)
{
	uint64_t prev = m->swept;
	int i;

	m->swept = now;
	for (i = 0; polled && i < m->nqp; i++) {
		struct nv_wqe_qp *q = &m->qp[i];
		uint64_t t0 = atomic_load_explicit(&q->post_ns, memory_order_relaxed);

		/* posted before the previous sweep, polled for since: no completion */
		if (!t0 || t0 >= prev || now - t0 <= m->thr_ns)
			continue;
		if (q->last_stall_ns && now - q->last_stall_ns < NV_WQE_EVERY_NS)
			continue;
		q->last_stall_ns = now;
		NV_INFO(NV_SUB_NET, "WQE stall (no CQE): %s | stall_thr=%" PRIu64 "ns age=%" PRIu64
			"ns inflight=%u", q->ident, m->thr_ns, now - t0,
			atomic_load_explicit(&q->inflight, memory_order_relaxed));
	}
}

void nv_wqe_summary(const struct nv_wqe_mon *m)
{
	int i;

	for (i = 0; m && m->report && i < m->nqp; i++) {
		const struct nv_wqe_qp *q = &m->qp[i];

		if (!q->n)
			continue;
		NV_INFO(NV_SUB_NET, "WQE latency summary [send peer=%s dev=%s qpn=%u port=%u]: n=%"
			PRIu64 " slow=%" PRIu64 " thr=%" PRIu64 "ns | post-to-poll ns: mean=%.0f "
			"std=%.0f p50=%" PRIu64 " p90=%" PRIu64 " p99=%" PRIu64 " p99.9=%" PRIu64
			" max=%" PRIu64, m->peer, q->dev, q->qpn, q->port, q->n, q->slow, m->thr_ns,
			q->mean, nv_wqe_stddev(q), nv_wqe_pctl(q, 500), nv_wqe_pctl(q, 900),
			nv_wqe_pctl(q, 990), nv_wqe_pctl(q, 999), q->max_ns);
	}
}
