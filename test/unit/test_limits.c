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
 * Each scenario runs in its own process and fabric.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl/net.h"
#include "nvtest.h"

#define MAX_QP 24
#define MAX_PAIRS MAX_QP

static const char *plugin_path;

static ncclNet_v12_t *load(void)
{
	void *h = dlopen(plugin_path, RTLD_NOW | RTLD_LOCAL);

	return h ? dlsym(h, "ncclNetPlugin_v12") : NULL;
}

static void run(const char *name, void (*fn)(void))
{
	pid_t pid;
	int status = 0;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		char fab[128];

		snprintf(fab, sizeof(fab), "%s-%s", getenv("SIMVERBS_FABRIC") ?
			 getenv("SIMVERBS_FABRIC") : "nvlimits", name);
		setenv("SIMVERBS_FABRIC", fab, 1);
		nvt_failures = 0;
		fn();
		exit(nvt_failures ? 1 : 0); /* exit(): simverbs' leak report runs */
	}
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "scenario %s failed (status 0x%x)\n", name, status);
		nvt_failures++;
	}
}

static int find(ncclNet_v12_t *n, const char *name)
{
	ncclNetProperties_v12_t p;
	int nd = 0;

	n->devices(&nd);
	for (int i = 0; i < nd; i++)
		if (n->getProperties(i, &p) == ncclSuccess && !strcmp(p.name, name))
			return i;
	return -1;
}

/* Connects one pair: send comm on dev `sd`, receive comm through listener lc. */
static int connect_pair(ncclNet_v12_t *n, void *ctx, int sd, void *handle, void *lc, void **sc,
			void **rc)
{
	*sc = *rc = NULL;
	for (time_t end = time(NULL) + 30; (!*sc || !*rc) && time(NULL) < end;) {
		if (!*sc && n->connect(ctx, sd, handle, sc, NULL) != ncclSuccess)
			return -1;
		if (!*rc && n->accept(lc, rc, NULL) != ncclSuccess)
			return -1;
	}
	return *sc && *rc ? 0 : -1;
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
		if (connect_pair(n, ctx, sd, handle, lc, &sc[ok], &rc[ok]))
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
	char handle[NCCL_NET_HANDLE_MAXSIZE], *sb = calloc(1, 1 << 16), *rb = calloc(1, 1 << 16);
	void *ctx = NULL, *lc = NULL, *sc = NULL, *rc = NULL, *smh = NULL, *rmh = NULL;
	void *sr = NULL, *rr = NULL, *data = rb;
	size_t cap = 1 << 16;
	int tag = 3, done = 0, d, sz[1];
	ncclResult_t sres = ncclSuccess, rres = ncclSuccess;

	CHECK(n && n->init(&ctx, 1, NULL, NULL, NULL) == ncclSuccess);
	if (!ctx)
		return;
	d = find(n, "simib0");
	CHECK(d >= 0 && n->listen(ctx, d, handle, &lc) == ncclSuccess);
	CHECK(connect_pair(n, ctx, d, handle, lc, &sc, &rc) == 0);
	if (!sc || !rc)
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
	CHECK(n->deregMr(sc, smh) == ncclSuccess);
	CHECK(n->closeSend(sc) == ncclSuccess && n->closeRecv(rc) == ncclSuccess);
	CHECK(n->closeListen(lc) == ncclSuccess);
	CHECK(n->finalize(ctx) == ncclSuccess);
	free(sb);
	free(rb);
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
	return nvt_exit("test_limits");
}
