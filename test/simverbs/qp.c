/*
 * RC queue pairs: creation (QPN from the fabric), the IB state machine with
 * the attribute masks the spec requires per transition, RTR/RTS value checks,
 * peer resolution, query and destroy.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sv.h"


struct sv_trans {
	uint32_t req, opt;
};

#define SV_M(x) IBV_QP_##x
/* RC transitions [cur][next]; STATE is implied. */
static const struct sv_trans sv_rc_trans[IBV_QPS_ERR + 1][IBV_QPS_ERR + 1] = {
	[IBV_QPS_RESET] = {
		[IBV_QPS_RESET] = { 0, 0 },
		[IBV_QPS_INIT] = { SV_M(PKEY_INDEX) | SV_M(PORT) | SV_M(ACCESS_FLAGS), 0 },
	},
	[IBV_QPS_INIT] = {
		[IBV_QPS_INIT] = { 0, SV_M(PKEY_INDEX) | SV_M(PORT) | SV_M(ACCESS_FLAGS) },
		[IBV_QPS_RTR] = { SV_M(AV) | SV_M(PATH_MTU) | SV_M(DEST_QPN) | SV_M(RQ_PSN) |
				  SV_M(MAX_DEST_RD_ATOMIC) | SV_M(MIN_RNR_TIMER),
				  SV_M(ALT_PATH) | SV_M(ACCESS_FLAGS) | SV_M(PKEY_INDEX) },
	},
	[IBV_QPS_RTR] = {
		[IBV_QPS_RTS] = { SV_M(TIMEOUT) | SV_M(RETRY_CNT) | SV_M(RNR_RETRY) |
				  SV_M(SQ_PSN) | SV_M(MAX_QP_RD_ATOMIC),
				  SV_M(CUR_STATE) | SV_M(ALT_PATH) | SV_M(ACCESS_FLAGS) |
				  SV_M(MIN_RNR_TIMER) | SV_M(PATH_MIG_STATE) },
	},
	[IBV_QPS_RTS] = {
		[IBV_QPS_RTS] = { 0, SV_M(CUR_STATE) | SV_M(ACCESS_FLAGS) | SV_M(ALT_PATH) |
				     SV_M(PATH_MIG_STATE) | SV_M(MIN_RNR_TIMER) },
	},
	[IBV_QPS_SQE] = {
		[IBV_QPS_RTS] = { 0, SV_M(CUR_STATE) | SV_M(ACCESS_FLAGS) },
	},
};

/* UD transitions (IB spec 11.2.4.2 table 91 for UD): Q_Key instead of
 * access flags, nothing to resolve at RTR, SQ_PSN at RTS. */
static const struct sv_trans sv_ud_trans[IBV_QPS_ERR + 1][IBV_QPS_ERR + 1] = {
	[IBV_QPS_RESET] = {
		[IBV_QPS_RESET] = { 0, 0 },
		[IBV_QPS_INIT] = { SV_M(PKEY_INDEX) | SV_M(PORT) | SV_M(QKEY), 0 },
	},
	[IBV_QPS_INIT] = {
		[IBV_QPS_INIT] = { 0, SV_M(PKEY_INDEX) | SV_M(PORT) | SV_M(QKEY) },
		[IBV_QPS_RTR] = { 0, SV_M(PKEY_INDEX) | SV_M(QKEY) },
	},
	[IBV_QPS_RTR] = {
		[IBV_QPS_RTS] = { SV_M(SQ_PSN), SV_M(CUR_STATE) | SV_M(QKEY) },
	},
	[IBV_QPS_RTS] = {
		[IBV_QPS_RTS] = { 0, SV_M(CUR_STATE) | SV_M(QKEY) },
	},
	[IBV_QPS_SQE] = {
		[IBV_QPS_RTS] = { 0, SV_M(CUR_STATE) | SV_M(QKEY) },
	},
};

static bool sv_trans_ok(uint32_t type, uint32_t cur, uint32_t next, uint32_t mask)
{
	const struct sv_trans *t;
	uint32_t extra = mask & ~(uint32_t)IBV_QP_STATE;

	if (cur > IBV_QPS_ERR || next > IBV_QPS_ERR)
		return false;
	if (next == IBV_QPS_RESET || next == IBV_QPS_ERR)
		return !(extra & ~(uint32_t)IBV_QP_CUR_STATE);
	t = type == IBV_QPT_UD ? &sv_ud_trans[cur][next] : &sv_rc_trans[cur][next];
	if (!t->req && !t->opt && !(cur == IBV_QPS_RESET && next == IBV_QPS_RESET))
		return false;
	if ((extra & t->req) != t->req)
		return false;
	return !(extra & ~(t->req | t->opt));
}

static int sv_qp_slot_alloc(struct sv_qp *qp, const struct sv_context *ctx)
{
	struct sv_fabric *f = sv_g.fab;
	int rc = ENOMEM;

	if (sv_lock())
		return EIO;
	for (uint32_t n = 0; n < SV_MAX_QP_SLOTS; n++) {
		uint32_t slot = (f->qp_hint + n) % SV_MAX_QP_SLOTS;
		struct sv_shm_qp *q = &f->qps[slot];
		uint32_t gen = (sv_next_id() % SV_QP_GEN_MAX) + 1, qpn = gen << SV_QP_SLOT_BITS | slot;

		if (atomic_load(&q->qpn) || qpn <= 1)
			continue;
		memset((char *)q + sizeof(q->qpn), 0, sizeof(*q) - sizeof(q->qpn));
		q->pid = sv_g.pid;
		atomic_store(&q->state, IBV_QPS_RESET);
		q->dev_idx = ctx->dev->idx;
		q->host = sv_g.host;
		q->port = 1;
		q->pd_id = qp->pd->id;
		q->recv_cq_slot = qp->rcq->slot;
		q->recv_cq_gen = qp->rcq->gen;
		q->rq_kind = qp->srq ? 's' : 'r';
		q->rq_slot = qp->srq ? qp->srq->id : slot;
		q->rq_gen = qp->srq ? (uint32_t)sv_g.pid : qpn;
		q->rq_bytes = (uint32_t)(qp->srq ? qp->srq->rq_bytes : qp->rq_bytes);
		q->recv_pd_id = qp->srq ? qp->srq->pd->id : qp->pd->id;
		q->qp_type = qp->ibv.qp_type;
		q->async_id = ctx->chan_id;
		memcpy(q->dev_name, ctx->dev->ibv.name, sizeof(q->dev_name));
		atomic_store(&q->qpn, qpn);
		f->qp_hint = slot + 1;
		qp->slot = slot;
		qp->sh = q;
		qp->ibv.qp_num = qpn;
		rc = 0;
		break;
	}
	sv_unlock();
	return rc;
}

static int sv_qp_check_cap(const struct sv_context *ctx, const struct ibv_qp_init_attr *a)
{
	const struct sv_limits *l = &ctx->dev->lim;

	if ((a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UD) ||
	    (a->qp_type == IBV_QPT_UD && a->srq))
		return EOPNOTSUPP;
	if (!a->send_cq || !a->recv_cq || (a->srq && a->srq->context != a->send_cq->context))
		return EINVAL;
	/* with an SRQ the receive capabilities are ignored */
	if (a->cap.max_send_wr > l->max_qp_wr || a->cap.max_send_sge > l->max_sge ||
	    a->cap.max_inline_data > l->max_inline_data ||
	    (!a->srq && (a->cap.max_recv_wr > l->max_qp_wr || a->cap.max_recv_sge > l->max_sge)))
		return EINVAL;
	return 0;
}

static int sv_qp_alloc_queues(struct sv_qp *qp, const struct ibv_qp_cap *cap)
{
	uint32_t ssge = cap->max_send_sge ? cap->max_send_sge : 1;
	uint32_t rsge = cap->max_recv_sge ? cap->max_recv_sge : 1;
	uint32_t rcap = (uint32_t)sv_pow2(cap->max_recv_wr ? cap->max_recv_wr : 1);

	qp->cap = *cap;
	qp->sq_cap = cap->max_send_wr ? cap->max_send_wr : 1;
	qp->sq = calloc(qp->sq_cap, sizeof(*qp->sq));
	qp->sq_sge = calloc((size_t)qp->sq_cap * ssge, sizeof(*qp->sq_sge));
	qp->sq_inline = calloc(qp->sq_cap, (size_t)cap->max_inline_data + 1);
	if (!qp->sq || !qp->sq_sge || !qp->sq_inline)
		return ENOMEM;
	if (SV_UNLIKELY(sv_check_sources) && sv_srccheck_alloc(qp))
		return ENOMEM;
	qp->rq_bytes = sizeof(struct sv_rq) +
		       (size_t)rcap * (sizeof(struct sv_rwqe) + rsge * sizeof(struct sv_rwqe_sge));
	return 0;
}

static int sv_qp_rq_init(struct sv_qp *qp)
{
	uint32_t rsge = qp->cap.max_recv_sge ? qp->cap.max_recv_sge : 1;
	struct sv_rq *rq;

	if (qp->srq) {
		qp->rq = qp->srq->rq;
		return 0;
	}
	rq = sv_seg_create('r', qp->slot, qp->ibv.qp_num, qp->rq_bytes);
	if (!rq)
		return errno ? errno : ENOMEM;
	rq->cap = (uint32_t)sv_pow2(qp->cap.max_recv_wr ? qp->cap.max_recv_wr : 1);
	rq->max_wr = qp->cap.max_recv_wr;
	rq->max_sge = rsge;
	rq->stride = (uint32_t)(sizeof(struct sv_rwqe) + rsge * sizeof(struct sv_rwqe_sge));
	rq->magic = SV_RQ_MAGIC;
	qp->rq = rq;
	return 0;
}

static void sv_qp_free_local(struct sv_qp *qp)
{
	sv_qpx_free(qp);
	free(qp->sq);
	free(qp->sq_sge);
	free(qp->sq_inline);
	sv_srccheck_free(qp);
	free(qp);
}

static void sv_qp_slot_free(struct sv_qp *qp)
{
	if (sv_lock())
		return;
	atomic_store(&qp->sh->state, IBV_QPS_ERR);
	if (!qp->srq)
		sv_seg_unlink('r', qp->slot, qp->ibv.qp_num);
	atomic_store(&qp->sh->qpn, 0);
	sv_unlock();
}

static void sv_qp_link(struct sv_qp *qp)
{
	pthread_mutex_lock(&sv_g.lock);
	sv_g.qp_by_slot[qp->slot] = qp;
	sv_g.lqp[sv_g.nlqp++] = qp;
	pthread_mutex_unlock(&sv_g.lock);
}

static void sv_qp_unlink(struct sv_qp *qp)
{
	pthread_mutex_lock(&sv_g.lock);
	sv_g.qp_by_slot[qp->slot] = NULL;
	for (uint32_t i = 0; i < sv_g.nlqp; i++) {
		if (sv_g.lqp[i] == qp) {
			sv_g.lqp[i] = sv_g.lqp[--sv_g.nlqp];
			break;
		}
	}
	pthread_mutex_unlock(&sv_g.lock);
}

SV_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
struct ibv_qp *ibv_create_qp(struct ibv_pd *ibpd, struct ibv_qp_init_attr *attr)
{
	struct sv_context *ctx = ibpd ? sv_ctx(ibpd->context) : NULL;
	struct sv_qp *qp;
	int rc;

	if (!ctx || !attr) {
		errno = EINVAL;
		return NULL;
	}
	rc = sv_qp_check_cap(ctx, attr);
	if (!rc)	/* every process of the host on this device (sv_dev_take) */
		rc = sv_dev_take(ctx->dev, SV_K_QP, ctx->dev->lim.max_qp);
	if (rc) {
		SV_DBG("create_qp on %s: type %d, wr %u/%u, sge %u/%u, inline %u: %s",
		       ctx->dev->ibv.name, attr->qp_type, attr->cap.max_send_wr,
		       attr->cap.max_recv_wr, attr->cap.max_send_sge, attr->cap.max_recv_sge,
		       attr->cap.max_inline_data, rc == ENOMEM ? "max_qp reached" :
		       "unsupported type or over the device limits");
		errno = rc;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		sv_dev_give(ctx->dev, SV_K_QP);
		errno = ENOMEM;
		return NULL;
	}
	qp->ctx = ctx;
	qp->pd = (struct sv_pd *)ibpd;
	qp->scq = (struct sv_cq *)attr->send_cq;
	qp->rcq = (struct sv_cq *)attr->recv_cq;
	qp->sq_sig_all = attr->sq_sig_all;
	qp->srq = (struct sv_srq *)attr->srq;
	qp->ibv.qp_type = attr->qp_type;
	qp->peer_chan_fd = -1;
	pthread_spin_init(&qp->lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp->rlock, PTHREAD_PROCESS_PRIVATE);
	if (qp->srq) {
		attr->cap.max_recv_wr = 0;
		attr->cap.max_recv_sge = 0;
	}
	rc = sv_qp_alloc_queues(qp, &attr->cap);
	if (rc)
		goto err_free;
	rc = sv_qp_slot_alloc(qp, ctx);
	if (rc)
		goto err_free;
	rc = sv_qp_rq_init(qp);
	if (rc)
		goto err_slot;
	qp->ibv.context = ibpd->context;
	qp->ibv.qp_context = attr->qp_context;
	qp->ibv.pd = ibpd;
	qp->ibv.send_cq = attr->send_cq;
	qp->ibv.recv_cq = attr->recv_cq;
	qp->ibv.srq = attr->srq;
	qp->ibv.handle = qp->slot;
	qp->ibv.state = IBV_QPS_RESET;
	pthread_mutex_init(&qp->ibv.mutex, NULL);
	pthread_cond_init(&qp->ibv.cond, NULL);
	atomic_fetch_add(&qp->pd->children, 1);
	atomic_fetch_add(&qp->scq->nqps, 1);
	atomic_fetch_add(&qp->rcq->nqps, 1);
	if (qp->srq)
		atomic_fetch_add(&qp->srq->nqps, 1);
	sv_qp_link(qp);
	qp->obj.dev = ctx->dev;
	sv_obj_add(&qp->obj, SV_K_QP);
	return &qp->ibv;
err_slot:
	sv_qp_slot_free(qp);
err_free:
	sv_qp_free_local(qp);
	sv_dev_give(ctx->dev, SV_K_QP);
	errno = rc;
	return NULL;
}

void sv_peer_unmap(struct sv_qp *qp)
{
	if (qp->peer_rq)
		munmap(qp->peer_rq, qp->peer_rq_bytes);
	if (qp->peer_cq)
		munmap(qp->peer_cq, qp->peer_cq_bytes);
	if (qp->peer_chan_fd >= 0)
		close(qp->peer_chan_fd);
	qp->peer_rq = NULL;
	qp->peer_cq = NULL;
	qp->peer = NULL;
	qp->peer_port = NULL;
	qp->peer_chan_fd = -1;
}

bool sv_peer_map(struct sv_qp *qp, struct sv_shm_qp *d)
{
	qp->peer_rq = sv_seg_map((char)d->rq_kind, d->rq_slot, d->rq_gen, d->rq_bytes);
	qp->peer_rq_bytes = d->rq_bytes;
	qp->peer_cq_bytes = sv_g.fab->cqs[d->recv_cq_slot].ring_bytes;
	qp->peer_cq = sv_seg_map('c', d->recv_cq_slot, d->recv_cq_gen, qp->peer_cq_bytes);
	if (!qp->peer_rq || !qp->peer_cq) {
		sv_peer_unmap(qp);
		return false;
	}
	qp->peer = d;
	return true;
}

/* Locally the address vector must be valid (MTU, port, GRH with a valid
 * SGID on Ethernet: EINVAL otherwise, as the kernel checks).  Where it leads
 * is resolved as the fabric would (route.c); an address that leads nowhere
 * leaves the QP without a peer, and its requests fail with RETRY_EXC_ERR. */
static int sv_to_rtr(struct sv_qp *qp, const struct ibv_qp_attr *a)
{
	const struct sv_device *dev = qp->ctx->dev;
	const struct sv_port *pt = &dev->ports[qp->sh->port - 1];
	struct sv_shm_port *dport;
	struct sv_shm_qp *d;
	char why[256] = "";
	bool sgid_ok;
	uint32_t mtu;

	pthread_mutex_lock(&sv_g.port_lock);
	mtu = pt->mtu;
	sgid_ok = a->ah_attr.grh.sgid_index < SV_GID_TBL_LEN &&
		  pt->gids[a->ah_attr.grh.sgid_index].valid;
	pthread_mutex_unlock(&sv_g.port_lock);
	if (a->path_mtu < IBV_MTU_256 || a->path_mtu > mtu)
		return EINVAL;
	if (a->ah_attr.port_num && a->ah_attr.port_num != qp->sh->port)
		return EINVAL;
	if (a->max_dest_rd_atomic > dev->lim.max_qp_rd_atom)
		return EINVAL;
	if (dev->link_layer == IBV_LINK_LAYER_ETHERNET && (!a->ah_attr.is_global || !sgid_ok))
		return EINVAL;
	if (a->ah_attr.is_global && !sgid_ok)
		return EINVAL;
	sv_peer_unmap(qp);
	qp->peer_port = NULL;
	qp->addr_ok = false;
	qp->sh->dest_qpn = a->dest_qp_num;
	qp->peer_qpn = a->dest_qp_num;
	qp->dgid = a->ah_attr.grh.dgid;
	qp->dgid_valid = a->ah_attr.is_global;
	d = sv_resolve_dest(qp, a, &dport, why, sizeof(why));
	if (!d) {
		SV_DBG("modify_qp 0x%x -> RTR on %s: dest QPN 0x%x dlid 0x%x: %s; its requests "
		       "will time out (RETRY_EXC_ERR)", qp->ibv.qp_num, dev->ibv.name,
		       a->dest_qp_num, a->ah_attr.dlid, why);
		return 0;
	}
	if (!sv_peer_map(qp, d))
		return 0;	/* gone meanwhile: unreachable */
	qp->peer_port = dport;
	qp->peer_knobs = NULL;
	qp->peer_knobs_epoch = atomic_load(&sv_g.fab->epoch) - 1;
	qp->addr_ok = true;
	qp->peer_pid = d->pid;
	qp->peer_dead = false;
	qp->peer_checked = sv_now_ns();
	return 0;
}

static int sv_check_values(struct sv_qp *qp, const struct ibv_qp_attr *a, int mask)
{
	const struct sv_device *dev = qp->ctx->dev;

	if ((mask & IBV_QP_PORT) && (a->port_num < 1 || a->port_num > dev->nports))
		return EINVAL;
	if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index >= dev->lim.max_pkeys)
		return EINVAL;
	if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31)
		return EINVAL;
	if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7)
		return EINVAL;
	if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7)
		return EINVAL;
	if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
		return EINVAL;
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > dev->lim.max_qp_rd_atom)
		return EINVAL;
	if ((mask & IBV_QP_ACCESS_FLAGS) &&
	    (a->qp_access_flags & ~(unsigned int)(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
						  IBV_ACCESS_REMOTE_READ |
						  IBV_ACCESS_REMOTE_ATOMIC)))
		return EINVAL;
	return 0;
}

static void sv_apply_attrs(struct sv_qp *qp, const struct ibv_qp_attr *a, int mask)
{
	struct ibv_qp_attr *s = &qp->attr;

	if (mask & IBV_QP_PORT) {
		s->port_num = a->port_num;
		qp->sh->port = a->port_num;
		qp->sh->lid = qp->ctx->dev->ports[a->port_num - 1].lid;
	}
	if (mask & IBV_QP_PKEY_INDEX)
		s->pkey_index = a->pkey_index;
	if (mask & IBV_QP_QKEY) {
		s->qkey = a->qkey;
		atomic_store(&qp->sh->qkey, a->qkey);
	}
	if (mask & IBV_QP_ACCESS_FLAGS) {
		s->qp_access_flags = a->qp_access_flags;
		atomic_store(&qp->sh->access, a->qp_access_flags);
	}
	if (mask & IBV_QP_AV)
		s->ah_attr = a->ah_attr;
	if (mask & IBV_QP_PATH_MTU)
		s->path_mtu = a->path_mtu;
	if (mask & IBV_QP_DEST_QPN)
		s->dest_qp_num = a->dest_qp_num;
	if (mask & IBV_QP_RQ_PSN)
		s->rq_psn = a->rq_psn;
	if (mask & IBV_QP_SQ_PSN)
		s->sq_psn = a->sq_psn;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) {
		s->max_dest_rd_atomic = a->max_dest_rd_atomic;
		qp->sh->max_dest_rd_atomic = a->max_dest_rd_atomic;
	}
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		s->max_rd_atomic = a->max_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER) {
		s->min_rnr_timer = a->min_rnr_timer;
		qp->sh->min_rnr_timer = a->min_rnr_timer;
	}
	if (mask & IBV_QP_TIMEOUT)
		s->timeout = a->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		s->retry_cnt = a->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		s->rnr_retry = a->rnr_retry;
	if (mask & IBV_QP_ALT_PATH)
		s->alt_ah_attr = a->alt_ah_attr;
	if (mask & IBV_QP_PATH_MIG_STATE)
		s->path_mig_state = a->path_mig_state;
}

static void sv_qp_reset(struct sv_qp *qp)
{
	qp->sq_post = qp->sq_exec = 0;
	atomic_store(&qp->sq_free, 0);
	if (!qp->srq)	/* an SRQ's WQEs belong to all its QPs */
		atomic_store(&qp->rq->head, atomic_load(&qp->rq->tail));
	if (qp->stalled) {
		qp->stalled = false;
		atomic_fetch_sub(&sv_g.nstalled, 1);
	}
	sv_peer_unmap(qp);
	qp->flushed = false;
	qp->ops = 0;
}

static void sv_set_state(struct sv_qp *qp, uint32_t st)
{
	atomic_store(&qp->sh->state, st);
	qp->ibv.state = (enum ibv_qp_state)st;
}

static int sv_modify_locked(struct sv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	uint32_t cur = atomic_load(&qp->sh->state);
	uint32_t next = (mask & IBV_QP_STATE) ? a->qp_state : cur;
	int rc;

	if ((mask & IBV_QP_CUR_STATE) && a->cur_qp_state != cur) {
		SV_DBG("modify_qp 0x%x: cur_qp_state %d but QP is in %u", qp->ibv.qp_num,
		       a->cur_qp_state, cur);
		return EINVAL;
	}
	if (!sv_trans_ok(qp->ibv.qp_type, cur, next, (uint32_t)mask)) {
		SV_DBG("modify_qp 0x%x: %u -> %u with attr_mask 0x%x: not a valid transition "
		       "or required/forbidden attributes", qp->ibv.qp_num, cur, next, mask);
		return EINVAL;
	}
	rc = sv_check_values(qp, a, mask);
	if (rc) {
		SV_DBG("modify_qp 0x%x: an attribute value is out of range", qp->ibv.qp_num);
		return rc;
	}
	if (next == IBV_QPS_ERR) {
		sv_qp_to_error(qp, false);
		return 0;
	}
	if (next == IBV_QPS_RESET) {
		sv_set_state(qp, IBV_QPS_RESET);
		sv_qp_reset(qp);
		qp->ece_set = false;
		return 0;
	}
	if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR && qp->ibv.qp_type == IBV_QPT_RC) {
		struct sv_device *dev = qp->ctx->dev;

		if (dev->rtr_timeouts) { /* knob: address resolution times out */
			dev->rtr_timeouts--;
			SV_DBG("modify_qp 0x%x -> RTR: ETIMEDOUT (rtr_timeouts knob, %u left)",
			       qp->ibv.qp_num, dev->rtr_timeouts);
			return ETIMEDOUT;
		}
		rc = sv_to_rtr(qp, a);
		if (rc) {
			SV_DBG("modify_qp 0x%x -> RTR: path_mtu %d (port %u), GRH %d sgid_index %u, "
			       "dest QPN 0x%x dlid %u: rejected (MTU, port, or GRH/SGID "
			       "index)", qp->ibv.qp_num, a->path_mtu,
			       qp->ctx->dev->ports[qp->sh->port - 1].mtu, a->ah_attr.is_global,
			       a->ah_attr.grh.sgid_index, a->dest_qp_num, a->ah_attr.dlid);
			return rc;
		}
	}
	if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR)
		sv_qp_ece_rtr(qp);
	sv_apply_attrs(qp, a, mask);
	sv_set_state(qp, next);
	return 0;
}

SV_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int attr_mask)
{
	struct sv_qp *qp = (struct sv_qp *)ibqp;
	int rc;

	if (!qp || !attr)
		return EINVAL;
	pthread_spin_lock(&qp->lock);
	rc = sv_modify_locked(qp, attr, attr_mask);
	pthread_spin_unlock(&qp->lock);
	return rc;
}

SV_EXPORT int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
			   struct ibv_qp_init_attr *init_attr);
int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int attr_mask,
		 struct ibv_qp_init_attr *init)
{
	struct sv_qp *qp = (struct sv_qp *)ibqp;

	(void)attr_mask;
	if (!qp || !attr || !init)
		return EINVAL;
	*attr = qp->attr;
	attr->qp_state = (enum ibv_qp_state)atomic_load(&qp->sh->state);
	attr->cur_qp_state = attr->qp_state;
	attr->cap = qp->cap;
	memset(init, 0, sizeof(*init));
	init->qp_context = ibqp->qp_context;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	init->cap = qp->cap;
	init->qp_type = ibqp->qp_type;
	init->sq_sig_all = qp->sq_sig_all;
	return 0;
}

SV_EXPORT int ibv_destroy_qp(struct ibv_qp *qp);
int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct sv_qp *qp = (struct sv_qp *)ibqp;

	if (!qp)
		return EINVAL;
	pthread_spin_lock(&qp->lock);
	if (qp->stalled) {
		qp->stalled = false;
		atomic_fetch_sub(&sv_g.nstalled, 1);
	}
	pthread_spin_unlock(&qp->lock);
	sv_qp_unlink(qp);
	sv_qp_slot_free(qp);
	if (!qp->srq)
		munmap(qp->rq, qp->rq_bytes);
	sv_peer_unmap(qp);
	atomic_fetch_sub(&qp->pd->children, 1);
	if (qp->srq)
		atomic_fetch_sub(&qp->srq->nqps, 1);
	atomic_fetch_sub(&qp->scq->nqps, 1);
	atomic_fetch_sub(&qp->rcq->nqps, 1);
	/* unlinked: events_reported is final; the memory stays valid until
	 * every event handed out for the QP has been acknowledged */
	sv_events_wait(&qp->ibv.mutex, &qp->ibv.cond, &qp->ibv.events_completed,
		       qp->events_reported, NULL, 0);
	sv_obj_del(&qp->obj);
	sv_qp_free_local(qp);
	return 0;
}

/* Moves the QP to ERR and flushes both queues.  Caller holds qp->lock. */
void sv_qp_to_error(struct sv_qp *qp, bool async)
{
	bool was = atomic_load(&qp->sh->state) == IBV_QPS_ERR && qp->flushed;

	sv_set_state(qp, IBV_QPS_ERR);
	if (was)
		return;
	qp->flushed = true;
	sv_flush_sq(qp);
	if (!qp->srq)
		sv_flush_rq(qp->rq, qp->rcq->ring, qp->ibv.qp_num, &qp->rcq->chan_fd_w);
	if (async)
		sv_async_post(qp->ctx, IBV_EVENT_QP_FATAL, qp->ibv.qp_num);
	if (qp->srq)	/* the SRQ keeps its WQEs; this QP takes no more of them */
		sv_async_post(qp->ctx, IBV_EVENT_QP_LAST_WQE_REACHED, qp->ibv.qp_num);
}

/* Re-reads what other processes or the control plane changed. */
void sv_qp_sync(struct sv_qp *qp)
{
	const struct sv_device *dev = qp->ctx->dev;
	uint32_t st = atomic_load(&qp->sh->state);
	bool port_down = sv_port_state(dev, qp->sh->port) != IBV_PORT_ACTIVE;

	if (st == IBV_QPS_ERR) {
		if (!qp->flushed)
			sv_qp_to_error(qp, true);
		return;
	}
	if (st == IBV_QPS_RESET || st == IBV_QPS_INIT)
		return;
	if ((port_down && !dev->link_down_local) || atomic_load(&qp->scq->ring->overrun) ||
	    atomic_load(&qp->rcq->ring->overrun))
		sv_qp_to_error(qp, true);
	else if (qp->stalled)
		sv_qp_progress(qp);
}
