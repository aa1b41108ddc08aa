/*
 * SIMVERBS_CHECK_SOURCES=1 (read at attach, per process): a NIC reads the
 * local source of a non-inline send WR (RDMA WRITE, WRITE_WITH_IMM, SEND,
 * SEND_WITH_IMM) by DMA at some time between ibv_post_send and the WR's
 * completion, so a program that rewrites such a buffer in between sends
 * whatever the NIC happened to read (on hardware a torn mix of old and new
 * bytes). simverbs normally reads the source only when it executes the WR
 * and so can never show that; with this knob it keeps a snapshot of the
 * source bytes at post time (a copy up to SV_SNAP_COPY bytes, else a hash per
 * SGE) and compares it when the WR executes. A difference completes the WR
 * with IBV_WC_GENERAL_ERR (the QP moves to error, as after any error
 * completion) and prints the QP, wr_id and the modified range on stderr.
 * Combined with deferred execution (SIMVERBS_LATENCY_NS, `latency`) WRs stay
 * queued long enough for such a reuse to be seen. Off: qp->snap is NULL and
 * the data path pays one predictable branch at post and at execution.
 *
 * Not checked: GPU memory (its bytes are not in our address space), WRs with
 * IBV_SEND_FENCE (they may legitimately send what an earlier READ brings).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sv.h"

#define SV_SNAP_COPY 1024	/* WRs up to this many bytes are copied, longer ones hashed */

enum { SV_SNAP_NONE = 0, SV_SNAP_BYTES, SV_SNAP_HASH };

struct sv_snap {
	uint32_t kind;		/* SV_SNAP_* */
	uint32_t len;		/* bytes covered */
};

bool sv_check_sources;

void sv_srccheck_from_env(void)
{
	const char *v = getenv("SIMVERBS_CHECK_SOURCES");

	sv_check_sources = v && *v && strcmp(v, "0");
}

int sv_srccheck_alloc(struct sv_qp *qp)
{
	uint32_t msge = qp->cap.max_send_sge ? qp->cap.max_send_sge : 1;

	if (!sv_check_sources)
		return 0;
	qp->snap = calloc(qp->sq_cap, sizeof(struct sv_snap));
	qp->snap_bytes = calloc(qp->sq_cap, SV_SNAP_COPY);
	qp->snap_hash = calloc((size_t)qp->sq_cap * msge, sizeof(uint64_t));
	return qp->snap && qp->snap_bytes && qp->snap_hash ? 0 : ENOMEM;
}

void sv_srccheck_free(struct sv_qp *qp)
{
	free(qp->snap);
	free(qp->snap_bytes);
	free(qp->snap_hash);
}

/* 64-bit hash of n bytes, 8 at a time (a mixer of the xxhash/murmur kind). */
static uint64_t sv_hash(const unsigned char *p, size_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ n, w;

	for (; n >= 8; p += 8, n -= 8) {
		memcpy(&w, p, 8);
		h ^= w * 0xc2b2ae3d27d4eb4full;
		h = ((h << 31) | (h >> 33)) * 0x9e3779b97f4a7c15ull;
	}
	for (; n; p++, n--)
		h = (h ^ *p) * 0x100000001b3ull;
	h ^= h >> 29;
	return h * 0xbf58476d1ce4e5b9ull;
}

static struct sv_snap *sv_snap_of(struct sv_qp *qp, uint64_t idx)
{
	return &((struct sv_snap *)qp->snap)[idx % qp->sq_cap];
}

/* At ibv_post_send, after the WQE at idx was queued: the snapshot of its source. */
void sv_srccheck_post(struct sv_qp *qp, uint64_t idx)
{
	const struct sv_swqe *w = &qp->sq[idx % qp->sq_cap];
	struct sv_snap *s = sv_snap_of(qp, idx);
	unsigned char *dst = qp->snap_bytes + (idx % qp->sq_cap) * SV_SNAP_COPY;
	uint32_t msge = qp->cap.max_send_sge ? qp->cap.max_send_sge : 1;
	uint64_t *hash = qp->snap_hash + (idx % qp->sq_cap) * msge;
	struct sv_iovs io;

	s->kind = SV_SNAP_NONE;
	if ((w->flags & (IBV_SEND_INLINE | IBV_SEND_FENCE)) || sv_op_fills_local(w->opcode) ||
	    !w->length)
		return;
	/* an SGE that does not resolve fails at execution (LOC_PROT_ERR) anyway */
	if (sv_local_iovs(qp, w, idx, &io) || io.any_gpu)
		return;
	for (int i = 0; i < io.n; i++) {
		if (w->length <= SV_SNAP_COPY) {
			memcpy(dst, io.v[i].iov_base, io.v[i].iov_len);
			dst += io.v[i].iov_len;
		} else {
			hash[i] = sv_hash(io.v[i].iov_base, io.v[i].iov_len);
		}
	}
	s->len = w->length;
	s->kind = w->length <= SV_SNAP_COPY ? SV_SNAP_BYTES : SV_SNAP_HASH;
}

/* The first and last differing byte of one iovec against its copy; false if equal. */
static bool sv_diff(const unsigned char *now, const unsigned char *then, size_t n, size_t *lo,
		    size_t *hi)
{
	size_t a = 0, b = n;

	while (a < n && now[a] == then[a])
		a++;
	if (a == n)
		return false;
	while (b > a && now[b - 1] == then[b - 1])
		b--;
	*lo = a;
	*hi = b;
	return true;
}

/*
 * At execution, with the WQE's local iovecs resolved: true when its source
 * still holds what it held at post time; else the diagnostic is printed.
 */
bool sv_srccheck_exec(struct sv_qp *qp, uint64_t idx, const struct sv_iovs *lio)
{
	const struct sv_swqe *w = &qp->sq[idx % qp->sq_cap];
	const struct sv_snap *s = sv_snap_of(qp, idx);
	const unsigned char *then = qp->snap_bytes + (idx % qp->sq_cap) * SV_SNAP_COPY;
	uint32_t msge = qp->cap.max_send_sge ? qp->cap.max_send_sge : 1;
	const uint64_t *hash = qp->snap_hash + (idx % qp->sq_cap) * msge;
	size_t lo = 0, hi = 0;
	int i;

	if (s->kind == SV_SNAP_NONE || lio->any_gpu || s->len != w->length)
		return true;
	for (i = 0; i < lio->n; i++) {
		const unsigned char *now = lio->v[i].iov_base;
		size_t n = lio->v[i].iov_len;

		if (s->kind == SV_SNAP_BYTES ? sv_diff(now, then, n, &lo, &hi)
					     : sv_hash(now, n) != hash[i])
			break;
		then += n;
	}
	if (i == lio->n)
		return true;
	if (s->kind == SV_SNAP_HASH) {
		lo = 0;
		hi = lio->v[i].iov_len;
	}
	sv_log("QP 0x%x: the source of WR %llu (wr_id 0x%llx, %s, %u bytes) was modified "
	       "between ibv_post_send and its execution: bytes [%p, %p) of its scatter entry %d "
	       "(%s); a NIC may read it at any time until the WR completes, so it would have "
	       "sent a torn mix (SIMVERBS_CHECK_SOURCES); completing it with GENERAL_ERR",
	       qp->ibv.qp_num, (unsigned long long)idx, (unsigned long long)w->wr_id,
	       w->opcode == IBV_WR_RDMA_WRITE ? "RDMA_WRITE" :
	       w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ? "RDMA_WRITE_WITH_IMM" :
	       w->opcode == IBV_WR_SEND ? "SEND" : "SEND_WITH_IMM", w->length,
	       (void *)((unsigned char *)lio->v[i].iov_base + lo),
	       (void *)((unsigned char *)lio->v[i].iov_base + hi), i,
	       s->kind == SV_SNAP_HASH ? "hashed: somewhere in this entry" : "first to last changed byte");
	return false;
}
