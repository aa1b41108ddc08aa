/*
 * eager.h - the eager path: small messages written into the receiver's ring
 * before their clear-to-send arrived. The protocol is below; the code is in
 * eager.c (isend, irecv and completions of eager comms), eager_ring.c (the
 * ring's set-up at connect and accept) and the inline fast paths here, which
 * isend (send.c), irecv (recv.c) and the completion engine (engine.c, through
 * the hooks listed in engine.h) call.
 *
 * The protocol (docs/design.md, "The eager path"). Only on comms of one
 * device and one QP on both sides, so every WR of a comm is in one QP's order.
 *
 * Sender: a message of at most max bytes whose clear-to-send (CTS) has not
 * arrived when isend looks, and whose sequence is below the receiver's grant,
 * is RDMA-written into ring entry seq % NV_EAGER_SLOTS as data followed by a
 * trailer (size, tag, seq + 1; last, so its arrival means the data is there).
 * That takes sequence seq exactly as its CTS would have: a CTS for seq that
 * arrives later is never read (the sender looks at head only).
 *
 * Sequences on an eager comm count messages, not receives: a clear-to-send
 * slot of m entries at sequence x stands for the m messages x .. x + m - 1,
 * and the sender's head moves by m once it posts that slot. So a receive of
 * n entries owns n sequences whatever path its messages take, and both
 * sides agree on every sequence without the sender knowing n in advance.
 *
 * Receiver: a receive of n entries at sequences x .. x + n - 1 posts one
 * CTS at its cursor c (first x) for the entries still open. When the ring
 * entry of c arrives instead (the eager message crossed the CTS), it takes
 * the first open entry with its tag (the CTS path's matching), c moves to
 * c + 1 and the open entries go out again as the CTS of c + 1 (unless that
 * one's ring entry is there too). The RECV posted for c stays in the queue
 * as a surplus one, which the next CTS uses instead of posting another.
 * Because of that, a WRITE_WITH_IMM completion is matched to a sequence by
 * order, not by wr_id: it belongs to the oldest sequence whose CTS is out
 * and whose ring entry has not arrived, after the ring entries that landed
 * before it (same QP, written earlier) were delivered; it completes every
 * entry still open on that CTS. Ring entries are freed by delivery; the
 * grant (tail + NV_EAGER_SLOTS) goes back in batches of NV_EAGER_GRANT_BATCH.
 *
 * Grants ride on the clear-to-sends when the sender announced that it reads
 * them there (region NV_SEND_CTRL_REMOTE_LEN_EAGER_CTS): each CTS carries
 * the grant of the moment it was posted (cts.h). The sender, out of credit,
 * reads the grant on the last CTS it used (or on a newer one in that FIFO
 * slot; grants only grow, so either is true). The receiver counts the grant
 * on the CTS of the last message that came through its CTS as given (the
 * sender found that CTS), and writes the credit word only when that leaves
 * the sender short, i.e. when messages went eager; a comm whose receives are
 * posted ahead writes none.
 */
#ifndef NV_EAGER_H
#define NV_EAGER_H

#include <arpa/inet.h>

#include "comm.h"
#include "engine.h"
#include "ibv.h"
#include "prof.h"

#define NV_EAGER_GRANT_BATCH (NV_EAGER_SLOTS / 2)

/* The shadow entries of sequence seq on an eager comm (two banks: nv_recv_ctrl, comm.h). */
static inline struct nv_cts_entry *nv_eager_shadow(struct nv_recv_ctrl *ctrl, uint64_t seq)
{
	return ctrl->shadow[seq % NV_SHADOW_SLOTS];
}

/* isend of at most s->eager.max bytes whose clear-to-send has not arrived. */
nv_status_t nv_eager_isend(struct nv_send_comm *s, void *data, size_t size, int tag,
			   void *mhandle, void *phandle, void **request);
/*
 * isend found no CTS: 1 when a credit may allow the message to go eager (a
 * grant left, a new credit word, or a CTS whose grant was not read yet);
 * nv_eager_isend decides. 0: it waits for its CTS, as an idle call.
 */
static inline int nv_eager_may_send(const struct nv_send_comm *s)
{
	const struct nv_send_ctrl *ctrl = nv_send_ctrl_of(&s->base);

	return s->head < s->eager.grant || s->eager.cts_took != s->eager.cts_seq ||
	       __atomic_load_n(&ctrl->eager_grant, __ATOMIC_ACQUIRE) > s->head;
}
/* irecv on a comm with eager on (every entry one sequence). */
nv_status_t nv_eager_irecv(struct nv_recv_comm *rc, int n, void **data, size_t *sizes, int *tags,
			   void **mhandles, void **phandles, void **request);
/* The rest of nv_eager_irecv_one when the ring entry of seq has its flag already. */
nv_status_t nv_eager_irecv_arrived(struct nv_recv_comm *rc, uint64_t seq);
/* Room for n more sequences and the cursor's RECV and CTS. */
static inline int nv_eager_room(const struct nv_recv_comm *rc, int n)
{
	const struct nv_comm_qp *q = &rc->base.qps[0];

	return rc->head + (uint64_t)n - rc->eager.tail <= NV_EAGER_SLOTS &&
	       q->outstanding + 1 <= q->max_wr &&
	       (rc->eager.surplus || q->recv_outstanding + 1 <= q->max_recv);
}
/* The trailer of ring entry seq % NV_EAGER_SLOTS (it ends the entry). */
static inline struct nv_eager_trailer *nv_eager_trl(const struct nv_eager_recv *E, uint64_t seq)
{
	return (struct nv_eager_trailer *)(E->ring + (seq % NV_EAGER_SLOTS) * E->entry + E->entry -
					   NV_EAGER_TRAILER);
}

/*
 * RECV (or a surplus one) and the CTS of n entries for sequence seq from its
 * shadow entries src (nv_eager_shadow(ctrl, seq)), room checked by the
 * caller; 0, or -1 with the comm failed.
 */
static inline __attribute__((always_inline)) int
nv_eager_post_n(struct nv_recv_comm *rc, uint64_t seq, struct nv_cts_entry *src, int n)
{
	struct nv_comm *c = &rc->base;
	struct nv_comm_qp *q = &c->qps[0];
	struct ibv_recv_wr *wr = &rc->recv_wr, *bad;
	uint32_t slot = (uint32_t)(seq % NV_EAGER_SLOTS);

	/* the grant of this moment rides on the CTS (comm.h; ignored by a sender
	 * that did not ask for it); tail <= seq < tail + slots */
	src[0].eager.grant = (uint32_t)(rc->eager.tail + NV_EAGER_SLOTS - seq);

	if (nv_unlikely(rc->eager.surplus)) {
		rc->eager.surplus--;
	} else {
		wr->wr_id = NV_WRID(NV_WR_RECV, 0, 0, slot); /* not used to match (comm.h) */
		q->recv_outstanding++;
		if (nv_ibv_post_recv(q->qp, wr, &bad) != NV_OK) {
			nv_comm_fail(c, NV_ERR_SYSTEM, "posting a receive on QP 0x%x (from %s) "
				     "failed", q->qp->qp_num, c->peer);
			return -1;
		}
	}
	rc->eager.seqs[slot].state = NV_ESEQ_WAIT;
	return nv_recv_post_cts_q(rc, q, 0, slot, src, n) == NV_OK ? 0 : -1;
}

/*
 * irecv of one registered buffer on an eager comm with room for it
 * (nv_eager_room): the same sequence state, entry, arrival check and RECV +
 * CTS as the general path (nv_eager_irecv), without its loops and the pass
 * over older sequences. Inline into nv_net_irecv; a ring entry that already
 * has its flag goes out of line (nv_eager_irecv_arrived checks it).
 * NCCL_VERBS_FAST_PATHS=0 (one_recvs 0) takes the general path for every
 * receive, and for every completion below (test/reruns.mk).
 */
static inline __attribute__((always_inline)) nv_status_t
nv_eager_irecv_one(struct nv_recv_comm *rc, void *data, size_t size, int tag,
		   const struct nv_mhandle *mh, void *phandle, void **request)
{
	struct nv_comm *c = &rc->base;
	struct nv_eager_recv *E = &rc->eager;
	uint64_t seq = rc->head;
	uint32_t slot = (uint32_t)(seq % NV_EAGER_SLOTS);
	struct nv_cts_entry *e = nv_eager_shadow(nv_recv_ctrl_of(c), seq);
	struct nv_request *req = nv_req_get(c, NV_REQ_RECV);

	if (!req)
		return nv_comm_idle_call(c);
	req->seq = seq;
	req->pending = 1;
	req->eager_left = 1;
	req->eager_map[0] = 0;
	req->eager_kind[0] = (uint8_t)mh->kind;
	req->mem_kind = (uint8_t)mh->kind;
	req->sizes[0] = size > UINT32_MAX ? UINT32_MAX : (uint32_t)size;
	if (nv_unlikely(nv_prof_cb != NULL)) {
		req->phandle[0] = phandle;
		nv_prof_qp_start(req, phandle, c->qps[0].dev, c->qps[0].qp->qp_num,
				 IBV_WC_RECV_RDMA_WITH_IMM, size, NV_WRID(NV_WR_RECV, 0, 0, slot));
	}
	e->addr = (uintptr_t)data;
	e->size = (uint64_t)req->sizes[0];
	e->rkey[0] = mh->rkey[0];
	e->tag = (uint32_t)tag;
	e->nreqs = 1;
	e->seq = seq + 1;
	E->seqs[slot].req = req->idx;
	E->seqs[slot].state = NV_ESEQ_PEND;
	rc->head = seq + 1;
	*request = req;
	if (nv_unlikely(__atomic_load_n(&nv_eager_trl(E, seq)->seq, __ATOMIC_ACQUIRE) == seq + 1))
		return nv_eager_irecv_arrived(rc, seq);
	return nv_eager_post_n(rc, seq, e, 1) < 0 ? c->error : NV_OK;
}

/* Freed ring entries to grant: the credit word, unless the grant on a CTS the
 * sender used is enough (comm.h). */
nv_status_t nv_eager_grant(struct nv_recv_comm *rc);

/* Frees finished sequences from the tail; grants the freed ring entries in batches. */
static inline nv_status_t nv_eager_advance(struct nv_recv_comm *rc)
{
	struct nv_eager_recv *E = &rc->eager;

	while (E->tail < rc->head && E->seqs[E->tail % NV_EAGER_SLOTS].state == NV_ESEQ_DONE)
		E->seqs[E->tail++ % NV_EAGER_SLOTS].state = NV_ESEQ_FREE;
	if (nv_likely(E->tail + NV_EAGER_SLOTS - E->granted < NV_EAGER_GRANT_BATCH))
		return NV_OK;
	return nv_eager_grant(rc);
}

/* The entries still open on cursor seq's CTS got their data (sizes from imm or the records). */
nv_status_t nv_eager_cts_done(struct nv_recv_comm *rc, uint64_t seq, uint32_t imm);
/* A WRITE_WITH_IMM completion that is not the common case below (RECV already counted). */
nv_status_t nv_eager_recv_cqe_slow(struct nv_recv_comm *rc, const struct ibv_wc *wc);

/*
 * A WRITE_WITH_IMM completion on an eager comm, matched by order, not wr_id
 * (comm.h). The common case inline: the tail waits for it on the CTS of a
 * one-buffer receive and its ring entry has not arrived; no sequence is
 * older, so no ring entry written before this completion can be pending.
 * Only sequences in [tail, head) have a state other than FREE (irecv sets
 * head's, the tail frees what it passes), so a WAIT tail is below head; and
 * a one-buffer receive in WAIT has its one entry open (eager_left 1, its
 * capacity in sizes[0], pending 1).
 */
static inline __attribute__((always_inline)) nv_status_t
nv_eager_recv_cqe(struct nv_recv_comm *rc, const struct ibv_wc *wc)
{
	struct nv_comm *c = &rc->base;
	struct nv_eager_recv *E = &rc->eager;
	uint64_t seq = E->tail;
	uint32_t slot = (uint32_t)(seq % NV_EAGER_SLOTS), imm = ntohl(wc->imm_data);
	struct nv_request *r = &c->reqs[E->seqs[slot].req];

	c->qps[0].recv_outstanding--;
	if (nv_unlikely(E->seqs[slot].state != NV_ESEQ_WAIT || r->nreqs != rc->one_recvs ||
			!(wc->wc_flags & IBV_WC_WITH_IMM) || imm > r->sizes[0] ||
			__atomic_load_n(&nv_eager_trl(E, seq)->seq, __ATOMIC_ACQUIRE) == seq + 1))
		return nv_eager_recv_cqe_slow(rc, wc);
	r->sizes[0] = imm;
	r->eager_left = 0;
	r->pending = 0;
	r->done = 1;
	E->seqs[slot].state = NV_ESEQ_FREE;
	E->tail = seq + 1;
	E->cts_done = seq; /* the sender found the grant on its CTS (comm.h) */
	return nv_eager_advance(rc);
}
/* A loopback copy into a GPU buffer completed. */
nv_status_t nv_eager_copy_done(struct nv_recv_comm *rc, const struct ibv_wc *wc);
/* Delivers the ring entries that arrived, in sequence order; NV_OK or the sticky error. */
nv_status_t nv_eager_poll(struct nv_recv_comm *rc);
/*
 * test() of receive r, not done after the CQ poll: a pass over the posted
 * sequences only when it can finish something, i.e. the ring entry of r's
 * cursor arrived, or a sequence waits for a CTS or copy that found no room.
 * Other receives' arrived entries are taken when they are tested or when a
 * completion needs the pass (nv_eager_recv_cqe_slow).
 */
static inline nv_status_t nv_eager_test_poll(struct nv_recv_comm *rc, const struct nv_request *r)
{
	struct nv_eager_recv *E = &rc->eager;
	uint64_t c = r->seq + r->nreqs - r->eager_left;

	if (nv_unlikely(E->dirty) ||
	    (r->eager_left && __atomic_load_n(&nv_eager_trl(E, c)->seq, __ATOMIC_ACQUIRE) == c + 1))
		return nv_eager_poll(rc);
	return NV_OK;
}

#endif /* NV_EAGER_H */
