/*
 * test_vnic - NIC fusion through makeVDevice, end to end over simverbs with
 * four devices (simib0, simib1, simib2: InfiniBand; simroce0: RoCE): merged
 * properties (name, speed, vProps, plane mask), data through a merged vNIC
 * with one and with several QPs split over both NICs (content checked), the
 * refusals (mixed link layers, too many devices for the ABI version,
 * duplicates, NCCL_IB_MERGE_NICS=0), planeIds of NICs fused over different
 * plane sets. Each scenario runs in its own process.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nvplugin.h"

static void run(const char *name, void (*fn)(void))
{
	pid_t pid = fork();
	int status = 0;

	if (pid == 0) {
		nvt_failures = 0; /* count this scenario's own failures only */
		fn();
		exit(nvt_failures ? 1 : 0); /* exit(): simverbs' leak report runs */
	}
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "scenario %s failed (status 0x%x)\n", name, status);
		nvt_failures++;
	}
}

/* One 1 MiB + one 0-byte message through vdev, both directions of one pair. */
static void exchange(ncclNet_v12_t *n, void *ctx, int vd)
{
	size_t sz = 1 << 20;
	char handle[NCCL_NET_HANDLE_MAXSIZE], *sb = malloc(sz), *rb = malloc(sz);
	void *lc = NULL, *sc = NULL, *rc = NULL, *smh = NULL, *rmh = NULL;

	CHECK(n->listen(ctx, vd, handle, &lc) == ncclSuccess && lc);
	for (time_t end = time(NULL) + 60; (!sc || !rc) && time(NULL) < end;) {
		if (!sc && n->connect(ctx, vd, handle, &sc, NULL) != ncclSuccess)
			break;
		if (!rc && n->accept(lc, &rc, NULL) != ncclSuccess)
			break;
	}
	CHECK(sc && rc);
	if (!sc || !rc)
		return;
	for (size_t i = 0; i < sz; i++)
		sb[i] = (char)(i * 131 + 7);
	CHECK(n->regMr(sc, sb, sz, NCCL_PTR_HOST, &smh) == ncclSuccess);
	CHECK(n->regMr(rc, rb, sz, NCCL_PTR_HOST, &rmh) == ncclSuccess);
	for (int it = 0; it < 2; it++) {
		size_t len = it ? 0 : sz, cap = sz;
		void *sr = NULL, *rr = NULL, *data = rb;
		int tag = 5, ds = 0, dr = 0, ssize = -1, rsize[8] = { -1 };
		ncclResult_t res = ncclSuccess;
		time_t end = time(NULL) + 60;

		memset(rb, 0, sz);
		/* Drive both sides from one loop, as NCCL's proxy does: posting may
		 * return NULL until the other side has progressed. */
		while (res == ncclSuccess && (!ds || !dr) && time(NULL) < end) {
			if (!rr)
				res = n->irecv(rc, 1, &data, &cap, &tag, &rmh, NULL, &rr);
			if (!sr && res == ncclSuccess)
				res = n->isend(sc, sb, len, 5, smh, NULL, &sr);
			if (sr && !ds && res == ncclSuccess)
				res = n->test(sr, &ds, &ssize);
			if (rr && !dr && res == ncclSuccess)
				res = n->test(rr, &dr, rsize);
		}
		CHECK(res == ncclSuccess && ds && dr && rsize[0] == (int)len);
		CHECK(len == 0 || memcmp(sb, rb, sz) == 0);
	}
	CHECK(n->deregMr(sc, smh) == ncclSuccess && n->deregMr(rc, rmh) == ncclSuccess);
	CHECK(n->closeSend(sc) == ncclSuccess && n->closeRecv(rc) == ncclSuccess);
	CHECK(n->closeListen(lc) == ncclSuccess);
	free(sb);
	free(rb);
}

static void sc_merge(void)
{
	ncclNet_v12_t *n = load();
	ncclNetProperties_v12_t p, p0, p1;
	ncclNetVDeviceProps_v12_t vp = { 2, { 0 } };
	void *ctx = NULL;
	int vd = -1, nd = 0;

	CHECK(n && n->init(&ctx, 1, NULL, NULL, NULL) == ncclSuccess);
	if (!ctx)
		return;
	vp.devs[0] = find(n, "simib0");
	vp.devs[1] = find(n, "simib1");
	CHECK(vp.devs[0] >= 0 && vp.devs[1] >= 0 && n->devices(&nd) == ncclSuccess);
	CHECK(n->makeVDevice(&vd, &vp) == ncclSuccess && vd == nd);
	CHECK(n->getProperties(vd, &p) == ncclSuccess);
	CHECK(n->getProperties(vp.devs[0], &p0) == 0 && n->getProperties(vp.devs[1], &p1) == 0);
	CHECK(!strcmp(p.name, "simib0+simib1") && p.speed == p0.speed + p1.speed);
	CHECK(p.vProps.ndevs == 2 && p.vProps.devs[0] == vp.devs[0] && p.vProps.devs[1] == vp.devs[1]);
	CHECK(p.railId == -1 && p.planeId == (0x4000 | 1)); /* virtual bit | "plane -1" slot */
	CHECK(n->devices(&nd) == ncclSuccess && nd == vd + 1);
	exchange(n, ctx, vd);
	CHECK(n->finalize(ctx) == ncclSuccess);
}

static void sc_merge_split(void)
{
	setenv("NCCL_IB_QPS_PER_CONNECTION", "2", 1);
	setenv("NCCL_IB_SPLIT_DATA_ON_QPS", "1", 1);
	sc_merge();
}

static void sc_refuse(void)
{
	ncclNet_v12_t *n = load();
	ncclNetVDeviceProps_v12_t vp = { 2, { 0 } };
	ncclNetVDeviceProps_v11_t vp11 = { 5, { 0, 1, 2, 0 } };
	void *ctx = NULL;
	int vd = -1, nd = 0;

	CHECK(n && n->init(&ctx, 1, NULL, NULL, NULL) == ncclSuccess);
	if (!ctx)
		return;
	n->devices(&nd);
	vp.devs[0] = find(n, "simib0");
	vp.devs[1] = find(n, "simroce0");
	CHECK(n->makeVDevice(&vd, &vp) == ncclInvalidArgument); /* IB + RoCE */
	vp.devs[1] = vp.devs[0];
	CHECK(n->makeVDevice(&vd, &vp) == ncclInvalidArgument); /* duplicate */
	vp.ndevs = 9;
	CHECK(n->makeVDevice(&vd, &vp) == ncclInvalidArgument); /* > 8 */
	vp.ndevs = 0;
	CHECK(n->makeVDevice(&vd, &vp) == ncclInvalidArgument);
	vp.ndevs = 2;
	vp.devs[1] = nd + 5;
	CHECK(n->makeVDevice(&vd, &vp) == ncclInvalidArgument); /* not a device */
	{
		void *h = dlopen(plugin_path, RTLD_NOW | RTLD_LOCAL);
		ncclNet_v11_t *t = h ? dlsym(h, "ncclNetPlugin_v11") : NULL;

		CHECK(t && t->makeVDevice(&vd, &vp11) == ncclInvalidArgument); /* > 4 in v11 */
	}
	CHECK(n->devices(&vd) == ncclSuccess && vd == nd); /* nothing was added */
	CHECK(n->finalize(ctx) == ncclSuccess);
}

/* NCCL 2.30's planeId of fused NICs: plane indexes assigned once over all
 * devices (0 = no plane), not per fused NIC, so NICs fused over planes {0,2}
 * and {2,3} differ (both read 0x4006 when numbered per NIC). */
static void sc_planes(void)
{
	ncclNet_v12_t *n;
	ncclNetVDeviceProps_v12_t a = { 2, { 0 } }, b = { 2, { 0 } };
	ncclNetProperties_v12_t pa, pb, p1;
	void *ctx = NULL;
	int va = -1, vb = -1;

	setenv("NCCL_IB_HCA", "simib0:1:0:0,simib1:1:0:2,simib2:1:0:3,simroce0", 1);
	n = load();
	CHECK(n && n->init(&ctx, 1, NULL, NULL, NULL) == ncclSuccess);
	if (!ctx)
		return;
	a.devs[0] = find(n, "simib0");
	a.devs[1] = b.devs[0] = find(n, "simib1");
	b.devs[1] = find(n, "simib2");
	CHECK(a.devs[0] >= 0 && a.devs[1] >= 0 && b.devs[1] >= 0);
	CHECK(n->makeVDevice(&va, &a) == ncclSuccess && n->makeVDevice(&vb, &b) == ncclSuccess);
	CHECK(n->getProperties(va, &pa) == ncclSuccess && n->getProperties(vb, &pb) == ncclSuccess);
	CHECK(n->getProperties(a.devs[1], &p1) == ncclSuccess && p1.planeId == 2);
	/* planes -1, 0, 2, 3 have indexes 0, 1, 2, 3 */
	CHECK(pa.planeId == (0x4000 | 1 << 1 | 1 << 2));
	CHECK(pb.planeId == (0x4000 | 1 << 2 | 1 << 3));
	CHECK(pa.railId == 0 && pb.railId == 0);
	CHECK(n->finalize(ctx) == ncclSuccess);
}

static void sc_merge_disabled(void)
{
	ncclNet_v12_t *n;
	ncclNetVDeviceProps_v12_t vp = { 2, { 0 } };
	void *ctx = NULL;
	int vd;

	setenv("NCCL_IB_MERGE_NICS", "0", 1);
	n = load();
	CHECK(n && n->init(&ctx, 1, NULL, NULL, NULL) == ncclSuccess);
	if (!ctx)
		return;
	vp.devs[0] = find(n, "simib0");
	vp.devs[1] = find(n, "simib1");
	CHECK(n->makeVDevice(&vd, &vp) == ncclInvalidUsage);
	CHECK(n->finalize(ctx) == ncclSuccess);
}

int main(void)
{
	plugin_path = getenv("NV_TEST_PLUGIN");
	if (!plugin_path || access(plugin_path, R_OK) != 0) {
		printf("test_vnic: NV_TEST_PLUGIN not set or unreadable: skipped\n");
		return 77;
	}
	/* Before any verbs call: every process of this fabric sees these devices. */
	setenv("SIMVERBS_DEVICES", "simib0:ll=ib;simib1:ll=ib;simib2:ll=ib;simroce0:ll=eth", 1);
	run("merge", sc_merge);
	run("merge split", sc_merge_split);
	run("refuse", sc_refuse);
	run("merge disabled", sc_merge_disabled);
	run("planes", sc_planes);
	return nvt_exit("test_vnic");
}
