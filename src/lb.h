/*
 * lb.h - speed-weighted striping over fused NICs (NCCL_IB_EVENT_BASED_LB,
 * NCCL_IB_EVENT_BASED_LB_REMOTE; NCCL 2.31's names, meaning and defaults).
 *
 * A send comm that uses several QPs per message over several devices (a
 * fused NIC on either side) normally cuts each message into equal chunks,
 * one per QP (send.c). With NCCL_IB_EVENT_BASED_LB=1 it cuts it in
 * proportion to each QP's speed, min(local device speed, remote device
 * speed), still at NV_CHUNK_ALIGN boundaries. The weights are computed off
 * the data path, when they change:
 *  - a local speed: IBV_EVENT_DEVICE_SPEED_CHANGE; the HCA's event thread
 *    queries the speed again (device.c) and sets NV_SINK_LB in the sink of
 *    every comm on that HCA that asked for it (sink.lb_wake); the comm takes
 *    it in nv_comm_check's slow half (engine.c -> nv_lb_take);
 *  - a remote speed (_REMOTE=1, the default): the receiver RDMA-writes its
 *    speeds (wire.h, struct nv_lb_speeds) into the sender's
 *    nv_send_ctrl.lb_in, once at its first call and after each speed change
 *    of its devices, as a signalled WR of its CTS send queue (counted like a
 *    CTS). The sender announced that it reads them with its region length
 *    (NV_SEND_CTRL_REMOTE_LEN_LB); an older receiver ignores it, an older
 *    sender never asks. The sender polls the buffer's count once per
 *    message, only on LB comms.
 * A speed of 0 (unknown, or a port going down) is ignored: the last known
 * one stays, and a dead port is failover's business. Until a remote speed is
 * known the local one counts alone. When all QPs weigh the same, the comm
 * goes back to the equal cut (s->lb_on = 0), the exact path of knob 0.
 * Every QP of a message still ends its chain with the WRITE_WITH_IMM, an
 * empty chunk too, so the receiver's per-slot completion count does not
 * change. With the knob 0 (the default) nothing of this exists (c->lb NULL).
 *
 * Threads: everything here runs on the comm's progress thread; the event
 * thread only sets NV_SINK_LB.
 */
#ifndef NV_LB_H
#define NV_LB_H

#include "comm.h"

#define NV_LB_ONE 65536u	/* weights: shares of the comm's QPs, summing to about this */

struct nv_lb {
	int push;			/* recv: the sender reads our speeds (region length) */
	uint64_t pushed;		/* recv: speed writes posted so far */
	uint32_t lspeed[NV_COMM_MAX_DEVS];	/* send: local speeds used, Mb/s (0 unknown) */
	uint32_t rspeed[NV_COMM_MAX_DEVS];	/* send: the receiver's, Mb/s (0 unknown) */
	uint64_t rseen;			/* send: raw count of the last speed buffer taken */
	uint32_t pw[NV_COMM_MAX_DEVS][NV_COMM_MAX_DEVS]; /* send: weight per QP of local dev
							  * x remote dev, NV_LB_ONE shares */
	uint32_t cum[NV_WIRE_MAX_QPS + 1];	/* send: this message's cut points (nv_lb_prepare) */
	uint64_t changes;		/* send: times the weights changed (tests, state) */
};

/* After connect/accept (plugin.c): sets c->lb up when the knobs and the comm call for it
 * (an allocation failure: a WARN, and the equal cut). */
void nv_lb_attach(void *comm);
/* nv_comm_check's slow half found NV_SINK_LB: speeds again (send), or push ours (recv). */
void nv_lb_take(struct nv_comm *c);
/* Send path, c->lb set: takes a new remote speed buffer, then the cut points of seq;
 * NV_OK, or the sticky error (a hostile speed buffer). */
nv_status_t nv_lb_prepare(struct nv_send_comm *s, uint64_t seq);

/*
 * Offset of chunk i (0..nq) of a size-byte request of the message prepared last:
 * 0 for i = 0, size for i = nq, else the weighted cut rounded down to NV_CHUNK_ALIGN.
 */
static inline uint64_t nv_lb_off(const struct nv_lb *lb, int nq, uint64_t size, int i)
{
	uint64_t tot = lb->cum[nq];

	if (i == 0)
		return 0;
	if (i >= nq)
		return size;
	return (tot ? size * lb->cum[i] / tot : size * (uint64_t)i / (uint64_t)nq) &
	       ~((uint64_t)NV_CHUNK_ALIGN - 1);
}

#endif /* NV_LB_H */
