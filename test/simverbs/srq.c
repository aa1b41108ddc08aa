/*
 * Shared receive queues (RC).  An SRQ is a receive queue segment of its own
 * ("sv.<fabric>.s<id>.<pid>", the same struct sv_rq a QP's RQ is): the owner
 * posts into it with ibv_post_srq_recv, and initiators of every QP bound to it
 * claim its entries exactly as they claim a QP's receives (CAS on head), so
 * the data path is unchanged.  The receive SGEs are checked against the
 * SRQ's PD (the QP's shm entry names it as recv_pd_id).
 *
 * Semantics, as rdma-core/rxe/the IB spec:
 *  - ibv_create_srq: max_wr 1..max_srq_wr, max_sge 1..max_srq_sge (EINVAL),
 *    at most max_srq per device and process (ENOMEM); srq_limit is ignored at create.
 *  - ibv_modify_srq: IBV_SRQ_LIMIT arms the limit (<= max_wr, else EINVAL);
 *    IBV_SRQ_MAX_WR is EINVAL (no IBV_DEVICE_SRQ_RESIZE); other bits EINVAL.
 *  - when an initiator's claim leaves fewer than srq_limit WQEs, the limit
 *    disarms (query shows 0) and the owner gets IBV_EVENT_SRQ_LIMIT_REACHED.
 *  - a QP bound to an SRQ has no receive queue of its own: ibv_post_recv on it
 *    is EINVAL, its cap.max_recv_wr/sge read 0; when it enters the error state
 *    its send queue is flushed, the SRQ's WQEs stay for the other QPs, and
 *    IBV_EVENT_QP_LAST_WQE_REACHED is raised for it.
 *  - ibv_destroy_srq is EBUSY while a QP is bound to it, and waits for every
 *    SRQ event handed out to be acknowledged; WQEs still posted are dropped.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sv.h"

static struct sv_srq *sv_srqs;		/* this process's SRQs, under sv_g.lock */

/* Caller holds sv_g.lock. */
struct sv_srq *sv_srq_by_id(uint32_t id)
{
	for (struct sv_srq *s = sv_srqs; s; s = s->next)
		if (s->id == id)
			return s;
	return NULL;
}

static void sv_srq_link(struct sv_srq *s, bool add)
{
	pthread_mutex_lock(&sv_g.lock);
	if (add) {
		s->next = sv_srqs;
		sv_srqs = s;
	} else {
		for (struct sv_srq **p = &sv_srqs; *p; p = &(*p)->next) {
			if (*p == s) {
				*p = s->next;
				break;
			}
		}
	}
	pthread_mutex_unlock(&sv_g.lock);
}

static int sv_srq_check(const struct sv_context *ctx, const struct ibv_srq_attr *a)
{
	const struct sv_limits *l = &ctx->dev->lim;

	if (!a->max_wr || a->max_wr > l->max_srq_wr || !a->max_sge || a->max_sge > l->max_srq_sge)
		return EINVAL;
	return sv_dev_take(ctx->dev, SV_K_SRQ, l->max_srq);	/* every process of the host */
}

static int sv_srq_rq_init(struct sv_srq *s, const struct ibv_srq_attr *a)
{
	uint32_t cap = (uint32_t)sv_pow2(a->max_wr);

	s->rq_bytes = sizeof(struct sv_rq) +
		      (size_t)cap * (sizeof(struct sv_rwqe) + a->max_sge * sizeof(struct sv_rwqe_sge));
	s->rq = sv_seg_create('s', s->id, (uint32_t)sv_g.pid, s->rq_bytes);
	if (!s->rq)
		return errno ? errno : ENOMEM;
	s->rq->cap = cap;
	s->rq->max_wr = a->max_wr;
	s->rq->max_sge = a->max_sge;
	s->rq->stride = (uint32_t)(sizeof(struct sv_rwqe) + a->max_sge * sizeof(struct sv_rwqe_sge));
	s->rq->owner_pid = sv_g.pid;
	s->rq->async_id = s->ctx->chan_id;
	s->rq->srq_id = s->id;
	s->rq->magic = SV_RQ_MAGIC;
	return 0;
}

SV_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr);
struct ibv_srq *ibv_create_srq(struct ibv_pd *ibpd, struct ibv_srq_init_attr *attr)
{
	struct sv_context *ctx = ibpd ? sv_ctx(ibpd->context) : NULL;
	struct sv_srq *s;
	int rc;

	if (!ctx || !attr) {
		errno = EINVAL;
		return NULL;
	}
	rc = sv_srq_check(ctx, &attr->attr);
	if (rc) {
		SV_DBG("create_srq on %s: max_wr %u, max_sge %u: %s", ctx->dev->ibv.name,
		       attr->attr.max_wr, attr->attr.max_sge,
		       rc == ENOMEM ? "max_srq reached" : "outside the device limits");
		errno = rc;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		sv_dev_give(ctx->dev, SV_K_SRQ);
		errno = ENOMEM;
		return NULL;
	}
	s->ctx = ctx;
	s->pd = (struct sv_pd *)ibpd;
	do
		s->id = sv_next_id() & 0x7fffffff;
	while (!s->id);
	rc = sv_srq_rq_init(s, &attr->attr);
	if (rc) {
		free(s);
		sv_dev_give(ctx->dev, SV_K_SRQ);
		errno = rc;
		return NULL;
	}
	pthread_spin_init(&s->lock, PTHREAD_PROCESS_PRIVATE);
	s->ibv.context = ibpd->context;
	s->ibv.srq_context = attr->srq_context;
	s->ibv.pd = ibpd;
	s->ibv.handle = s->id;
	pthread_mutex_init(&s->ibv.mutex, NULL);
	pthread_cond_init(&s->ibv.cond, NULL);
	attr->attr.srq_limit = 0;
	atomic_fetch_add(&s->pd->children, 1);
	sv_srq_link(s, true);
	s->obj.dev = ctx->dev;
	sv_obj_add(&s->obj, SV_K_SRQ);
	return &s->ibv;
}

SV_EXPORT int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask);
int ibv_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask)
{
	struct sv_srq *s = (struct sv_srq *)ibsrq;

	if (!s || !attr || (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)))
		return EINVAL;
	if (mask & IBV_SRQ_MAX_WR)
		return EINVAL;	/* no IBV_DEVICE_SRQ_RESIZE */
	if (mask & IBV_SRQ_LIMIT) {
		if (attr->srq_limit > s->rq->max_wr)
			return EINVAL;
		atomic_store(&s->rq->limit, attr->srq_limit);
	}
	return 0;
}

SV_EXPORT int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr);
int ibv_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct sv_srq *s = (struct sv_srq *)ibsrq;

	if (!s || !attr)
		return EINVAL;
	attr->max_wr = s->rq->max_wr;
	attr->max_sge = s->rq->max_sge;
	attr->srq_limit = atomic_load(&s->rq->limit);
	return 0;
}

SV_EXPORT int ibv_destroy_srq(struct ibv_srq *srq);
int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct sv_srq *s = (struct sv_srq *)ibsrq;

	if (!s)
		return EINVAL;
	if (atomic_load(&s->nqps))
		return EBUSY;
	sv_srq_link(s, false);
	sv_seg_unlink('s', s->id, (uint32_t)sv_g.pid);
	munmap(s->rq, s->rq_bytes);
	atomic_fetch_sub(&s->pd->children, 1);
	sv_events_wait(&s->ibv.mutex, &s->ibv.cond, &s->ibv.events_completed,
		       s->events_reported, NULL, 0);
	sv_obj_del(&s->obj);
	pthread_spin_destroy(&s->lock);
	free(s);
	return 0;
}

int sv_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sv_srq *s = (struct sv_srq *)ibsrq;
	int rc;

	pthread_spin_lock(&s->lock);
	rc = sv_rq_post(s->rq, wr, bad);
	pthread_spin_unlock(&s->lock);
	return rc;
}

/* After an initiator claimed the entry before head h: fires the armed limit
 * once the SRQ holds fewer WQEs than it (the owner's event, limit disarmed). */
void sv_srq_claimed(struct sv_rq *rq, uint64_t h)
{
	uint32_t lim = atomic_load_explicit(&rq->limit, memory_order_relaxed);
	uint64_t left = atomic_load_explicit(&rq->tail, memory_order_acquire) - h;

	if (lim && left < lim && atomic_compare_exchange_strong(&rq->limit, &lim, 0))
		sv_async_post_remote(rq->owner_pid, rq->async_id, IBV_EVENT_SRQ_LIMIT_REACHED,
				     rq->srq_id);
}
