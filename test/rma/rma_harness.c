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
 *  5. with -W: windows of each size given (rma_big.c);
 *  6. error paths: a destination range past the window, rank N, context 2, a
 *     misaligned signal, signal op 3: each refused with ncclInvalidArgument and
 *     no request, the context still healthy (queryLastError false);
 *  7. with -k: rank N-1 kills itself; every other rank's put to it fails
 *     (ncclRemoteError) within a bounded time, queryLastError turns true and
 *     stays so, the failed context refuses new work, and the other context
 *     still carries a put and signal between live ranks;
 *  8. with -L: a host's port goes down (rma_port.c).
 * With -A (run on a device with atomics=none) createContext must fail with
 * ncclInvalidUsage. With -b: put, get and put+signal bandwidth and the
 * signal's latency between ranks 0 and 1 instead of the checks (rma_bench.c).
 *
 * The ranks are forked here (-n N), or each is started on its own (simulated)
 * host with -r RANK -n N -R HOST:PORT and they meet at rank 0's TCP port
 * (nccl-net-bench's rendezvous), as in test/cluster/cl-rma.sh.
 * Exit 0 when every check passed; 77 when not on simverbs.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rma_harness.h"
#include "tools/nccl-net-bench.h"

int nranks = 4, rank, version;
char hosts[MAXR][64];
static int kill_test, no_atomics, bench;
static size_t big_sizes[8];
static int nbig;
static const char *down_host, *down_dir;

/* shared between forked ranks (mmap'd before fork) */
struct shared {
	char handles[MAXR][NCCL_NET_HANDLE_MAXSIZE];
	int arrived;			/* barrier arrivals, all barriers so far */
	int victim_reaped;		/* -k: the parent reaped the killed rank */
};
static struct shared *sh;
/* ranks on their own: the rendezvous at rank 0 (fds[0] .. fds[n-1] at rank 0) */
static struct nb_oob oob;

uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* One byte from fd within the deadline (0), or -1. */
static int oob_byte(int fd, bool out, uint64_t end)
{
	struct pollfd p = { .fd = fd, .events = out ? POLLOUT : POLLIN };
	char c = 1;

	while (now_ns() < end) {
		ssize_t n;

		if (poll(&p, 1, 100) <= 0)
			continue;
		n = out ? send(fd, &c, 1, MSG_NOSIGNAL) : recv(fd, &c, 1, 0);
		if (n == 1)
			return 0;
		if (n == 0 || (errno != EINTR && errno != EAGAIN))
			return -1;
	}
	return -1;
}

/* The rendezvous' barrier: rank 0 hears from every live rank, then answers;
 * with want == nranks - 1 the last rank (killed) is left out. */
static void oob_barrier(int ph, int want)
{
	uint64_t end = now_ns() + 60000000000ull;

	if (rank != 0) {
		if (oob_byte(oob.fds[0], true, end) || oob_byte(oob.fds[0], false, end))
			FAIL("barrier %d: rank 0 did not answer in 60 s", ph);
		return;
	}
	if (want < nranks && oob.fds[nranks - 1] >= 0) {
		close(oob.fds[nranks - 1]);
		oob.fds[nranks - 1] = -1;
	}
	for (int r = 1; r < want; r++)
		if (oob_byte(oob.fds[r], false, end))
			FAIL("barrier %d: rank %d did not arrive in 60 s", ph, r);
	for (int r = 1; r < want; r++)
		if (oob_byte(oob.fds[r], true, end))
			FAIL("barrier %d: rank %d is gone", ph, r);
}

void barrier(int ph, int want)
{
	static int expect;	/* arrivals when every live rank reached this one */
	uint64_t end = now_ns() + 60000000000ull;

	if (!sh) {
		oob_barrier(ph, want);
		return;
	}
	expect += want;
	__atomic_add_fetch(&sh->arrived, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&sh->arrived, __ATOMIC_SEQ_CST) < expect) {
		if (now_ns() > end)
			FAIL("barrier %d: %d of %d ranks arrived", ph,
			     want - (expect - sh->arrived), want);
		usleep(200);
	}
}

ncclResult_t wait_req(void *req)
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

void wait_word(volatile uint64_t *w, uint64_t want, const char *what)
{
	uint64_t end = now_ns() + 30000000000ull;

	while (__atomic_load_n(w, __ATOMIC_ACQUIRE) != want) {
		if (now_ns() > end)
			FAIL("%s: the signal word holds %llu, not %llu, after 30 s", what,
			     (unsigned long long)*w, (unsigned long long)want);
		sched_yield(); /* a loaded host: let the peers run */
	}
}

/* Every rank's handle (written at handles[rank]) and host name to every rank. */
static void exchange_handles(char handles[MAXR][NCCL_NET_HANDLE_MAXSIZE])
{
	char mine[64] = "", me[NCCL_NET_HANDLE_MAXSIZE];

	if (sh) { /* forked: the handles are in the shared page already */
		barrier(0, nranks);
		for (int i = 0; i < nranks; i++)
			strcpy(hosts[i], "localhost");
		return;
	}
	gethostname(mine, sizeof(mine) - 1);
	memcpy(me, handles[rank], sizeof(me));
	if (nb_oob_allgather(&oob, me, handles, NCCL_NET_HANDLE_MAXSIZE) ||
	    nb_oob_allgather(&oob, mine, hosts, sizeof(mine)))
		FAIL("the rendezvous' allgather failed");
}

/* ---- the run ---- */

void *pctx, *coll, *rctx, *srcw, *dstw, *sigw;
unsigned char *src, *dst;
static size_t win;	/* bytes of the src and dst windows */
uint64_t *sig;

static unsigned char pat(int from, int to, size_t i, int round)
{
	return (unsigned char)(from * 31 + to * 7 + i * 13 + (i >> 8) + round * 101);
}

static size_t size_for(int peer)
{
	static const size_t s[] = { 0, 1, 4097, CHUNK, 8, 40000 };

	return s[(peer + rank) % 6];
}

static void setup(void)
{
	ncclRmaConfig_v15_t cfg = { .nContexts = 2, .trafficClass = -1 };
	static char hd[MAXR][NCCL_NET_HANDLE_MAXSIZE];
	char (*h)[NCCL_NET_HANDLE_MAXSIZE] = sh ? sh->handles : hd;
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
	OK(rma.listen(pctx, 0, h[rank], &lc));
	exchange_handles(h);
	for (int i = 0; i < nranks; i++)
		handles[i] = h[i];
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
	while (sh && __atomic_load_n(&sh->victim_reaped, __ATOMIC_SEQ_CST) == 0 &&
	       kill(getppid(), 0) == 0) {
		/* forked: the parent reaps the victim and opens phase 9 */
		usleep(1000);
	}
	/* on its own host the victim may still be dying: put until a put fails */
	t0 = now_ns();
	do {
		if (now_ns() - t0 > 60000000000ull)
			FAIL("puts to the killed rank still succeed after 60 s");
		POST(rma.iput(rctx, 0, 0, srcw, 4096, 0, dstw, (uint32_t)victim, 0, &req), &req);
		r = wait_req(req);
	} while (r == ncclSuccess && (usleep(1000), 1));
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
	if (nbig)
		phase_big(big_sizes, nbig);
	phase_errors();
	if (kill_test)
		phase_kill();
	if (down_host)
		phase_port_down(down_host, down_dir);
	teardown();
	exit(0);
}

/* Forks the ranks and reaps them (the victim of -k first). */
static int run_forked(void)
{
	pid_t pids[MAXR];
	int bad = 0;

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
			__atomic_store_n(&sh->victim_reaped, 1, __ATOMIC_SEQ_CST);
			continue;
		}
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "rank %d failed (status 0x%x)\n", i, st);
			bad = 1;
		}
	}
	return bad;
}

/* -W 4096,16M,1G: window sizes (K, M, G suffixes) */
static int parse_sizes(const char *s)
{
	char *end;

	for (nbig = 0; *s && nbig < 8; nbig++) {
		unsigned long long v = strtoull(s, &end, 10);

		v <<= *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
		end += *end == 'K' || *end == 'M' || *end == 'G';
		if (v < 4096 || v > (1ull << 30) || v % 4096 || (*end && *end != ','))
			return -1;
		big_sizes[nbig] = (size_t)v;
		s = *end ? end + 1 : end;
	}
	return *s ? -1 : 0;
}

static const char usage[] =
	"usage: rma_harness [-n ranks] [-v 13|14|15] [-k] [-A] [-b] [-W size,...]\n"
	"                   [-r rank -R host:port] [-L host,dir]\n"
	"  -W  windows of these sizes (4K .. 1G, multiples of 4K) carry puts up to half\n"
	"      of each (at most 64M) at its end, with signals, and gets back\n"
	"  -r, -R  this process is rank r of -n; the ranks meet at rank 0's host:port\n"
	"  -L  host's port goes down (test/cluster/cl-rma.sh); dir: files shared with it\n";

int main(int argc, char **argv)
{
	char root[256] = "", *comma;
	int c, port = 0, self_rank = -1;

	while ((c = getopt(argc, argv, "n:v:kAbW:r:R:L:")) != -1) {
		switch (c) {
		case 'n': nranks = atoi(optarg); break;
		case 'v': version = atoi(optarg); break;
		case 'k': kill_test = 1; break;
		case 'b': bench = 1; break;
		case 'A': no_atomics = 1; break;
		case 'r': self_rank = atoi(optarg); break;
		case 'R':
			if (nb_parse_hostport(optarg, root, sizeof(root), &port)) {
				fprintf(stderr, "-R wants host:port\n");
				return 2;
			}
			break;
		case 'W':
			if (parse_sizes(optarg)) {
				fprintf(stderr, "-W: window sizes 4K .. 1G, multiples of 4K\n");
				return 2;
			}
			break;
		case 'L':
			comma = strchr(optarg, ',');
			if (!comma) {
				fprintf(stderr, "-L wants host,dir\n");
				return 2;
			}
			*comma = '\0';
			down_host = optarg;
			down_dir = comma + 1;
			break;
		default:
			fputs(usage, stderr);
			return 2;
		}
	}
	if (nranks < 1 || nranks > MAXR || (kill_test && nranks < 3) || (bench && nranks < 2) ||
	    (down_host && nranks < 2) || (self_rank >= 0) != (port > 0) || self_rank >= nranks) {
		fprintf(stderr, "1..%d ranks (3 or more with -k, 2 with -b or -L); -r with -R\n%s",
			MAXR, usage);
		return 2;
	}
	if (!getenv("SIMVERBS_FABRIC")) {
		fprintf(stderr, "not on simverbs (SIMVERBS_FABRIC unset): skip\n");
		return 77;
	}
	if (self_rank < 0)
		return run_forked();
	rank = nb_rank = self_rank;
	nb_deadline = nb_now() + 120;
	if (nb_oob_init(&oob, rank, nranks, root, port, -1))
		FAIL("the rendezvous at %s:%d failed", root, port);
	run_rank();
	return 0;
}
