/*
 * cts.h - the clear-to-send entry the receiver RDMA-writes into the sender's
 * FIFO, and pure validators for everything a peer writes into our memory
 * over RDMA (CTS entries, grouped-receive size records). Pure functions: no
 * comm, no verbs, no logging, so the fuzzers can call them.
 */
#ifndef NV_CTS_H
#define NV_CTS_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define NV_CTS_MAX_DEVS 8	/* == NV_COMM_MAX_DEVS */
#define NV_CTS_MAX_RECVS 8	/* == NV_MAX_RECVS */

/*
 * One clear-to-send entry. Written by the RECEIVER with one RDMA WRITE of
 * nreqs consecutive entries (from its shadow copy) into the SENDER's FIFO;
 * read only by the sender's isend. Host byte order (both peers checked equal
 * at connect). 64-byte aligned and registered without relaxed ordering, so
 * an entry lands in address order: `seq` is the last field and, once it
 * reads s + 1 for slot sequence s, the rest of the entry is valid.
 */
struct nv_cts_entry {
	uint64_t addr;				/* receive buffer */
	uint64_t size;				/* its capacity in bytes */
	union {
		uint32_t rkey[NV_CTS_MAX_DEVS];	/* per RECEIVER device */
		struct {
			uint32_t rkey0_[NV_CTS_MAX_DEVS - 1];
			uint32_t grant;		/* entry 0 on an eager comm: see below */
		} eager;
	};
	uint32_t tag;
	uint32_t nreqs;				/* 1..NV_CTS_MAX_RECVS, same in all entries */
	uint64_t seq;				/* slot sequence + 1; the ready flag */
} __attribute__((aligned(64)));
_Static_assert(sizeof(struct nv_cts_entry) == 64, "CTS entry must be 64 bytes");
/*
 * The eager path's credit in a clear-to-send (eager.h, the protocol): on
 * a comm of one device (rkey[1..] unused) whose sender announced that it
 * reads it, entry 0's eager.grant is the receiver's grant when it posted the
 * slot, as an offset from the slot's sequence s: sequences below s + grant
 * may go eager. 1..NV_CTS_GRANT_MAX; 0: none given (a receiver that does not
 * write it). Grants only grow, so an older entry's grant stays true.
 */
#define NV_CTS_GRANT_MAX 32	/* == NV_EAGER_SLOTS */

/*
 * The grant on a CTS slot's entry 0 and, in *flag, its ready flag (slot
 * sequence + 1; 0: nothing has landed in this FIFO slot yet, and then the
 * grant is not read). The flag is read first, with acquire ordering, and
 * only then the grant, as for every field of a peer-written entry: read the
 * other way round, an entry landing between the two reads pairs an older
 * entry's offset with the newer sequence, a sum past any grant given.
 * test_read_order checks the order.
 */
static inline uint32_t nv_cts_grant_read(const struct nv_cts_entry *e, uint64_t *flag)
{
	*flag = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
	if (!*flag)
		return 0;
	return __atomic_load_n(&e->eager.grant, __ATOMIC_RELAXED);
}

/*
 * The sender's checks of the eager credit the receiver writes (eager.h): 1
 * when it is a protocol violation. The receiver never grants past its free
 * ring entries, which are at most NV_CTS_GRANT_MAX past any message the
 * sender has not sent (head: the sender's next sequence).
 *  - the credit word (struct nv_send_ctrl.eager_grant): sequences below grant;
 *  - a clear-to-send's grant: off past its slot sequence seq (its flag - 1),
 *    checked without forming seq + off, which a hostile flag could wrap.
 */
static inline int nv_eager_word_bad(uint64_t grant, uint64_t head)
{
	return grant > head + NV_CTS_GRANT_MAX;
}

static inline int nv_cts_grant_bad(uint64_t seq, uint32_t off, uint64_t head)
{
	return off > NV_CTS_GRANT_MAX || seq > head + NV_CTS_GRANT_MAX - off;
}

/* One arrived entry of a slot of n: 1 when it is unusable (see nv_cts_slot_check). */
static inline int nv_cts_entry_bad(const struct nv_cts_entry *x, uint32_t n, int rdevs)
{
	int d;

	if (x->nreqs != n || x->size > UINT32_MAX || (x->size && !x->addr) ||
	    x->addr + x->size < x->addr)
		return 1;
	for (d = 0; x->size && d < rdevs && d < NV_CTS_MAX_DEVS; d++)
		if (!x->rkey[d])
			return 1;
	return 0;
}

/*
 * The entries of the slot with sequence `seq` (e[0..NV_CTS_MAX_RECVS-1]):
 * 1 all nreqs entries arrived and are usable; 0 not (completely) written
 * yet; -1 hostile or corrupt. rdevs: the receiver's device count (rkeys
 * that must be valid). Inline for isend; nv_cts_slot_check gives the reason.
 */
static inline int nv_cts_slot_ready(const struct nv_cts_entry *e, uint64_t seq, int rdevs)
{
	uint32_t n, r;

	if (__atomic_load_n(&e[0].seq, __ATOMIC_ACQUIRE) != seq + 1)
		return 0;
	n = e[0].nreqs;
	if (n < 1 || n > NV_CTS_MAX_RECVS)
		return -1;
	for (r = 0; r < n; r++) {
		if (r && __atomic_load_n(&e[r].seq, __ATOMIC_ACQUIRE) != seq + 1)
			return 0; /* the rest of this slot is still on its way */
		if (nv_cts_entry_bad(&e[r], n, rdevs))
			return -1;
	}
	return 1;
}

/*
 * The trailer that ends every eager message in the receiver's ring (comm.h):
 * written by the SENDER in the same RDMA WRITE as the data, which lies right
 * before it. Host byte order; `seq` (sequence + 1) is the last field and the
 * ready flag, like nv_cts_entry's.
 */
struct nv_eager_trailer {
	uint32_t size;		/* message bytes, <= the negotiated eager limit */
	uint32_t tag;
	uint64_t seq;		/* sequence + 1 */
};
_Static_assert(sizeof(struct nv_eager_trailer) == 16, "eager trailer must be 16 bytes");

/*
 * The ring entry for sequence seq: 1 it arrived and is usable (size <= max),
 * 0 not arrived yet (the trailer still holds an older sequence's flag), -1
 * hostile (the reason in why when why_len). Inline for the data path.
 */
static inline int nv_eager_trailer_check(const struct nv_eager_trailer *t, uint64_t seq,
					 uint32_t max, char *why, size_t why_len);

/* nv_cts_slot_ready's verdict, with the reason in why when it is -1. */
int nv_cts_slot_check(const struct nv_cts_entry *e, uint64_t seq, int rdevs, char *why,
		      size_t why_len);

/*
 * Sizes a sender reported for a grouped receive of n buffers (rec[i]) against
 * what was posted (capacity[i]): 0 valid, -1 with the reason in why.
 */
int nv_records_check(const uint32_t *rec, const uint32_t *capacity, int n, char *why,
		     size_t why_len);

int nv_eager_trailer_why(const struct nv_eager_trailer *t, uint64_t seq, uint32_t max, char *why,
			 size_t why_len);

static inline int nv_eager_trailer_check(const struct nv_eager_trailer *t, uint64_t seq,
					 uint32_t max, char *why, size_t why_len)
{
	if (__atomic_load_n(&t->seq, __ATOMIC_ACQUIRE) != seq + 1)
		return 0;
	if (t->size > max)
		return why_len ? nv_eager_trailer_why(t, seq, max, why, why_len) : -1;
	return 1;
}

#endif /* NV_CTS_H */
