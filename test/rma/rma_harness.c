/*
 * rma_harness - what NCCL's RMA proxy does with our RMA tables, over simverbs:
 * N ranks (processes) load the built plugin the way NCCL's rma.cc does (dlsym
 * of ncclRmaPlugin_v15, then _v14, then _v13, or the one -v names), listen,
 * exchange handles, connect collectively, create 2 contexts, register
 * symmetric windows, then:
 *  1. iputSignal (ADD rank+1) of a different size (0 B .. the chunk) to every
 *     peer, itself included, alternating contexts; each rank waits for every
 *     peer's signal and checks, as soon as it sees one, every byte that peer
 *     put before it (the signal never runs ahead of its data);
 *  2. iput to every peer, iflush to every peer, a barrier, every byte checked;
 *  3. iget of every peer's data, every byte checked;
 *  4. iputSignal INC of 0 bytes to every peer on a second signal word;
 *  5. error paths: a destination range past the window, rank N, context 2, a
 *     misaligned signal, signal op 3: each refused with ncclInvalidArgument and
 *     no request, the context still healthy (queryLastError false);
 *  6. with -k: rank N-1 kills itself; every other rank's put to it fails
 *     (ncclRemoteError) within a bounded time, queryLastError turns true and
 *     stays so, the failed context refuses new work, and the other context
 *     still carries a put and signal between live ranks.
 * With -A (run on a device with atomics=none) createContext must fail with
 * ncclInvalidUsage. With -b: put, get and put+signal bandwidth and the
 * signal's latency between ranks 0 and 1 instead of the checks.
 * Exit 0 when every check passed; 77 when not on simverbs.
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl/rma.h"

#define MAXR 16
#define CHUNK (64 * 1024)

static int nranks = 4, version, kill_test, no_atomics, bench;
static int rank;

/* shared between the ranks (mmap'd before fork) */
struct shared {
	char handles[MAXR][NCCL_NET_HANDLE_MAXSIZE];
	volatile int arrived[64];	/* per phase: ranks that reached it */
};
static struct shared *sh;

#define FAIL(...) do { \
	fprintf(stderr, "rank %d: %s:%d: ", rank, __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); \
	fputc('\n', stderr); \
	exit(1); \
} while (0)
#define OK(call) do { \
	ncclResult_t r_ = (call); \
	if (r_ != ncclSuccess) \
		FAIL("%s returned %d", #call, r_); \
} while (0)

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Every live rank (want of them) reaches phase ph; fails after 60 s. */
static void barrier(int ph, int want)
{
	uint64_t end = now_ns() + 60000000000ull;

	__atomic_add_fetch(&sh->arrived[ph], 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&sh->arrived[ph], __ATOMIC_SEQ_CST) < want) {
		if (now_ns() > end)
			FAIL("barrier %d: %d of %d ranks arrived", ph, sh->arrived[ph], want);
		usleep(200);
	}
}

/* ---- the loader: as NCCL's rma.cc, newest version first, adapted to v15 ---- */

static ncclRma_v15_t rma;
static ncclRma_v14_t *v14;
static ncclRma_v13_t *v13;

static ncclResult_t a14_iput(void *c, int x, uint64_t so, void *s, size_t n, uint64_t d_o,
			     void *d, uint32_t r, uint32_t f, void **q)
{
	(void)f;
	return v14->iput(c, x, so, s, n, d_o, d, r, q);
}

static ncclResult_t a14_sig(void *c, int x, uint64_t so, void *s, size_t n, uint64_t d_o, void *d,
			    uint32_t r, uint64_t go, void *g, uint64_t gv, uint32_t op, bool st,
			    uint32_t f, void **q)
{
	(void)f;
	return v14->iputSignal(c, x, so, s, n, d_o, d, r, go, g, gv, op, st, q);
}

static ncclResult_t a14_get(void *c, int x, uint64_t ro, void *rm, size_t n, uint64_t lo, void *l,
			    uint32_t r, uint32_t f, void **q)
{
	(void)f;
	return v14->iget(c, x, ro, rm, n, lo, l, r, q);
}

static ncclResult_t a13_sig(void *c, int x, uint64_t so, void *s, size_t n, uint64_t d_o, void *d,
			    uint32_t r, uint64_t go, void *g, uint64_t gv, uint32_t op, bool st,
			    uint32_t f, void **q)
{
	(void)f;
	(void)st;
	return v13->iputSignal(c, x, so, s, n, d_o, d, r, go, g, gv, op, q);
}

static ncclResult_t a13_iput(void *c, int x, uint64_t so, void *s, size_t n, uint64_t d_o,
			     void *d, uint32_t r, uint32_t f, void **q)
{
	(void)f;
	return v13->iput(c, x, so, s, n, d_o, d, r, q);
}

static ncclResult_t a13_get(void *c, int x, uint64_t ro, void *rm, size_t n, uint64_t lo, void *l,
			    uint32_t r, uint32_t f, void **q)
{
	(void)f;
	return v13->iget(c, x, ro, rm, n, lo, l, r, q);
}

static ncclResult_t a13_ctx(void *coll, ncclRmaConfig_v15_t *cfg, void **ctx)
{
	ncclGinConfig_v13_t g = { .nContexts = cfg->nContexts, .trafficClass = cfg->trafficClass };
	ncclNetDeviceHandle_v11_t *dh = (void *)1;
	ncclResult_t r = v13->createContext(coll, &g, ctx, &dh);

	if (r == ncclSuccess && dh != NULL)
		FAIL("v13 createContext handed back a device handle %p (a proxy plugin has none)", dh);
	return r;
}

static ncclResult_t a13_reg(void *coll, void *d, size_t n, int t, uint64_t fl, void **mh)
{
	void *gh = (void *)1;
	ncclResult_t r = v13->regMrSym(coll, d, n, t, fl, mh, &gh);

	if (r == ncclSuccess && gh != NULL)
		FAIL("v13 regMrSym handed back a GIN handle");
	return r;
}

static void load(void)
{
	const char *path = getenv("NV_TEST_PLUGIN");
	void *h = dlopen(path ? path : "libnccl-net-verbs.so", RTLD_NOW | RTLD_LOCAL);
	ncclRma_v15_t *v15;

	if (!h)
		FAIL("dlopen: %s", dlerror());
	v15 = (version == 0 || version == 15) ? dlsym(h, "ncclRmaPlugin_v15") : NULL;
	v14 = (version == 0 || version == 14) && !v15 ? dlsym(h, "ncclRmaPlugin_v14") : NULL;
	v13 = (version == 0 || version == 13) && !v15 && !v14 ? dlsym(h, "ncclRmaPlugin_v13") : NULL;
	if (dlsym(h, "ncclRmaPlugin_v12") || dlsym(h, "ncclRmaPlugin_v16"))
		FAIL("a table NCCL does not know is exported");
	if (v15) {
		rma = *v15;
	} else if (v14) {
		memcpy(&rma, v14, sizeof(rma)); /* same layout up to the changed calls */
		rma.iput = a14_iput;
		rma.iputSignal = a14_sig;
		rma.iget = a14_get;
	} else if (v13) {
		memcpy(&rma, v13, sizeof(rma));
		rma.createContext = a13_ctx;
		rma.regMrSym = a13_reg;
		rma.iputSignal = a13_sig;
		rma.iput = a13_iput;
		rma.iget = a13_get;
		rma.rmaProgress = v13->ginProgress;
	} else {
		FAIL("no ncclRmaPlugin_v%d in %s", version, path);
	}
	if (!rma.name || strcmp(rma.name, "Verbs") || !rma.init || !rma.connect || !rma.iput ||
	    !rma.iputSignal || !rma.iget || !rma.iflush || !rma.test || !rma.queryLastError ||
	    !rma.finalize || !rma.createContext || !rma.regMrSym || !rma.deregMrSym)
		FAIL("table incomplete");
}

/* ---- the run ---- */

static void *pctx, *coll, *rctx, *srcw, *dstw, *sigw;
static unsigned char *src, *dst;
static size_t win;	/* bytes of the src and dst windows */
static uint64_t *sig;

static unsigned char pat(int from, int to, size_t i, int round)
{
	return (unsigned char)(from * 31 + to * 7 + i * 13 + (i >> 8) + round * 101);
}

static size_t size_for(int peer)
{
	static const size_t s[] = { 0, 1, 4097, CHUNK, 8, 40000 };

	return s[(peer + rank) % 6];
}

/* Tests req to completion; returns its result (fails after 30 s). */
static ncclResult_t wait_req(void *req)
{
	uint64_t end = now_ns() + 30000000000ull;
	int done = 0;

	if (!req)
		FAIL("no request");
	while (!done) {
		ncclResult_t r = rma.test(coll, req, &done);

		if (r != ncclSuccess)
			return r;
		if (now_ns() > end)
			FAIL("request not done in 30 s");
	}
	return ncclSuccess;
}

/* Retries while the plugin says "queue full" (NULL request). */
#define POST(call, reqp) do { \
	uint64_t end_ = now_ns() + 30000000000ull; \
	*(reqp) = NULL; \
	while (*(reqp) == NULL) { \
		OK(call); \
		if (*(reqp) == NULL) { \
			if (rma.rmaProgress) rma.rmaProgress(rctx); \
			if (now_ns() > end_) FAIL("%s: queue full for 30 s", #call); \
		} \
	} \
} while (0)

static void setup(void)
{
	ncclRmaConfig_v15_t cfg = { .nContexts = 2, .trafficClass = -1 };
	void *handles[MAXR], *lc;
	int ndev;
	ncclResult_t r;

	OK(rma.init(&pctx, 0x5eed, NULL));
	OK(rma.devices(&ndev));
	if (ndev < 1)
		FAIL("no device");
	if (v13) { /* NCCL's v13 loader: the plugin must say it is a GIN proxy */
		ncclNetProperties_v12_t p;

		OK(rma.getProperties(0, &p));
		if (p.netDeviceType != NCCL_NET_DEVICE_GIN_PROXY)
			FAIL("v13 getProperties: netDeviceType %d, NCCL wants GIN_PROXY",
			     p.netDeviceType);
	}
	OK(rma.listen(pctx, 0, sh->handles[rank], &lc));
	barrier(0, nranks);
	for (int i = 0; i < nranks; i++)
		handles[i] = sh->handles[i];
	OK(rma.connect(pctx, handles, nranks, rank, lc, &coll));
	OK(rma.closeListen(lc));
	r = rma.createContext(coll, &cfg, &rctx);
	if (no_atomics) {
		if (r != ncclInvalidUsage)
			FAIL("createContext on a device without atomics returned %d, not "
			     "ncclInvalidUsage", r);
		OK(rma.closeColl(coll));
		OK(rma.finalize(pctx));
		printf("rank %d: no atomics: createContext refused (ncclInvalidUsage): ok\n", rank);
		exit(0);
	}
	OK(r);
	win = bench ? (size_t)4 << 20 : (size_t)nranks * CHUNK;
	src = aligned_alloc(4096, win);
	dst = aligned_alloc(4096, win);
	sig = aligned_alloc(4096, 4096);
	memset(src, 0x5a, win);
	memset(dst, 0, win);
	memset(sig, 0, 4096);
	OK(rma.regMrSym(coll, src, win, NCCL_PTR_HOST, 0, &srcw));
	OK(rma.regMrSym(coll, dst, win, NCCL_PTR_HOST, 0, &dstw));
	OK(rma.regMrSym(coll, sig, 4096, NCCL_PTR_HOST, 0, &sigw));
}

static void fill_src(int round)
{
	for (int q = 0; q < nranks; q++)
		for (size_t i = 0; i < CHUNK; i++)
			src[(size_t)q * CHUNK + i] = pat(rank, q, i, round);
}

static void check_from(int p, size_t n, int round, const char *what)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char b = ((volatile unsigned char *)dst)[(size_t)p * CHUNK + i];

		if (b != pat(p, rank, i, round))
			FAIL("%s: byte %zu from rank %d is 0x%02x, expected 0x%02x", what, i, p, b,
			     pat(p, rank, i, round));
	}
}

static void phase_signals(void)
{
	void *req[MAXR];
	bool seen[MAXR] = { false };
	int nseen = 0;
	uint64_t end;

	fill_src(1);
	barrier(1, nranks);
	for (int q = 0; q < nranks; q++)
		POST(rma.iputSignal(rctx, q % 2, (uint64_t)q * CHUNK, srcw, size_for(q),
				    (uint64_t)rank * CHUNK, dstw, (uint32_t)q, (uint64_t)rank * 8,
				    sigw, (uint64_t)rank + 1, NCCL_NET_SIGNAL_OP_ADD, true,
				    NCCL_RMA_OPT_DEFAULT, &req[q]), &req[q]);
	/* the peers' data, checked the moment each signal shows */
	end = now_ns() + 30000000000ull;
	while (nseen < nranks) {
		for (int p = 0; p < nranks; p++) {
			uint64_t v = __atomic_load_n(&sig[p], __ATOMIC_ACQUIRE);

			if (seen[p] || !v)
				continue;
			if (v != (uint64_t)p + 1)
				FAIL("signal from rank %d is %llu, expected %d", p,
				     (unsigned long long)v, p + 1);
			/* p put size_for(us) as p computes it: the same table entry */
			check_from(p, size_for(p), 1, "put+signal (at its signal)");
			seen[p] = true;
			nseen++;
		}
		if (now_ns() > end)
			FAIL("signals: %d of %d seen in 30 s", nseen, nranks);
		sched_yield(); /* a loaded host: let the peers run */
	}
	for (int q = 0; q < nranks; q++)
		OK(wait_req(req[q]));
	barrier(2, nranks);
	printf("rank %d: put+signal (ADD) to %d ranks, sizes 0..%d B: every byte there when its "
	       "signal shows: ok\n", rank, nranks, CHUNK);
}

static void phase_put_flush_get(void)
{
	void *req[MAXR];

	fill_src(2);
	memset(dst, 0, (size_t)nranks * CHUNK);
	barrier(3, nranks);
	for (int q = 0; q < nranks; q++)
		POST(rma.iput(rctx, (q + 1) % 2, (uint64_t)q * CHUNK, srcw, CHUNK,
			      (uint64_t)rank * CHUNK, dstw, (uint32_t)q, NCCL_RMA_OPT_DEFAULT,
			      &req[q]), &req[q]);
	for (int q = 0; q < nranks; q++)
		OK(wait_req(req[q]));
	for (int q = 0; q < nranks; q++) {
		POST(rma.iflush(rctx, (q + 1) % 2, dstw, (uint32_t)q, &req[q]), &req[q]);
		OK(wait_req(req[q]));
	}
	barrier(4, nranks);
	for (int p = 0; p < nranks; p++)
		check_from(p, CHUNK, 2, "put+flush");
	/* gets: peer q's src chunk meant for us, into our dst */
	memset(dst, 0, (size_t)nranks * CHUNK);
	for (int q = 0; q < nranks; q++)
		POST(rma.iget(rctx, q % 2, (uint64_t)rank * CHUNK, srcw, CHUNK, (uint64_t)q * CHUNK,
			      dstw, (uint32_t)q, NCCL_RMA_OPT_DEFAULT, &req[q]), &req[q]);
	for (int q = 0; q < nranks; q++)
		OK(wait_req(req[q]));
	for (int p = 0; p < nranks; p++)
		check_from(p, CHUNK, 2, "get");
	barrier(5, nranks);
	printf("rank %d: put, flush and get of %d B with every rank: every byte: ok\n", rank, CHUNK);
}

static void phase_inc(void)
{
	void *req[MAXR];
	uint64_t end = now_ns() + 30000000000ull;

	for (int q = 0; q < nranks; q++)
		POST(rma.iputSignal(rctx, 0, 0, NULL, 0, 0, NULL, (uint32_t)q,
				    (uint64_t)(MAXR + rank) * 8, sigw, 12345, NCCL_NET_SIGNAL_OP_INC,
				    false, NCCL_RMA_OPT_DEFAULT, &req[q]), &req[q]);
	for (int q = 0; q < nranks; q++)
		OK(wait_req(req[q]));
	for (int p = 0; p < nranks; p++)
		while (__atomic_load_n(&sig[MAXR + p], __ATOMIC_ACQUIRE) != 1 && (sched_yield(), 1))
			if (now_ns() > end)
				FAIL("INC signal from rank %d: %llu", p,
				     (unsigned long long)sig[MAXR + p]);
	barrier(6, nranks);
	printf("rank %d: signal-only INC to every rank: ok\n", rank);
}

static void expect_invalid(ncclResult_t r, void *req, const char *what)
{
	if (r != ncclInvalidArgument || req)
		FAIL("%s: returned %d with request %p, expected ncclInvalidArgument and none", what,
		     r, req);
}

static void phase_errors(void)
{
	int peer = (rank + 1) % nranks;
	void *req = NULL;
	bool err = true;

	expect_invalid(rma.iput(rctx, 0, 0, srcw, 16, (uint64_t)nranks * CHUNK - 8, dstw,
				(uint32_t)peer, 0, &req), req, "put past the window");
	expect_invalid(rma.iput(rctx, 0, (uint64_t)nranks * CHUNK, srcw, 1, 0, dstw, (uint32_t)peer,
				0, &req), req, "source past the window");
	expect_invalid(rma.iput(rctx, 0, 0, srcw, 16, 0, dstw, (uint32_t)nranks, 0, &req), req,
		       "rank nranks");
	expect_invalid(rma.iget(rctx, 2, 0, srcw, 16, 0, dstw, (uint32_t)peer, 0, &req), req,
		       "context 2 of 2");
	expect_invalid(rma.iputSignal(rctx, 0, 0, srcw, 8, 0, dstw, (uint32_t)peer, 4, sigw, 1,
				      NCCL_NET_SIGNAL_OP_ADD, true, 0, &req), req, "misaligned signal");
	expect_invalid(rma.iputSignal(rctx, 0, 0, srcw, 8, 0, dstw, (uint32_t)peer, 4096, sigw, 1,
				      NCCL_NET_SIGNAL_OP_ADD, true, 0, &req), req, "signal past window");
	expect_invalid(rma.iputSignal(rctx, 0, 0, srcw, 8, 0, dstw, (uint32_t)peer, 0, sigw, 1, 3,
				      true, 0, &req), req, "signal op 3");
	OK(rma.queryLastError(rctx, &err));
	if (err)
		FAIL("argument errors made the context report an error");
	barrier(7, nranks);
	printf("rank %d: bad offsets, rank, context, signal alignment and op refused; context "
	       "healthy: ok\n", rank);
}

static void phase_kill(void)
{
	int victim = nranks - 1, live = (rank + 1) % (nranks - 1);
	void *req = NULL;
	bool err = false;
	ncclResult_t r;
	uint64_t t0;

	if (rank == victim) {
		barrier(8, nranks);
		raise(SIGKILL);
	}
	barrier(8, nranks);
	while (__atomic_load_n(&sh->arrived[9], __ATOMIC_SEQ_CST) == 0 && kill(getppid(), 0) == 0) {
		/* the parent reaps the victim and opens phase 9 */
		usleep(1000);
	}
	t0 = now_ns();
	POST(rma.iput(rctx, 0, 0, srcw, 4096, 0, dstw, (uint32_t)victim, 0, &req), &req);
	r = wait_req(req);
	if (r != ncclRemoteError)
		FAIL("put to the killed rank returned %d, not ncclRemoteError", r);
	OK(rma.queryLastError(rctx, &err));
	if (!err)
		FAIL("queryLastError false after a failed put");
	req = NULL;
	r = rma.iput(rctx, 0, 0, srcw, 8, 0, dstw, (uint32_t)live, 0, &req);
	if (r == ncclSuccess || req)
		FAIL("the failed context took new work (%d)", r);
	/* the other context still works between live ranks */
	sig[2 * MAXR + rank] = 0;
	barrier(10, nranks - 1);
	POST(rma.iputSignal(rctx, 1, 0, srcw, 64, 0, dstw, (uint32_t)live, (uint64_t)(2 * MAXR + rank) * 8,
			    sigw, 1, NCCL_NET_SIGNAL_OP_ADD, true, 0, &req), &req);
	OK(wait_req(req));
	OK(rma.queryLastError(rctx, &err));
	if (!err)
		FAIL("the error did not stay");
	barrier(11, nranks - 1);
	printf("rank %d: killed rank %d: put failed (ncclRemoteError) in %.2f s, queryLastError "
	       "true and sticky, context 0 refuses work, context 1 still carries: ok\n", rank,
	       victim, (double)(now_ns() - t0) / 1e9);
}

static void teardown(void)
{
	OK(rma.deregMrSym(coll, srcw));
	OK(rma.deregMrSym(coll, dstw));
	OK(rma.deregMrSym(coll, sigw));
	OK(rma.destroyContext(rctx));
	OK(rma.closeColl(coll));
	OK(rma.finalize(pctx));
	free(src);
	free(dst);
	free(sig);
}

/*
 * -b: figures between ranks 0 and 1 (others idle): put, get and put+signal
 * bandwidth per size (a window of 16 requests in flight, in MB/s), and the
 * signal's half round trip (8 B put+signal answered by one, in us).
 */
static void bench_bw(const char *what, size_t size, int iters)
{
	void *req[16] = { NULL };
	uint64_t t0 = now_ns();

	for (int i = 0; i < iters; i++) {
		int k = i % 16;

		if (req[k])
			OK(wait_req(req[k]));
		if (!strcmp(what, "get"))
			POST(rma.iget(rctx, 0, 0, srcw, size, 0, dstw, 1, 0, &req[k]), &req[k]);
		else if (!strcmp(what, "put"))
			POST(rma.iput(rctx, 0, 0, srcw, size, 0, dstw, 1, 0, &req[k]), &req[k]);
		else
			POST(rma.iputSignal(rctx, 0, 0, srcw, size, 0, dstw, 1, 0, sigw, 1,
					    NCCL_NET_SIGNAL_OP_ADD, true, 0, &req[k]), &req[k]);
	}
	for (int k = 0; k < 16; k++)
		if (req[k])
			OK(wait_req(req[k]));
	printf("%-10s %10zu %10.1f\n", what, size,
	       (double)size * iters / ((double)(now_ns() - t0) / 1e3));
}

static void bench_lat(int iters)
{
	int peer = 1 - rank;
	uint64_t t0 = 0;
	void *req;

	for (int i = 0; i <= iters; i++) {
		if (i == 1)
			t0 = now_ns();
		if (rank == 0) {
			POST(rma.iputSignal(rctx, 0, 0, srcw, 8, 0, dstw, (uint32_t)peer, 8, sigw, 1,
					    NCCL_NET_SIGNAL_OP_ADD, true, 0, &req), &req);
			OK(wait_req(req));
		}
		for (int spin = 0; __atomic_load_n(&sig[rank], __ATOMIC_ACQUIRE) < (uint64_t)i + 1;)
			if (++spin > 100)
				sched_yield(); /* as simverbs' poll does: a loaded host */
		if (rank == 1) {
			POST(rma.iputSignal(rctx, 0, 0, srcw, 8, 0, dstw, (uint32_t)peer, 0, sigw, 1,
					    NCCL_NET_SIGNAL_OP_ADD, true, 0, &req), &req);
			OK(wait_req(req));
		}
	}
	if (rank == 0)
		printf("%-10s %10d %10.2f us (half round trip)\n", "signal", 8,
		       (double)(now_ns() - t0) / 1e3 / iters / 2);
}

static void run_bench(void)
{
	static const size_t sizes[] = { 8, 4096, 65536, 1 << 20, 4 << 20 };

	barrier(20, nranks);
	if (rank == 0) {
		printf("%-10s %10s %10s\n", "op", "bytes", "MB/s");
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			int iters = sizes[i] >= (1 << 20) ? 64 : 2000;

			bench_bw("put", sizes[i], iters);
			bench_bw("putsignal", sizes[i], iters);
			bench_bw("get", sizes[i], iters);
		}
	}
	barrier(21, nranks);
	memset(sig, 0, 4096);
	barrier(22, nranks);
	if (rank < 2)
		bench_lat(2000);
	barrier(23, nranks);
}

static void run_rank(void)
{
	load();
	setup();
	if (bench) {
		run_bench();
		teardown();
		exit(0);
	}
	phase_signals();
	phase_put_flush_get();
	phase_inc();
	phase_errors();
	if (kill_test)
		phase_kill();
	teardown();
	exit(0);
}

int main(int argc, char **argv)
{
	pid_t pids[MAXR];
	int c, bad = 0;

	while ((c = getopt(argc, argv, "n:v:kAb")) != -1) {
		switch (c) {
		case 'n': nranks = atoi(optarg); break;
		case 'v': version = atoi(optarg); break;
		case 'k': kill_test = 1; break;
		case 'b': bench = 1; break;
		case 'A': no_atomics = 1; break;
		default:
			fprintf(stderr, "usage: rma_harness [-n ranks] [-v 13|14|15] [-k] [-A] [-b]\n");
			return 2;
		}
	}
	if (nranks < 1 || nranks > MAXR || (kill_test && nranks < 3) || (bench && nranks < 2)) {
		fprintf(stderr, "1..%d ranks (3 or more with -k)\n", MAXR);
		return 2;
	}
	if (!getenv("SIMVERBS_FABRIC")) {
		fprintf(stderr, "not on simverbs (SIMVERBS_FABRIC unset): skip\n");
		return 77;
	}
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	memset(sh, 0, sizeof(*sh));
	fflush(stdout);
	for (int i = 0; i < nranks; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			rank = i;
			run_rank();
		}
	}
	for (int k = 0; k < nranks; k++) {
		int st, i = kill_test ? (k + nranks - 1) % nranks : k;	/* the victim first */

		waitpid(pids[i], &st, 0);
		if (kill_test && i == nranks - 1) {
			if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
				fprintf(stderr, "the victim rank did not die by SIGKILL (0x%x)\n", st);
				bad = 1;
			}
			__atomic_add_fetch(&sh->arrived[9], 1, __ATOMIC_SEQ_CST);
			continue;
		}
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "rank %d failed (status 0x%x)\n", i, st);
			bad = 1;
		}
	}
	return bad;
}
