/*
 * state.c - a comm's state in one line and the stall reports (contract in
 * comm.h, "state lines"). Runs on the comm's own progress thread (from the
 * health word's slow path, close, or a sticky error), so it reads the
 * data path's fields without a lock; the event thread only decides when
 * (event.h) and hands over what it measured through the sink.
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "event.h"
#include "ibv.h"
#include "os.h"

#define NV_STATE_LINE 2048
#define NV_STATE_MAX_REQS 8	/* requests listed per line (the oldest) */

int nv_comm_outstanding(const struct nv_comm *c)
{
	int i, n = 0;

	for (i = 0; c->reqs && i < c->nreq; i++)
		n += c->reqs[i].type != NV_REQ_FREE;
	return n;
}

/* The outstanding, not yet completed request with the lowest sequence (NULL: none). */
static const struct nv_request *nv_comm_oldest(const struct nv_comm *c, int type)
{
	const struct nv_request *o = NULL;
	int i;

	for (i = 0; c->reqs && i < c->nreq; i++) {
		const struct nv_request *r = &c->reqs[i];

		if (r->type == type && !r->done && (!o || r->seq < o->seq))
			o = r;
	}
	return o;
}

static uint64_t nv_req_age_ms(const struct nv_request *r)
{
	uint64_t now = nv_now_ns();

	/* not stamped for this use (comm.h): not waited for yet, age 0 */
	return r->t_seq == r->seq && r->t_post && now > r->t_post ? (now - r->t_post) / 1000000 : 0;
}

static uint64_t nv_req_bytes(const struct nv_request *r)
{
	uint64_t b = 0;
	int i;

	if (r->type == NV_REQ_SEND)
		return r->size;
	for (i = 0; r->type == NV_REQ_RECV && i < r->nreqs && i < NV_MAX_RECVS; i++)
		b += r->sizes[i];
	return b;
}

/* The tag of a request: from the clear-to-send entry it matched or posted. */
static int nv_req_tag(const struct nv_comm *c, const struct nv_request *r)
{
	if (r->type == NV_REQ_SEND)
		return (int)((const struct nv_send_ctrl *)c->ctrl)->fifo[r->seq % NV_FIFO_SLOTS]
								 [r->entry % NV_MAX_RECVS].tag;
	if (r->type == NV_REQ_RECV) {
		const struct nv_recv_comm *rc = (const struct nv_recv_comm *)c;
		uint64_t slots = rc->eager.max ? NV_SHADOW_SLOTS : NV_FIFO_SLOTS;

		return (int)((const struct nv_recv_ctrl *)c->ctrl)->shadow[r->seq % slots][0].tag;
	}
	return -1;
}

static const char *nv_comm_kind(const struct nv_comm *c)
{
	return c->type == NV_COMM_SEND ? "send" : c->type == NV_COMM_RECV ? "recv" : "comm";
}

/* Appends to buf at *used (bounded; always terminated). */
__attribute__((format(printf, 4, 5)))
static void nv_put(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
	va_list ap;
	int w;

	if (*used >= len)
		return;
	va_start(ap, fmt);
	w = vsnprintf(buf + *used, len - *used, fmt, ap);
	va_end(ap);
	if (w > 0)
		*used = *used + (size_t)w < len ? *used + (size_t)w : len - 1;
}

/* "N outstanding [seq S age A ms B bytes tag T done, ...]", the oldest first. */
static void nv_put_reqs(const struct nv_comm *c, char *buf, size_t len, size_t *used)
{
	const struct nv_request *o[NV_STATE_MAX_REQS];
	int i, j, n = 0, k = 0;

	for (i = 0; c->reqs && i < c->nreq; i++) {
		const struct nv_request *r = &c->reqs[i];

		if (r->type == NV_REQ_FREE)
			continue;
		n++;
		/* keep the NV_STATE_MAX_REQS lowest sequences, sorted */
		if (k == NV_STATE_MAX_REQS && r->seq >= o[k - 1]->seq)
			continue;
		j = k < NV_STATE_MAX_REQS ? k++ : k - 1;
		for (; j > 0 && o[j - 1]->seq > r->seq; j--)
			o[j] = o[j - 1];
		o[j] = r;
	}
	nv_put(buf, len, used, "%d outstanding", n);
	for (i = 0; i < k; i++)
		nv_put(buf, len, used, "%sseq %" PRIu64 " age %" PRIu64 " ms %" PRIu64 " bytes tag %d%s",
		       i ? ", " : " [", o[i]->seq, nv_req_age_ms(o[i]), nv_req_bytes(o[i]),
		       nv_req_tag(c, o[i]), o[i]->type == NV_REQ_FLUSH ? " flush" :
		       o[i]->done ? " done" : "");
	if (k)
		nv_put(buf, len, used, "%s]", k < n ? ", ..." : "");
}

void nv_comm_state(const struct nv_comm *c, uint64_t since_ms, char *buf, size_t len)
{
	const struct nv_comm_stats *st = &c->st;
	char id[256];
	size_t used = 0;

	nv_put(buf, len, &used, "%s %s: ", nv_comm_kind(c), nv_comm_ident(c, id, sizeof(id)));
	if (c->type == NV_COMM_SEND) {
		const struct nv_send_comm *s = (const struct nv_send_comm *)c;
		const struct nv_cts_entry *e = ((const struct nv_send_ctrl *)c->ctrl)->fifo[s->head %
											  NV_FIFO_SLOTS];

		nv_put(buf, len, &used, "next seq %" PRIu64 " (its clear-to-send %s), ", s->head,
		       __atomic_load_n(&e[0].seq, __ATOMIC_ACQUIRE) == s->head + 1 ? "arrived"
										 : "not arrived");
	} else if (c->type == NV_COMM_RECV) {
		const struct nv_recv_comm *rc = (const struct nv_recv_comm *)c;

		nv_put(buf, len, &used, "next seq %" PRIu64 " (clear-to-sends posted up to %" PRIu64
		       "), ", rc->head, rc->head);
	}
	nv_put_reqs(c, buf, len, &used);
	if (since_ms)
		nv_put(buf, len, &used, "; last progress over %" PRIu64 " ms ago", since_ms);
	nv_put(buf, len, &used, "; msgs=%" PRIu64 " bytes=%" PRIu64 " eager=%" PRIu64 " cts_waits=%"
	       PRIu64 " wc_errors=%" PRIu64 " failovers=%" PRIu64 " flushes=%" PRIu64, nv_comm_msgs(c),
	       st->bytes, st->eager, st->cts_waits, st->wc_errors, st->failovers, st->flushes);
	if (c->error != NV_OK)
		nv_put(buf, len, &used, "; error: %.200s", c->why);
}

void nv_comm_dump(const struct nv_comm *c, int warn, const char *why)
{
	char line[NV_STATE_LINE];

	nv_comm_state(c, 0, line, sizeof(line));
	if (warn)
		NV_WARN("comm state (%s): %s", why, line);
	else
		NV_INFO(NV_SUB_NET, "comm state (%s): %s", why, line);
}

/* The stall report: which side waits for what, with the request and the counters. */
static void nv_comm_stall_warn(struct nv_comm *c, const struct nv_sink_report *rep)
{
	const struct nv_request *o = nv_comm_oldest(c, c->type == NV_COMM_SEND ? NV_REQ_SEND
									      : NV_REQ_RECV);
	const char *first = c->st.stall_reports++ ? "still " : "";
	char id[256];

	nv_comm_ident(c, id, sizeof(id));
	if (c->type == NV_COMM_SEND && !o) {
		NV_WARN("stall: send %s: %sno progress for %" PRIu64 " ms: a %" PRIu64 "-byte isend "
			"(tag %d) waits for the receiver's clear-to-send of seq %" PRIu64 ": the peer "
			"has not posted its receive: rank behind or hung, not the network",
			id, first, rep->stall_ms, c->st.wait_size, c->st.wait_tag,
			((struct nv_send_comm *)c)->head);
	} else if (c->type == NV_COMM_SEND) {
		const struct nv_send_comm *s = (const struct nv_send_comm *)c;
		const struct nv_comm_qp *q = &c->qps[(o->seq * (uint64_t)c->nq) % (uint64_t)c->nqps];

		if (s->slots[o->seq % NV_FIFO_SLOTS].seq == o->seq &&
		    !s->slots[o->seq % NV_FIFO_SLOTS].posted)
			NV_WARN("stall: send %s: %sno progress for %" PRIu64 " ms: a %" PRIu64 "-byte "
				"send (tag %d, seq %" PRIu64 ", age %" PRIu64 " ms) waits for the other "
				"sends of its grouped receive: NCCL has not issued them",
				id, first, rep->stall_ms, o->size, nv_req_tag(c, o), o->seq,
				nv_req_age_ms(o));
		else
			NV_WARN("stall: send %s: %sno progress for %" PRIu64 " ms: a %" PRIu64 "-byte "
				"send (tag %d, seq %" PRIu64 ", age %" PRIu64 " ms) was posted, %d WRs "
				"on QPN 0x%x without a completion: the network or the peer's NIC is not "
				"acknowledging (link down or lossy, peer host hung); %s",
				id, first, rep->stall_ms, o->size, nv_req_tag(c, o), o->seq,
				nv_req_age_ms(o), q->outstanding, q->qp->qp_num, rep->cnt);
	} else if (o) {
		NV_WARN("stall: recv %s: %sno progress for %" PRIu64 " ms: a %" PRIu64 "-byte receive "
			"(tag %d, seq %" PRIu64 ", age %" PRIu64 " ms) sent its clear-to-send and its "
			"data has not come: the sender has not sent it (rank behind or hung) or the "
			"network lost it; %s",
			id, first, rep->stall_ms, nv_req_bytes(o), nv_req_tag(c, o), o->seq,
			nv_req_age_ms(o), rep->cnt);
	} else {
		NV_WARN("stall: recv %s: %sno progress for %" PRIu64 " ms with no receive outstanding "
			"(%d requests held by NCCL, not tested)", id, first, rep->stall_ms,
			nv_comm_outstanding(c));
	}
}

void nv_comm_take_report(struct nv_comm *c)
{
	struct nv_sink_report rep;
	char line[NV_STATE_LINE];
	int kind = nv_sink_take_report(&c->sink, &rep);

	if (kind & NV_REPORT_STALL)
		nv_comm_stall_warn(c, &rep);
	if (kind & NV_REPORT_DUMP) {
		nv_comm_state(c, rep.since_ms, line, sizeof(line));
		NV_WARN("comm state: %s", line);
	}
}

void nv_comm_set_ident(struct nv_comm *c)
{
	char id[NV_SINK_IDENT_LEN], who[NV_SINK_IDENT_LEN];

	snprintf(id, sizeof(id), "%s %s", nv_comm_kind(c), nv_comm_ident(c, who, sizeof(who)));
	nv_sink_set_ident(&c->sink, c->dev[0].dev ? c->dev[0].dev->port : 1, id);
}

void nv_comm_wqe_start(struct nv_comm *c)
{
	char ident[NV_WQE_IDENT_LEN], lg[64], rg[64];
	int i;

	c->wqe = nv_wqe_new(c->nqps, c->peer);
	for (i = 0; c->wqe && i < c->nqps; i++) {
		const struct nv_comm_qp *q = &c->qps[i];
		const struct nv_comm_dev *d = &c->dev[q->dev];
		const struct nv_meta_dev *r = &c->rmeta->dev[q->rdev];
		int roce = d->dev->link_layer == IBV_LINK_LAYER_ETHERNET; /* GIDs: as NCCL */

		snprintf(ident, sizeof(ident), "peer=%s | local: qpn=%u dev=%s port=%u lid=%u "
			 "localGid=%s | remote: qpn=%u port=%u lid=%u remoteGid=%s", c->peer,
			 q->qp->qp_num, d->hca->name, d->dev->port, d->dev->lid,
			 roce ? nv_ibv_gid_str(&d->gid.gid, lg, sizeof(lg)) : "", q->rqpn, r->port,
			 r->lid, roce ? nv_ibv_gid_str((const union ibv_gid *)r->gid, rg, sizeof(rg))
				      : "");
		nv_wqe_qp_set(c->wqe, i, q->qp->qp_num, d->hca->name, d->dev->port, ident);
	}
	c->sink.wqe = c->wqe; /* the event thread's stall lines, once the sink is watched */
}
