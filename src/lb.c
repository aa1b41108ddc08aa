/*
 * lb.c - speed-weighted striping over fused NICs (NCCL_IB_EVENT_BASED_LB and
 * _REMOTE): the weights, the receiver's speed writes and the sender's take
 * of them. The contract, the wire and the threads are in lb.h; nothing here
 * runs per message unless the comm has c->lb.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lb.h"
#include "event.h"
#include "fo_state.h"
#include "ibv.h"
#include "param.h"

/* A device's speed now (the event thread stores it); 0 when unknown. */
static uint32_t nv_lb_dev_speed(const struct nv_comm_dev *cd)
{
	int v = __atomic_load_n(&cd->dev->speed_mbps, __ATOMIC_RELAXED);

	return v > 0 ? (uint32_t)v : 0;
}

/* ---- sender: the weights ---------------------------------------------------- */

/* min(local, remote) of a QP from local device d to remote device r; 0 unknown. */
static uint64_t nv_lb_pair_speed(const struct nv_lb *lb, int d, int r)
{
	uint32_t l = lb->lspeed[d], m = lb->rspeed[r];

	if (!l)
		return m;
	return m && m < l ? m : l;
}

/* Logs the new weights: one INFO line (NET) per change. */
static void nv_lb_log(const struct nv_comm *c, const char *why)
{
	const struct nv_lb *lb = c->lb;
	char buf[640];
	size_t n = 0;
	int i;

	for (i = 0; i < c->nqps && n + 96 < sizeof(buf); i++) {
		const struct nv_comm_qp *q = &c->qps[i];
		const struct nv_dev *d = c->dev[q->dev].dev;

		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%s:%d->%u %u/%u Mbps %.1f%%",
				      i ? ", " : "", d->name, d->port, q->rdev, lb->lspeed[q->dev],
				      lb->rspeed[q->rdev],
				      100.0 * lb->pw[q->dev][q->rdev] / NV_LB_ONE);
	}
	NV_INFO(NV_SUB_NET, "send comm to %s: NCCL_IB_EVENT_BASED_LB: %s; each message is cut "
		"%s over its QPs (local dev:port->remote dev, local/remote speed, share): %s",
		c->peer, why, ((const struct nv_send_comm *)c)->lb_on ? "by speed" : "equally",
		buf);
}

/* The QPs' shares from the speeds; logs when they changed. */
static void nv_lb_weigh(struct nv_send_comm *s, const char *why)
{
	struct nv_comm *c = &s->base;
	struct nv_lb *lb = c->lb;
	uint32_t pw[NV_COMM_MAX_DEVS][NV_COMM_MAX_DEVS];
	uint64_t sum = 0, v;
	int i, equal = 1, unknown = 0;

	memset(pw, 0, sizeof(pw));
	for (i = 0; i < c->nqps; i++) {
		v = nv_lb_pair_speed(lb, c->qps[i].dev, c->qps[i].rdev);
		unknown |= v == 0;
		sum += v;
	}
	for (i = 0; i < c->nqps; i++) {
		const struct nv_comm_qp *q = &c->qps[i];

		v = nv_lb_pair_speed(lb, q->dev, q->rdev);
		pw[q->dev][q->rdev] = unknown ? NV_LB_ONE / (uint32_t)c->nqps
					      : (uint32_t)(v * NV_LB_ONE / sum);
		if (pw[q->dev][q->rdev] != pw[c->qps[0].dev][c->qps[0].rdev])
			equal = 0;
	}
	if (!memcmp(pw, lb->pw, sizeof(pw)))
		return;
	memcpy(lb->pw, pw, sizeof(pw));
	s->lb_on = !equal;
	lb->changes++;
	nv_lb_log(c, why);
}

/* Local speeds again; a 0 keeps the last known one (lb.h). */
static void nv_lb_local(struct nv_send_comm *s)
{
	struct nv_comm *c = &s->base;
	int d;

	for (d = 0; d < c->ndevs; d++) {
		uint32_t v = nv_lb_dev_speed(&c->dev[d]);

		if (v)
			c->lb->lspeed[d] = v;
	}
	nv_lb_weigh(s, "a local port's speed changed");
}

/* A new count in lb_in: the receiver's speeds, checked (a bad buffer fails the comm). */
static __attribute__((noinline, cold)) void nv_lb_remote(struct nv_send_comm *s, uint64_t raw)
{
	struct nv_comm *c = &s->base;
	struct nv_lb *lb = c->lb;
	const uint8_t *in = nv_send_ctrl_of(c)->lb_in;
	uint8_t copy[NV_WIRE_LB_SIZE];
	struct nv_lb_speeds v;
	char why[160], id[256];
	int d;

	memcpy(copy, in, sizeof(copy));
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (__atomic_load_n((const uint64_t *)(in + NV_WIRE_LB_COUNT_OFF), __ATOMIC_RELAXED) != raw)
		return; /* a newer write is landing: the next message takes it */
	if (nv_wire_lb_decode(copy, c->rmeta->ndevs, &v, why, sizeof(why))) {
		nv_comm_fail(c, NV_ERR_REMOTE, "connection %s: the peer wrote %s (protocol "
			     "violation)", nv_comm_ident(c, id, sizeof(id)), why);
		return;
	}
	lb->rseen = raw;
	for (d = 0; d < c->rmeta->ndevs && d < NV_COMM_MAX_DEVS; d++)
		if (v.mbps[d])
			lb->rspeed[d] = v.mbps[d];
	nv_lb_weigh(s, "the receiver's speeds arrived (NCCL_IB_EVENT_BASED_LB_REMOTE)");
}

nv_status_t nv_lb_prepare(struct nv_send_comm *s, uint64_t seq)
{
	struct nv_comm *c = &s->base;
	struct nv_lb *lb = c->lb;
	const uint8_t *in = nv_send_ctrl_of(c)->lb_in;
	uint64_t raw = __atomic_load_n((const uint64_t *)(in + NV_WIRE_LB_COUNT_OFF),
				       __ATOMIC_ACQUIRE);
	uint32_t base;
	int i;

	if (nv_unlikely(raw != lb->rseen)) {
		nv_lb_remote(s, raw);
		if (c->error != NV_OK)
			return c->error;
	}
	if (!s->lb_on)
		return NV_OK;
	base = (uint32_t)((seq * (uint64_t)c->nq) % (uint64_t)c->nqps);
	lb->cum[0] = 0;
	for (i = 0; i < c->nq; i++) {
		const struct nv_comm_qp *q = &c->qps[(base + (uint32_t)i) % (uint32_t)c->nqps];

		lb->cum[i + 1] = lb->cum[i] + lb->pw[q->dev][q->rdev];
	}
	return NV_OK;
}

/* ---- receiver: our speeds to the sender --------------------------------------- */

/* 1 posted (or nothing to post), 0 not now (failover round, full send queue). */
static int nv_lb_push(struct nv_comm *c)
{
	struct nv_lb *lb = c->lb;
	struct nv_comm_qp *q = &c->qps[0];
	struct nv_lb_speeds v;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	uint8_t *src;
	int d;

	if ((c->fo && c->fo->state != NV_FO_IDLE) || q->outstanding + 1 > q->max_wr)
		return 0;
	memset(&v, 0, sizeof(v));
	v.ndevs = (uint16_t)c->ndevs;
	for (d = 0; d < c->ndevs; d++)
		v.mbps[d] = nv_lb_dev_speed(&c->dev[d]);
	v.count = ++lb->pushed;
	/* two sources in turn: speed changes come seconds apart, the NIC reads one in us */
	src = nv_recv_ctrl_of(c)->lb_src[v.count & 1];
	nv_wire_lb_encode(&v, src);
	memset(&sge, 0, sizeof(sge));
	sge.addr = (uintptr_t)src;
	sge.length = NV_WIRE_LB_SIZE;
	sge.lkey = c->dev[q->dev].ctrl_mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = c->rctrl_addr + offsetof(struct nv_send_ctrl, lb_in);
	wr.wr.rdma.rkey = c->rmeta->dev[q->rdev].rkey;
	/* retired as a signalled CTS: it and the unsignalled CTS before it */
	wr.wr_id = NV_WRID(NV_WR_CTS, q->unsignalled + 1, 0, 0);
	q->unsignalled = 0;
	q->outstanding++;
	if (nv_ibv_post_send(q->qp, &wr, &bad) != NV_OK) {
		nv_comm_fail(c, NV_ERR_SYSTEM, "posting our port speeds on QP 0x%x to %s failed",
			     q->qp->qp_num, c->peer);
		return 1;
	}
	NV_INFO(NV_SUB_NET, "recv comm from %s: told the sender our port speeds (write %" PRIu64
		", NCCL_IB_EVENT_BASED_LB_REMOTE): %u Mbps on %s:%d%s", c->peer, v.count, v.mbps[0],
		c->dev[0].dev->name, c->dev[0].dev->port, c->ndevs > 1 ? " and the others" : "");
	return 1;
}

/* ---- both ------------------------------------------------------------------------- */

void nv_lb_take(struct nv_comm *c)
{
	if (!c->lb) {
		nv_async_sink_clear(&c->sink, NV_SINK_LB);
		return;
	}
	if (c->type == NV_COMM_RECV) {
		if (c->error == NV_OK && !nv_lb_push(c))
			return; /* the bit stays: the next call tries again */
		nv_async_sink_clear(&c->sink, NV_SINK_LB);
		return;
	}
	nv_async_sink_clear(&c->sink, NV_SINK_LB); /* before reading: a later change sets it again */
	nv_lb_local((struct nv_send_comm *)c);
}

void nv_lb_attach(void *comm)
{
	struct nv_comm *c = comm;
	int lb = (int)nv_param_int(NV_PARAM_IB_EVENT_BASED_LB);
	int fused = c->nq > 1 && (c->ndevs > 1 || c->rmeta->ndevs > 1);
	int d;

	if (c->lb)
		return;
	if (c->type == NV_COMM_RECV && c->rmeta->region_len != NV_SEND_CTRL_REMOTE_LEN_LB)
		return; /* the sender does not read our speeds */
	if (c->type == NV_COMM_SEND && (!lb || !fused))
		return;
	c->lb = calloc(1, sizeof(*c->lb));
	if (!c->lb) {
		NV_WARN("connection to %s: no memory for NCCL_IB_EVENT_BASED_LB; messages are cut "
			"equally over its devices", c->peer);
		return;
	}
	if (c->type == NV_COMM_RECV) {
		c->lb->push = 1;
		/* the first call posts our speeds; each speed change again */
		atomic_store(&c->sink.lb_wake, 1);
		atomic_fetch_or_explicit(&c->sink.fatal, NV_SINK_LB, memory_order_release);
		return;
	}
	for (d = 0; d < c->ndevs; d++)
		c->lb->lspeed[d] = nv_lb_dev_speed(&c->dev[d]);
	for (d = 0; d < NV_COMM_MAX_DEVS; d++)
		c->lb->pw[0][d] = UINT32_MAX; /* never a weight: the first weighing logs */
	atomic_store(&c->sink.lb_wake, 1);
	nv_lb_weigh((struct nv_send_comm *)c, "connected");
}
