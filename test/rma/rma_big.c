/*
 * rma_big.c - rma_harness -W: windows of the sizes given (4 KiB .. 1 GiB).
 * Each rank registers one window of the size and, for every transfer size up
 * to half of it (at most 64 MiB), puts from the end of its lower half to the
 * end of the next rank's window (the window's last byte written), in turn
 * with a strong signal, a weak signal, or without one and then a flush and a
 * barrier, alternating contexts; the receiver checks every byte when the
 * signal shows (or after the barrier); then every rank gets the next rank's
 * source bytes back into its upper half and checks them. A put one byte past
 * the window's end is refused.
 */
#include <string.h>
#include <sys/mman.h>

#include "rma_harness.h"

#define BIG_SIG (3 * MAXR)	/* signal words [BIG_SIG + window index] */

static inline unsigned char bpat(int from, int round, size_t i)
{
	return (unsigned char)(i * 13 + (i >> 8) + (size_t)from * 31 + (size_t)round * 101);
}

static void check_bytes(const unsigned char *p, size_t n, int from, int round, const char *what,
			size_t w)
{
	for (size_t i = 0; i < n; i++)
		if (((const volatile unsigned char *)p)[i] != bpat(from, round, i))
			FAIL("window of %zu B, %s of %zu B from rank %d: byte %zu is 0x%02x, "
			     "expected 0x%02x", w, what, n, from, i, p[i], bpat(from, round, i));
}

/* The transfer sizes for a window of w bytes: up to min(w / 2, 64 MiB). */
static int transfer_sizes(size_t w, size_t *out)
{
	static const size_t s[] = { 0, 1, 4095, 4096, 65537, 1 << 20, (8 << 20) + 3, 64 << 20 };
	size_t cap = w / 2 < ((size_t)64 << 20) ? w / 2 : (size_t)64 << 20;
	int n = 0;

	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]) && s[i] < cap; i++)
		out[n++] = s[i];
	out[n++] = cap;
	return n;
}

static void one_transfer(unsigned char *buf, void *bw, size_t w, size_t s, int round, int k)
{
	int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks, mode = round % 3;
	void *req = NULL;

	for (size_t i = 0; i < s; i++)
		buf[w / 2 - s + i] = bpat(rank, round, i);
	barrier(30, nranks);
	if (mode < 2) { /* put + strong (0) or weak (1) signal: ADD 1 */
		POST(rma.iputSignal(rctx, round % 2, w / 2 - s, bw, s, w - s, bw, (uint32_t)next,
				    (uint64_t)(BIG_SIG + k) * 8, sigw, 1, NCCL_NET_SIGNAL_OP_ADD,
				    mode == 0, NCCL_RMA_OPT_DEFAULT, &req), &req);
		wait_word(&sig[BIG_SIG + k], (uint64_t)round / 3 * 2 + mode + 1, "big window");
		check_bytes(buf + w - s, s, prev, round, mode ? "put+weak signal" : "put+signal", w);
		OK(wait_req(req));
	} else { /* put, flush, barrier */
		POST(rma.iput(rctx, round % 2, w / 2 - s, bw, s, w - s, bw, (uint32_t)next,
			      NCCL_RMA_OPT_DEFAULT, &req), &req);
		OK(wait_req(req));
		POST(rma.iflush(rctx, round % 2, bw, (uint32_t)next, &req), &req);
		OK(wait_req(req));
		barrier(31, nranks);
		check_bytes(buf + w - s, s, prev, round, "put+flush", w);
	}
	barrier(32, nranks);
	/* the next rank's source bytes back into the upper half */
	POST(rma.iget(rctx, (round + 1) % 2, w / 2 - s, bw, s, w / 2, bw, (uint32_t)next,
		      NCCL_RMA_OPT_DEFAULT, &req), &req);
	OK(wait_req(req));
	check_bytes(buf + w / 2, s, next, round, "get", w);
	barrier(33, nranks);	/* before the source is refilled */
}

void phase_big(const size_t *sizes, int n)
{
	for (int k = 0; k < n; k++) {
		size_t w = sizes[k], ts[16];
		int nt = transfer_sizes(w, ts);
		uint64_t t0 = now_ns();
		void *bw = NULL, *req = NULL;
		unsigned char *buf = mmap(NULL, w, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		ncclResult_t r;

		if (buf == MAP_FAILED)
			FAIL("cannot map a window of %zu B", w);
		OK(rma.regMrSym(coll, buf, w, NCCL_PTR_HOST, 0, &bw));
		for (int i = 0; i < nt; i++)
			one_transfer(buf, bw, w, ts[i], i, k);
		r = rma.iput(rctx, 0, 0, bw, 2, w - 1, bw, (uint32_t)((rank + 1) % nranks), 0, &req);
		if (r != ncclInvalidArgument || req)
			FAIL("a put one byte past the window of %zu B returned %d (request %p)", w, r,
			     req);
		barrier(34, nranks);
		OK(rma.deregMrSym(coll, bw));
		munmap(buf, w);
		printf("rank %d: window of %zu B: put+strong signal, put+weak signal, put+flush and "
		       "get of 0 .. %zu B at its end, every byte: ok (%.2f s)\n", rank, w,
		       ts[nt - 1], (double)(now_ns() - t0) / 1e9);
	}
}
