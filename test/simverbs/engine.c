/*
 * The requester engine: executes one send WQE in the initiator's process.
 * It checks local SGEs, reachability of the peer, the remote key and range,
 * moves the bytes with process_vm_writev/readv (memcpy within one process),
 * consumes the responder's posted receive and pushes the responder's
 * completion into its CQ ring, then the requester's own completion.  The
 * responder's data is written before its completion is published (release
 * store), so a RECV_RDMA_WITH_IMM completion implies all earlier writes of
 * that QP are visible.
 */
#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include "sv.h"

enum sv_exec { SV_DONE, SV_STALL };

static uint64_t sv_iov_len(const struct iovec *v, int n)
{
	uint64_t t = 0;

	for (int i = 0; i < n; i++)
		t += v[i].iov_len;
	return t;
}

/* Advances an iovec array by `done` bytes. */
static void sv_iov_advance(struct iovec **v, int *n, size_t done)
{
	while (*n && done >= (*v)->iov_len) {
		done -= (*v)->iov_len;
		(*v)++;
		(*n)--;
	}
	if (*n && done) {
		(*v)->iov_base = (char *)(*v)->iov_base + done;
		(*v)->iov_len -= done;
	}
}

static void sv_memcpy_iov(struct iovec *dst, int nd, struct iovec *src, int ns)
{
	while (nd && ns) {
		size_t c = dst->iov_len < src->iov_len ? dst->iov_len : src->iov_len;

		memcpy(dst->iov_base, src->iov_base, c);
		sv_iov_advance(&dst, &nd, c);
		sv_iov_advance(&src, &ns, c);
	}
}

int sv_vm_copy(int32_t pid, bool write, struct iovec *l, int nl, struct iovec *r, int nr)
{
	uint64_t total = sv_iov_len(l, nl);

	while (total) {
		ssize_t n = write ? process_vm_writev(pid, l, (unsigned long)nl, r,
						      (unsigned long)nr, 0)
				  : process_vm_readv(pid, l, (unsigned long)nl, r,
						     (unsigned long)nr, 0);

		if (n <= 0)
			return n < 0 ? errno : EFAULT;
		total -= (uint64_t)n;
		sv_iov_advance(&l, &nl, (size_t)n);
		sv_iov_advance(&r, &nr, (size_t)n);
	}
	return 0;
}

/* Moves bytes between our iovecs and pid's (GPU memory through gpu.c).
 * Returns 0 or an errno (ESRCH: the process is gone; EFAULT: a bad address). */
static int sv_xfer(int32_t pid, bool write, struct sv_iovs *l, struct sv_iovs *r)
{
	if (SV_UNLIKELY(l->any_gpu || r->any_gpu))
		return sv_gpu_xfer(pid, write, l, r);
	if (pid == sv_g.pid) {
		if (write)
			sv_memcpy_iov(r->v, r->n, l->v, l->n);
		else
			sv_memcpy_iov(l->v, l->n, r->v, r->n);
		return 0;
	}
	return sv_vm_copy(pid, write, l->v, l->n, r->v, r->n);
}

/* Appends an MR range to io (bounds already checked). */
static void sv_iov_add(struct sv_iovs *io, const struct sv_shm_mr *m, uint64_t va, uint32_t len)
{
	io->v[io->n].iov_base = (void *)(uintptr_t)va;
	io->v[io->n].iov_len = len;
	io->gpu[io->n] = m->gpu;
	io->any_gpu |= m->gpu != 0;
	io->n++;
}

static void sv_complete(struct sv_qp *qp, uint64_t idx, uint32_t status, uint32_t len)
{
	const struct sv_swqe *w = &qp->sq[idx % qp->sq_cap];
	struct sv_cqe e = {
		.wr_id = w->wr_id,
		.status = status,
		.byte_len = len,
		.qp_num = qp->ibv.qp_num,
		.sq_idx = (uint32_t)idx,
		.flags = SV_CQE_SQ,
	};

	if (status == IBV_WC_SUCCESS && !qp->sq_sig_all && !(w->flags & IBV_SEND_SIGNALED))
		return;
	e.opcode = sv_wc_opcode(w->opcode);
	if (status != IBV_WC_SUCCESS)
		e.vendor_err = 0x81;
	sv_cq_push(qp->scq->ring, &e);
	sv_cq_notify(qp->scq->ring, &qp->scq->chan_fd_w);
}

/* Error completion for the WQE, QP to error, the rest flushed. */
static enum sv_exec sv_fail(struct sv_qp *qp, uint32_t status)
{
	SV_DBG("QP 0x%x: WR %llu (wr_id 0x%llx) failed: %s; QP to error", qp->ibv.qp_num,
	       (unsigned long long)qp->sq_exec,
	       (unsigned long long)qp->sq[qp->sq_exec % qp->sq_cap].wr_id,
	       ibv_wc_status_str((enum ibv_wc_status)status));
	sv_complete(qp, qp->sq_exec, status, 0);
	qp->sq_exec++;
	sv_qp_to_error(qp, false);
	return SV_DONE;
}

int sv_local_iovs(struct sv_qp *qp, const struct sv_swqe *w, uint64_t idx, struct sv_iovs *io)
{
	const struct ibv_sge *sg = &qp->sq_sge[(idx % qp->sq_cap) *
					       (qp->cap.max_send_sge ? qp->cap.max_send_sge : 1)];
	uint32_t need = sv_op_fills_local(w->opcode) ? IBV_ACCESS_LOCAL_WRITE : 0;

	io->n = 0;
	io->any_gpu = false;
	if (w->flags & IBV_SEND_INLINE && !sv_op_fills_local(w->opcode)) {
		io->v[0].iov_base = qp->sq_inline + (idx % qp->sq_cap) *
				    ((size_t)qp->cap.max_inline_data + 1);
		io->v[0].iov_len = w->length;
		io->gpu[0] = 0;
		io->n = w->length ? 1 : 0;
		return 0;
	}
	for (uint32_t i = 0; i < w->num_sge; i++) {
		const struct sv_shm_mr *m = sv_mr_lookup(sg[i].lkey);
		uint64_t va;

		if (!sg[i].length)
			continue;
		if (sv_mr_check(m, sg[i].lkey, sv_g.pid, qp->pd->id, sg[i].addr, sg[i].length,
				need, &va))
			return EACCES;
		sv_iov_add(io, m, va, sg[i].length);
	}
	return 0;
}

static const uint32_t sv_rnr_10us[32] = {
	65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512,
	768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
};

static uint64_t sv_scaled(double ns)
{
	double v = ns * sv_timeout_scale();

	return v < 1000.0 ? 1000 : (uint64_t)v;
}

/* The requester's counter c and the responder's counter rc (SV_CNT_N: none). */
static void sv_cnt_pair(struct sv_qp *qp, enum sv_cnt c, enum sv_cnt rc)
{
	if (c != SV_CNT_N)
		sv_cnt_add(qp->sh->host, qp->sh->dev_idx, qp->sh->port, c, 1);
	if (rc != SV_CNT_N && qp->peer)
		sv_cnt_add(qp->peer->host, qp->peer->dev_idx, qp->peer->port, rc, 1);
}

/* The peer cannot be reached: retry until timeout * (retry_cnt + 1); on the
 * requester's port each try was a local ACK timeout. */
static enum sv_exec sv_unreachable(struct sv_qp *qp, struct sv_swqe *w, uint64_t now)
{
	uint32_t h = qp->sh->host, d = qp->sh->dev_idx, p = qp->sh->port;

	if (w->wait != SV_WAIT_RETRY) {
		w->wait = SV_WAIT_RETRY;
		w->deadline = qp->attr.timeout ?
			      now + sv_scaled(4096.0 * (double)(1ull << qp->attr.timeout) *
					      (qp->attr.retry_cnt + 1)) : UINT64_MAX;
	}
	if (now < w->deadline)
		return SV_STALL;
	sv_cnt_add(h, d, p, SV_CNT_ACK_TIMEOUT, qp->attr.retry_cnt + 1u);
	sv_cnt_add(h, d, p, SV_CNT_RETRIES, qp->attr.retry_cnt);
	sv_cnt_add(h, d, p, SV_CNT_RETRY_EXC, 1);
	return sv_fail(qp, IBV_WC_RETRY_EXC_ERR);
}

/* No receive posted at the responder. */
static enum sv_exec sv_rnr(struct sv_qp *qp, struct sv_swqe *w, uint64_t now)
{
	uint64_t delay = sv_scaled(10000.0 * sv_rnr_10us[qp->peer->min_rnr_timer & 31]);

	if (w->wait != SV_WAIT_RNR) {
		w->wait = SV_WAIT_RNR;
		w->rnr_left = qp->attr.rnr_retry;
		w->rnr_next = now + delay;
		sv_cnt_pair(qp, SV_CNT_RNR_NAK_RCVD, SV_CNT_RNR_NAK_SENT);
		return SV_STALL;
	}
	if (now < w->rnr_next)
		return SV_STALL;
	if (qp->attr.rnr_retry != 7 && !w->rnr_left) {
		sv_cnt_pair(qp, SV_CNT_RNR_RETRY_EXC, SV_CNT_N);
		return sv_fail(qp, IBV_WC_RNR_RETRY_EXC_ERR);
	}
	/* the retry: counted as a NAK only when it is refused again */
	sv_cnt_pair(qp, SV_CNT_RNR_NAK_RCVD, SV_CNT_RNR_NAK_SENT);
	if (qp->attr.rnr_retry != 7)
		w->rnr_left--;
	w->rnr_next = now + delay;
	return SV_STALL;
}

static bool sv_peer_ok(struct sv_qp *qp, uint64_t now)
{
	struct sv_shm_qp *p = qp->peer;
	uint32_t st;

	if (!p || qp->peer_dead || atomic_load_explicit(&p->qpn, memory_order_relaxed) !=
	    qp->peer_qpn)
		return false;
	if (atomic_load_explicit(&p->cut, memory_order_relaxed) ||
	    atomic_load_explicit(&qp->sh->cut, memory_order_relaxed))
		return false;
	st = atomic_load_explicit(&p->state, memory_order_acquire);
	if (st != IBV_QPS_RTR && st != IBV_QPS_RTS)
		return false;
	/* RC: the responder must be connected back to us (otherwise real
	 * hardware sees PSN errors and the requester retries until it fails) */
	if (SV_UNLIKELY(p->dest_qpn != qp->ibv.qp_num))
		return false;
	/* the address vector must still lead to the peer's port, and that
	 * port must be up (its host publishes netdev state and GID changes) */
	if (SV_UNLIKELY(atomic_load_explicit(&qp->peer_port->seq, memory_order_relaxed) !=
			qp->peer_seq))
		qp->addr_ok = sv_addr_recheck(qp);
	if (SV_UNLIKELY(!qp->addr_ok) ||
	    SV_UNLIKELY(atomic_load_explicit(&qp->peer_port->state, memory_order_relaxed) !=
			IBV_PORT_ACTIVE))
		return false;
	if (SV_UNLIKELY(atomic_load_explicit(&sv_g.fab->knobs.nbad_gids, memory_order_relaxed)) &&
	    qp->dgid_valid && sv_gid_unreachable(&qp->dgid))
		return false;
	if (SV_UNLIKELY(now - qp->peer_checked > SV_PEER_CHECK_NS)) {
		qp->peer_checked = now;
		if (!sv_pid_alive(qp->peer_pid))
			qp->peer_dead = true;
	}
	return !qp->peer_dead;
}

/* Claims the responder's next receive; copies it to *out.  false: none. */
static bool sv_claim_recv(struct sv_rq *rq, struct sv_rwqe *out, struct sv_rwqe_sge *sges)
{
	uint64_t h = atomic_load_explicit(&rq->head, memory_order_acquire);

	for (;;) {
		const struct sv_rwqe *e;

		if (h == atomic_load_explicit(&rq->tail, memory_order_acquire))
			return false;
		e = (const struct sv_rwqe *)(rq->ents + (h & (rq->cap - 1)) * rq->stride);
		*out = *e;
		if (out->num_sge > rq->max_sge)
			out->num_sge = rq->max_sge;
		memcpy(sges, e->sge, out->num_sge * sizeof(*sges));
		if (atomic_compare_exchange_weak_explicit(&rq->head, &h, h + 1,
							  memory_order_acq_rel,
							  memory_order_acquire)) {
			if (SV_UNLIKELY(rq->srq_id))
				sv_srq_claimed(rq, h + 1);
			return true;
		}
	}
}

static void sv_push_remote(struct sv_qp *qp, const struct sv_cqe *e)
{
	sv_cq_push(qp->peer_cq, e);
	sv_cq_notify(qp->peer_cq, &qp->peer_chan_fd);
}

static void sv_responder_error(struct sv_qp *qp, const struct sv_rwqe *rw, uint32_t status)
{
	struct sv_cqe e = {
		.wr_id = rw->wr_id, .status = status, .opcode = IBV_WC_RECV,
		.qp_num = qp->peer_qpn, .src_qp = qp->ibv.qp_num, .vendor_err = 0x82,
	};

	sv_push_remote(qp, &e);
	atomic_store(&qp->peer->state, IBV_QPS_ERR);
	sv_bump_epoch();
}

/*
 * A remote access error (bad rkey, deregistered or out-of-range MR, rights
 * or QP access flags) is a responder-side error too: as the IB spec has it
 * and rxe does (do_class_d1e_error), the responder QP moves to error and its
 * posted receives are flushed - its owner does that at its next verb
 * (sv_qp_sync), with the QP's asynchronous event - and the requester gets
 * REM_ACCESS_ERR.
 */
static enum sv_exec sv_access_error(struct sv_qp *qp)
{
	atomic_store(&qp->peer->state, IBV_QPS_ERR);
	sv_bump_epoch();
	return sv_fail(qp, IBV_WC_REM_ACCESS_ERR);
}

/*
 * A request the responder cannot take (a READ or atomic with no responder
 * resources, max_dest_rd_atomic 0; an atomic at an address not 8-byte
 * aligned): an Invalid Request NAK (IBA 9.7.5.2.2, rxe's
 * RESPST_ERR_TOO_MANY_RDMA_ATM_REQ and RESPST_ERR_MISALIGNED_ATOMIC); the
 * responder QP moves to error, the requester gets REM_INV_REQ_ERR.
 */
static enum sv_exec sv_invalid_request(struct sv_qp *qp)
{
	atomic_store(&qp->peer->state, IBV_QPS_ERR);
	sv_bump_epoch();
	return sv_fail(qp, IBV_WC_REM_INV_REQ_ERR);
}

/*
 * FETCH_AND_ADD and CMP_AND_SWP (IBA 9.4.5): 8 bytes at an 8-byte aligned
 * address in a responder MR and QP with REMOTE_ATOMIC; the value found
 * there returns into the local SGE (8 bytes, checked at post), in host byte
 * order as rxe and mlx5 on x86 keep it.  The read-modify-write runs under the
 * fabric's atomic lock, so atomics are atomic with respect to each other
 * across the fabric (IBV_ATOMIC_HCA; a CPU store to the word may interleave,
 * as on hardware).  WQEs execute in order, so every earlier write of the QP
 * is visible before the atomic's effect.
 */
static enum sv_exec sv_do_atomic(struct sv_qp *qp, struct sv_swqe *w, struct sv_iovs *lio,
				 uint64_t now)
{
	const struct sv_shm_mr *m = sv_mr_lookup(w->rkey);
	uint64_t va, old = 0, val;
	struct sv_iovs r, v;
	int rc;

	if ((w->remote_addr & 7) || !qp->peer->max_dest_rd_atomic)
		return sv_invalid_request(qp);
	if (sv_mr_check(m, w->rkey, qp->peer_pid, qp->peer->pd_id, w->remote_addr, 8,
			IBV_ACCESS_REMOTE_ATOMIC, &va) ||
	    !(atomic_load_explicit(&qp->peer->access, memory_order_relaxed) &
	      IBV_ACCESS_REMOTE_ATOMIC))
		return sv_access_error(qp);
	r.n = 0;
	r.any_gpu = false;
	sv_iov_add(&r, m, va, 8);
	v.n = 1;
	v.any_gpu = false;
	v.gpu[0] = 0;
	v.v[0].iov_base = &old;
	v.v[0].iov_len = 8;
	if (sv_atomic_lock())
		return sv_fail(qp, IBV_WC_GENERAL_ERR);
	rc = sv_xfer(qp->peer_pid, false, &v, &r);
	val = w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ? old + w->compare_add :
	      old == w->compare_add ? w->swap : old;
	if (!rc && val != old) {
		v.v[0].iov_base = &val;
		v.v[0].iov_len = 8;
		rc = sv_xfer(qp->peer_pid, true, &v, &r);
	}
	sv_atomic_unlock();
	if (rc)
		return rc == ESRCH ? sv_unreachable(qp, w, now) : sv_access_error(qp);
	v.v[0].iov_base = &old;
	v.v[0].iov_len = 8;
	if (sv_xfer(sv_g.pid, false, lio, &v))
		return sv_fail(qp, IBV_WC_LOC_PROT_ERR);
	return SV_DONE;
}

/* Builds the responder iovecs for a SEND from its receive WQE. */
static int sv_recv_iovs(struct sv_qp *qp, const struct sv_rwqe *rw,
			const struct sv_rwqe_sge *sg, uint32_t len, struct sv_iovs *io)
{
	uint32_t left = len;

	io->n = 0;
	io->any_gpu = false;
	for (uint32_t i = 0; i < rw->num_sge && left; i++) {
		const struct sv_shm_mr *m = sv_mr_lookup(sg[i].lkey);
		uint32_t c = sg[i].length < left ? sg[i].length : left;
		uint64_t va;

		if (!c)
			continue;
		if (sv_mr_check(m, sg[i].lkey, qp->peer_pid, qp->peer->recv_pd_id, sg[i].addr,
				sg[i].length, IBV_ACCESS_LOCAL_WRITE, &va))
			return EACCES;
		sv_iov_add(io, m, va, c);
		left -= c;
	}
	return left ? EMSGSIZE : 0;
}

static uint32_t sv_recv_flags(const struct sv_qp *qp, bool imm)
{
	uint32_t f = imm ? IBV_WC_WITH_IMM : 0;

	if (qp->ctx->dev->link_layer == IBV_LINK_LAYER_ETHERNET)
		f |= IBV_WC_GRH;
	return f;
}

static enum sv_exec sv_do_send(struct sv_qp *qp, struct sv_swqe *w, struct sv_iovs *lio,
			       uint64_t now)
{
	struct sv_rwqe_sge sg[SV_MAX_IOV];
	struct sv_rwqe rw;
	struct sv_iovs rio;
	bool imm = w->opcode == IBV_WR_SEND_WITH_IMM;
	struct sv_cqe e;
	int rc;

	if (!sv_claim_recv(qp->peer_rq, &rw, sg))
		return sv_rnr(qp, w, now);
	rc = sv_recv_iovs(qp, &rw, sg, w->length, &rio);
	if (rc) {
		sv_responder_error(qp, &rw, rc == EACCES ? IBV_WC_LOC_PROT_ERR : IBV_WC_LOC_LEN_ERR);
		return sv_fail(qp, rc == EACCES ? IBV_WC_REM_OP_ERR : IBV_WC_REM_INV_REQ_ERR);
	}
	rc = sv_xfer(qp->peer_pid, true, lio, &rio);
	if (rc)
		return rc == ESRCH ? sv_unreachable(qp, w, now) : sv_fail(qp, IBV_WC_REM_OP_ERR);
	memset(&e, 0, sizeof(e));
	e.wr_id = rw.wr_id;
	e.opcode = IBV_WC_RECV;
	e.byte_len = w->length;
	e.imm = imm ? w->imm : 0;
	e.qp_num = qp->peer_qpn;
	e.src_qp = qp->ibv.qp_num;
	e.wc_flags = sv_recv_flags(qp, imm);
	e.slid = qp->sh->lid;
	sv_push_remote(qp, &e);
	return SV_DONE;
}

static enum sv_exec sv_do_rdma(struct sv_qp *qp, struct sv_swqe *w, struct sv_iovs *lio,
			       uint64_t now)
{
	bool rd = w->opcode == IBV_WR_RDMA_READ;
	uint32_t need = rd ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE;
	struct sv_rwqe_sge sg[SV_MAX_IOV];
	const struct sv_shm_mr *m = sv_mr_lookup(w->rkey);
	struct sv_rwqe rw;
	struct sv_iovs r;
	uint64_t va = 0;
	int rc;

	if (rd && !qp->peer->max_dest_rd_atomic)
		return sv_invalid_request(qp);
	if (w->length && (sv_mr_check(m, w->rkey, qp->peer_pid, qp->peer->pd_id,
				      w->remote_addr, w->length, need, &va) ||
			  !(atomic_load_explicit(&qp->peer->access, memory_order_relaxed) & need)))
		return sv_access_error(qp);
	if (w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM && !sv_claim_recv(qp->peer_rq, &rw, sg))
		return sv_rnr(qp, w, now);
	r.n = 0;
	r.any_gpu = false;
	if (w->length)
		sv_iov_add(&r, m, va, w->length);
	rc = w->length ? sv_xfer(qp->peer_pid, !rd, lio, &r) : 0;
	if (rc)
		return rc == ESRCH ? sv_unreachable(qp, w, now) : sv_access_error(qp);
	if (w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
		struct sv_cqe e = {
			.wr_id = rw.wr_id, .opcode = IBV_WC_RECV_RDMA_WITH_IMM,
			.byte_len = w->length, .imm = w->imm, .qp_num = qp->peer_qpn,
			.src_qp = qp->ibv.qp_num, .wc_flags = sv_recv_flags(qp, true),
			.slid = qp->sh->lid,
		};

		sv_push_remote(qp, &e);
	}
	return SV_DONE;
}

/* Latency and bandwidth-cap knobs: when may this WQE execute? */
/* ---- UD: one datagram per WQE to (AH, remote QPN, Q_Key) */

#define SV_GRH_LEN 40	/* the first 40 bytes of every UD receive buffer */

/* Maps the destination's receive queue and CQ (a one-entry cache). */
static bool sv_ud_peer(struct sv_qp *qp, struct sv_shm_qp *d, uint32_t qpn)
{
	if (qp->peer == d && qp->peer_qpn == qpn && qp->peer_pid == d->pid && qp->peer_rq)
		return true;
	sv_peer_unmap(qp);
	if (!sv_peer_map(qp, d))
		return false;
	qp->peer_qpn = qpn;
	qp->peer_pid = d->pid;
	return true;
}

/* The destination QP if the datagram reaches it (else NULL: dropped). */
static struct sv_shm_qp *sv_ud_dest(struct sv_qp *qp, const struct sv_swqe *w)
{
	struct sv_shm_qp *d = &sv_g.fab->qps[w->ud_qpn & (SV_MAX_QP_SLOTS - 1)];
	const struct ibv_ah_attr *ah = &w->ah->attr;
	const struct sv_device *dd;
	uint32_t st, qkey = w->ud_qkey;

	if (atomic_load(&d->qpn) != w->ud_qpn || d->qp_type != IBV_QPT_UD)
		return NULL;
	st = atomic_load(&d->state);
	dd = sv_dev_by_name(d->dev_name);
	if ((st != IBV_QPS_RTR && st != IBV_QPS_RTS) || !dd ||
	    dd->link_layer != qp->ctx->dev->link_layer || !sv_pid_alive(d->pid))
		return NULL;
	if (dd->link_layer == IBV_LINK_LAYER_ETHERNET || ah->is_global) {
		if (sv_gid_lookup(&dd->ports[d->port - 1], &ah->grh.dgid) < 0)
			return NULL;
	}
	if (dd->link_layer == IBV_LINK_LAYER_INFINIBAND && ah->dlid != dd->ports[d->port - 1].lid)
		return NULL;
	if (qkey & 0x80000000u)	/* the high bit: use the QP's own Q_Key */
		qkey = atomic_load(&qp->sh->qkey);
	return qkey == atomic_load(&d->qkey) ? d : NULL;
}

/* The 40 bytes before the payload: an IB GRH (IPv6 header layout), or for a
 * RoCE v2 IPv4-mapped pair 20 zero bytes and an IPv4 header; zeros without
 * a GRH (its contents are undefined then). */
static void sv_ud_grh(const struct sv_qp *qp, const struct ibv_ah_attr *ah, uint32_t len,
		      uint8_t *g)
{
	const struct sv_gid *s = &qp->ctx->dev->ports[qp->sh->port - 1].gids[ah->grh.sgid_index];
	static const uint8_t v4pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	memset(g, 0, SV_GRH_LEN);
	if (!ah->is_global)
		return;
	if (s->type == IBV_GID_TYPE_ROCE_V2 && !memcmp(s->gid.raw, v4pfx, 12) &&
	    !memcmp(ah->grh.dgid.raw, v4pfx, 12)) {
		uint8_t *ip = g + 20;
		uint16_t tot = (uint16_t)(20 + 8 + 12 + 8 + len + 4);	/* UDP BTH DETH ICRC */

		ip[0] = 0x45;
		ip[1] = ah->grh.traffic_class;
		ip[2] = (uint8_t)(tot >> 8);
		ip[3] = (uint8_t)tot;
		ip[8] = ah->grh.hop_limit;
		ip[9] = 17;	/* UDP */
		memcpy(ip + 12, s->gid.raw + 12, 4);
		memcpy(ip + 16, ah->grh.dgid.raw + 12, 4);
		return;
	}
	g[0] = (uint8_t)(0x60 | (ah->grh.traffic_class >> 4));
	g[1] = (uint8_t)((ah->grh.traffic_class << 4) | ((ah->grh.flow_label >> 16) & 0xf));
	g[2] = (uint8_t)(ah->grh.flow_label >> 8);
	g[3] = (uint8_t)ah->grh.flow_label;
	g[4] = (uint8_t)((len + 8) >> 8);	/* payload length: DETH + data */
	g[5] = (uint8_t)(len + 8);
	g[6] = 0x1b;	/* next header: IBA transport */
	g[7] = ah->grh.hop_limit;
	memcpy(g + 8, s->gid.raw, 16);
	memcpy(g + 24, ah->grh.dgid.raw, 16);
}

/* Delivers the datagram, or drops it silently (no such QP, not UD, not
 * RTR/RTS, wrong address, Q_Key mismatch, no receive posted), as the wire
 * does; the send completes successfully either way.  A receive too small
 * for GRH + payload, or with a bad SGE, completes in error at the receiver
 * (LOC_LEN_ERR / LOC_PROT_ERR); a UD QP stays usable. */
static enum sv_exec sv_do_ud(struct sv_qp *qp, struct sv_swqe *w, struct sv_iovs *lio)
{
	struct sv_shm_qp *d = sv_ud_dest(qp, w);
	const struct ibv_ah_attr *ah = &w->ah->attr;
	bool imm = w->opcode == IBV_WR_SEND_WITH_IMM;
	struct sv_rwqe_sge sg[SV_MAX_IOV];
	struct sv_iovs out, rio;
	uint8_t grh[SV_GRH_LEN];
	struct sv_rwqe rw;
	struct sv_cqe e;
	int rc;

	if (!d || !sv_ud_peer(qp, d, w->ud_qpn) || !sv_claim_recv(qp->peer_rq, &rw, sg))
		return SV_DONE;
	memset(&e, 0, sizeof(e));
	e.wr_id = rw.wr_id;
	e.opcode = IBV_WC_RECV;
	e.qp_num = w->ud_qpn;
	e.src_qp = qp->ibv.qp_num;
	rc = lio->n < SV_MAX_IOV ? sv_recv_iovs(qp, &rw, sg, SV_GRH_LEN + w->length, &rio)
				  : EMSGSIZE;
	if (rc) {
		e.status = rc == EACCES ? IBV_WC_LOC_PROT_ERR : IBV_WC_LOC_LEN_ERR;
		e.vendor_err = 0x82;
		sv_push_remote(qp, &e);
		return SV_DONE;
	}
	sv_ud_grh(qp, ah, w->length, grh);
	out.v[0].iov_base = grh;
	out.v[0].iov_len = SV_GRH_LEN;
	out.gpu[0] = 0;
	memcpy(out.v + 1, lio->v, (size_t)lio->n * sizeof(lio->v[0]));
	memcpy(out.gpu + 1, lio->gpu, (size_t)lio->n * sizeof(lio->gpu[0]));
	out.n = lio->n + 1;
	out.any_gpu = lio->any_gpu;
	if (sv_xfer(d->pid, true, &out, &rio))
		return SV_DONE;	/* the receiver vanished: lost */
	sv_cnt_add(d->host, d->dev_idx, d->port, SV_CNT_RCV_PKTS, 1);
	sv_cnt_add(d->host, d->dev_idx, d->port, SV_CNT_RCV_DATA, w->length + sv_pkt_hdr(qp));
	e.byte_len = SV_GRH_LEN + w->length;
	e.imm = imm ? w->imm : 0;
	e.wc_flags = (ah->is_global ? IBV_WC_GRH : 0) | (imm ? IBV_WC_WITH_IMM : 0);
	e.slid = qp->sh->lid;
	e.sl = ah->sl;
	sv_push_remote(qp, &e);
	return SV_DONE;
}

static uint64_t sv_release_time(struct sv_qp *qp, const struct sv_swqe *w, uint64_t now)
{
	struct sv_device *dev = qp->ctx->dev;
	struct sv_dev_knobs *k = dev->knobs;
	uint64_t lat = atomic_load_explicit(&sv_g.fab->knobs.latency_ns, memory_order_relaxed);
	uint64_t bw = 0, t;

	if (k) {
		lat += atomic_load_explicit(&k->latency_ns, memory_order_relaxed);
		bw = atomic_load_explicit(&k->bw_mbps, memory_order_relaxed);
	}
	t = now + lat;
	if (bw) {
		uint32_t p = (qp->sh->port - 1) % SV_MAX_PORTS;
		uint64_t start = dev->bw_busy_until[p] > now ? dev->bw_busy_until[p] : now;
		uint64_t done = start + (uint64_t)w->length * 1000ull / bw;

		dev->bw_busy_until[p] = done;
		if (done > t)
			t = done;
	}
	return t;
}

static bool sv_inject_error(struct sv_qp *qp)
{
	const struct sv_dev_knobs *k = qp->ctx->dev->knobs;
	uint64_t g = atomic_load_explicit(&sv_g.fab->knobs.qp_err_after, memory_order_relaxed);
	uint64_t d = k ? atomic_load_explicit(&k->err_after, memory_order_relaxed) : 0;
	uint32_t n = atomic_load_explicit(&qp->sh->err_after, memory_order_relaxed);

	qp->ops++;
	return (n && qp->ops >= n) || (g && qp->ops > g) || (d && qp->ops > d);
}

/*
 * qp-fail-op countdown: 0 not this op, 1 it fails before it is carried out,
 * 2 it is carried out and then fails as if its ack was lost.
 */
static int sv_fail_op_due(struct sv_qp *qp)
{
	uint32_t v = atomic_load(&qp->sh->fail_in), n;

	do {
		n = v & ~SV_FAIL_ACK;
		if (!n)
			return 0;
	} while (!atomic_compare_exchange_weak(&qp->sh->fail_in, &v,
					       n == 1 ? 0 : (v & SV_FAIL_ACK) | (n - 1)));
	if (n != 1)
		return 0;
	return v & SV_FAIL_ACK ? 2 : 1;
}

/*
 * Loss on the QP's path (loss.c): draws the WQE's recovery when it first
 * executes, then holds it (and the QP's later WQEs) until the recovery's
 * time has passed.  true: wait; false: its time has come (SV_WAIT_LOSS_EXC:
 * its retries ran out, it fails with RETRY_EXC_ERR).
 */
static bool sv_loss_wait(struct sv_qp *qp, struct sv_swqe *w, uint64_t now)
{
	uint64_t delay;
	enum sv_loss_res lr;

	if (w->wait == SV_WAIT_NONE) {
		uint32_t ppb = sv_loss_ppb(qp);

		lr = ppb ? sv_loss_run(qp, w, ppb, &delay) : SV_LOSS_CLEAN;
		if (lr == SV_LOSS_CLEAN)
			return false;
		w->wait = lr == SV_LOSS_EXCEEDED ? SV_WAIT_LOSS_EXC : SV_WAIT_LOSS;
		w->deadline = delay == UINT64_MAX || now + delay < now ? UINT64_MAX : now + delay;
	}
	return now < w->deadline;
}

/* Executes the WQE at sq_exec.  Caller holds qp->lock; QP is RTS. */
static enum sv_exec sv_exec_one(struct sv_qp *qp, uint64_t now)
{
	struct sv_swqe *w = &qp->sq[qp->sq_exec % qp->sq_cap];
	const struct sv_dev_knobs *k = qp->ctx->dev->knobs;
	struct sv_iovs lio;
	enum sv_exec r;
	int ack_lost = 0;

	if (SV_UNLIKELY(!w->not_before))
		w->not_before = sv_release_time(qp, w, now);
	if (SV_UNLIKELY(w->not_before > now))
		return SV_STALL;
	if (SV_UNLIKELY(k && (atomic_load_explicit(&k->port_down, memory_order_relaxed) &
			      (1u << qp->sh->port))) ||
	    SV_UNLIKELY(atomic_load_explicit(&qp->ctx->dev->ports[qp->sh->port - 1].link,
					     memory_order_relaxed) != IBV_PORT_ACTIVE))
		return sv_fail(qp, qp->ctx->dev->link_down_local ? IBV_WC_LOC_QP_OP_ERR
								 : IBV_WC_RETRY_EXC_ERR);
	if (SV_LIKELY(!w->ah) && !sv_peer_ok(qp, now))
		return sv_unreachable(qp, w, now);
	if (sv_local_iovs(qp, w, qp->sq_exec, &lio))
		return sv_fail(qp, IBV_WC_LOC_PROT_ERR);
	if (SV_UNLIKELY(qp->snap != NULL) && !sv_srccheck_exec(qp, qp->sq_exec, &lio))
		return sv_fail(qp, IBV_WC_GENERAL_ERR); /* SIMVERBS_CHECK_SOURCES */
	if (w->wait == SV_WAIT_NONE && SV_UNLIKELY(sv_inject_error(qp)))
		return sv_fail(qp, IBV_WC_RETRY_EXC_ERR);
	if (w->wait == SV_WAIT_NONE && SV_UNLIKELY(atomic_load_explicit(&qp->sh->fail_in,
									memory_order_relaxed)))
		ack_lost = sv_fail_op_due(qp);
	if (ack_lost == 1)
		return sv_fail(qp, IBV_WC_RETRY_EXC_ERR);
	if (SV_UNLIKELY(w->wait >= SV_WAIT_LOSS) || SV_UNLIKELY(w->wait == SV_WAIT_NONE && !w->ah &&
								 sv_loss_ppb(qp))) {
		if (sv_loss_wait(qp, w, now))
			return SV_STALL;
		if (w->wait == SV_WAIT_LOSS_EXC)
			return sv_fail(qp, IBV_WC_RETRY_EXC_ERR);
	}
	if (SV_UNLIKELY(w->ah))
		r = SV_UNLIKELY(sv_loss_ud(qp)) ? SV_DONE : sv_do_ud(qp, w, &lio);
	else if (w->opcode == IBV_WR_SEND || w->opcode == IBV_WR_SEND_WITH_IMM)
		r = sv_do_send(qp, w, &lio, now);
	else if (sv_op_atomic(w->opcode))
		r = sv_do_atomic(qp, w, &lio, now);
	else
		r = sv_do_rdma(qp, w, &lio, now);
	if (r == SV_STALL || atomic_load_explicit(&qp->sh->state, memory_order_relaxed) ==
	    IBV_QPS_ERR)
		return r;
	if (SV_UNLIKELY(ack_lost == 2)) /* it landed; the requester never hears of it */
		return sv_fail(qp, IBV_WC_RETRY_EXC_ERR);
	w->wait = SV_WAIT_NONE;
	if (SV_LIKELY(!w->counted))
		sv_cnt_op(qp, w);
	sv_complete(qp, qp->sq_exec, IBV_WC_SUCCESS, w->length);
	qp->sq_exec++;
	return SV_DONE;
}

/* Runs queued WQEs in order until one must wait.  Caller holds qp->lock. */
void sv_qp_progress(struct sv_qp *qp)
{
	uint64_t now = 0;
	bool stall = false;

	while (qp->sq_exec < qp->sq_post) {
		if (atomic_load_explicit(&qp->sh->state, memory_order_relaxed) == IBV_QPS_ERR) {
			sv_qp_to_error(qp, false);
			break;
		}
		if (!now || qp->sq[qp->sq_exec % qp->sq_cap].wait != SV_WAIT_NONE)
			now = sv_now_ns();
		if (sv_exec_one(qp, now) == SV_STALL) {
			stall = true;
			break;
		}
	}
	if (now)
		sv_cnt_tick(now);
	if (stall != qp->stalled) {
		qp->stalled = stall;
		if (stall)
			atomic_fetch_add(&sv_g.nstalled, 1);
		else
			atomic_fetch_sub(&sv_g.nstalled, 1);
	}
}
