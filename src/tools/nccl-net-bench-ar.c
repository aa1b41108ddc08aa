/*
 * nccl-net-bench-ar.c - ring AllReduce (sum, float32, host buffers) with the
 * chunking of NCCL's SIMPLE protocol: per loop each rank owns one chunk of at
 * most chunkSteps (4) slots; the loop does send, n-2 x recvReduceSend,
 * recvReduceCopySend, n-2 x recvCopySend, recv; each primitive moves its chunk
 * in at most two slices of sliceSteps (2) slots, one isend per slice.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tools/nccl-net-bench.h"

#define NB_AR_CHUNKSTEPS 4
#define NB_AR_SLICESTEPS 2
#define NB_AR_ALIGN 16		/* elements */

enum nb_ar_op { NB_AR_SEND, NB_AR_RRS, NB_AR_RRCS, NB_AR_RCS, NB_AR_RECV };

struct nb_ar {
	int rank, n;
	size_t count, chunk_elems, slice_elems;
	float *in, *out;
	int iters;
	struct nb_conn *sconn, *rconn;
	int it, prim, slice;
	size_t grid, real;
};

static float *nb_ar_in, *nb_ar_out;
static size_t nb_ar_cap;

static float nb_ar_val(int r, size_t i)
{
	return (float)((i * 7 + (size_t)r * 11) % 1000 + (size_t)r);
}

static size_t nb_roundup(size_t x, size_t a)
{
	return (x + a - 1) / a * a;
}

static void nb_ar_prim(const struct nb_ar *a, int *op, int *chunk)
{
	int n = a->n, r = a->rank, p = a->prim;

	if (p == 0) {
		*op = NB_AR_SEND, *chunk = (r + n - 1) % n;
	} else if (p < n - 1) {
		*op = NB_AR_RRS, *chunk = (r + n - (p + 1)) % n;
	} else if (p == n - 1) {
		*op = NB_AR_RRCS, *chunk = r;
	} else if (p < 2 * n - 2) {
		*op = NB_AR_RCS, *chunk = (r + n - (p - n + 1)) % n;
	} else {
		*op = NB_AR_RECV, *chunk = (r + 1) % n;
	}
}

static void nb_ar_advance(struct nb_ar *a, int nslices)
{
	if (++a->slice < nslices)
		return;
	a->slice = 0;
	if (++a->prim < 2 * a->n - 1)
		return;
	a->prim = 0;
	a->grid += (size_t)a->n * a->real;
	if (a->grid >= a->count) {
		a->grid = 0;
		a->it++;
	}
}

static int nb_ar_next(struct nb_stream *s, struct nb_step *st)
{
	struct nb_ar *a = s->state;
	size_t coff, nelem, sl, len;
	int op, chunk, nslices;

	memset(st, 0, sizeof(*st));
	if (a->it >= a->iters)
		return 0;
	if (a->prim == 0 && a->slice == 0) {
		size_t per = nb_roundup((a->count - a->grid + (size_t)a->n - 1) / (size_t)a->n,
					NB_AR_ALIGN);
		a->real = per < a->chunk_elems ? per : a->chunk_elems;
	}
	nb_ar_prim(a, &op, &chunk);
	coff = a->grid + (size_t)chunk * a->real;
	nelem = coff < a->count ? a->count - coff : 0;
	if (nelem > a->real)
		nelem = a->real;
	sl = nb_roundup((nelem + 1) / 2, NB_AR_ALIGN);
	if (sl < NB_AR_ALIGN)
		sl = NB_AR_ALIGN;
	if (sl > a->slice_elems)
		sl = a->slice_elems;
	nslices = nelem == 0 ? 1 : (int)((nelem + sl - 1) / sl);
	len = nelem > (size_t)a->slice * sl ? nelem - (size_t)a->slice * sl : 0;
	if (len > sl)
		len = sl;
	st->op = op;
	st->off = coff + (size_t)a->slice * sl;
	st->iter = a->it;
	if (op != NB_AR_RECV)
		st->sconn = a->sconn, st->ssize = len * sizeof(float);
	if (op != NB_AR_SEND)
		st->rconn = a->rconn, st->rsize = len * sizeof(float);
	nb_ar_advance(a, nslices);
	return 1;
}

static void nb_ar_reset(struct nb_stream *s)
{
	struct nb_ar *a = s->state;

	a->it = a->prim = a->slice = 0;
	a->grid = a->real = 0;
}

#define NB_AR_BLOCK 16

/* dst = a + b; blocks of fixed length so the compiler vectorizes at -O2. */
static void nb_ar_sum(float *restrict dst, const float *restrict a, const float *restrict b,
		      size_t len)
{
	size_t i = 0, j;

	for (; i + NB_AR_BLOCK <= len; i += NB_AR_BLOCK)
		for (j = 0; j < NB_AR_BLOCK; j++)
			dst[i + j] = a[i + j] + b[i + j];
	for (; i < len; i++)
		dst[i] = a[i] + b[i];
}

/* dst = dst2 = a + b in one pass (recvReduceCopySend). */
static void nb_ar_sum2(float *restrict dst, float *restrict dst2, const float *restrict a,
		       const float *restrict b, size_t len)
{
	size_t i = 0, j;

	for (; i + NB_AR_BLOCK <= len; i += NB_AR_BLOCK)
		for (j = 0; j < NB_AR_BLOCK; j++)
			dst[i + j] = dst2[i + j] = a[i + j] + b[i + j];
	for (; i < len; i++)
		dst[i] = dst2[i] = a[i] + b[i];
}

static int nb_ar_exec(struct nb_stream *s, const struct nb_step *st, char **rptr, char **sptr)
{
	struct nb_ar *a = s->state;
	const float *in = a->in + st->off, *rp = (const float *)rptr[0];
	float *out = a->out + st->off, *sp = (float *)sptr[0];
	size_t len = (st->sconn ? st->ssize : st->rsize) / sizeof(float);

	switch (st->op) {
	case NB_AR_SEND:
		memcpy(sp, in, len * sizeof(float));
		break;
	case NB_AR_RRS:
		nb_ar_sum(sp, rp, in, len);
		break;
	case NB_AR_RRCS:
		nb_ar_sum2(out, sp, rp, in, len);
		break;
	case NB_AR_RCS:
		memcpy(out, rp, len * sizeof(float));
		memcpy(sp, rp, len * sizeof(float));
		break;
	default:
		memcpy(out, rp, len * sizeof(float));
		break;
	}
	return 0;
}

static int nb_ar_buffers(int rank, size_t count)
{
	size_t i;

	if (count <= nb_ar_cap)
		return 0;
	free(nb_ar_in);
	free(nb_ar_out);
	nb_ar_in = malloc(count * sizeof(float));
	nb_ar_out = malloc(count * sizeof(float));
	nb_ar_cap = nb_ar_in && nb_ar_out ? count : 0;
	if (!nb_ar_cap) {
		nb_err("cannot allocate 2 x %zu floats for allreduce", count);
		return -1;
	}
	for (i = 0; i < count; i++)
		nb_ar_in[i] = nb_ar_val(rank, i);
	return 0;
}

static long nb_ar_check(int nranks, size_t count)
{
	long wrong = 0;
	size_t i;
	int r;

	for (i = 0; i < count; i++) {
		float want = 0;

		for (r = 0; r < nranks; r++)
			want += nb_ar_val(r, i);
		wrong += nb_ar_out[i] != want;
	}
	return wrong;
}

int nb_ar_run(struct nb_ctx *c, size_t count, int iters, int check, long *wrong)
{
	struct nb_stream s = { 0 };
	struct nb_ar a = { 0 };
	size_t step = c->e->buffsize / NB_STEPS;
	size_t i;

	*wrong = 0;
	if (count == 0 || nb_ar_buffers(c->rank, count) != 0)
		return count == 0 ? 0 : -1;
	a.rank = c->rank;
	a.n = c->nranks;
	a.count = count;
	a.chunk_elems = step * NB_AR_CHUNKSTEPS / sizeof(float) / NB_AR_ALIGN * NB_AR_ALIGN;
	a.slice_elems = step * NB_AR_SLICESTEPS / sizeof(float) / NB_AR_ALIGN * NB_AR_ALIGN;
	a.in = nb_ar_in;
	a.out = nb_ar_out;
	a.iters = iters;
	a.sconn = nb_engine_find(c->e, (c->rank + 1) % c->nranks, 1);
	a.rconn = nb_engine_find(c->e, (c->rank + c->nranks - 1) % c->nranks, 0);
	if (!a.sconn || !a.rconn || a.slice_elems == 0) {
		nb_err("internal: allreduce ring connections missing or buffer too small");
		return -1;
	}
	if (check)
		for (i = 0; i < count; i++)
			nb_ar_out[i] = -1.0f;
	nb_engine_reset(c->e);
	s.state = &a;
	s.next = nb_ar_next;
	s.exec = nb_ar_exec;
	s.reset = nb_ar_reset;
	nb_stream_count(&s);
	if (nb_run(c->e, &s, 1) != 0)
		return -1;
	if (check)
		*wrong = nb_ar_check(c->nranks, count);
	return 0;
}

void nb_ar_release(void)
{
	free(nb_ar_in);
	free(nb_ar_out);
	nb_ar_in = nb_ar_out = NULL;
	nb_ar_cap = 0;
}
