/*
 * Packet loss and RC recovery as a NIC does it (IBA 9.7.5, rxe_comp.c).
 *
 * A message of n = ceil(length / path MTU) packets crosses the requester's
 * link and the responder's link; each packet (data, ACK, NAK, READ request or
 * response) is lost independently with the probability the `loss` knobs give
 * those links.  Recovery is go-back-N:
 *  - the responder drops every packet after a gap (out_of_sequence) and
 *    NAKs the first of them; the requester, on the NAK (packet_seq_err),
 *    resends from the lost PSN after one round trip; what it sent in that
 *    round trip (the port's rate x RTT) was sent for nothing;
 *  - when nothing after the gap arrives (the last packet lost, or every
 *    later one), or the NAK or the final ACK is lost, only the local ACK
 *    timer (4.096 us * 2^timeout, times the fabric's timeout scale) brings
 *    the requester back, to the first PSN not acknowledged (ACKs cover at
 *    most SV_ACK_EVERY packets); a retransmission the responder already has
 *    counts as duplicate_request;
 *  - a READ response with a gap is an implied NAK (implied_nak_seq_err);
 *  - each NAK or timeout takes one retry from retry_cnt; a positive ACK
 *    restores them (rxe's reset_retry_counters: the message's last ACK, an
 *    intermediate one at an AckReq boundary passed in order, any READ
 *    response packet), so retry_cnt + 1 failures in a row without one
 *    complete the message with IBV_WC_RETRY_EXC_ERR.
 * The outcome of a message is drawn when it first executes; its time cost
 * (timeouts, NAK round trips, the bytes resent at the port's bandwidth cap)
 * delays it and every later work request of its QP, as go-back-N does.  The
 * data moves once, when the delay has passed.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sv.h"

int ibv_query_port_speed(struct ibv_context *ibctx, uint8_t port, uint64_t *speed);	/* context.c */

#define SV_ACK_EVERY 128	/* rxe's RXE_MAX_UNACKED_PSNS: AckReq at least this often */
#define SV_MIN_RTT_NS 2000	/* a NAK's round trip when no latency is configured */

static __thread uint64_t sv_rng;

static uint64_t sv_rand(void)
{
	if (SV_UNLIKELY(!sv_rng))
		sv_rng = (sv_now_ns() ^ ((uint64_t)sv_g.pid << 32) ^ (uintptr_t)&sv_rng) | 1;
	sv_rng ^= sv_rng >> 12;
	sv_rng ^= sv_rng << 25;
	sv_rng ^= sv_rng >> 27;
	return sv_rng * 0x2545f4914f6cdd1dull;
}

/* Uniform in (0, 1]. */
static double sv_unit(void)
{
	return ((double)(sv_rand() >> 11) + 1.0) / 9007199254740992.0;
}

static bool sv_lost(double p)
{
	return p > 0 && (p >= 1 || sv_unit() <= p);
}

/* Packets that arrive before the first loss (geometric); UINT32_MAX: none lost. */
static uint32_t sv_first_loss(double p)
{
	double k;

	if (p <= 0)
		return UINT32_MAX;
	if (p >= 1)
		return 0;
	k = floor(log(sv_unit()) / log1p(-p));
	return k >= (double)UINT32_MAX ? UINT32_MAX : (uint32_t)k;
}

/* The peer device's knobs, looked up once (again after a fabric epoch
 * change while it had none). */
static struct sv_dev_knobs *sv_peer_knobs(struct sv_qp *qp)
{
	struct sv_knobs *k = &sv_g.fab->knobs;
	uint32_t ep = atomic_load_explicit(&sv_g.fab->epoch, memory_order_relaxed);

	if (SV_LIKELY(qp->peer_knobs) || !qp->peer || qp->peer_knobs_epoch == ep)
		return qp->peer_knobs;
	qp->peer_knobs_epoch = ep;
	for (int i = 0; i < SV_MAX_DEV_KNOBS && !qp->peer_knobs; i++)
		if (k->dev[i].name[0] && k->dev[i].host == qp->peer->host &&
		    !strcmp(k->dev[i].name, qp->peer->dev_name))
			qp->peer_knobs = &k->dev[i];
	return qp->peer_knobs;
}

static double sv_ppb_p(uint32_t ppb)
{
	return ppb >= 1000000000u ? 1.0 : ppb / 1e9;
}

/* The loss probability of a packet between qp and its peer, in parts per
 * 1e9 (0: no loss knob applies; one relaxed load each when none is set). */
uint32_t sv_loss_ppb(struct sv_qp *qp)
{
	const struct sv_dev_knobs *own = qp->ctx->dev->knobs, *peer;
	uint32_t g = atomic_load_explicit(&sv_g.fab->knobs.loss_ppb, memory_order_relaxed);
	uint32_t a = own ? atomic_load_explicit(&own->loss_ppb, memory_order_relaxed) : 0, b;
	double keep;

	peer = sv_peer_knobs(qp);
	b = peer ? atomic_load_explicit(&peer->loss_ppb, memory_order_relaxed) : 0;
	if (SV_LIKELY(!g && !a && !b))
		return 0;
	/* the packet crosses both links; the global knob applies once */
	keep = (1 - sv_ppb_p(g)) * (1 - sv_ppb_p(a)) * (1 - sv_ppb_p(b));
	return keep <= 0 ? 1000000000u : (uint32_t)((1 - keep) * 1e9 + 0.5);
}

/* A UD datagram lost on the sender's link (or everywhere). */
bool sv_loss_ud(struct sv_qp *qp)
{
	const struct sv_dev_knobs *own = qp->ctx->dev->knobs;
	uint32_t g = atomic_load_explicit(&sv_g.fab->knobs.loss_ppb, memory_order_relaxed);
	uint32_t a = own ? atomic_load_explicit(&own->loss_ppb, memory_order_relaxed) : 0;

	if (SV_LIKELY(!g && !a))
		return false;
	return sv_lost(1 - (1 - sv_ppb_p(g)) * (1 - sv_ppb_p(a)));
}

/* Counts for one side of the transfer, added to its port at the end. */
struct sv_side {
	uint32_t host, dev, port;
	uint64_t c[SV_CNT_N];
};

struct sv_msg {
	uint32_t n, mtu, hdr, len;
	uint32_t window;		/* packets sent in one round trip at the port's rate */
	double p;
	uint64_t timeout, rtt, delay, resent;
	bool served;			/* READ: the responder has answered a request */
	bool acked;			/* this round brought a positive ACK */
	struct sv_side req, resp;
};

static uint64_t sv_bytes(const struct sv_msg *m, uint32_t a, uint32_t b)
{
	uint64_t lo = (uint64_t)a * m->mtu, hi = (uint64_t)b * m->mtu;

	if (hi > m->len)
		hi = m->len;
	return (hi > lo ? hi - lo : 0) + (uint64_t)(b - a) * m->hdr;
}

/* Packets [a, b) leave `from` and those in `arrive` reach `to`. */
static void sv_pkts(struct sv_msg *m, struct sv_side *from, struct sv_side *to, uint32_t a,
		    uint32_t b, uint32_t arrive)
{
	from->c[SV_CNT_XMIT_PKTS] += b - a;
	from->c[SV_CNT_XMIT_DATA] += sv_bytes(m, a, b);
	to->c[SV_CNT_RCV_PKTS] += arrive;
	to->c[SV_CNT_RCV_DATA] += arrive == b - a ? sv_bytes(m, a, b)
						  : (uint64_t)arrive * (m->hdr + m->mtu);
}

/* One header-only packet (ACK, NAK, READ request) from -> to; false: lost. */
static bool sv_ctl_pkt(struct sv_msg *m, struct sv_side *from, struct sv_side *to)
{
	bool lost = sv_lost(m->p);

	from->c[SV_CNT_XMIT_PKTS]++;
	from->c[SV_CNT_XMIT_DATA] += m->hdr;
	if (!lost) {
		to->c[SV_CNT_RCV_PKTS]++;
		to->c[SV_CNT_RCV_DATA] += m->hdr;
	}
	return !lost;
}

/* The end of what leaves after a gap at k before the NAK can stop it: a
 * round trip's worth of packets, or the whole message when none of those
 * arrives (no NAK then). *later: the arrivals among them. */
static uint32_t sv_after_gap(const struct sv_msg *m, uint32_t k, uint32_t *later);

/* Arrivals among the packets after a gap, [a, b). */
static uint32_t sv_arrivals(const struct sv_msg *m, uint32_t a, uint32_t b)
{
	uint32_t n = 0;

	for (uint32_t i = a; i < b; i++)
		n += !sv_lost(m->p);
	return n;
}

static uint32_t sv_after_gap(const struct sv_msg *m, uint32_t k, uint32_t *later)
{
	uint32_t e = m->n - (k + 1) > m->window ? k + 1 + m->window : m->n;

	*later = sv_arrivals(m, k + 1, e);
	if (!*later && e < m->n) {
		*later = sv_arrivals(m, e, m->n);
		e = m->n;
	}
	return e;
}

static void sv_timeout(struct sv_msg *m)
{
	m->req.c[SV_CNT_ACK_TIMEOUT]++;
	m->delay = m->timeout == UINT64_MAX || m->delay + m->timeout < m->delay ? UINT64_MAX
										  : m->delay + m->timeout;
}

/*
 * One transmission round of a WRITE or SEND from PSN start: returns the PSN
 * the next round starts from, or m->n when the message was acknowledged.
 */
static uint32_t sv_round_write(struct sv_msg *m, uint32_t start, uint32_t *delivered)
{
	uint32_t k = sv_first_loss(m->p), later, dup, e;

	k = k >= m->n - start ? m->n : start + k;
	dup = *delivered > start ? (k < *delivered ? k : *delivered) - start : 0;
	m->resp.c[SV_CNT_DUP] += dup;
	if (k == m->n) {
		sv_pkts(m, &m->req, &m->resp, start, m->n, m->n - start);
		*delivered = m->n;
		if (sv_ctl_pkt(m, &m->resp, &m->req))
			return m->n;
		if (m->n / SV_ACK_EVERY > start / SV_ACK_EVERY && m->n > SV_ACK_EVERY &&
		    sv_ctl_pkt(m, &m->resp, &m->req))
			m->acked = true;	/* an intermediate ACK made it */
		sv_timeout(m);	/* the ACK was lost */
		k = (m->n - 1) / SV_ACK_EVERY * SV_ACK_EVERY;
		m->resent += sv_bytes(m, k, m->n);
		return k;
	}
	e = sv_after_gap(m, k, &later);
	sv_pkts(m, &m->req, &m->resp, start, e, k - start + later);
	if (k > *delivered)
		*delivered = k;
	/* an AckReq boundary passed in order: its ACK (if it arrives) */
	if (k / SV_ACK_EVERY > start / SV_ACK_EVERY && sv_ctl_pkt(m, &m->resp, &m->req))
		m->acked = true;
	m->resent += sv_bytes(m, k, e);
	m->resp.c[SV_CNT_OOS] += later;
	if (later && sv_ctl_pkt(m, &m->resp, &m->req)) {
		m->req.c[SV_CNT_SEQ_NAK]++;
		m->delay += m->rtt;
		return k;
	}
	sv_timeout(m);
	return k / SV_ACK_EVERY * SV_ACK_EVERY;
}

/* One round of a READ from response PSN start (same contract). */
static uint32_t sv_round_read(struct sv_msg *m, uint32_t start, uint32_t *delivered)
{
	uint32_t k, later, e;

	if (!sv_ctl_pkt(m, &m->req, &m->resp)) {
		sv_timeout(m);	/* the request was lost */
		return start;
	}
	m->resp.c[SV_CNT_DUP] += m->served;	/* a request it has answered before */
	m->served = true;
	k = sv_first_loss(m->p);
	k = k >= m->n - start ? m->n : start + k;
	if (k == m->n) {
		sv_pkts(m, &m->resp, &m->req, start, m->n, m->n - start);
		return m->n;
	}
	e = sv_after_gap(m, k, &later);
	sv_pkts(m, &m->resp, &m->req, start, e, k - start + later);
	if (k > *delivered)
		*delivered = k;
	m->acked = k > start;	/* response packets arrived in order */
	m->resent += sv_bytes(m, k, e);
	if (later) {
		m->req.c[SV_CNT_IMPLIED_NAK]++;
		m->delay += m->rtt;
		return k;
	}
	sv_timeout(m);
	return k;
}

static void sv_side_add(const struct sv_side *s)
{
	for (int c = 0; c < SV_CNT_N; c++)
		if (s->c[c])
			sv_cnt_add(s->host, s->dev, s->port, (enum sv_cnt)c, s->c[c]);
}

/* Packets that leave in one round trip: the bw cap, else the port's speed. */
static uint32_t sv_window(struct sv_qp *qp, const struct sv_msg *m)
{
	const struct sv_dev_knobs *k = qp->ctx->dev->knobs;
	uint64_t mbps = k ? atomic_load_explicit(&k->bw_mbps, memory_order_relaxed) * 8 : 0;
	uint64_t speed = 0, w;

	if (!mbps && !ibv_query_port_speed(&qp->ctx->vctx.context, (uint8_t)qp->sh->port, &speed))
		mbps = speed * 100;
	if (!mbps)
		mbps = 100000;
	w = m->rtt * mbps / 8000 / (m->mtu + m->hdr) + 1;
	return w > UINT32_MAX ? UINT32_MAX : (uint32_t)w;
}

static void sv_msg_init(struct sv_qp *qp, const struct sv_swqe *w, uint32_t ppb, struct sv_msg *m)
{
	uint64_t lat = atomic_load_explicit(&sv_g.fab->knobs.latency_ns, memory_order_relaxed);
	const struct sv_dev_knobs *k = qp->ctx->dev->knobs;

	memset(m, 0, sizeof(*m));
	m->p = sv_ppb_p(ppb);
	m->mtu = 128u << (qp->attr.path_mtu ? qp->attr.path_mtu : IBV_MTU_1024);
	m->len = w->length;
	m->n = w->length ? (w->length + m->mtu - 1) / m->mtu : 1;
	m->hdr = sv_pkt_hdr(qp);
	if (k)
		lat += atomic_load_explicit(&k->latency_ns, memory_order_relaxed);
	m->rtt = 2 * lat > SV_MIN_RTT_NS ? 2 * lat : SV_MIN_RTT_NS;
	m->timeout = qp->attr.timeout ? (uint64_t)(4096.0 * (double)(1ull << qp->attr.timeout) *
						     sv_timeout_scale())
				      : UINT64_MAX;
	if (m->timeout < 1000)
		m->timeout = 1000;
	m->window = sv_window(qp, m);
	m->req.host = qp->sh->host;
	m->req.dev = qp->sh->dev_idx;
	m->req.port = qp->sh->port;
	m->resp.host = qp->peer->host;
	m->resp.dev = qp->peer->dev_idx;
	m->resp.port = qp->peer->port;
}

/*
 * Draws the fate of the WQE's packets under loss ppb and counts them on
 * both ports: CLEAN (no retransmission), DELAY (*delay ns of recovery before
 * it completes) or EXCEEDED (RETRY_EXC_ERR after *delay ns).
 */
enum sv_loss_res sv_loss_run(struct sv_qp *qp, struct sv_swqe *w, uint32_t ppb, uint64_t *delay)
{
	bool rd = w->opcode == IBV_WR_RDMA_READ;
	uint32_t start = 0, delivered = 0, tries = 0;
	const struct sv_dev_knobs *k = qp->ctx->dev->knobs;
	uint64_t bw = k ? atomic_load_explicit(&k->bw_mbps, memory_order_relaxed) : 0;
	enum sv_loss_res res = SV_LOSS_CLEAN;
	struct sv_msg m;

	sv_msg_init(qp, w, ppb, &m);
	for (;;) {
		m.acked = false;
		start = rd ? sv_round_read(&m, start, &delivered)
			   : sv_round_write(&m, start, &delivered);
		if (start == m.n)
			break;
		res = SV_LOSS_DELAY;
		if (m.acked)
			tries = 0;	/* forward progress acknowledged */
		if (tries++ == qp->attr.retry_cnt || m.delay == UINT64_MAX) {
			res = SV_LOSS_EXCEEDED;
			m.req.c[SV_CNT_RETRY_EXC]++;
			break;
		}
		m.req.c[SV_CNT_RETRIES]++;
	}
	if (bw && m.delay != UINT64_MAX)
		m.delay += m.resent * 1000ull / bw;	/* the bytes sent again */
	sv_side_add(&m.req);
	sv_side_add(&m.resp);
	w->counted = true;
	*delay = m.delay;
	return res;
}
