/*
 * post_send / post_recv (the verbs entry points of the data path), queue
 * flushing, and the slow-path resynchronisation poll_cq runs when the fabric
 * epoch changed or some WQE is waiting (RNR, retry, latency knobs).
 */
#include <errno.h>
#include <string.h>

#include "sv.h"

/* Atomics only where the device has them (atomics=none: EINVAL, as siw). */
static bool sv_opcode_ok(const struct sv_qp *qp, enum ibv_wr_opcode op)
{
	if (sv_op_atomic(op))
		return !qp->ctx->dev->no_atomics;
	return op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM ||
	       op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_READ;
}

/* UD: a send (with immediate) to an AH of the QP's PD, at most one path MTU
 * (the port's active MTU), as rxe and the IB spec require. */
static bool sv_ud_wr_ok(const struct sv_qp *qp, const struct ibv_send_wr *wr)
{
	const struct sv_ah *ah = (const struct sv_ah *)wr->wr.ud.ah;
	uint64_t len = 0;

	if ((wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM) || !ah ||
	    ah->pd != qp->pd)
		return false;
	for (int i = 0; i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	return len <= (128u << qp->ctx->dev->ports[qp->sh->port - 1].mtu);
}

/* Validates and queues one WR.  Returns 0 or the errno post_send returns. */
static int sv_queue_send(struct sv_qp *qp, const struct ibv_send_wr *wr)
{
	uint32_t msge = qp->cap.max_send_sge ? qp->cap.max_send_sge : 1;
	uint64_t idx = qp->sq_post;
	struct sv_swqe *w = &qp->sq[idx % qp->sq_cap];
	struct ibv_sge *sg = &qp->sq_sge[(idx % qp->sq_cap) * msge];
	uint64_t len = 0;

	if (!sv_opcode_ok(qp, wr->opcode) || wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_send_sge)
		return EINVAL;
	if (qp->ibv.qp_type == IBV_QPT_UD && !sv_ud_wr_ok(qp, wr))
		return EINVAL;
	if (qp->ctx->dev->ibv.transport_type == IBV_TRANSPORT_IWARP &&
	    wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		return EINVAL; /* iWARP (RFC 5040) has no immediate data on writes */
	if (idx - atomic_load_explicit(&qp->sq_free, memory_order_acquire) >= qp->sq_cap)
		return ENOMEM;
	for (int i = 0; i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	if (len > qp->ctx->dev->lim.max_msg_sz)
		return EINVAL;	/* as rxe: a message longer than the port's max_msg_sz */
	if (sv_op_atomic(wr->opcode) && len != 8)
		return EINVAL;	/* as rxe: an atomic returns 8 bytes into its SGEs */
	if ((wr->send_flags & IBV_SEND_INLINE) && !sv_op_fills_local(wr->opcode)) {
		unsigned char *dst = qp->sq_inline + (idx % qp->sq_cap) *
				     ((size_t)qp->cap.max_inline_data + 1);

		if (len > qp->cap.max_inline_data)
			return EINVAL;
		for (int i = 0; i < wr->num_sge; i++) {
			memcpy(dst, (void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
			dst += wr->sg_list[i].length;
		}
	} else if (wr->num_sge) {
		memcpy(sg, wr->sg_list, (size_t)wr->num_sge * sizeof(*sg));
	}
	w->wr_id = wr->wr_id;
	w->opcode = wr->opcode;
	w->flags = wr->send_flags;
	w->imm = wr->imm_data;
	w->num_sge = (uint32_t)wr->num_sge;
	w->length = (uint32_t)len;
	w->remote_addr = wr->wr.rdma.remote_addr;
	w->rkey = wr->wr.rdma.rkey;
	if (sv_op_atomic(wr->opcode)) {
		w->remote_addr = wr->wr.atomic.remote_addr;
		w->rkey = wr->wr.atomic.rkey;
		w->compare_add = wr->wr.atomic.compare_add;
		w->swap = wr->wr.atomic.swap;
	}
	w->ah = NULL;
	if (qp->ibv.qp_type == IBV_QPT_UD) {
		w->ah = (struct sv_ah *)wr->wr.ud.ah;
		w->ud_qpn = wr->wr.ud.remote_qpn;
		w->ud_qkey = wr->wr.ud.remote_qkey;
	}
	w->not_before = 0;
	w->wait = SV_WAIT_NONE;
	w->counted = false;
	if (SV_UNLIKELY(qp->snap != NULL))
		sv_srccheck_post(qp, idx);
	__atomic_store_n(&qp->sq_post, idx + 1, __ATOMIC_RELAXED);
	return 0;
}

int sv_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct sv_qp *qp = (struct sv_qp *)ibqp;
	uint32_t st;
	int rc = 0;

	pthread_spin_lock(&qp->lock);
	st = atomic_load_explicit(&qp->sh->state, memory_order_relaxed);
	if (SV_UNLIKELY(st != IBV_QPS_RTS && st != IBV_QPS_ERR && st != IBV_QPS_SQD)) {
		rc = EINVAL;
		*bad = wr;
		goto out;
	}
	for (; wr; wr = wr->next) {
		rc = sv_queue_send(qp, wr);
		if (rc) {
			*bad = wr;
			break;
		}
	}
	if (st == IBV_QPS_ERR && qp->ctx->dev->err_post == SV_ERR_POST_DROP)
		; /* queued; only a reset takes them away (rxe 6.1) */
	else if (st == IBV_QPS_ERR)
		sv_flush_sq(qp);
	else
		sv_qp_progress(qp);
out:
	pthread_spin_unlock(&qp->lock);
	return rc;
}

/* Posts wr into rq (one producer: the caller holds the queue's lock). */
static int sv_rq_post_max(struct sv_rq *rq, uint32_t max_sge, struct ibv_recv_wr *wr,
			  struct ibv_recv_wr **bad)
{
	for (; wr; wr = wr->next) {
		uint64_t t = atomic_load_explicit(&rq->tail, memory_order_relaxed);
		struct sv_rwqe *e;
		int rc = 0;

		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > max_sge)
			rc = EINVAL;
		else if (t - atomic_load_explicit(&rq->head, memory_order_acquire) >= rq->max_wr)
			rc = ENOMEM;
		if (rc) {
			*bad = wr;
			return rc;
		}
		e = (struct sv_rwqe *)(rq->ents + (t & (rq->cap - 1)) * rq->stride);
		e->wr_id = wr->wr_id;
		e->num_sge = (uint32_t)wr->num_sge;
		for (int i = 0; i < wr->num_sge; i++) {
			e->sge[i].addr = wr->sg_list[i].addr;
			e->sge[i].length = wr->sg_list[i].length;
			e->sge[i].lkey = wr->sg_list[i].lkey;
			SV_PEER_WRITABLE((void *)(uintptr_t)wr->sg_list[i].addr,
					 wr->sg_list[i].length);
		}
		atomic_store_explicit(&rq->tail, t + 1, memory_order_release);
	}
	return 0;
}

int sv_rq_post(struct sv_rq *rq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return sv_rq_post_max(rq, rq->max_sge, wr, bad);
}

int sv_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sv_qp *qp = (struct sv_qp *)ibqp;
	struct sv_rq *rq = qp->rq;
	uint32_t st = atomic_load_explicit(&qp->sh->state, memory_order_relaxed);
	int rc;

	/* a QP bound to an SRQ has no receive queue of its own */
	if (SV_UNLIKELY(st == IBV_QPS_RESET || qp->srq)) {
		*bad = wr;
		return EINVAL;
	}
	pthread_spin_lock(&qp->rlock);
	rc = sv_rq_post_max(rq, qp->cap.max_recv_sge, wr, bad);
	pthread_spin_unlock(&qp->rlock);
	if (st == IBV_QPS_ERR && qp->ctx->dev->err_post != SV_ERR_POST_DROP)
		sv_flush_rq(rq, qp->rcq->ring, ibqp->qp_num, &qp->rcq->chan_fd_w);
	return rc;
}

/* Every WQE not yet executed completes with WR_FLUSH_ERR (signalled or not). */
void sv_flush_sq(struct sv_qp *qp)
{
	for (; qp->sq_exec < qp->sq_post; qp->sq_exec++) {
		const struct sv_swqe *w = &qp->sq[qp->sq_exec % qp->sq_cap];
		struct sv_cqe e = {
			.wr_id = w->wr_id,
			.status = IBV_WC_WR_FLUSH_ERR,
			.opcode = sv_wc_opcode(w->opcode),
			.qp_num = qp->ibv.qp_num,
			.sq_idx = (uint32_t)qp->sq_exec,
			.flags = SV_CQE_SQ,
		};

		sv_cq_push(qp->scq->ring, &e);
	}
	if (qp->stalled) {
		qp->stalled = false;
		atomic_fetch_sub(&sv_g.nstalled, 1);
	}
	sv_cq_notify(qp->scq->ring, &qp->scq->chan_fd_w);
}

/* Claims and flushes every posted receive of rq. */
void sv_flush_rq(struct sv_rq *rq, struct sv_cq_ring *ring, uint32_t qpn, int *fd)
{
	uint64_t h = atomic_load_explicit(&rq->head, memory_order_acquire);
	bool any = false;

	while (h != atomic_load_explicit(&rq->tail, memory_order_acquire)) {
		const struct sv_rwqe *e = (const struct sv_rwqe *)
					  (rq->ents + (h & (rq->cap - 1)) * rq->stride);
		struct sv_cqe c = {
			.wr_id = e->wr_id, .status = IBV_WC_WR_FLUSH_ERR, .opcode = IBV_WC_RECV,
			.qp_num = qpn,
		};

		if (!atomic_compare_exchange_weak_explicit(&rq->head, &h, h + 1,
							   memory_order_acq_rel,
							   memory_order_acquire))
			continue;
		sv_cq_push(ring, &c);
		h++;
		any = true;
	}
	if (any)
		sv_cq_notify(ring, fd);
}

/* Slow path of poll_cq: resync QPs after an epoch change, run stalled WQEs. */
void sv_sync_all(void)
{
	uint32_t e = atomic_load(&sv_g.fab->epoch);
	bool changed = e != atomic_load(&sv_g.seen_epoch);
	struct sv_qp *list[256];
	uint32_t n = 0, start = 0;

	if (changed)
		atomic_store(&sv_g.seen_epoch, e);
	do {
		pthread_mutex_lock(&sv_g.lock);
		for (n = 0; start < sv_g.nlqp && n < 256; start++) {
			struct sv_qp *qp = sv_g.lqp[start];

			if (changed || qp->stalled)
				list[n++] = qp;
		}
		for (uint32_t i = 0; i < n; i++) {
			struct sv_qp *qp = list[i];

			if (changed) {
				pthread_spin_lock(&qp->lock);
				sv_qp_sync(qp);
				pthread_spin_unlock(&qp->lock);
			} else if (!pthread_spin_trylock(&qp->lock)) {
				if (qp->stalled)
					sv_qp_progress(qp);
				pthread_spin_unlock(&qp->lock);
			}
		}
		pthread_mutex_unlock(&sv_g.lock);
	} while (start < sv_g.nlqp && n == 256);
}
