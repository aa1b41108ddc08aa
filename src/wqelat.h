/*
 * wqelat.h - the per-QP work-request latency monitor of NCCL 2.31
 * (NCCL_IB_WQE_LATENCY_THRESHOLD_NS, NCCL_IB_WQE_LATENCY_REPORT; wqelat.c).
 *
 * Off (threshold 0, the default) a send comm has no monitor (c->wqe NULL)
 * and the data path pays one load and one not-taken branch per post and
 * per data completion. On, every QP of a send comm times one signalled data
 * WR at a time, from just before ibv_post_send to the poll of its
 * completion: when none is timed, the next one posted is, after the
 * signalled WRs already in flight on that QP (an RC QP completes in order).
 * As NCCL, only the sender's data WRs (chains and eager messages) are timed,
 * not clear-to-sends, receives or flushes.
 *  - slow:    a timed WR took longer than the threshold: counted, and one
 *             INFO (NET) line per QP per second at most ("WQE slow: ..."),
 *             logged by the thread that polled the completion;
 *  - stall:   a timed WR older than the threshold with no completion yet:
 *             one INFO line per QP per second at most ("WQE stall (no
 *             CQE): ..."), found by the HCA's event thread on its sweep
 *             (every NV_LIVENESS_NS), not by the data path. NCCL looks on
 *             each poll of the CQ; the sweep instead takes a WR posted
 *             before its previous sweep, of a comm whose thread polled since
 *             (a call that found nothing to do: event.h's waiting word), so
 *             the CQ was polled after the post and held no completion for
 *             it. A comm its thread does not call gives no stall line (its
 *             completions may wait unpolled), nor one whose HCA has no
 *             event thread;
 *  - summary: at close (NCCL_IB_WQE_LATENCY_REPORT, default 1), one INFO
 *             line per QP that timed a WR: count, slow count, mean,
 *             stddev, p50, p90, p99, p99.9, max.
 * Percentiles come from a log-linear histogram of NV_WQE_SUB buckets per
 * power of two (within 1/NV_WQE_SUB of the exact value, never above max).
 *
 * Threads: the comm's progress thread owns everything but post_ns and
 * inflight, which it stores atomically for the event thread to read, and
 * last_stall_ns, which only the event thread touches. ident, dev, port and
 * qpn are set before the comm's sink is watched, then only read.
 */
#ifndef NV_WQELAT_H
#define NV_WQELAT_H

#include <stdatomic.h>
#include <stdint.h>

#include "nv_common.h"

#define NV_WQE_SUB 16		/* histogram buckets per power of two */
#define NV_WQE_TOP_EXP 41	/* from 2^42 ns (73 minutes) on, all in the last bucket */
#define NV_WQE_BUCKETS ((NV_WQE_TOP_EXP - 2) * NV_WQE_SUB)
#define NV_WQE_EVERY_NS 1000000000ull	/* a slow or stall line per QP at most this often */
#define NV_WQE_IDENT_LEN 320

struct nv_wqe_qp {
	_Atomic uint64_t post_ns;	/* post time of the WR timed (nv_now_ns); 0: none */
	_Atomic uint32_t inflight;	/* signalled WRs posted and not yet completed */
	uint32_t before;		/* of those, completions due before the timed one's */
	uint64_t n;			/* WRs timed */
	uint64_t slow;			/* of those, above the threshold */
	uint64_t max_ns;
	double mean, m2;		/* running mean and sum of squared deviations (ns) */
	uint64_t last_slow_ns;		/* last slow line */
	uint64_t last_stall_ns;		/* last stall line (event thread) */
	uint32_t qpn;
	uint8_t port;
	char dev[64];
	/* "peer=A | local: qpn=.. dev=.. port=.. lid=.. localGid=G | remote: qpn=.. port=..
	 * lid=.. remoteGid=G" (GIDs on RoCE only, as NCCL) */
	char ident[NV_WQE_IDENT_LEN];
	uint64_t hist[NV_WQE_BUCKETS];
};

struct nv_wqe_mon {
	uint64_t thr_ns;		/* NCCL_IB_WQE_LATENCY_THRESHOLD_NS */
	uint64_t swept;			/* the event thread's previous sweep of it */
	int report;			/* NCCL_IB_WQE_LATENCY_REPORT != 0 */
	int nqp;
	char peer[64];
	struct nv_wqe_qp qp[];
};

/* A monitor for nqp QPs when the threshold knob is > 0, else NULL (also when
 * out of memory: INFO, the comm goes on without one). free() releases it. */
struct nv_wqe_mon *nv_wqe_new(int nqp, const char *peer);
/* Names QP i for the lines (before the comm's sink is watched). */
void nv_wqe_qp_set(struct nv_wqe_mon *m, int i, uint32_t qpn, const char *dev, int port,
		   const char *ident);
/* Just before posting a chain whose last WR is signalled, on QP q. */
void nv_wqe_post(struct nv_wqe_qp *q);
/* The signalled data WR of QP i completed (polled now). */
void nv_wqe_done(struct nv_wqe_mon *m, int i);
/* QP i was restarted (failover): nothing is in flight on it any more. */
void nv_wqe_reset(struct nv_wqe_mon *m, int i);
/* Event thread, each sweep: the stall lines due at time now; polled: the comm's
 * thread made a call that found nothing to do since the previous sweep. */
void nv_wqe_scan(struct nv_wqe_mon *m, uint64_t now, int polled);
/* At close: the summary line of every QP that timed a WR (when the report is on). */
void nv_wqe_summary(const struct nv_wqe_mon *m);

/* Pure parts (unit-tested): a value's bucket, the largest value of a bucket, the
 * permille-th percentile of q's histogram (0 when empty; at most q->max_ns). */
int nv_wqe_bucket(uint64_t ns);
uint64_t nv_wqe_bucket_top(int b);
uint64_t nv_wqe_pctl(const struct nv_wqe_qp *q, unsigned permille);
/* Adds one timed WR's latency to q's figures (what nv_wqe_done does; 1 when slow). */
int nv_wqe_add(struct nv_wqe_qp *q, uint64_t ns, uint64_t thr_ns);

#endif /* NV_WQELAT_H */
