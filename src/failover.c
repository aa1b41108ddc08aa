/*
 * failover.c - port failover of comms over several devices (fused NICs,
 * makeVDevice): NCCL_IB_RESILIENCY_PORT_FAILOVER. See failover.h for the
 * contract with the data path.
 *
 * The protocol (one "round"; both sides run the same steps):
 *
 *  1. Detection, on either side: an error completion on one of the comm's
 *     QPs, a fatal async event on one (QP_FATAL, a port that went down), a
 *     device-wide failure of an HCA, or the peer's STATE message on the
 *     handshake socket (found by the liveness check while we wait). A local
 *     device is blamed when its port is not ACTIVE, its HCA failed, or one
 *     of its QPs failed without an error from the peer's side (flush, local
 *     errors). Errors that the peer's own round may have caused (retry
 *     exceeded, remote errors) only make the device a suspect: when the
 *     peer's STATE arrives within NCCL_IB_RESILIENCY_PORT_FAILOVER_PROBE_DELAY
 *     ms (the initiator waits that long), they are dismissed; else our STATE
 *     names them as suspects, and once both STATEs are known both sides
 *     dismiss them if the peer's names a device newly failed for certain (a
 *     late peer, e.g. on a loaded host), and blame them otherwise.
 *  2. Drain: every QP of the comm (the healthy ones too) is moved to error and
 *     its CQ polled until each QP's send queue has delivered a marker WR
 *     posted behind everything else and every posted RECV has completed. A
 *     completion that arrives with success in this phase is counted as usual:
 *     a successful WRITE_WITH_IMM on the receiver means its chunk landed, a
 *     successful one on the sender means the receiver has it. Once a QP is in
 *     error on our side nothing more can land through it, so what the
 *     receiver has recorded is final. A QP with nothing outstanding needs no
 *     marker; one whose marker cannot be posted or does not come back, or
 *     whose RECVs are not flushed, within 100 ms (rdma_rxe without its
 *     flush fixes, early Linux 6.1, completes nothing posted to a QP in
 *     error) is moved to RESET, which
 *     empties its queues without completions: those WRs count as flushed.
 *  3. STATE exchange over the handshake socket (it stays open for liveness):
 *     each side sends its failed devices; the receiver adds, for every
 *     receive it has posted and not completed, its sequence and its CTS
 *     entries (so a CTS that went down with a QP reaches the sender this way).
 *  4. Both sides compute the same surviving QP list (QP i connects our device
 *     i % ndevs to the peer's i % rndevs: it survives when neither end was
 *     blamed), compact c->qps to it (order kept), restart those QPs (RESET ->
 *     INIT -> RTR -> RTS, both PSNs derived from the round number), and use
 *     min(nq, survivors) QPs per message from then on, with the usual
 *     (seq * nq + i) % nqps rule. No survivor: the comm fails, as without
 *     failover. The receiver posts the RECVs of its open receives again, in
 *     sequence order; the sender writes the CTS entries it was sent into its
 *     FIFO, completes every posted message the receiver did not list (it
 *     landed, even if our completion said otherwise) and queues the listed
 *     ones it posted for resending. A message is always resent whole: its
 *     bytes go to the same addresses, and the receive is not complete yet, so
 *     rewriting a chunk that had landed is harmless.
 *  5. READY exchange: each side says its QPs are at RTS and its RECVs posted.
 *     Then the sender posts the queued messages, in sequence order, before
 *     any new one, so that every QP sees its WRITE_WITH_IMMs in the order the
 *     receiver posted their RECVs: the receiver's per-request count of
 *     expected completions (reset to the new nq) and the immediate (the size)
 *     land on the right request. Flushes (iflush) are not part of the round:
 *     a flush READ on a failed device fails, counts as done and blames that
 *     device; data that landed through a failed NIC before it failed cannot
 *     be flushed through it (as in NCCL).
 *
 * Everything here runs outside the fast path: from the cold error branch of
 * the CQ poll, from nv_comm_check's slow half (NV_SINK_FAILOVER keeps the comm
 * there for the whole round) and from the liveness check. Each call does what
 * can be done without waiting and returns NV_FO_BUSY otherwise; a round that
 * does not finish within NCCL_VERBS_CONNECT_TIMEOUT_MS fails the comm (e.g. a
 * peer without failover).
 *
 * Recovery (NCCL_IB_RESILIENCY_PORT_RECOVERY): a PORT_ACTIVE event arms the
 * comms on that HCA; once a failed device's port is ACTIVE again and it
 * failed START_DELAY ms ago, a side with no request open starts a round in
 * which it no longer reports the device failed (the peer, in the same round,
 * takes back its own devices that are usable again); the round restarts
 * every QP of the new layout, the recovered ones included, and their flush
 * QPs. ATTEMPTS_MAX recoveries per device. Instead of NCCL's "alive"
 * messages the round itself proves the path (its QPs carry the resends).
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "fo_state.h"
#include "engine.h"
#include "event.h"
#include "ibv.h"
#include "param.h"
#include "sock.h"

/* ---- the round ------------------------------------------------------------------ */

static nv_status_t nv_fo_fail(struct nv_comm *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static nv_status_t nv_fo_fail(struct nv_comm *c, const char *fmt, ...)
{
	char msg[NV_COMM_WHY_LEN - 160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	nv_comm_fail(c, NV_ERR_SYSTEM, "%s %s: %s: %s", nv_fo_kind(c), c->peer,
		     c->fo->failover ? "failover" : "link hold", msg);
	return c->error;
}

static nv_status_t nv_fo_start(struct nv_comm *c)
{
	struct nv_fo *f = c->fo;
	struct ibv_qp_attr a;
	int i;

	f->state = NV_FO_DRAIN;
	f->t0 = nv_now_ns();
	f->deadline = f->t0 + (uint64_t)nv_connect_timeout_ms() * 1000000ull;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	for (i = 0; i < c->nqps; i++) {
		if (nv_ibv_modify_qp(c->qps[i].qp, &a, IBV_QP_STATE) != NV_OK)
			return nv_fo_fail(c, "moving QP 0x%x to error failed", c->qps[i].qp->qp_num);
		f->mark[i] = 0;
	}
	f->errored = 1;
	if (f->failover) /* a hold says only when it starts and ends */
		NV_INFO(NV_SUB_NET, "%s %s: failover round %u starts (%s)", nv_fo_kind(c), c->peer,
			f->epoch + 1, f->first[0] ? f->first : "the peer started it");
	return NV_OK;
}

/* How long the drain waits for a QP's marker and flushed RECVs before it resets the QP. */
#define NV_FO_FLUSH_WAIT_NS (100ull * 1000000ull)

/* Posts QP i's drain marker behind everything queued on it: 1 posted, 0 queue full. */
static int nv_fo_post_marker(struct nv_comm *c, int i)
{
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = NV_WRID(NV_WR_PROBE, 0, i, NV_FO_MARKER);
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	return nv_ibv_post_send(c->qps[i].qp, &wr, &bad) == NV_OK;
}

/*
 * QPs rst[i] did not drain in NV_FO_FLUSH_WAIT_NS: a marker that could not
 * be posted (the queue is full of WRs that never complete) or did not come
 * back, or RECVs never flushed. rdma_rxe without its flush fixes (early
 * Linux 6.1; Debian's 6.1.192 flushes) completes nothing posted to a QP
 * already in error, and rxe moves a QP to error itself on a
 * failed WR, before the data path has polled that error and stopped
 * posting. RESET empties both queues without completions and stops the QP:
 * completions it wrote before are polled here, the QP writes no more. A WR
 * that got none counts as flushed: its chunk or CTS may or may not have
 * landed, so the receive it was for stays open, the receiver's STATE lists
 * it and the sender sends it again whole (what the receiver lists decides,
 * as for flushed WRs: exactly once).
 */
static nv_status_t nv_fo_reset(struct nv_comm *c, const uint8_t *rst)
{
	struct ibv_qp_attr a;
	int i;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RESET;
	for (i = 0; i < c->nqps; i++)
		if (rst[i] && nv_ibv_modify_qp(c->qps[i].qp, &a, IBV_QP_STATE) != NV_OK)
			return nv_fo_fail(c, "moving QP 0x%x to reset failed (its queues did not "
					  "drain)", c->qps[i].qp->qp_num);
	if (nv_comm_progress(c) != NV_OK)
		return c->error;
	for (i = 0; i < c->nqps; i++)
		if (rst[i]) {
			struct nv_comm_qp *q = &c->qps[i];

			NV_INFO(NV_SUB_NET, "%s %s: failover: QP 0x%x reset, %d send and %d receive "
				"WR(s) not flushed (counted as not landed)", nv_fo_kind(c), c->peer,
				q->qp->qp_num, q->outstanding, q->recv_outstanding);
			q->outstanding = q->unsignalled = q->recv_outstanding = 0;
			c->fo->mark[i] = 2;
		}
	return NV_OK;
}

/*
 * 1 when every QP's queues are empty: the markers posted behind its sends came
 * back (none is needed where nothing is outstanding) and its RECVs completed;
 * QPs that do not get there in time are reset. 0 not yet, -1 failed (sticky).
 */
static int nv_fo_drained(struct nv_comm *c)
{
	struct nv_fo *f = c->fo;
	uint8_t rst[NV_WIRE_MAX_QPS];
	int i, done = 1, late = nv_now_ns() > f->t0 + NV_FO_FLUSH_WAIT_NS, any = 0;

	for (i = 0; i < c->nqps; i++) {
		struct nv_comm_qp *q = &c->qps[i];

		if (f->mark[i] == 0 && q->outstanding <= 0)
			f->mark[i] = 2; /* nothing queued: no marker to wait for */
		else if (f->mark[i] == 0 && nv_fo_post_marker(c, i))
			f->mark[i] = 1; /* else full: flushes free room, retried */
		rst[i] = (uint8_t)(late && (f->mark[i] != 2 || q->recv_outstanding > 0));
		any |= rst[i];
	}
	if (any && nv_fo_reset(c, rst) != NV_OK)
		return -1;
	for (i = 0; i < c->nqps; i++)
		if (f->mark[i] != 2 || c->qps[i].recv_outstanding > 0)
			done = 0;
	return done;
}

/* Reads the next message into f->in: 1 complete, 0 not yet, <0 failed (sticky). */
static int nv_fo_read(struct nv_comm *c)
{
	struct nv_fo *f = c->fo;
	char why[128];
	int r;

	if (f->in_off < NV_FO_HDR_SIZE) {
		r = nv_sock_recv(c->fd, f->in, NV_FO_HDR_SIZE, &f->in_off);
		if (r <= 0)
			goto io;
		if (nv_fo_hdr_decode(f->in, &f->peer, why, sizeof(why))) {
			nv_fo_fail(c, "the peer sent %s", why);
			return -1;
		}
	}
	r = nv_sock_recv(c->fd, f->in, NV_FO_HDR_SIZE + f->peer.len, &f->in_off);
	if (r > 0 && nv_fo_payload_check(f->in + NV_FO_HDR_SIZE, &f->peer, why, sizeof(why))) {
		nv_fo_fail(c, "the peer sent %s", why);
		return -1;
	}
	if (r > 0)
		return 1;
io:
	if (r == 0)
		return 0;
	nv_fo_fail(c, "the handshake socket failed (%s): the peer closed the comm or exited",
		   strerror(-r));
	return -1;
}

static int nv_fo_write(struct nv_comm *c)
{
	struct nv_fo *f = c->fo;
	int r = nv_sock_send(c->fd, f->out, f->out_len, &f->out_off);

	if (r < 0)
		nv_fo_fail(c, "sending on the handshake socket failed (%s)", strerror(-r));
	return r;
}

static void nv_fo_put_msg(struct nv_fo *f, uint16_t type, uint64_t head, uint32_t nrec,
			  uint32_t len)
{
	struct nv_fo_hdr h = { .type = type, .epoch = f->epoch, .dead = f->dead_local,
			       .suspect = type == NV_FO_MSG_STATE ? (uint16_t)f->sus_sent : 0,
			       .head = head, .nrec = nrec, .len = len };

	nv_fo_hdr_encode(&h, f->out);
	f->out_len = NV_FO_HDR_SIZE + len;
	f->out_off = 0;
}

/* The receiver's open receives, ascending: their count, or -1 (failed, sticky). */
static int nv_fo_open_recvs(struct nv_comm *c, struct nv_request **open)
{
	uint64_t head = ((struct nv_recv_comm *)c)->head;
	int i, j, n = 0;

	for (i = 0; i < c->nreq; i++) {
		struct nv_request *r = &c->reqs[i];

		if (r->type != NV_REQ_RECV || r->done)
			continue;
		if (r->seq + NV_FIFO_SLOTS < head) {
			nv_fo_fail(c, "receive %" PRIu64 " is open while receive %" PRIu64 " reuses "
				   "its slot: its clear-to-send is gone", r->seq,
				   r->seq + NV_FIFO_SLOTS);
			return -1;
		}
		for (j = n++; j > 0 && open[j - 1]->seq > r->seq; j--)
			open[j] = open[j - 1];
		open[j] = r;
	}
	return n;
}

static nv_status_t nv_fo_send_state(struct nv_comm *c)
{
	struct nv_fo *f = c->fo;
	uint32_t len = 0;
	int n = 0;

	if (c->type == NV_COMM_RECV) {
		struct nv_recv_ctrl *ctrl = nv_recv_ctrl_of(c);
		struct nv_request *open[NV_MAX_REQUESTS];

		n = nv_fo_open_recvs(c, open);
		if (n < 0)
			return c->error;
		for (int i = 0; i < n; i++)
			nv_fo_rec_encode(f->out + NV_FO_HDR_SIZE, &len, open[i]->seq, open[i]->nreqs,
					 ctrl->shadow[open[i]->seq % NV_FIFO_SLOTS]);
	}
	nv_fo_put_msg(f, NV_FO_MSG_STATE,
		      c->type == NV_COMM_SEND ? ((struct nv_send_comm *)c)->head
					      : ((struct nv_recv_comm *)c)->head, (uint32_t)n, len);
	f->state = NV_FO_XCHG;
	return nv_fo_write(c) < 0 ? c->error : NV_OK;
}

static void nv_fo_slot_done(struct nv_comm *c, struct nv_send_slot *sl)
{
	sl->pending = 0;
	for (int r = 0; r < sl->nreqs; r++)
		c->reqs[sl->req[r]].done = 1;
}

/* A failover this message went through; NV_OK, or the sticky error past MAX_ATTEMPTS. */
static nv_status_t nv_fo_attempt(struct nv_comm *c, uint64_t seq)
{
	struct nv_fo *f = c->fo;
	unsigned k = (unsigned)(seq % NV_FIFO_SLOTS);
	int64_t max = nv_param_int(NV_PARAM_IB_RESILIENCY_PORT_FAILOVER_MAX_ATTEMPTS);

	if (f->att_seq[k] != seq + 1) {
		f->att_seq[k] = seq + 1;
		f->att_n[k] = 0;
	}
	if (!f->round_failed || !f->failover)
		return NV_OK; /* a recovery round, or a hold (its time is the limit) */
	if (++f->att_n[k] > max)
		return nv_fo_fail(c, "message %" PRIu64 " failed again after %d failover(s) "
				  "(NCCL_IB_RESILIENCY_PORT_FAILOVER_MAX_ATTEMPTS=%" PRId64 ")",
				  seq, f->att_n[k] - 1, max);
	return NV_OK;
}

/*
 * Sender: the receiver's open receives decide. Listed and posted: resend; posted and
 * not listed: it landed, complete it; listed, not posted yet: its CTS into our FIFO.
 */
static nv_status_t nv_fo_sender_apply(struct nv_comm *c)
{
	struct nv_send_comm *s = (struct nv_send_comm *)c;
	struct nv_send_ctrl *ctrl = nv_send_ctrl_of(c);
	struct nv_fo *f = c->fo;
	struct nv_cts_entry e[NV_MAX_RECVS];
	uint8_t listed[NV_FIFO_SLOTS] = { 0 };
	uint32_t off = 0, n, r;
	uint64_t seq, prev = 0, q;
	char why[192];
	int k, got = 0;

	f->nresend = f->iresend = 0;
	while ((k = nv_fo_rec_decode(f->in + NV_FO_HDR_SIZE, f->peer.len, &off, &seq, &n, e, why,
				     sizeof(why))) > 0) {
		struct nv_send_slot *sl = &s->slots[seq % NV_FIFO_SLOTS];

		if ((got++ && seq <= prev) || seq + NV_FIFO_SLOTS <= s->head ||
		    seq >= s->head + NV_FIFO_SLOTS || seq >= f->peer.head)
			return nv_fo_fail(c, "the peer listed receive %" PRIu64 " (our next send "
					  "%" PRIu64 ", its next receive %" PRIu64 ")", seq, s->head,
					  f->peer.head);
		prev = seq;
		listed[seq % NV_FIFO_SLOTS] = 1;
		if (seq < s->head) {
			if (sl->seq != seq || sl->pending <= 0)
				return nv_fo_fail(c, "the peer lost message %" PRIu64 ", which "
						  "completed here", seq);
			if (nv_fo_attempt(c, seq) != NV_OK)
				return c->error;
			f->resend[f->nresend++] = seq;
			continue;
		}
		why[0] = 0;
		if (e[0].nreqs != n || nv_cts_slot_check(e, seq, c->rmeta->ndevs, why, sizeof(why)) != 1)
			return nv_fo_fail(c, "the peer's clear-to-send %" PRIu64 " is bad: %s", seq,
					  why[0] ? why : "incomplete");
		for (r = n; r-- > 0;) { /* seq last in each entry, entry 0 last: as RDMA would */
			struct nv_cts_entry *x = &ctrl->fifo[seq % NV_FIFO_SLOTS][r];
			uint64_t sq = e[r].seq;

			e[r].seq = 0;
			memcpy(x, &e[r], sizeof(*x));
			__atomic_store_n(&x->seq, sq, __ATOMIC_RELEASE);
		}
	}
	if (k < 0)
		return nv_fo_fail(c, "the peer sent %s", why);
	for (q = s->head > NV_FIFO_SLOTS ? s->head - NV_FIFO_SLOTS : 0; q < s->head; q++) {
		struct nv_send_slot *sl = &s->slots[q % NV_FIFO_SLOTS];

		if (sl->seq == q && sl->pending > 0 && !listed[q % NV_FIFO_SLOTS])
			nv_fo_slot_done(c, sl);
	}
	return NV_OK;
}

static nv_status_t nv_fo_receiver_repost(struct nv_comm *c)
{
	struct nv_request *open[NV_MAX_REQUESTS];
	int i, n = nv_fo_open_recvs(c, open);

	if (n < 0)
		return c->error;
	for (i = 0; i < n; i++)
		if (nv_recv_repost((struct nv_recv_comm *)c, open[i]) != NV_OK)
			return c->error;
	return NV_OK;
}

/* Names the devices in mask (ours, or the peer's) for the WARN. */
static void nv_fo_devs(const struct nv_comm *c, uint32_t mask, int peer, char *buf, size_t len)
{
	size_t o = 0;

	buf[0] = 0;
	for (int d = 0; d < NV_COMM_MAX_DEVS && o < len; d++)
		if (mask & (1u << d))
			o += (size_t)snprintf(buf + o, len - o, "%s%s%.31s:%u", o ? ", " : "",
					      peer ? "peer's " : "",
					      peer ? c->rmeta->dev[d].name : c->dev[d].hca->name,
					      peer ? c->rmeta->dev[d].port : c->dev[d].dev->port);
}

/* Recovered devices are in the layout again: their flush QPs too; an INFO line. */
static void nv_fo_recovered(struct nv_comm *c, uint32_t local, uint32_t peer)
{
	struct nv_fo *f = c->fo;
	char l[160], p[160];

	for (int d = 0; d < c->ndevs; d++)
		if (local & (1u << d)) {
			f->revivals[d]++;
			if (nv_comm_flush_qp_restart(c, d) != NV_OK)
				f->later |= 1u << d; /* its flushes fail again: the next round */
		}
	if (f->hold_t0)
		return; /* the end of a hold has its own line */
	nv_fo_devs(c, local, 0, l, sizeof(l));
	nv_fo_devs(c, peer, 1, p, sizeof(p));
	NV_INFO(NV_SUB_NET, "%s %s: %s%s%s recovered (NCCL_IB_RESILIENCY_PORT_RECOVERY): %d QP(s), "
		"%d per message", nv_fo_kind(c), c->peer, l, l[0] && p[0] ? " and " : "", p, c->nqps,
		c->nq);
}

/* Restarts the survivors and compacts c->qps to them; 0 survivors: fails the comm. */
static nv_status_t nv_fo_relayout(struct nv_comm *c, uint32_t new_local, uint32_t new_peer)
{
	struct nv_fo *f = c->fo;
	uint32_t psn = ((f->epoch + 1) * 0x9e37u) & 0xffffffu;
	char l[160], p[160];
	int i, n = 0;

	c->qps = f->all;
	c->nqps = f->nall;
	for (i = 0; i < f->nall; i++) {
		if ((f->dead_local & (1u << f->all[i].dev)) || (f->dead_peer & (1u << f->all[i].rdev)))
			continue;
		f->lidx[n++] = (uint8_t)i;
	}
	nv_fo_devs(c, new_local, 0, l, sizeof(l));
	nv_fo_devs(c, new_peer, 1, p, sizeof(p));
	if (f->hold_ns && (n == 0 || (!f->failover && (f->dead_local | f->dead_peer)))) {
		f->state = NV_FO_HOLD; /* every QP stays in error until the ports are back */
		return NV_OK;
	}
	if (n == 0)
		return nv_fo_fail(c, "%s%s%s failed (%s) and no device pair of the comm is left",
				  l, l[0] && p[0] ? " and " : "", p, f->first[0] ? f->first : "peer");
	for (i = 0; i < n; i++) {
		if (nv_comm_qp_restart(c, f->lidx[i], psn) != NV_OK) {
			struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

			/* same layout as the peer's; it fails again and the next round drops it */
			nv_ibv_modify_qp(f->all[f->lidx[i]].qp, &a, IBV_QP_STATE);
			f->later |= 1u << f->all[f->lidx[i]].dev;
		}
		f->live[i] = f->all[f->lidx[i]];
	}
	c->qps = f->live;
	c->nqps = n;
	c->nq = f->nq0 < n ? f->nq0 : n;
	memset(f->qerr, 0, sizeof(f->qerr));
	if (new_local | new_peer)
		NV_WARN("%s %s: %s%s%s failed (%s); NCCL_IB_RESILIENCY_PORT_FAILOVER: going "
			"on over %d QP(s) on the surviving device(s), unfinished messages are sent "
			"again", nv_fo_kind(c), c->peer, l, l[0] && p[0] ? " and " : "", p,
			f->first[0] ? f->first : "seen by the peer", n);
	return NV_OK;
}

/* Local devices found failed in this round: dead from now on (until recovered). */
static void nv_fo_mark_dead(struct nv_comm *c, uint32_t mask)
{
	struct nv_fo *f = c->fo;
	uint64_t now = nv_now_ns();

	for (int d = 0; d < c->ndevs; d++)
		if ((mask & (1u << d)) && !(f->dead_local & (1u << d)))
			f->t_dead[d] = now;
	f->dead_local |= mask;
}

/*
 * Both STATEs are known: the suspects of each side are decided the same way
 * on both. A side's suspects (retry exceeded, remote errors: what the other
 * side's drain causes) are dismissed when the other side's STATE names a
 * device newly failed for certain, whose round explains them, and blamed
 * otherwise (e.g. both sides saw only timeouts on one rail). The peer's
 * devices that failed, so decided, are returned in *peer_dead.
 */
static void nv_fo_suspects(struct nv_comm *c, uint32_t *peer_dead)
{
	struct nv_fo *f = c->fo;
	uint32_t local_new = f->dead_local & ~f->sent_dead;
	uint32_t peer_new = f->peer.dead & ~f->dead_peer;

	if (!peer_new)
		nv_fo_mark_dead(c, f->sus_sent);
	f->sus_sent = 0;
	*peer_dead = f->peer.dead | (local_new ? 0 : f->peer.suspect);
}

/*
 * NCCL_VERBS_LINK_HOLD_MS: the round left no device pair (with failover off:
 * lost one), so instead of failing, the comm holds: its QPs stay in error,
 * the sender keeps the messages the receiver has not got, the receiver its
 * open receives, and every call says "busy" (isend/irecv give no request,
 * test says not done) until the ports are back, when a recovery round
 * restarts the QPs and sends those messages again, or the hold ends.
 */
static nv_status_t nv_fo_hold_start(struct nv_comm *c)
{
	struct nv_fo *f = c->fo;
	char l[160], p[160];

	f->revive = 0;
	f->sent_dead = f->dead_local;
	f->epoch++;
	c->st.failovers++;
	f->in_off = 0;
	f->state_in = 0;
	f->errored = f->initiator = f->peer_spoke = 0;
	f->blame = f->suspect = 0;
	if (f->hold_t0) {
		/* still holding: the other side's ports came back first, or the recovery round
		 * could not restart a QP; the next attempt backs off (10 ms, doubling, 100 ms at
		 * most) and the hold's deadline stands */
		f->hold_retry_ns = f->hold_retry_ns ? f->hold_retry_ns * 2 : 10000000ull;
		if (f->hold_retry_ns > 100000000ull)
			f->hold_retry_ns = 100000000ull;
		f->next_revive = nv_now_ns() + f->hold_retry_ns;
		return NV_FO_BUSY;
	}
	f->hold_t0 = nv_now_ns();
	/* the side whose ports are fine waits a little longer: the other side gives up first,
	 * and tells it by closing the socket */
	f->hold_until = f->hold_t0 + f->hold_ns + (f->dead_local ? 0 : 2000000000ull);
	f->hold_gid[0] = 0;
	nv_fo_devs(c, f->dead_local, 0, l, sizeof(l));
	nv_fo_devs(c, f->dead_peer, 1, p, sizeof(p));
	NV_INFO(NV_SUB_NET, "%s %s: %s%s%s down (%s); holding its requests for up to %" PRIu64
		" ms (NCCL_VERBS_LINK_HOLD_MS)", nv_fo_kind(c), c->peer, l, l[0] && p[0] ? " and " : "",
		p, f->first[0] ? f->first : "seen by the peer", (uint64_t)(f->hold_ns / 1000000u));
	return NV_FO_BUSY;
}

/* Holding: the ports back (a recovery round), the peer's round, or the end of the hold. */
static nv_status_t nv_fo_hold_step(struct nv_comm *c)
{
	struct nv_fo *f = c->fo;
	uint64_t now = nv_now_ns();
	char l[160], p[160];
	uint32_t back;
	int wait;

	if (now > f->hold_until) {
		nv_fo_devs(c, f->dead_local, 0, l, sizeof(l));
		nv_fo_devs(c, f->dead_peer, 1, p, sizeof(p));
		nv_fo_fail(c, "%s%s%s did not come back within NCCL_VERBS_LINK_HOLD_MS=%" PRIu64
			   " (waited %.0f ms)", l, l[0] && p[0] ? " and " : "", p,
			   (uint64_t)(f->hold_ns / 1000000u), (double)(now - f->hold_t0) / 1e6);
		shutdown(c->fd, SHUT_RDWR); /* the peer, still holding, learns it now */
		return c->error;
	}
	if (nv_fd_pending(c->fd) == 1) {
		f->peer_spoke = 1; /* the peer's ports are back, or it gave up: its round */
	} else {
		if (!f->dead_local || now < f->next_revive)
			return NV_FO_BUSY;
		f->next_revive = now + 1000000ull; /* a port query per ms at most */
		back = nv_fo_revivable(c, &wait);
		if (back != f->dead_local)
			return NV_FO_BUSY; /* every port back, or none */
		for (int d = 0; d < c->ndevs; d++) {
			nv_status_t st = (back & (1u << d)) ? nv_fo_gid_again(c, d) : NV_OK;

			if (st != NV_OK)
				return st;
		}
		f->revive = back;
	}
	f->state = NV_FO_IDLE;
	nv_fo_arm(c);
	return nv_fo_start(c);
}

/* Both STATEs are known: decide, restart, repost; then READY. */
static nv_status_t nv_fo_apply(struct nv_comm *c)
{
	struct nv_fo *f = c->fo;
	uint32_t new_peer, back_peer, back_local, new_local, peer_dead;
	uint32_t mask = (1u << c->rmeta->ndevs) - 1;

	if (f->peer.type != NV_FO_MSG_STATE || f->peer.epoch != f->epoch ||
	    ((f->peer.dead | f->peer.suspect) & ~mask) ||
	    (c->type == NV_COMM_RECV && f->peer.nrec))
		return nv_fo_fail(c, "the peer's failover state (type %u, round %u, devices 0x%x, "
				  "suspects 0x%x, %u records) does not match ours (round %u)",
				  f->peer.type, f->peer.epoch, f->peer.dead, f->peer.suspect,
				  f->peer.nrec, f->epoch);
	nv_fo_suspects(c, &peer_dead);
	new_local = f->dead_local & ~f->sent_dead;
	new_peer = peer_dead & ~f->dead_peer;
	f->round_failed = (new_local | new_peer) != 0;
	back_peer = f->dead_peer & ~peer_dead; /* the peer recovered them */
	back_local = f->sent_dead & ~f->dead_local;
	f->dead_peer = peer_dead;
	if (c->type == NV_COMM_SEND && nv_fo_sender_apply(c) != NV_OK)
		return c->error;
	if (nv_fo_relayout(c, new_local, new_peer) != NV_OK)
		return c->error;
	if (f->state == NV_FO_HOLD)
		return nv_fo_hold_start(c);
	if (back_local | back_peer)
		nv_fo_recovered(c, back_local, back_peer);
	f->revive = 0;
	f->sent_dead = f->dead_local;
	f->epoch++;
	c->st.failovers++;
	if (c->type == NV_COMM_RECV && nv_fo_receiver_repost(c) != NV_OK)
		return c->error;
	f->in_off = 0;
	f->state_in = 0;
	nv_fo_put_msg(f, NV_FO_MSG_READY, 0, 0, 0);
	f->state = NV_FO_READY;
	return nv_fo_write(c) < 0 ? c->error : NV_OK;
}

static nv_status_t nv_fo_resend(struct nv_comm *c)
{
	struct nv_send_comm *s = (struct nv_send_comm *)c;
	struct nv_fo *f = c->fo;

	while (f->iresend < f->nresend) {
		uint64_t seq = f->resend[f->iresend];

		if (!nv_send_repost_room(s, seq) &&
		    (nv_comm_progress(c) != NV_OK || !nv_send_repost_room(s, seq)))
			return c->error != NV_OK ? c->error : NV_FO_BUSY;
		if (nv_send_repost(s, seq) != NV_OK)
			return c->error;
		f->iresend++;
		f->nresent++;
	}
	return NV_OK;
}

/* The round is over: back to the fast path, or straight into the next round. */
static nv_status_t nv_fo_finish(struct nv_comm *c)
{
	struct nv_fo *f = c->fo;

	if (f->hold_t0 && !f->later) {
		NV_INFO(NV_SUB_NET, "%s %s: recovered after %.0f ms on hold (NCCL_VERBS_LINK_HOLD_MS): "
			"%d QP(s) restarted%s, %d message(s) sent again", nv_fo_kind(c), c->peer,
			(double)(nv_now_ns() - f->hold_t0) / 1e6, c->nqps, f->hold_gid, f->nresend);
		f->hold_t0 = f->hold_retry_ns = 0;
	} else if (!f->hold_t0 && f->failover) {
		NV_INFO(NV_SUB_NET, "%s %s: failover round %u done in %.1f ms: %d QP(s), %d per "
			"message, %d message(s) sent again", nv_fo_kind(c), c->peer, f->epoch,
			(double)(nv_now_ns() - f->t0) / 1e6, c->nqps, c->nq, f->nresend);
	} /* a hold whose recovery failed a QP goes on (the next round holds again) */
	f->state = NV_FO_IDLE;
	if (c->lb) /* NCCL_IB_EVENT_BASED_LB: weigh the new layout; a receiver's speed write
		    * may have gone down with a QP: again (lb.h) */
		atomic_fetch_or_explicit(&c->sink.fatal, NV_SINK_LB, memory_order_release);
	f->errored = f->initiator = f->peer_spoke = 0;
	f->first[0] = 0;
	f->blame = f->suspect = 0;
	if (f->later) {
		f->blame = f->later;
		f->later = 0;
		f->initiator = 1;
		return NV_FO_BUSY; /* still armed */
	}
	/* with devices to recover, the next call looks at them (a PORT_ACTIVE that came
	 * during the round armed us and must not be lost); it disarms if none is back */
	if (!f->dead_local || !nv_param_int(NV_PARAM_IB_RESILIENCY_PORT_RECOVERY))
		nv_async_sink_clear(&c->sink, NV_SINK_FAILOVER);
	/* an event or error that raced with the clear is looked at on the next call */
	return NV_OK;
}

/* Reads the peer's STATE of this round unless it is in already: 0, or -1 (comm failed). */
static int nv_fo_take_state(struct nv_comm *c)
{
	struct nv_fo *f = c->fo;
	int r;

	if (f->state_in)
		return 0;
	r = nv_fo_read(c);
	if (r < 0)
		return -1;
	f->state_in = r;
	return 0;
}

static nv_status_t nv_fo_step(struct nv_comm *c)
{
	struct nv_fo *f = c->fo;
	int64_t delay_ms = nv_param_int(NV_PARAM_IB_RESILIENCY_PORT_FAILOVER_PROBE_DELAY);
	int r;

	switch (f->state) {
	case NV_FO_DRAIN:
		if (nv_comm_progress(c) != NV_OK)
			return c->error;
		if (nv_fo_take_state(c) < 0)
			return c->error;
		r = nv_fo_drained(c);
		if (r < 0)
			return c->error;
		if (r == 0)
			return NV_FO_BUSY;
		if (f->initiator && !f->state_in &&
		    nv_now_ns() < f->t0 + (uint64_t)delay_ms * 1000000ull)
			return NV_FO_BUSY;
		nv_fo_scan(c);
		if (f->state_in)
			f->suspect = 0; /* the peer's round explains errors seen from its side */
		r = 0;
		f->revive |= nv_fo_revivable(c, &r);
		nv_fo_mark_dead(c, f->blame);
		f->sus_sent = f->suspect & ~f->blame & ~f->dead_local;
		f->revive &= ~(f->blame | f->suspect);
		f->dead_local &= ~f->revive;
		f->blame = f->suspect = 0;
		return nv_fo_send_state(c);
	case NV_FO_XCHG:
		if (nv_fo_write(c) < 0)
			return c->error;
		if (nv_fo_take_state(c) < 0)
			return c->error;
		if (f->out_off < f->out_len || !f->state_in)
			return NV_FO_BUSY;
		return nv_fo_apply(c);
	case NV_FO_READY:
		if (nv_fo_write(c) < 0)
			return c->error;
		r = nv_fo_read(c);
		if (r < 0)
			return c->error;
		if (f->out_off < f->out_len || r == 0)
			return NV_FO_BUSY;
		if (f->peer.type != NV_FO_MSG_READY || f->peer.epoch != f->epoch)
			return nv_fo_fail(c, "expected the peer's READY of round %u, got type %u "
					  "round %u", f->epoch, f->peer.type, f->peer.epoch);
		f->in_off = 0;
		f->state = c->type == NV_COMM_SEND ? NV_FO_RESEND : NV_FO_IDLE;
		return f->state == NV_FO_IDLE ? nv_fo_finish(c) : NV_OK;
	case NV_FO_HOLD:
		return nv_fo_hold_step(c);
	case NV_FO_RESEND:
		r = (int)nv_fo_resend(c);
		if (r != NV_OK)
			return (nv_status_t)r;
		f->state = NV_FO_IDLE;
		return nv_fo_finish(c);
	default:
		return NV_OK;
	}
}

nv_status_t nv_fo_check(struct nv_comm *c)
{
	struct nv_fo *f = c->fo;
	nv_status_t st;

	nv_fo_take_events(c);
	if (f->state == NV_FO_IDLE) {
		/* an event: completions already queued are classified before our drain's
		 * flushes could hide them (a suspect of another rail stays one) */
		if (f->scan && nv_comm_progress(c) != NV_OK)
			return c->error;
		if (f->scan)
			nv_fo_scan(c);
		f->scan = 0;
		if (nv_fd_pending(c->fd) == 1) /* the peer's STATE (the liveness sweep armed us) */
			f->peer_spoke = 1;
		if (!f->blame && !f->suspect && !f->peer_spoke && f->dead_local &&
		    nv_param_int(NV_PARAM_IB_RESILIENCY_PORT_RECOVERY)) {
			int wait;

			if (nv_now_ns() < f->next_revive)
				return NV_OK; /* armed: a port is back, its start delay runs */
			f->revive = nv_fo_revivable(c, &wait);
			if (f->revive && nv_fo_requests_open(c)) {
				f->revive = 0; /* recovery starts between requests only */
				wait = 1;
			}
			if (!f->revive && wait) {
				f->next_revive = nv_now_ns() + 1000000ull;
				return NV_OK;
			}
		}
		if (!f->blame && !f->suspect && !f->peer_spoke && !f->revive) {
			f->first[0] = 0; /* a later round's WARN names its own cause */
			nv_async_sink_clear(&c->sink, NV_SINK_FAILOVER);
			return NV_OK; /* e.g. a late event of a QP an earlier round dropped, or
				       * the PORT_ERR of a device an earlier round took out */
		}
		if (f->blame || f->suspect)
			f->initiator = 1;
		nv_fo_arm(c);
		st = nv_fo_start(c);
		if (st != NV_OK)
			return st;
	} else if (f->scan) {
		f->scan = 0;
		nv_fo_scan(c);
	}
	do {
		int before = f->state;

		st = nv_fo_step(c);
		if (st != NV_OK || f->state == before || f->state == NV_FO_IDLE)
			break;
	} while (1);
	if (st == NV_OK && f->state != NV_FO_IDLE)
		st = NV_FO_BUSY;
	if (st == NV_FO_BUSY && nv_now_ns() > f->deadline && f->state != NV_FO_IDLE &&
	    f->state != NV_FO_HOLD)
		return nv_fo_fail(c, "round %u did not finish within NCCL_VERBS_CONNECT_TIMEOUT_MS="
				  "%d ms (does the peer run with NCCL_IB_RESILIENCY_PORT_FAILOVER=1?)",
				  f->epoch + 1, nv_connect_timeout_ms());
	return st;
}
