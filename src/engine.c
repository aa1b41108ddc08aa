/*
 * engine.c - the data path's completion engine: the health check, CQ polling
 * and completion dispatch, the liveness check, and test(). The sides that
 * post work are recv.c (irecv, iflush), send.c (isend) and eager.c (the eager
 * path); the protocol is in comm.h. The engine calls up into the eager path
 * and failover only through the hooks listed in engine.h.
 *
 * Rules kept by every data-path file: no allocation, no lock and no system
 * call per operation (the peer's liveness is checked by the HCA's event
 * thread; only without one, a rate-limited socket check runs here while a
 * caller is waiting without progress); send queues never overflow because
 * every post first checks the QP's outstanding-WR count, and every chain ends
 * with a signalled WR that retires the count; errors are sticky.
 */
#include "config.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "eager.h"
#include "engine.h"
#include "failover.h"
#include "ibv.h"
#include "lb.h"
#include "mr.h"
#include "nv_api.h"
#include "prof.h"

/*
 * The slow path of nv_comm_check: the health word is non-zero. Turns a fatal
 * async event (on one of the comm's QPs/CQs, or device-wide on one of its
 * HCAs) into the sticky error, or repeats the sticky error.
 */
__attribute__((noinline, cold)) nv_status_t nv_comm_check_slow(struct nv_comm *c, const char *fn)
{
	int dev_wide = atomic_load_explicit(&c->sink.fatal, memory_order_acquire) & NV_SINK_DEVICE;
	char id[256];
	int d;

	if (atomic_load_explicit(&c->sink.fatal, memory_order_acquire) & NV_SINK_REPORT) {
		nv_comm_take_report(c); /* the event thread asked: a stall or a dump (state.c) */
		if (atomic_load_explicit(&c->sink.fatal, memory_order_acquire) == 0)
			return NV_OK;
	}
	if (atomic_load_explicit(&c->sink.fatal, memory_order_acquire) & NV_SINK_LB) {
		nv_lb_take(c); /* a port speed changed (lb.c) */
		if (atomic_load_explicit(&c->sink.fatal, memory_order_acquire) == 0)
			return NV_OK;
	}
	if (c->fo && c->error == NV_OK)
		return nv_fo_check(c); /* failover.c: NV_OK, NV_FO_BUSY or the sticky error */
	if (c->error == NV_OK) {
		if (!dev_wide && nv_async_sink_failed(&c->sink))
			nv_comm_fail(c, NV_ERR_SYSTEM, "connection %s: fatal asynchronous event: %s; "
				     "hint: the QP or CQ was moved to error by the device, see the "
				     "event text", nv_comm_ident(c, id, sizeof(id)), c->sink.what);
		for (d = 0; d < c->ndevs && c->error == NV_OK; d++)
			if (nv_unlikely(nv_hca_failed(c->dev[d].hca)))
				nv_comm_fail(c, NV_ERR_SYSTEM,
					     "connection %s: device %s failed: %s; hint: check the "
					     "port and driver state (ibv_devinfo, dmesg)",
					     nv_comm_ident(c, id, sizeof(id)), c->dev[d].hca->name,
					     c->dev[d].hca->sink.what);
		return c->error;
	}
	NV_WARN("%s on the failed connection to %s: %s", fn, c->peer, c->why);
	return c->error;
}

/* ---- completions ------------------------------------------------------- */

/* always_inline here and below: the cold error path has its own copy (nv_comm_progress_errors) */
static inline __attribute__((always_inline)) void nv_send_done(struct nv_send_comm *s,
							       const struct ibv_wc *wc)
{
	struct nv_comm *c = &s->base;
	struct nv_send_slot *sl = &s->slots[NV_WRID_IDX(wc->wr_id) % NV_FIFO_SLOTS];
	int r;

	c->qps[NV_WRID_QP(wc->wr_id)].outstanding -= (int)NV_WRID_NWR(wc->wr_id);
	if (nv_unlikely(c->wqe != NULL)) /* NCCL_IB_WQE_LATENCY_THRESHOLD_NS */
		nv_wqe_done(c->wqe, (int)NV_WRID_QP(wc->wr_id));
	if (--sl->pending > 0)
		return;
	if (nv_likely(sl->nreqs == 1))
		c->reqs[sl->req[0]].done = 1;
	else
		for (r = 0; r < sl->nreqs; r++)
			c->reqs[sl->req[r]].done = 1;
}

/*
 * The last completion of a grouped receive: the sizes the sender recorded,
 * checked against what was posted. Out of line: the one-buffer receive, the
 * common case, keeps nv_comm_progress's loop small.
 */
static __attribute__((noinline)) nv_status_t nv_recv_done_grouped(struct nv_comm *c,
								  struct nv_request *r)
{
	const uint32_t *rec = nv_recv_ctrl_of(c)->records[r->seq % NV_FIFO_SLOTS];
	char why[128], id[256];
	int i;

	if (nv_records_check(rec, r->sizes, r->nreqs, why, sizeof(why))) {
		nv_comm_fail(c, NV_ERR_REMOTE, "connection %s: the peer's sizes: %s (protocol "
			     "violation)", nv_comm_ident(c, id, sizeof(id)), why);
		return c->error;
	}
	for (i = 0; i < r->nreqs; i++)
		r->sizes[i] = rec[i];
	r->done = 1;
	return NV_OK;
}

/* A RECV taken by something other than our peer's WRITE_WITH_IMM (a SEND, say). */
static __attribute__((noinline, cold)) nv_status_t nv_recv_no_imm(struct nv_comm *c)
{
	char id[256];

	nv_comm_fail(c, NV_ERR_REMOTE, "connection %s: the peer wrote data without an immediate "
		     "(protocol violation)", nv_comm_ident(c, id, sizeof(id)));
	return c->error;
}

__attribute__((noinline, cold)) nv_status_t nv_recv_too_big(struct nv_comm *c, uint32_t n,
							     uint32_t size)
{
	char id[256];

	nv_comm_fail(c, NV_ERR_REMOTE, "connection %s: the peer sent %u bytes into a %u-byte "
		     "receive (protocol violation)", nv_comm_ident(c, id, sizeof(id)), n, size);
	return c->error;
}

/* NV_OK, or the sticky error when the completion breaks the protocol. */
static inline __attribute__((always_inline)) nv_status_t nv_recv_done(struct nv_recv_comm *rc,
								      const struct ibv_wc *wc)
{
	struct nv_comm *c = &rc->base;
	struct nv_request *r;

	if (nv_unlikely(rc->eager.max)) /* matched by order there, not by wr_id */
		return nv_eager_recv_cqe(rc, wc);
	r = &c->reqs[NV_WRID_IDX(wc->wr_id) % (uint32_t)c->nreq];
	c->qps[nv_qp_of(NV_WRID_QP(wc->wr_id), c->nqps)].recv_outstanding--;

	if (r->nreqs == 1 && (wc->wc_flags & IBV_WC_WITH_IMM)) {
		uint32_t n = ntohl(wc->imm_data);

		if (n > r->sizes[0])
			return nv_recv_too_big(c, n, r->sizes[0]);
		r->sizes[0] = n;
	} else if (nv_unlikely(!(wc->wc_flags & IBV_WC_WITH_IMM))) {
		return nv_recv_no_imm(c); /* every message of ours ends in a WRITE_WITH_IMM */
	}
	if (--r->pending > 0)
		return NV_OK;
	if (r->nreqs > 1)
		return nv_recv_done_grouped(c, r);
	r->done = 1;
	return NV_OK;
}

/*
 * Handles one successful completion; NV_OK, or the sticky error when it
 * breaks the protocol. The two kinds every message completes (DATA on a send
 * comm, RECV on a receive comm) are tested first.
 */
static inline __attribute__((always_inline)) nv_status_t nv_wc_dispatch(struct nv_comm *c,
									 const struct ibv_wc *wc)
{
	unsigned kind = NV_WRID_KIND(wc->wr_id);

	if (nv_likely(kind == NV_WR_RECV))
		return nv_recv_done((struct nv_recv_comm *)c, wc);
	if (nv_likely(kind == NV_WR_DATA)) {
		nv_send_done((struct nv_send_comm *)c, wc);
		return NV_OK;
	}
	switch (kind) {
	case NV_WR_CTS:
		c->qps[NV_WRID_QP(wc->wr_id)].outstanding -= (int)NV_WRID_NWR(wc->wr_id);
		break;
	case NV_WR_FLUSH: {
		struct nv_request *r = &c->reqs[NV_WRID_IDX(wc->wr_id) % (uint32_t)c->nreq];

		c->dev[NV_WRID_QP(wc->wr_id) % (unsigned)c->ndevs].flush_outstanding--;

		if (--r->pending == 0)
			r->done = 1;
		break;
	}
	case NV_WR_EAGER: {
		struct nv_request *r = &c->reqs[NV_WRID_IDX(wc->wr_id) % (uint32_t)c->nreq];

		c->qps[NV_WRID_QP(wc->wr_id) % (unsigned)c->nqps].outstanding -=
			(int)NV_WRID_NWR(wc->wr_id);
		if (nv_unlikely(c->wqe != NULL))
			nv_wqe_done(c->wqe, 0);
		r->done = 1;
		break;
	}
	case NV_WR_ECOPY:
		return nv_eager_copy_done((struct nv_recv_comm *)c, wc);
	default: /* late probe completion: nothing to do */
		break;
	}
	return NV_OK;
}

static __attribute__((noinline, cold)) nv_status_t nv_comm_poll_failed(struct nv_comm *c, int d)
{
	nv_comm_fail(c, NV_ERR_SYSTEM, "polling the CQ of %s (connection to %s) failed",
		     c->dev[d].hca->name, c->peer);
	return c->error;
}

/*
 * nv_comm_progress met an error completion on device d's CQ, wc[0] of the
 * n it has not handled yet. Without failover it is the sticky error. With failover
 * (failover.c takes transport errors) the rest of the batch and then every
 * CQ are polled here as nv_comm_progress does, so its loop stays as it was.
 */
/* noinline but not cold: `cold` here changes nv_comm_progress's register allocation
 * (+7 instructions per message in scripts/cpu-cost.sh loopback). */
static __attribute__((noinline)) nv_status_t
nv_comm_progress_errors(struct nv_comm *c, int d, struct ibv_wc *wc, int n)
{
	struct ibv_wc more[NV_CQ_POLL_BATCH];
	int k;

	for (;;) {
		for (k = 0; k < n; k++) {
			if (wc[k].status == IBV_WC_SUCCESS) {
				if (nv_wc_dispatch(c, &wc[k]) != NV_OK)
					return c->error;
			} else if (++c->st.wc_errors, !c->fo || !nv_fo_wc_error(c, d, &wc[k])) {
				nv_comm_wc_error(c, d, &wc[k]);
				return c->error;
			}
		}
		/* then this CQ and the next ones until they are empty, as nv_comm_progress */
		if (wc == more && n < NV_CQ_POLL_BATCH && ++d >= c->ndevs)
			return NV_OK;
		wc = more;
		if (nv_ibv_poll_cq(c->dev[d].cq, NV_CQ_POLL_BATCH, wc, &n) != NV_OK)
			return nv_comm_poll_failed(c, d);
	}
}

/* Polls every CQ of the comm in batches until they are empty. */
nv_status_t nv_comm_progress(struct nv_comm *c)
{
	struct ibv_wc wc[NV_CQ_POLL_BATCH];
	int d = 0, k, n;

	do {
		do {
			if (nv_ibv_poll_cq(c->dev[d].cq, NV_CQ_POLL_BATCH, wc, &n) != NV_OK)
				return nv_comm_poll_failed(c, d);
			for (k = 0; k < n; k++) {
				if (nv_unlikely(wc[k].status != IBV_WC_SUCCESS))
					return nv_comm_progress_errors(c, d, &wc[k], n - k);
				if (nv_unlikely(nv_wc_dispatch(c, &wc[k]) != NV_OK))
					return c->error;
			}
		} while (n == NV_CQ_POLL_BATCH);
	} while (++d < c->ndevs);
	return NV_OK;
}

/*
 * The peer's handshake socket reads EOF or failed: an error, unless the
 * request waited for completed in the meantime (the peer may have finished
 * and closed after its last completion reached us).
 */
__attribute__((noinline, cold)) nv_status_t nv_comm_peer_closed(struct nv_comm *c,
							       const struct nv_request *waiting)
{
	char id[256];

	if (nv_comm_progress(c) != NV_OK || (waiting && waiting->done))
		return c->error;
	/* sink.peer_state: what the handshake socket said (nv_fd_peer_state) */
	nv_comm_fail(c, NV_ERR_REMOTE, "connection %s: %s, found on the handshake connection "
		     "while we were waiting for the peer; hint: look for the first error on that "
		     "peer%s", nv_comm_ident(c, id, sizeof(id)), nv_peer_gone_why(c->sink.peer_state),
		     c->sink.peer_state ? " and at that host" : "");
	return c->error;
}

/*
 * Without an event thread watching the comm: at most every NV_LIVENESS_NS,
 * check the handshake socket, so a dead peer turns into an error instead of
 * a hang even when nothing is in flight on the wire.
 */
__attribute__((noinline)) nv_status_t nv_comm_liveness(struct nv_comm *c,
						 const struct nv_request *waiting)
{
	uint64_t now;

	if (c->live_done != c->st.done) { /* progress: this wait reads the clock at once */
		c->live_done = c->st.done;
		c->live_stride = 1;
	}
	if (++c->idle_polls < c->live_stride)
		return NV_OK; /* a busy poller reads the clock only every few polls */
	c->idle_polls = 0;
	now = nv_now_ns();
	c->live_stride = nv_liveness_stride(c->live_stride, now - c->last_clock_ns);
	c->last_clock_ns = now;
	if (now - c->last_alive_ns < NV_LIVENESS_NS)
		return NV_OK;
	c->last_alive_ns = now;
	if (c->fo && nv_fo_peer_spoke(c))
		return NV_OK; /* a failover round starts at the next call */
	c->sink.peer_state = nv_fd_peer_state(c->fd);
	if (c->sink.peer_state == 1)
		return NV_OK;
	return nv_comm_peer_closed(c, waiting);
}

/* isend's and irecv's waits: out of line, so their fast paths keep their registers. */
__attribute__((noinline)) nv_status_t nv_comm_idle_call(struct nv_comm *c)
{
	return nv_comm_idle(c, NULL);
}

/* ---- test --------------------------------------------------------------------- */

static __attribute__((noinline, cold)) nv_status_t nv_test_bad_request(void *request)
{
	NV_WARN("test: %p is not an outstanding request", request);
	return NV_ERR_INTERNAL;
}

nv_status_t nv_net_test(void *request, int *done, int *sizes)
{
	struct nv_request *r = request;
	struct nv_comm *c;
	nv_status_t st;
	int i;

	*done = 0;
	if (nv_unlikely(!r || r->type == NV_REQ_FREE))
		return nv_test_bad_request(request);
	c = r->comm;
	st = nv_comm_check(c, "test");
	if (st != NV_OK)
		return st == NV_FO_BUSY ? NV_OK : st; /* not done yet */
	if (!r->done) {
		st = nv_comm_progress(c);
		if (st != NV_OK)
			return st;
		if (r->type == NV_REQ_RECV && ((struct nv_recv_comm *)c)->eager.max && !r->done &&
		    (st = nv_eager_test_poll((struct nv_recv_comm *)c, r)) != NV_OK)
			return st;
		if (!r->done) {
			if (nv_unlikely(r->t_seq != r->seq))
				nv_req_stamp(r); /* first seen waiting: its age starts */
			st = nv_comm_idle(c, r);
			if (st != NV_OK || !r->done)
				return st;
		}
	}
	*done = 1;
	/* the comm's counters (comm.h) count what completes here; st.done is also
	 * the progress the liveness check and the stall check look for */
	c->st.done++;
	/* test's sizes are int in every ABI version: exact up to INT_MAX, then INT_MAX */
	if (r->type == NV_REQ_SEND) {
		c->st.bytes += r->size;
		if (sizes)
			sizes[0] = r->size > INT_MAX ? INT_MAX : (int)r->size;
	} else if (r->type == NV_REQ_RECV && nv_likely(r->nreqs == 1)) {
		c->st.bytes += r->sizes[0];
		if (sizes)
			sizes[0] = r->sizes[0] > INT_MAX ? INT_MAX : (int)r->sizes[0];
	} else if (r->type == NV_REQ_RECV) {
		c->st.grouped += r->nreqs - 1;
		for (i = 0; i < r->nreqs; i++) {
			c->st.bytes += r->sizes[i];
			if (sizes)
				sizes[i] = r->sizes[i] > INT_MAX ? INT_MAX : (int)r->sizes[i];
		}
	} else {
		c->st.flushes++;
	}
	nv_req_put(c, r);
	return NV_OK;
}
