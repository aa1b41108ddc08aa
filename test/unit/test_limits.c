/*
 * test_limits - the limits the plugin advertises hold, and hard edges fail
 * cleanly, through the built
 * plugin over simverbs with lowered device limits (SIMVERBS_LIMITS):
 *   - maxComms: a receive comm takes its data QPs plus a GPU flush QP per
 *     device (simverbs offers dma-buf, so flushes are on), so maxComms is
 *     max_qp / (QPS_PER_CONNECTION + 1), and that many comm pairs connect,
 *     with 1 and with 2 QPs per connection (max_qp alone was twice too
 *     many: half of them failed in ibv_create_qp);
 *   - a receive whose buffer was deregistered while posted ends in an error
 *     on both sides (simverbs moves the responder QP to error on a remote
 *     access error, as hardware does), never a request pending for ever.
 *   - maxP2pBytes: with max_msg_sz lowered to 64 KiB, messages are split
 *     into writes the port takes, every size up to maxP2pBytes arrives whole
 *     with exact sizes (truncation too, grouped, 1 and 2 QPs, IB and RoCE)
 *     and one byte more is refused (test/unit/test_large: 2-3 GiB messages);
 *   - sticky errors after the deregistered-buffer fault, and the grouped
 *     receive bound (8 work, 9 and 0 are refused, the comm stays usable):
 *     second tests of behaviours fault_qp / test_cts guard.
 * Each scenario runs in its own process and fabric.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nvplugin.h"

#define MAX_QP 24
#define MAX_PAIRS MAX_QP

static void run(const char *name, void (*fn)(void))
{
	int status = nvt_scenario("nvlimits", name, fn);

	if (status != 0) {
		fprintf(stderr, "scenario %s failed (status 0x%x)\n", name, status);
		nvt_failures++;
	}
}

/*
 * init (capturing WARNs) and one pair connected on simib0 through listener
 * *lc, every step checked; false when there is no pair to use.
 */
static bool open_pair(ncclNet_v12_t *n, void **ctx, void **lc, void **sc, void **rc)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	int d;

	CHECK(n && n->init(ctx, 1, NULL, nvt_logger, NULL) == ncclSuccess);
	if (!*ctx)
		return false;
	d = find(n, "simib0");
	CHECK(d >= 0 && n->listen(*ctx, d, handle, lc) == ncclSuccess);
	CHECK(nvt_connect(n, *ctx, d, handle, *lc, sc, rc, 30) == 0);
	return *sc && *rc;
}

/* Send comms on simib0, receive comms on simib1: each device holds one kind. */
static void max_comms(int qps)
{
	ncclNet_v12_t *n;
	ncclNetProperties_v12_t p0, p1;
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	void *ctx = NULL, *lc = NULL, *sc[MAX_PAIRS], *rc[MAX_PAIRS];
	int sd, rd, ok = 0;

	setenv("SIMVERBS_DEVICES", "simib0:ll=ib;simib1:ll=ib", 1);
	setenv("SIMVERBS_LIMITS", "max_qp=24" /* MAX_QP */, 1);
	if (qps > 1) {
		char v[8];

		snprintf(v, sizeof(v), "%d", qps);
		setenv("NCCL_IB_QPS_PER_CONNECTION", v, 1);
	}
	n = load();
	CHECK(n && n->init(&ctx, 1, NULL, NULL, NULL) == ncclSuccess);
	if (!ctx)
		return;
	sd = find(n, "simib0");
	rd = find(n, "simib1");
	CHECK(sd >= 0 && rd >= 0);
	CHECK(n->getProperties(sd, &p0) == ncclSuccess && n->getProperties(rd, &p1) == ncclSuccess);
	CHECK(p1.ptrSupport & NCCL_PTR_DMABUF); /* so receive comms take a flush QP */
	CHECK(p1.maxComms == MAX_QP / (qps + 1) && p0.maxComms == p1.maxComms);
	CHECK(p1.maxComms >= 1 && p1.maxComms <= MAX_PAIRS);
	if (p1.maxComms < 1 || p1.maxComms > MAX_PAIRS)
		return;
	CHECK(n->listen(ctx, rd, handle, &lc) == ncclSuccess && lc);
	for (ok = 0; ok < p1.maxComms; ok++)
		if (nvt_connect(n, ctx, sd, handle, lc, &sc[ok], &rc[ok], 30))
			break;
	CHECK(ok == p1.maxComms);
	if (ok != p1.maxComms)
		fprintf(stderr, "maxComms %d (%d QPs per connection, max_qp %d): only %d pairs "
			"connected\n", p1.maxComms, qps, MAX_QP, ok);
	for (int i = 0; i < ok; i++)
		CHECK(n->closeSend(sc[i]) == ncclSuccess && n->closeRecv(rc[i]) == ncclSuccess);
	if (ok < p1.maxComms) { /* the half-built pair */
		if (sc[ok])
			n->closeSend(sc[ok]);
		if (rc[ok])
			n->closeRecv(rc[ok]);
	}
	CHECK(n->closeListen(lc) == ncclSuccess);
	CHECK(n->finalize(ctx) == ncclSuccess);
}

/*
 * A receiver that deregistered its buffer while the receive was posted: the
 * sender's RDMA write fails with a remote access error, and the receiver must
 * get an error from test() as well (its QP goes to error, the receive is
 * flushed), not a request pending for ever while the sender stays connected.
 */
static void sc_dereg_pending(void)
{
	ncclNet_v12_t *n = load();
	char *sb = calloc(1, 1 << 16), *rb = calloc(1, 1 << 16);
	void *ctx = NULL, *lc = NULL, *sc = NULL, *rc = NULL, *smh = NULL, *rmh = NULL;
	void *sr = NULL, *rr = NULL, *data = rb;
	size_t cap = 1 << 16;
	int tag = 3, done = 0, sz[1];
	ncclResult_t sres = ncclSuccess, rres = ncclSuccess;
	time_t t0;

	if (!open_pair(n, &ctx, &lc, &sc, &rc))
		return;
	CHECK(n->regMr(sc, sb, 1 << 16, NCCL_PTR_HOST, &smh) == ncclSuccess);
	CHECK(n->regMr(rc, rb, 1 << 16, NCCL_PTR_HOST, &rmh) == ncclSuccess);
	for (time_t end = time(NULL) + 10; !rr && time(NULL) < end;)
		CHECK(n->irecv(rc, 1, &data, &cap, &tag, &rmh, NULL, &rr) == ncclSuccess);
	CHECK(rr != NULL);
	CHECK(n->deregMr(rc, rmh) == ncclSuccess); /* the posted receive's buffer is gone */
	for (time_t end = time(NULL) + 10; !sr && sres == ncclSuccess && time(NULL) < end;)
		sres = n->isend(sc, sb, 1 << 16, tag, smh, NULL, &sr);
	for (time_t end = time(NULL) + 10; sr && !done && sres == ncclSuccess && time(NULL) < end;)
		sres = n->test(sr, &done, sz);
	CHECK(sres != ncclSuccess); /* remote access error at the sender */
	done = 0;
	for (time_t end = time(NULL) + 10; !done && rres == ncclSuccess && time(NULL) < end;)
		rres = n->test(rr, &done, sz);
	CHECK(rres != ncclSuccess && !done);
	if (rres == ncclSuccess)
		fprintf(stderr, "the receive into a deregistered buffer is still %s after 10 s\n",
			done ? "reported done" : "pending");
	/* sticky (a second test of it, on another fault than fault_qp's): every
	 * later call on either comm fails at once and repeats the first cause */
	nvt_log_clear();
	t0 = time(NULL);
	sr = rr = NULL;
	CHECK(n->irecv(rc, 1, &data, &cap, &tag, &rmh, NULL, &rr) != ncclSuccess && !rr);
	CHECK(n->isend(sc, sb, 64, tag, smh, NULL, &sr) != ncclSuccess && !sr);
	CHECK(n->isend(sc, sb, 64, tag, smh, NULL, &sr) != ncclSuccess && !sr);
	CHECK(time(NULL) - t0 <= 2);
	CHECK(strstr(nvt_warns, "irecv on the failed connection") != NULL);
	CHECK(strstr(nvt_warns, "isend on the failed connection") != NULL);
	CHECK(strstr(nvt_warns, "remote access error") != NULL); /* the sender's first cause */
	CHECK(n->deregMr(sc, smh) == ncclSuccess);
	CHECK(n->closeSend(sc) == ncclSuccess && n->closeRecv(rc) == ncclSuccess);
	CHECK(n->closeListen(lc) == ncclSuccess);
	CHECK(n->finalize(ctx) == ncclSuccess);
	free(sb);
	free(rb);
}

/* Byte i of message `seed`: every byte checked, no two messages alike. */
static unsigned char pat(size_t i, unsigned seed)
{
	return (unsigned char)((i * 2654435761u) >> 13 ^ seed);
}

/*
 * One grouped receive of n buffers (capacity cap[k]) and n sends of
 * len[k] bytes with tags 10+k: true when both sides complete, test reports
 * min(len, cap) on both, those bytes arrived and nothing beyond them moved.
 */
static bool xfer(ncclNet_v12_t *n, void *sc, void *rc, int nr, const size_t *len,
		 const size_t *cap, unsigned seed)
{
	static unsigned char *sb[8], *rb[8];
	void *smh[8], *rmh[8], *sr[8] = { NULL }, *rr = NULL, *data[8];
	size_t caps[8];
	int tags[8], sdone[8] = { 0 }, rdone = 0, ssz[8], rsz[8];
	ncclResult_t res = ncclSuccess;
	bool ok = true;

	for (int k = 0; k < nr; k++) {
		sb[k] = malloc(len[k] + 1);
		rb[k] = malloc(cap[k] + 256);
		for (size_t i = 0; i < len[k]; i++)
			sb[k][i] = pat(i, seed + (unsigned)k);
		memset(rb[k], 0xee, cap[k] + 256);
		CHECK(n->regMr(sc, sb[k], len[k] + 1, NCCL_PTR_HOST, &smh[k]) == ncclSuccess);
		CHECK(n->regMr(rc, rb[k], cap[k] + 256, NCCL_PTR_HOST, &rmh[k]) == ncclSuccess);
		data[k] = rb[k];
		caps[k] = cap[k];
		tags[k] = 10 + k;
	}
	for (time_t end = time(NULL) + 30; res == ncclSuccess && time(NULL) < end;) {
		int all = rdone;

		if (!rr)
			res = n->irecv(rc, nr, data, caps, tags, rmh, NULL, &rr);
		for (int k = 0; k < nr && res == ncclSuccess; k++) {
			if (!sr[k])
				res = n->isend(sc, sb[k], len[k], 10 + k, smh[k], NULL, &sr[k]);
			if (sr[k] && !sdone[k] && res == ncclSuccess)
				res = n->test(sr[k], &sdone[k], &ssz[k]);
			all &= sdone[k];
		}
		if (rr && !rdone && res == ncclSuccess)
			res = n->test(rr, &rdone, rsz);
		if (all)
			break;
	}
	CHECK(res == ncclSuccess && rdone);
	ok = res == ncclSuccess && rdone;
	for (int k = 0; k < nr && ok; k++) {
		size_t got = len[k] < cap[k] ? len[k] : cap[k], bad = 0;

		CHECK(sdone[k] && ssz[k] == (int)got && rsz[k] == (int)got);
		for (size_t i = 0; i < got; i++)
			bad += rb[k][i] != pat(i, seed + (unsigned)k);
		for (size_t i = got; i < cap[k] + 256; i++)
			bad += rb[k][i] != 0xee;
		CHECK(bad == 0);
		if (bad || ssz[k] != (int)got || rsz[k] != (int)got) {
			fprintf(stderr, "message %d: %zu bytes into %zu: sent %d, received %d, %zu "
				"bytes wrong\n", k, len[k], cap[k], ssz[k], rsz[k], bad);
			ok = false;
		}
	}
	for (int k = 0; k < nr; k++) {
		CHECK(n->deregMr(sc, smh[k]) == ncclSuccess && n->deregMr(rc, rmh[k]) == ncclSuccess);
		free(sb[k]);
		free(rb[k]);
	}
	return ok;
}

/*
 * maxP2pBytes is what the data path carries: messages are split into RDMA
 * writes of at most the port's max_msg_sz (64 KiB here), NV_MAX_WR_PER_MSG
 * (4) of them per QP, so maxP2pBytes = 256 KiB; every size up to it arrives
 * whole (sizes around each write boundary, truncation, grouped receives, one
 * and two QPs, InfiniBand and RoCE), and one byte more is refused.
 */
static void split_on(const char *dev, int qps)
{
	ncclNet_v12_t *n;
	ncclNetProperties_v12_t p;
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	void *ctx = NULL, *lc = NULL, *sc = NULL, *rc = NULL, *mh = NULL, *req = NULL;
	const size_t W = 65536, M = 4 * W;
	static const size_t one[][2] = { /* len, capacity */
		{ 1, 1 }, { 0, 64 }, { 65536, 65536 }, { 65537, 65537 }, { 131072 + 128, 262144 },
		{ 262143, 262144 }, { 262144, 262144 }, { 262144, 1 << 20 },
		{ 200000, 100000 }, { 262144, 65537 },
	};
	size_t len[3] = { M, W + 1, 3 * W - 5 }, cap[3] = { M, 2 * W, 3 * W };
	unsigned char *big;
	int d;

	if (qps > 1) {
		setenv("NCCL_IB_QPS_PER_CONNECTION", "2", 1);
		setenv("NCCL_IB_SPLIT_DATA_ON_QPS", "1", 1);
	}
	n = load();
	CHECK(n && n->init(&ctx, 1, NULL, NULL, NULL) == ncclSuccess);
	if (!ctx)
		return;
	d = find(n, dev);
	CHECK(d >= 0 && n->getProperties(d, &p) == ncclSuccess);
	CHECK(p.maxP2pBytes == M);
	CHECK(n->listen(ctx, d, handle, &lc) == ncclSuccess);
	CHECK(nvt_connect(n, ctx, d, handle, lc, &sc, &rc, 30) == 0);
	if (!sc || !rc)
		return;
	for (size_t i = 0; i < sizeof(one) / sizeof(one[0]); i++)
		CHECK(xfer(n, sc, rc, 1, &one[i][0], &one[i][1], (unsigned)i));
	CHECK(xfer(n, sc, rc, 3, len, cap, 77)); /* grouped: 4 + 2 + 3 writes */
	/* one byte above maxP2pBytes: refused, the comm stays usable */
	big = malloc(M + 1);
	CHECK(n->regMr(sc, big, M + 1, NCCL_PTR_HOST, &mh) == ncclSuccess);
	CHECK(n->isend(sc, big, M + 1, 10, mh, NULL, &req) == ncclInvalidArgument && !req);
	CHECK(n->deregMr(sc, mh) == ncclSuccess);
	free(big);
	CHECK(xfer(n, sc, rc, 1, &one[6][0], &one[6][1], 99));
	CHECK(n->closeSend(sc) == ncclSuccess && n->closeRecv(rc) == ncclSuccess);
	CHECK(n->closeListen(lc) == ncclSuccess);
	CHECK(n->finalize(ctx) == ncclSuccess);
}

static void sc_split_ib(void)
{
	setenv("SIMVERBS_LIMITS", "max_msg_sz=65536", 1);
	split_on("simib0", 1);
}

static void sc_split_roce_2qp(void)
{
	setenv("SIMVERBS_LIMITS", "max_msg_sz=65536", 1);
	split_on("simroce0", 2);
}

/*
 * The grouped-receive bound from the receiver's side (a second test of it:
 * fault_qp and test_cts check a hostile CTS at the sender): 8 grouped
 * receives arrive with exact sizes, 9 are refused naming the bound, and the
 * comm is still usable afterwards.
 */
static void sc_groups(void)
{
	ncclNet_v12_t *n = load();
	char buf[9][64];
	void *ctx = NULL, *lc = NULL, *sc = NULL, *rc = NULL, *req = NULL, *data[9], *mh[9];
	size_t len[8], cap[8], caps[9];
	int tags[9];

	if (!open_pair(n, &ctx, &lc, &sc, &rc))
		return;
	for (int k = 0; k < 8; k++) {
		len[k] = 1000 + 333 * (size_t)k;
		cap[k] = k == 5 ? 700 : 4096; /* one of them truncated */
	}
	CHECK(xfer(n, sc, rc, 8, len, cap, 5));
	for (int k = 0; k < 9; k++) {
		data[k] = buf[k];
		caps[k] = sizeof(buf[k]);
		tags[k] = k;
		mh[k] = NULL;
	}
	CHECK(n->regMr(rc, buf, sizeof(buf), NCCL_PTR_HOST, &mh[0]) == ncclSuccess);
	for (int k = 1; k < 9; k++)
		mh[k] = mh[0];
	nvt_log_clear();
	/* misuse by the NCCL core: ncclInternalError (docs/net-api.md, result codes) */
	CHECK(n->irecv(rc, 9, data, caps, tags, mh, NULL, &req) == ncclInternalError && !req);
	CHECK(strstr(nvt_warns, "9 grouped receives requested, maxRecvs is 8") != NULL);
	CHECK(n->irecv(rc, 0, data, caps, tags, mh, NULL, &req) == ncclInternalError && !req);
	/* a buffer of bytes without a registration: ncclInvalidArgument, one buffer or grouped */
	void *nomh[2] = { NULL, NULL };
	nvt_log_clear();
	CHECK(n->irecv(rc, 1, data, caps, tags, nomh, NULL, &req) == ncclInvalidArgument && !req);
	CHECK(strstr(nvt_warns, "buffer 0 of 64 bytes has no registration") != NULL);
	CHECK(n->irecv(rc, 1, data, caps, tags, NULL, NULL, &req) == ncclInvalidArgument && !req);
	nomh[0] = mh[0];
	nvt_log_clear();
	CHECK(n->irecv(rc, 2, data, caps, tags, nomh, NULL, &req) == ncclInvalidArgument && !req);
	CHECK(strstr(nvt_warns, "buffer 1 of 64 bytes has no registration") != NULL);
	CHECK(n->deregMr(rc, mh[0]) == ncclSuccess);
	CHECK(xfer(n, sc, rc, 2, len, cap, 6)); /* still usable */
	CHECK(n->closeSend(sc) == ncclSuccess && n->closeRecv(rc) == ncclSuccess);
	CHECK(n->closeListen(lc) == ncclSuccess);
	CHECK(n->finalize(ctx) == ncclSuccess);
}

static void sc_max_comms_1(void)
{
	max_comms(1);
}

static void sc_max_comms_2(void)
{
	max_comms(2);
}

int main(void)
{
	plugin_path = getenv("NV_TEST_PLUGIN");
	if (!plugin_path || access(plugin_path, R_OK) != 0) {
		printf("test_limits: NV_TEST_PLUGIN not set or unreadable: skipped\n");
		return 77;
	}
	run("maxcomms1", sc_max_comms_1);
	run("maxcomms2", sc_max_comms_2);
	run("dereg", sc_dereg_pending);
	run("split-ib", sc_split_ib);
	run("groups", sc_groups);
	run("split-roce-2qp", sc_split_roce_2qp);
	return nvt_exit("test_limits");
}
