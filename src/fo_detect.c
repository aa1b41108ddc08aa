/*
 * fo_detect.c - failover (failover.c has the protocol): attaching the state
 * to a comm, classifying error completions, async events and port states
 * into failed devices, the peer's wake-up, and recovery's checks.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fo_state.h"
#include "engine.h"
#include "event.h"
#include "ibv.h"
#include "os.h"
#include "param.h"

/* ---- attach / release --------------------------------------------------------- */

void nv_fo_attach(void *comm)
{
	struct nv_comm *c = comm;
	struct nv_fo *f;

	int64_t hold = nv_param_int(NV_PARAM_VERBS_LINK_HOLD_MS);
	int fo = (int)nv_param_int(NV_PARAM_IB_RESILIENCY_PORT_FAILOVER);

	if ((!fo && !hold) || c->fo)
		return;
	if (fo && (c->nqps < 2 || (c->ndevs < 2 && c->rmeta->ndevs < 2))) {
		fo = 0;
		if (!hold) {
			NV_INFO(NV_SUB_NET, "connection to %s: one device on each side, nothing to "
				"fail over to (NCCL_IB_RESILIENCY_PORT_FAILOVER)", c->peer);
			return;
		}
	}
	f = calloc(1, sizeof(*f));
	if (f)
		f->live = calloc((size_t)c->nqps, sizeof(*f->live));
	if (!f || !f->live) {
		free(f);
		NV_WARN("connection to %s: no memory for the failover state; this comm fails "
			"when one of its devices fails", c->peer);
		return;
	}
	f->failover = fo;
	f->hold_ns = (uint64_t)hold * 1000000ull;
	f->all = c->qps;
	f->nall = c->nqps;
	f->nq0 = c->nq;
	for (int i = 0; i < c->nqps; i++)
		f->lidx[i] = (uint8_t)i;
	c->fo = f;
	atomic_store(&c->sink.fo_wake, 1); /* the event thread's liveness sweep tells us */
}

void nv_fo_release(void *comm)
{
	struct nv_comm *c = comm;

	if (!c || (c->type != NV_COMM_SEND && c->type != NV_COMM_RECV) || !c->fo)
		return;
	c->qps = c->fo->all;
	c->nqps = c->fo->nall;
	c->nq = c->fo->nq0;
	free(c->fo->live);
	free(c->fo);
	c->fo = NULL;
}

void nv_fo_stats(const struct nv_comm *c, unsigned *rounds, unsigned *resent)
{
	*rounds = c->fo ? c->fo->epoch : 0;
	*resent = c->fo ? (unsigned)c->fo->nresent : 0;
}

/* ---- detection ------------------------------------------------------------------ */

/* "send comm to" / "receive comm from", for messages. */
const char *nv_fo_kind(const struct nv_comm *c)
{
	return c->type == NV_COMM_SEND ? "send comm to" : "receive comm from";
}

void nv_fo_note(struct nv_fo *f, const char *fmt, ...)
{
	va_list ap;

	if (f->first[0])
		return;
	va_start(ap, fmt);
	vsnprintf(f->first, sizeof(f->first), fmt, ap);
	va_end(ap);
}

/* Keeps the comm on the slow path until the round is over. */
void nv_fo_arm(struct nv_comm *c)
{
	atomic_fetch_or_explicit(&c->sink.fatal, NV_SINK_FAILOVER, memory_order_release);
}

/* A local device found failed: this round's, or the next one's once our STATE left. */
static void nv_fo_blame(struct nv_fo *f, int dev, int definite)
{
	uint32_t bit = 1u << dev;

	if (f->dead_local & bit)
		return;
	if (f->state == NV_FO_XCHG || f->state == NV_FO_READY || f->state == NV_FO_RESEND)
		f->later |= bit;
	else if (definite)
		f->blame |= bit;
	else
		f->suspect |= bit;
}

static int nv_fo_status_definite(enum ibv_wc_status s)
{
	return s == IBV_WC_WR_FLUSH_ERR || s == IBV_WC_FATAL_ERR || s == IBV_WC_GENERAL_ERR ||
	       s == IBV_WC_LOC_QP_OP_ERR; /* taken only with our port down (nv_fo_link_lost) */
}

/* Transport failures; errors of our own making (keys, lengths, opcodes) fail the comm. */
static int nv_fo_status_transport(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_WR_FLUSH_ERR:
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
	case IBV_WC_RESP_TIMEOUT_ERR:
	case IBV_WC_REM_ABORT_ERR:
	case IBV_WC_BAD_RESP_ERR:
	case IBV_WC_FATAL_ERR:
	case IBV_WC_GENERAL_ERR:
		return 1;
	default:
		return 0;
	}
}

/*
 * rdma_rxe completes a WR it cannot route (its netdev went down) with
 * LOC_QP_OP_ERR, not RETRY_EXC_ERR: a link failure when device d's port is
 * not ACTIVE. The kernel drops the routes a moment before it marks the port
 * down, so an ACTIVE port is looked at again for up to 10 ms (a cold path:
 * otherwise the comm fails); still ACTIVE, the error is ours.
 */
static int nv_fo_link_lost(struct nv_comm *c, int d)
{
	struct ibv_port_attr pa;

	for (int i = 0; i < 10; i++) {
		if (nv_ibv_query_port(c->dev[d].hca->ctx, c->dev[d].dev->port, &pa) != NV_OK)
			return 0;
		if (pa.state != IBV_PORT_ACTIVE)
			return 1;
		nv_sleep_ms(1);
	}
	return 0;
}

int nv_fo_wc_error(struct nv_comm *c, int d, const struct ibv_wc *wc)
{
	struct nv_fo *f = c->fo;
	unsigned kind = NV_WRID_KIND(wc->wr_id), qi = NV_WRID_QP(wc->wr_id);
	struct nv_comm_qp *q;

	if (c->error != NV_OK || (!nv_fo_status_transport(wc->status) &&
				  (wc->status != IBV_WC_LOC_QP_OP_ERR || !nv_fo_link_lost(c, d))))
		return 0;
	if (kind == NV_WR_FLUSH) {
		struct nv_request *r = &c->reqs[NV_WRID_IDX(wc->wr_id) % (uint32_t)c->nreq];

		c->dev[qi % (unsigned)c->ndevs].flush_outstanding--;
		if (--r->pending == 0)
			r->done = 1; /* see the top of the file: not flushable through a dead NIC */
		nv_fo_note(f, "GPU flush read on %s: %s", c->dev[d].hca->name,
			   nv_ibv_wc_status_str(wc->status));
		nv_fo_blame(f, (int)(qi % (unsigned)c->ndevs), 1);
		nv_fo_arm(c);
		return 1;
	}
	if (kind == NV_WR_PROBE) {
		if (NV_WRID_IDX(wc->wr_id) == NV_FO_MARKER && qi < (unsigned)c->nqps) {
			f->mark[qi] = 2;
			c->qps[qi].outstanding = 0; /* every WR before the marker completed */
		}
		return 1; /* a connect-time probe: done long ago, nothing to count */
	}
	if (qi >= (unsigned)c->nqps || (kind != NV_WR_DATA && kind != NV_WR_CTS &&
					kind != NV_WR_RECV))
		return 0;
	q = &c->qps[qi];
	if (kind == NV_WR_RECV)
		q->recv_outstanding--;
	else
		q->outstanding -= (int)NV_WRID_NWR(wc->wr_id);
	/* the chunk or CTS may not have landed: the round decides (sender's slot
	 * count and receiver's request count stay as they are) */
	if (!f->errored && !f->qerr[qi]) {
		f->qerr[qi] = 1; /* later flushes on it follow from this error */
		nv_fo_note(f, "QP 0x%x on %s:%u: %s", q->qp->qp_num, c->dev[q->dev].hca->name,
			   c->dev[q->dev].dev->port, nv_ibv_wc_status_str(wc->status));
		nv_fo_blame(f, q->dev, nv_fo_status_definite(wc->status));
		if (!f->state)
			f->initiator = 1;
		nv_fo_arm(c);
	}
	return 1;
}

int nv_fo_peer_spoke(struct nv_comm *c)
{
	if (c->fo->state != NV_FO_IDLE || nv_fd_pending(c->fd) != 1)
		return 0;
	c->fo->peer_spoke = 1;
	nv_fo_arm(c);
	return 1;
}

/* Ports, HCAs and QP states (syscalls: only when something happened). */
void nv_fo_scan(struct nv_comm *c)
{
	struct nv_fo *f = c->fo;
	struct ibv_port_attr pa;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr ia;
	int d, i;

	for (d = 0; d < c->ndevs; d++) {
		struct nv_comm_dev *cd = &c->dev[d];

		if (f->dead_local & (1u << d))
			continue;
		if (nv_hca_failed(cd->hca)) {
			nv_fo_note(f, "%s: %s", cd->hca->name, cd->hca->sink.what);
			nv_fo_blame(f, d, 1);
		} else if (nv_ibv_query_port(cd->hca->ctx, cd->dev->port, &pa) == NV_OK &&
			   pa.state != IBV_PORT_ACTIVE) {
			nv_fo_note(f, "port %s:%u is not ACTIVE (state %d)", cd->hca->name,
				   cd->dev->port, (int)pa.state);
			nv_fo_blame(f, d, 1);
		}
	}
	for (i = 0; !f->errored && i < c->nqps; i++) {
		struct nv_comm_qp *q = &c->qps[i];

		if (nv_ibv_query_qp(q->qp, &qa, IBV_QP_STATE, &ia) == NV_OK &&
		    (qa.qp_state == IBV_QPS_ERR || qa.qp_state == IBV_QPS_SQE)) {
			nv_fo_note(f, "QP 0x%x on %s:%u is in error (%s)", q->qp->qp_num,
				   c->dev[q->dev].hca->name, c->dev[q->dev].dev->port,
				   c->sink.what[0] ? c->sink.what : "no event");
			nv_fo_blame(f, q->dev, !f->qerr[i]);
		}
	}
}

/* Async events recorded into the comm's sink: handled here, so later ones are seen. */
void nv_fo_take_events(struct nv_comm *c)
{
	int bits = atomic_load_explicit(&c->sink.fatal, memory_order_acquire);

	if (bits & NV_SINK_EVENT_MASK) {
		nv_fo_note(c->fo, "%s", c->sink.what);
		nv_async_sink_clear(&c->sink, NV_SINK_EVENT_MASK | NV_SINK_DEVICE);
		c->fo->scan = 1;
	}
}

/*
 * Recovery (NCCL_IB_RESILIENCY_PORT_RECOVERY): failed local devices whose
 * port is ACTIVE again, whose HCA works, that failed at least
 * NCCL_IB_RESILIENCY_PORT_RECOVERY_START_DELAY ms ago and were recovered
 * fewer than NCCL_IB_RESILIENCY_PORT_RECOVERY_ATTEMPTS_MAX times. *wait: a
 * port that is back but still inside its delay (the comm stays armed).
 */
uint32_t nv_fo_revivable(struct nv_comm *c, int *wait)
{
	struct nv_fo *f = c->fo;
	uint64_t now = nv_now_ns(), delay;
	struct ibv_port_attr pa;
	uint32_t r = 0;
	int d;

	int hold = f->state == NV_FO_HOLD; /* as soon as the port is ACTIVE, no limit */

	*wait = 0;
	if ((!hold && !nv_param_int(NV_PARAM_IB_RESILIENCY_PORT_RECOVERY)) || !f->dead_local)
		return 0;
	delay = (uint64_t)nv_param_int(NV_PARAM_IB_RESILIENCY_PORT_RECOVERY_START_DELAY) * 1000000ull;
	for (d = 0; d < c->ndevs; d++) {
		struct nv_comm_dev *cd = &c->dev[d];

		if (!(f->dead_local & (1u << d)) || nv_hca_failed(cd->hca) ||
		    (!hold && f->revivals[d] >=
			      nv_param_int(NV_PARAM_IB_RESILIENCY_PORT_RECOVERY_ATTEMPTS_MAX)) ||
		    nv_ibv_query_port(cd->hca->ctx, cd->dev->port, &pa) != NV_OK ||
		    pa.state != IBV_PORT_ACTIVE)
			continue;
		if (!hold && now - f->t_dead[d] < delay)
			*wait = 1;
		else
			r |= 1u << d;
	}
	return r;
}

/*
 * A comm with requests NCCL has not seen complete. A round needs both sides
 * to call in, and a side calls only while it has requests or wants a new one;
 * a side that is between requests starts a recovery round (on its next
 * isend/irecv, which stay without request until the peer joins), and the
 * peer joins when it next needs the comm. A side with requests open does not
 * start one: its peer may be done with its part and not call again.
 */
int nv_fo_requests_open(const struct nv_comm *c)
{
	for (int i = 0; i < c->nreq; i++)
		if (c->reqs[i].type != NV_REQ_FREE)
			return 1;
	return 0;
}

/*
 * A hold ends: device d's GID is chosen again by the configured rule from
 * the port's current table (a flap that removed and re-added the address
 * may have moved it to another index). The same GID at another index: the
 * new index from now on (the peer addresses us by the GID, which it already
 * has). Another GID (the address itself changed): the comm fails, the peer
 * cannot learn it without a new connection.
 */
nv_status_t nv_fo_gid_again(struct nv_comm *c, int d)
{
	struct nv_comm_dev *cd = &c->dev[d];
	struct nv_fo *f = c->fo;
	struct nv_gid_info g;
	char a[64], b[64];
	size_t o;

	atomic_store(&cd->dev->gid_stale, 1); /* the GID_CHANGE event may still be on its way */
	if (nv_dev_gid(cd->dev, &g) != NV_OK)
		return NV_FO_BUSY; /* no usable GID yet: the address comes back later */
	if (memcmp(g.gid.raw, cd->gid.gid.raw, 16)) {
		nv_comm_fail(c, NV_ERR_SYSTEM, "%s %s: NCCL_VERBS_LINK_HOLD_MS: %s:%u came back "
			     "with another GID (%s, was %s): the port's address changed; a new "
			     "connection is needed", nv_fo_kind(c), c->peer, cd->hca->name,
			     cd->dev->port, nv_ibv_gid_str(&g.gid, a, sizeof(a)),
			     nv_ibv_gid_str(&cd->gid.gid, b, sizeof(b)));
		return c->error;
	}
	if (g.index != cd->gid.index) {
		o = strlen(f->hold_gid);
		snprintf(f->hold_gid + o, sizeof(f->hold_gid) - o, "%s%s:%u GID index %d -> %d",
			 o ? ", " : "; ", cd->hca->name, cd->dev->port, cd->gid.index, g.index);
	}
	cd->gid = g;
	return NV_OK;
}
