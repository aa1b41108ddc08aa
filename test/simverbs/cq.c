/*
 * Completion queues and completion channels.  A CQ is a ring in its own shm
 * segment: producers in any process push (see sv.h for the protocol), the
 * owner polls without syscalls.  A completion channel is a FIFO; a producer
 * that finds the CQ armed writes the CQ's slot number into it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sched.h>
#include <unistd.h>

#include "sv.h"

#define SV_CQ_MAGIC 0x53564351u

SV_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ibctx);
struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ibctx)
{
	struct sv_chan *ch = calloc(1, sizeof(*ch));

	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	ch->ibv.context = ibctx;
	ch->ibv.fd = sv_fifo_create(ch->fifo, sizeof(ch->fifo), "chan", &ch->id);
	if (ch->ibv.fd < 0) {
		int e = errno;

		free(ch);
		errno = e;
		return NULL;
	}
	sv_obj_add(&ch->obj, SV_K_CHAN);
	return &ch->ibv;
}

SV_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel);
int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct sv_chan *ch = (struct sv_chan *)channel;

	if (channel->refcnt)
		return EBUSY;
	close(channel->fd);
	unlink(ch->fifo);
	sv_obj_del(&ch->obj);
	free(ch);
	return 0;
}

static int sv_cq_slot_alloc(struct sv_cq *cq)
{
	struct sv_fabric *f = sv_g.fab;
	int rc = ENOMEM;

	if (sv_lock())
		return EIO;
	for (uint32_t n = 0; n < SV_MAX_CQ_SLOTS; n++) {
		uint32_t slot = ((sv_g.cq_lowest_slot ? 0 : f->cq_hint) + n) % SV_MAX_CQ_SLOTS;
		struct sv_shm_cq *c = &f->cqs[slot];

		if (atomic_load(&c->pid))
			continue;
		c->gen++;
		c->ring_bytes = (uint32_t)cq->ring_bytes;
		atomic_store(&c->pid, sv_g.pid);
		f->cq_hint = slot + 1;
		cq->slot = slot;
		cq->gen = c->gen;
		rc = 0;
		break;
	}
	sv_unlock();
	return rc;
}

static void sv_cq_slot_free(struct sv_cq *cq)
{
	if (sv_lock())
		return;
	sv_seg_unlink('c', cq->slot, cq->gen);
	atomic_store(&sv_g.fab->cqs[cq->slot].pid, 0);
	sv_unlock();
}

static int sv_cq_ring_init(struct sv_cq *cq, struct sv_context *ctx, uint32_t cqe)
{
	struct sv_cq_ring *r;

	r = sv_seg_create('c', cq->slot, cq->gen, cq->ring_bytes);
	if (!r)
		return errno ? errno : ENOMEM;
	r->cap = (uint32_t)sv_pow2(cqe);
	r->cqe = cqe;
	r->owner_pid = sv_g.pid;
	r->ev_id = SV_CQ_EV_ID(cq->slot, cq->gen);
	r->async_id = ctx->chan_id;
	r->chan_id = cq->ibv.channel ? ((struct sv_chan *)cq->ibv.channel)->id : 0;
	r->magic = SV_CQ_MAGIC;
	cq->ring = r;
	return 0;
}

SV_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *ibctx, int cqe, void *cq_context,
				       struct ibv_comp_channel *channel, int comp_vector);
struct ibv_cq *ibv_create_cq(struct ibv_context *ibctx, int cqe, void *cq_context,
			     struct ibv_comp_channel *channel, int comp_vector)
{
	struct sv_context *ctx = ibctx ? sv_ctx(ibctx) : NULL;
	struct sv_cq *cq;
	int rc;

	if (!ctx || cqe < 1 || (uint32_t)cqe > ctx->dev->lim.max_cqe || comp_vector < 0 ||
	    comp_vector >= ibctx->num_comp_vectors) {
		errno = EINVAL;
		return NULL;
	}
	rc = sv_dev_take(ctx->dev, SV_K_CQ, ctx->dev->lim.max_cq);
	if (rc) {
		errno = rc;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		sv_dev_give(ctx->dev, SV_K_CQ);
		errno = ENOMEM;
		return NULL;
	}
	cq->ibv.context = ibctx;
	cq->ibv.channel = channel;
	cq->ibv.cq_context = cq_context;
	cq->ibv.cqe = cqe;
	cq->chan_fd_w = -1;
	cq->ring_bytes = sizeof(struct sv_cq_ring) + sv_pow2((uint64_t)cqe) * sizeof(struct sv_cqe);
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	pthread_mutex_init(&cq->ibv.mutex, NULL);
	pthread_cond_init(&cq->ibv.cond, NULL);
	rc = sv_cq_slot_alloc(cq);
	if (rc)
		goto err_free;
	rc = sv_cq_ring_init(cq, ctx, (uint32_t)cqe);
	if (rc)
		goto err_slot;
	cq->ibv.handle = cq->slot;
	if (channel)
		channel->refcnt++;
	pthread_mutex_lock(&sv_g.lock);
	sv_g.cq_by_slot[cq->slot] = cq;
	pthread_mutex_unlock(&sv_g.lock);
	cq->obj.dev = ctx->dev;
	sv_obj_add(&cq->obj, SV_K_CQ);
	return &cq->ibv;
err_slot:
	sv_cq_slot_free(cq);
err_free:
	free(cq);
	sv_dev_give(ctx->dev, SV_K_CQ);
	errno = rc;
	return NULL;
}

SV_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq);
int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct sv_cq *cq = (struct sv_cq *)ibcq;

	if (!cq)
		return EINVAL;
	if (atomic_load(&cq->nqps))
		return EBUSY;
	pthread_mutex_lock(&sv_g.lock);
	sv_g.cq_by_slot[cq->slot] = NULL;	/* no more events resolve to it */
	pthread_mutex_unlock(&sv_g.lock);
	sv_cq_slot_free(cq);
	munmap(cq->ring, cq->ring_bytes);
	if (cq->chan_fd_w >= 0)
		close(cq->chan_fd_w);
	if (ibcq->channel)
		ibcq->channel->refcnt--;
	/* as rdma-core: wait until every completion and async event handed
	 * out for this CQ has been acknowledged */
	sv_events_wait(&ibcq->mutex, &ibcq->cond, &ibcq->comp_events_completed,
		       cq->comp_events_reported, &ibcq->async_events_completed,
		       cq->async_events_reported);
	sv_obj_del(&cq->obj);
	free(cq);
	return 0;
}

SV_EXPORT int ibv_resize_cq(struct ibv_cq *cq, int cqe);
int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	(void)cq; (void)cqe;
	return EOPNOTSUPP;
}

/* Says once, on stderr, what fills an overrun CQ: the unpolled entries
 * grouped by QP, opcode and status (with the first and last wr_id of each
 * group), and whether the oldest one is published (a stalled producer would
 * block the consumer).  The consumer may run meanwhile: a snapshot. */
static void sv_cq_overrun_report(const struct sv_cq_ring *r, uint64_t h, uint64_t t)
{
	struct { uint32_t qp, op, st, n; uint64_t first, last; } g[8];
	const struct sv_cqe *he = &r->ents[h & (r->cap - 1)];
	char buf[400];
	size_t off = 0;
	int ng = 0, other = 0;

	for (uint64_t i = h; i < t && i - h < r->cap; i++) {
		const struct sv_cqe *e = &r->ents[i & (r->cap - 1)];
		int k;

		for (k = 0; k < ng; k++)
			if (g[k].qp == e->qp_num && g[k].op == e->opcode && g[k].st == e->status)
				break;
		if (k == ng && ng == 8) {
			other++;
			continue;
		}
		if (k == ng)
			g[ng++] = (typeof(g[0])){ e->qp_num, e->opcode, e->status, 0, e->wr_id, 0 };
		g[k].n++;
		g[k].last = e->wr_id;
	}
	for (int k = 0; k < ng && off < sizeof(buf); k++)
		off += (size_t)snprintf(buf + off, sizeof(buf) - off,
					" [qp 0x%x op %u st %u: %u, wr_id 0x%llx..0x%llx]", g[k].qp,
					g[k].op, g[k].st, g[k].n, (unsigned long long)g[k].first,
					(unsigned long long)g[k].last);
	sv_log("CQ slot %u of pid %d overran: cqe %u, head %llu tail %llu, oldest entry %s,%s%s",
	       r->ev_id & (SV_MAX_CQ_SLOTS - 1), (int)r->owner_pid, r->cqe, (unsigned long long)h,
	       (unsigned long long)t,
	       atomic_load(&he->seq) == h + 1 ? "published" : "NOT published", buf,
	       other ? " [+ more groups]" : "");
}

/* Is the ring full?  t is a tail value read earlier (possibly stale: other
 * producers may have pushed since, and the consumer may have polled past
 * it), h a head value read after t.  Full only if the tail is still t (so it
 * was t when h was read) and t - h >= cqe; a stale t makes t - h small or
 * negative, never a false overrun.  *t is refreshed when the tail moved. */
static bool sv_cq_full(struct sv_cq_ring *r, uint64_t *t, uint64_t h)
{
	uint64_t now;

	if (SV_LIKELY((int64_t)(*t - h) < (int64_t)r->cqe))
		return false;
	now = atomic_load_explicit(&r->tail, memory_order_acquire);
	if (now != *t) {
		*t = now;	/* caller re-reads head and checks again */
		return false;
	}
	return true;
}

/* Pushes one completion.  Returns 0, or ENOSPC when the CQ overran (the
 * entry is lost, the CQ is marked, its owner gets IBV_EVENT_CQ_ERR). */
int sv_cq_push(struct sv_cq_ring *r, const struct sv_cqe *src)
{
	uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
	struct sv_cqe *e;

	if (SV_UNLIKELY(sv_g.cq_push_delay_us))
		usleep(sv_g.cq_push_delay_us);	/* tests: let t go stale */
	for (;;) {
		uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
		uint64_t t0 = t;

		if (SV_UNLIKELY(sv_cq_full(r, &t, h))) {
			if (!atomic_exchange(&r->overrun, 1)) {
				sv_cq_overrun_report(r, h, t);
				sv_async_post_remote(r->owner_pid, r->async_id, IBV_EVENT_CQ_ERR,
						     r->ev_id);
				sv_bump_epoch();
			}
			return ENOSPC;
		}
		if (t != t0)
			continue;	/* the tail moved: re-read head first */
		if (atomic_compare_exchange_weak_explicit(&r->tail, &t, t + 1,
							  memory_order_acq_rel,
							  memory_order_relaxed))
			break;
	}
	e = &r->ents[t & (r->cap - 1)];
	e->wr_id = src->wr_id;
	e->status = src->status;
	e->opcode = src->opcode;
	e->byte_len = src->byte_len;
	e->imm = src->imm;
	e->qp_num = src->qp_num;
	e->src_qp = src->src_qp;
	e->wc_flags = src->wc_flags;
	e->sq_idx = src->sq_idx;
	e->slid = src->slid;
	e->flags = src->flags;
	e->vendor_err = src->vendor_err;
	e->sl = src->sl;
	atomic_store_explicit(&e->seq, t + 1, memory_order_release);
	return 0;
}

/*
 * Wakes the CQ's completion channel if the CQ is armed.  Called after the
 * completion is published.  Arming (sv_req_notify_cq) and publishing are each
 * a store followed by a load of the other side's word (the consumer arms,
 * then polls; the producer publishes, then reads `armed`): without a full
 * fence on both sides each may read the old value (x86 lets a load pass an
 * earlier store), the consumer finds the CQ empty, the producer finds it not
 * armed, and the event is lost (ibv_rc_pingpong -e hung in about 1 run of 8).
 */
void sv_cq_notify(struct sv_cq_ring *r, int *fd_cache)
{
	uint32_t id = r->ev_id;

	atomic_thread_fence(memory_order_seq_cst);	/* publish before reading armed */
	if (SV_LIKELY(!atomic_load_explicit(&r->armed, memory_order_relaxed)))
		return;
	if (!r->chan_id || !atomic_exchange(&r->armed, 0))
		return;
	if (*fd_cache < 0) {
		char path[320];

		snprintf(path, sizeof(path), "%s/chan-%d-%u", sv_g.dir, (int)r->owner_pid,
			 r->chan_id);
		*fd_cache = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		if (*fd_cache < 0)
			return;
	}
	if (sv_write_nosig(*fd_cache, &id, sizeof(id)) != sizeof(id) && errno == EPIPE) {
		close(*fd_cache);	/* the channel's owner is gone */
		*fd_cache = -1;
	}
}

static void sv_cqe_to_wc(const struct sv_cqe *e, struct ibv_wc *wc)
{
	wc->wr_id = e->wr_id;
	wc->status = (enum ibv_wc_status)e->status;
	wc->opcode = (enum ibv_wc_opcode)e->opcode;
	wc->vendor_err = e->vendor_err;
	wc->byte_len = e->byte_len;
	wc->imm_data = e->imm;
	wc->qp_num = e->qp_num;
	wc->src_qp = e->src_qp;
	wc->wc_flags = e->wc_flags;
	wc->pkey_index = 0;
	wc->slid = e->slid;
	wc->sl = (uint8_t)e->sl;
	wc->dlid_path_bits = 0;
}

/* A poller that found nothing for poll_yield_ns yields the CPU once per
 * period: on an oversubscribed host the peer it waits for may need this CPU,
 * while a peer that is running answers well within the period. */
static void sv_poll_idle(struct sv_cq *cq)
{
	uint64_t now = sv_now_ns();

	if (cq->empty_polls == 64) {
		cq->idle_since = now;
	} else if (now - cq->idle_since >= sv_g.poll_yield_ns) {
		cq->idle_since = now;
		sv_cnt_tick(now);
		sched_yield();
	}
}

int sv_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct sv_cq *cq = (struct sv_cq *)ibcq;
	struct sv_cq_ring *r = cq->ring;
	uint64_t h;
	int got = 0;

	if (SV_UNLIKELY(atomic_load_explicit(&sv_g.fab->epoch, memory_order_relaxed) !=
			atomic_load_explicit(&sv_g.seen_epoch, memory_order_relaxed) ||
			atomic_load_explicit(&sv_g.nstalled, memory_order_relaxed)))
		sv_sync_all();
	pthread_spin_lock(&cq->lock);
	h = atomic_load_explicit(&r->head, memory_order_relaxed);
	for (; got < n; got++, h++) {
		const struct sv_cqe *e = &r->ents[h & (r->cap - 1)];

		if (atomic_load_explicit(&e->seq, memory_order_acquire) != h + 1)
			break;
		sv_cqe_to_wc(e, &wc[got]);
		if (e->flags & SV_CQE_SQ) {
			struct sv_qp *qp = sv_g.qp_by_slot[e->qp_num & (SV_MAX_QP_SLOTS - 1)];

			if (qp && qp->ibv.qp_num == e->qp_num) {
				/* sq_idx is the low 32 bits of an index < sq_post */
				uint64_t post = __atomic_load_n(&qp->sq_post, __ATOMIC_RELAXED);
				uint64_t idx = post - (uint32_t)((uint32_t)post - e->sq_idx);

				atomic_store_explicit(&qp->sq_free, idx + 1, memory_order_release);
			}
		}
		atomic_store_explicit(&r->head, h + 1, memory_order_release);
	}
	pthread_spin_unlock(&cq->lock);
	if (got)
		cq->empty_polls = 0;
	else if (sv_g.poll_yield_ns && !(++cq->empty_polls & 63))
		sv_poll_idle(cq);
	return got;
}

/* The live CQ of this process an event id names, or NULL (destroyed, or the
 * slot reused since).  Caller holds sv_g.lock. */
struct sv_cq *sv_cq_by_ev_id(uint32_t id)
{
	struct sv_cq *c = sv_g.cq_by_slot[id & (SV_MAX_CQ_SLOTS - 1)];

	return c && SV_CQ_EV_ID(c->slot, c->gen) == id ? c : NULL;
}

int sv_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct sv_cq *cq = (struct sv_cq *)ibcq;

	(void)solicited_only;
	if (!ibcq->channel)
		return EINVAL;
	/* armed before the caller's next poll reads the ring (sv_cq_notify) */
	atomic_store_explicit(&cq->ring->armed, 1, memory_order_seq_cst);
	atomic_thread_fence(memory_order_seq_cst);
	return 0;
}

SV_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
			       void **cq_context);
int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
{
	uint32_t id;

	for (;;) {
		struct sv_cq *c;

		if (read(channel->fd, &id, sizeof(id)) != sizeof(id))
			return -1;
		pthread_mutex_lock(&sv_g.lock);
		c = sv_cq_by_ev_id(id);
		if (c && c->ibv.channel == channel)
			c->comp_events_reported++;	/* destroy waits for its ack */
		else
			c = NULL;
		pthread_mutex_unlock(&sv_g.lock);
		if (!c)
			continue;
		*cq = &c->ibv;
		*cq_context = c->ibv.cq_context;
		return 0;
	}
}

SV_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents);
void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_broadcast(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}
