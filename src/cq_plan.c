/*
 * cq_plan.c - the queue budget of one comm device: how many send, receive
 * and flush work requests its QPs may have outstanding so that their shared
 * CQ can never overrun, shrunk to fit a device's max_cqe (nv_cq_plan).
 * Pure computation on device limits; the CQs themselves are made in qp.c.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "comm.h"

static int nv_min_int(int a, int b)
{
	return a < b ? a : b;
}

static int nv_max_int(int a, int b)
{
	return a > b ? a : b;
}

/* Lowers p's queues in proportion until nqp QPs fit max_cqe; -1 if even the minima do not. */
static int nv_cq_plan_shrink(struct nv_cq_plan *p, int send, int nqp, int max_cqe)
{
	long long want = (long long)nqp * (p->send_wr + p->recv_wr) + p->flush_wr;
	long long avail = (long long)max_cqe - nqp, excess;
	int min_send = send ? NV_MIN_SEND_QP_WR : NV_MIN_CTS_QP_WR;

	if (want <= 0 || max_cqe < 1)
		return -1;
	p->reduced = 1;
	p->send_wr = nv_max_int(min_send, (int)((long long)p->send_wr * avail / want));
	p->recv_wr = nv_max_int(1, (int)((long long)p->recv_wr * avail / want));
	p->flush_wr = nv_max_int(send ? 0 : 1, (int)((long long)p->flush_wr * avail / want));
	/* The minima may have pushed the total up again: trim until it fits. */
	while ((excess = (long long)nqp * (p->send_wr + p->recv_wr + 1) + p->flush_wr -
			 max_cqe) > 0) {
		if (nqp > 0 && p->send_wr > min_send)
			p->send_wr = nv_max_int(min_send,
						p->send_wr - (int)((excess + nqp - 1) / nqp));
		else if (nqp > 0 && p->recv_wr > 1)
			p->recv_wr--;
		else if (p->flush_wr > (send ? 0 : 1))
			p->flush_wr--;
		else
			return -1;
	}
	return 0;
}

/*
 * Why the depth holds every completion: each CQE on a comm's CQ stands for
 * a distinct WR posted on one of its QPs and not yet retired by the
 * plugin's accounting -
 *  - send queue (data chains, clear-to-send writes): a signalled success
 *    or the error/flush completion of any WR, signalled or not; each such WR
 *    is still counted in q->outstanding, which every post keeps <= send_wr;
 *  - receive queue: one per RECV counted in q->recv_outstanding <= recv_wr
 *    (senders never post RECVs; their 1-entry queue is counted anyway);
 *  - GDR flush READs: flush_outstanding <= flush_wr (receivers, per device);
 *  - the connect-time path probe: one per QP, outside that accounting.
 * So nqp * (send_wr + recv_wr + 1) + flush_wr entries cannot overrun, even
 * when an error flushes everything posted at once. When the device's
 * max_cqe is lower, the queues shrink in proportion (the data path then
 * waits for room sooner) down to the smallest that always progress
 * (NV_MIN_SEND_QP_WR, NV_MIN_CTS_QP_WR; the receive queue 1, flush 1).
 */
int nv_cq_plan(int type, int nqp, int max_cqe, int max_qp_wr, struct nv_cq_plan *p, char *why,
	       size_t len)
{
	int send = type == NV_COMM_SEND;
	long long full;

	memset(p, 0, sizeof(*p));
	p->send_wr = nv_min_int(send ? NV_SEND_QP_WR : NV_RECV_QP_SEND_WR, max_qp_wr);
	p->recv_wr = send ? 1 : nv_min_int(NV_RECV_QP_RECV_WR, max_qp_wr);
	p->flush_wr = send ? 0 : nv_min_int(NV_MAX_REQUESTS, max_qp_wr);
	if (nqp < 0 || p->send_wr < NV_MIN_QP_WR || p->recv_wr < 1) {
		snprintf(why, len, "the device allows only %d work requests per QP; the plugin "
			 "needs at least %d (a grouped send of %d receives plus its completion, "
			 "twice)", max_qp_wr, NV_MIN_QP_WR, NV_MAX_RECVS);
		return -1;
	}
	full = (long long)nqp * (p->send_wr + p->recv_wr + 1) + p->flush_wr;
	if ((full > max_cqe || max_cqe < 1) && nv_cq_plan_shrink(p, send, nqp, max_cqe) < 0) {
		int min_send = send ? NV_MIN_SEND_QP_WR : NV_MIN_CTS_QP_WR;

		snprintf(why, len, "the device's CQs hold at most %d entries (max_cqe); %d QPs on "
			 "one CQ need at least %d so that it can never overrun (lower "
			 "NCCL_IB_QPS_PER_CONNECTION)", max_cqe, nqp,
			 nqp * (min_send + 2) + (send ? 0 : 1));
		return -1;
	}
	p->depth = nv_max_int(1, nqp * (p->send_wr + p->recv_wr + 1) + p->flush_wr);
	return 0;
}
