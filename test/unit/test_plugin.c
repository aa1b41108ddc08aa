/*
 * test_plugin - the built libnccl-net-verbs.so as NCCL sees it, over simverbs:
 * exported tables: net v6..v12 and RMA v13..v15 (and nothing else), their mandatory members, init
 * in both forms, repeated init/finalize and reload, getProperties through every
 * version's layout, NCCL_IB_DISABLE (one WARN), a bad knob, NCCL_IB_PKEY beyond
 * the port's P_Key table, an empty NCCL_IB_HCA match,
 * makeVDevice. Each scenario runs in a child process (fresh plugin state).
 */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nccl/net.h"
#include "nvtest.h"

static const char *plugin_path;
static int infos_net_init; /* INFO messages flagged NET|INIT */

__attribute__((format(printf, 5, 6)))
static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		   const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	(void)file;
	(void)line;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (level == NCCL_LOG_INFO && (flags & NCCL_NET) && (flags & NCCL_INIT))
		infos_net_init++;
	if (level == NCCL_LOG_WARN) {
		size_t used = strlen(nvt_warns);

		snprintf(nvt_warns + used, sizeof(nvt_warns) - used, "%s\n", msg);
		nvt_nwarn++;
	}
	if (getenv("NVT_VERBOSE"))
		fprintf(stderr, "[%d] %s\n", (int)level, msg);
}

static void *open_plugin(void)
{
	void *h = dlopen(plugin_path, RTLD_NOW | RTLD_LOCAL);

	if (!h)
		fprintf(stderr, "dlopen %s: %s\n", plugin_path, dlerror());
	return h;
}

/* Runs fn in a child; the child's CHECK failures become its exit status. */
static void run(const char *name, void (*fn)(void))
{
	pid_t pid = fork();
	int status = 0;

	if (pid == 0) {
		nvt_failures = 0; /* count this scenario's own failures only */
		fn();
		_exit(nvt_failures ? 1 : 0);
	}
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "scenario %s failed (status 0x%x)\n", name, status);
		nvt_failures++;
	}
}

static void sc_symbols(void)
{
	void *h = open_plugin();
	const char *names[] = { "ncclNetPlugin_v6", "ncclNetPlugin_v7", "ncclNetPlugin_v8",
				"ncclNetPlugin_v9", "ncclNetPlugin_v10", "ncclNetPlugin_v11",
				"ncclNetPlugin_v12" };
	ncclNet_v12_t *v12;
	ncclNet_v11_t *v11;
	ncclNet_v9_t *v9;
	ncclNet_v6_t *v6;

	CHECK(h != NULL);
	if (!h)
		return;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char **name = dlsym(h, names[i]);

		CHECK(name && *name && !strcmp(*name, "Verbs"));
	}
	CHECK(dlsym(h, "ncclNetPlugin_v5") == NULL && dlsym(h, "ncclNetPlugin_v13") == NULL);
	/* the RMA tables NCCL 2.30 (v14, v13) and 2.31 (v15) look for, and no other */
	for (int v = 13; v <= 15; v++) {
		char sym[32];
		const char **name;

		snprintf(sym, sizeof(sym), "ncclRmaPlugin_v%d", v);
		name = dlsym(h, sym);
		CHECK(name && *name && !strcmp(*name, "Verbs"));
	}
	CHECK(dlsym(h, "ncclRmaPlugin_v12") == NULL && dlsym(h, "ncclRmaPlugin_v16") == NULL);
	CHECK(dlsym(h, "ncclGinPlugin_v13") == NULL && dlsym(h, "nv_rma_put") == NULL);
	CHECK(dlsym(h, "nv_net_listen") == NULL && dlsym(h, "nv_init") == NULL);
	CHECK(dlsym(h, "nv_log") == NULL && dlsym(h, "ncclCollNetPlugin_v12") == NULL);
	v12 = dlsym(h, "ncclNetPlugin_v12");
	v11 = dlsym(h, "ncclNetPlugin_v11");
	v9 = dlsym(h, "ncclNetPlugin_v9");
	v6 = dlsym(h, "ncclNetPlugin_v6");
	CHECK(v12->init && v12->devices && v12->getProperties && v12->listen && v12->connect &&
	      v12->accept && v12->regMr && v12->regMrDmaBuf && v12->deregMr && v12->isend &&
	      v12->irecv && v12->iflush && v12->test && v12->closeSend && v12->closeRecv &&
	      v12->closeListen && v12->finalize && v12->makeVDevice);
	CHECK(v11->finalize && v11->init && v11->getProperties && v11->irecv);
	CHECK(v9->makeVDevice == NULL && v9->isend && v9->getProperties);
	CHECK(v6->init && v6->closeListen && v6->getProperties);
	dlclose(h);
}

static void check_props_v12(const ncclNetProperties_v12_t *p, int dev)
{
	CHECK(p->name && p->name[0] && p->speed > 0 && p->port >= 1 && p->maxRecvs == 8);
	CHECK(p->regIsGlobal == 1 && (p->ptrSupport & NCCL_PTR_HOST) && p->maxComms > 0);
	CHECK(p->netDeviceType == NCCL_NET_DEVICE_HOST && p->netDeviceVersion == 0);
	CHECK(p->vProps.ndevs == 1 && p->vProps.devs[0] == dev && p->forceFlush == 0);
	CHECK(p->maxP2pBytes == UINT32_MAX && p->maxCollBytes == (512ULL << 20));
	CHECK(p->maxMultiRequestSize == 1 && p->railId == -1 && p->planeId == -1);
}

static void sc_v12_lifecycle(void)
{
	ncclNetCommConfig_v12_t cfg = { 5 };
	ncclNetProperties_v12_t p;
	void *h = open_plugin(), *ctx[3];
	ncclNet_v12_t *n = h ? dlsym(h, "ncclNetPlugin_v12") : NULL;
	int nd = 0, nd2 = 0, vd = -1, two[2] = { 0, 1 }, nphys = -1;
	ncclNetVDeviceProps_v12_t vp = { 1, { 1 } };

	if (!n) {
		nvt_failures++;
		return;
	}
	for (int round = 0; round < 3; round++) {
		infos_net_init = 0;
		for (int i = 0; i < 3; i++)
			CHECK(n->init(&ctx[i], 100 + i, &cfg, logger, NULL) == ncclSuccess && ctx[i]);
		CHECK(infos_net_init > 0);
		CHECK(n->devices(&nd) == ncclSuccess && nd >= 2);
		if (round == 0)
			nphys = nd;
		/* the vNIC made in round 0 survives the full finalize (NCCL keeps indices) */
		CHECK(nd == (round == 0 ? nphys : nphys + 1));
		for (int d = 0; d < nphys; d++) {
			memset(&p, 0xa5, sizeof(p));
			CHECK(n->getProperties(d, &p) == ncclSuccess);
			check_props_v12(&p, d);
		}
		if (round > 0)
			CHECK(n->getProperties(nphys, &p) == ncclSuccess && p.vProps.devs[0] == 1);
		CHECK(n->getProperties(nd, &p) != ncclSuccess);
		CHECK(n->finalize(ctx[0]) == ncclSuccess && n->finalize(ctx[1]) == ncclSuccess);
		CHECK(n->devices(&nd2) == ncclSuccess && nd2 == nd); /* ctx[2] still holds it */
		if (round == 0) {
			CHECK(n->makeVDevice(&vd, &vp) == ncclSuccess && vd == nd);
			vp.ndevs = 2;
			memcpy(vp.devs, two, sizeof(two));
			CHECK(n->makeVDevice(&vd, &vp) == ncclInvalidArgument); /* IB + RoCE */
			vp.ndevs = 1;
			vp.devs[0] = 1;
		}
		CHECK(n->finalize(ctx[2]) == ncclSuccess);
		CHECK(n->devices(&nd2) == ncclSuccess && nd2 == 0); /* released */
	}
	CHECK(n->finalize(NULL) == ncclSuccess);
	dlclose(h);
	/* reload */
	h = open_plugin();
	n = h ? dlsym(h, "ncclNetPlugin_v12") : NULL;
	CHECK(n && n->init(&ctx[0], 1, NULL, logger, NULL) == ncclSuccess);
	CHECK(n && n->devices(&nd2) == ncclSuccess && nd2 == nd);
	CHECK(n && n->finalize(ctx[0]) == ncclSuccess);
	if (h)
		dlclose(h);
}

#define GET(ver, type) \
	type *ver = h ? dlsym(h, "ncclNetPlugin_" #ver) : NULL

static void sc_old_versions(void)
{
	void *h = open_plugin();
	GET(v6, ncclNet_v6_t);
	GET(v7, ncclNet_v7_t);
	GET(v8, ncclNet_v8_t);
	GET(v9, ncclNet_v9_t);
	GET(v10, ncclNet_v10_t);
	GET(v11, ncclNet_v11_t);
	ncclNetProperties_v6_t p6;
	ncclNetProperties_v7_t p7;
	ncclNetProperties_v8_t p8;
	ncclNetProperties_v9_t p9;
	ncclNetProperties_v11_t p11;
	ncclNetVDeviceProps_v10_t vp = { 1, { 0 } };
	int nd = 0, vd = -1;
	void *ctx = NULL;

	if (!v6 || !v11) {
		nvt_failures++;
		return;
	}
	/* per-process init, several times (idempotent), through every old version */
	CHECK(v6->init(logger) == ncclSuccess && v7->init(logger) == ncclSuccess);
	CHECK(v8->init(logger) == ncclSuccess && v9->init(logger) == ncclSuccess);
	CHECK(v10->init(logger, NULL) == ncclSuccess);
	CHECK(v6->devices(&nd) == ncclSuccess && nd >= 2);
	for (int d = 0; d < nd; d++) {
		memset(&p6, 0xa5, sizeof(p6));
		memset(&p7, 0xa5, sizeof(p7));
		memset(&p8, 0xa5, sizeof(p8));
		memset(&p9, 0xa5, sizeof(p9));
		memset(&p11, 0xa5, sizeof(p11));
		CHECK(v6->getProperties(d, &p6) == ncclSuccess && v7->getProperties(d, &p7) == 0);
		CHECK(v8->getProperties(d, &p8) == 0 && v9->getProperties(d, &p9) == 0);
		CHECK(v11->getProperties(d, &p11) == ncclSuccess);
		CHECK(p6.speed > 0 && p6.maxRecvs == 8 && p6.port >= 1 && !strcmp(p6.name, p11.name));
		CHECK(p7.maxRecvs == 8 && p7.netDeviceType == 0 && p7.netDeviceVersion == 0);
		CHECK(p8.regIsGlobal == 1 && p8.speed == p6.speed && p8.netDeviceVersion == 0);
		CHECK(p9.forceFlush == 0 && p9.vProps.ndevs == 1 && p9.vProps.devs[0] == d);
		CHECK(p9.maxP2pBytes == UINT32_MAX && p9.maxCollBytes == (512ULL << 20));
		CHECK(p9.maxRecvs == 8 && p9.speed == p6.speed && p9.latency == 0.0f);
		CHECK(p11.maxMultiRequestSize == 1 && p11.maxP2pBytes == UINT32_MAX);
		CHECK(p11.guid == p6.guid && p11.ptrSupport == p6.ptrSupport);
	}
	CHECK(v10->makeVDevice(&vd, &vp) == ncclSuccess && vd == nd);
	{
		/* adapters refuse what cannot be converted before touching any comm */
		int sizes[9] = { 1, -5 }, tags[9] = { 0 };
		void *data[9] = { NULL }, *mh[9] = { NULL }, *req = NULL;
		ncclNet_v12_t *v12 = dlsym(h, "ncclNetPlugin_v12");
		size_t zs[9] = { 0 };

		CHECK(v6->isend(NULL, NULL, -1, 0, NULL, &req) == ncclInternalError);
		CHECK(v7->regMr(NULL, NULL, -1, NCCL_PTR_HOST, &req) == ncclInternalError);
		CHECK(v8->irecv(NULL, 2, data, sizes, tags, mh, &req) == ncclInternalError);
		CHECK(v8->irecv(NULL, 9, data, sizes, tags, mh, &req) == ncclInternalError);
		CHECK(v12->irecv(NULL, 0, data, zs, tags, mh, NULL, &req) == ncclInternalError);
		CHECK(v12->irecv(NULL, 9, data, zs, tags, mh, NULL, &req) == ncclInternalError);
		CHECK(v12->listen(NULL, nd + 5, data, &req) == ncclInternalError);
		CHECK(v10->connect(-1, NULL, data, &req, NULL) == ncclInternalError);
	}
	/* v11 per-communicator init on top of the per-process one */
	CHECK(v11->init(&ctx, 7, NULL, logger, NULL) == ncclSuccess && ctx);
	CHECK(v11->finalize(ctx) == ncclSuccess);
	CHECK(v6->devices(&nd) == ncclSuccess && nd >= 3); /* the v6 reference stays */
	dlclose(h);
}

static void sc_disabled(void)
{
	void *h = open_plugin(), *ctx = (void *)0x1;
	ncclNet_v12_t *n = h ? dlsym(h, "ncclNetPlugin_v12") : NULL;
	ncclNet_v6_t *v6 = h ? dlsym(h, "ncclNetPlugin_v6") : NULL;

	setenv("NCCL_IB_DISABLE", "1", 1);
	nvt_log_clear();
	CHECK(n && n->init(&ctx, 1, NULL, logger, NULL) == ncclInternalError && ctx == NULL);
	CHECK(n && n->finalize(ctx) == ncclSuccess);
	CHECK(v6 && v6->init(logger) == ncclInternalError);
	/* the WARN says why, once per process however often NCCL calls init */
	{
		const char *w = strstr(nvt_warns, "NCCL_IB_DISABLE=1: the plugin is disabled");

		CHECK(w != NULL);
		CHECK(w && !strstr(w + 1, "NCCL_IB_DISABLE=1"));
	}
	unsetenv("NCCL_IB_DISABLE");
	CHECK(n && n->init(&ctx, 1, NULL, logger, NULL) == ncclSuccess && ctx); /* re-read */
	CHECK(n && n->finalize(ctx) == ncclSuccess);
}

static void sc_bad_config(void)
{
	void *h = open_plugin(), *ctx = NULL;
	ncclNet_v12_t *n = h ? dlsym(h, "ncclNetPlugin_v12") : NULL;

	setenv("NCCL_IB_TIMEOUT", "99", 1);
	nvt_log_clear();
	CHECK(n && n->init(&ctx, 1, NULL, logger, NULL) == ncclInvalidUsage && ctx == NULL);
	CHECK(strstr(nvt_warns, "NCCL_IB_TIMEOUT=99") != NULL);
	unsetenv("NCCL_IB_TIMEOUT");
	setenv("NCCL_IB_HCA", "=nosuchhca", 1);
	nvt_log_clear();
	CHECK(n && n->init(&ctx, 1, NULL, logger, NULL) == ncclSystemError && ctx == NULL);
	CHECK(strstr(nvt_warns, "nosuchhca") != NULL);
	/* a P_Key index beyond every port's table (simverbs: 1 entry) is refused at
	 * init, naming knob, value and device, not at the first connect */
	setenv("NCCL_IB_HCA", "=simib0", 1);
	setenv("NCCL_IB_PKEY", "1", 1);
	nvt_log_clear();
	CHECK(n && n->init(&ctx, 1, NULL, logger, NULL) != ncclSuccess && ctx == NULL);
	CHECK(strstr(nvt_warns, "NCCL_IB_PKEY=1: simib0:1 has 1 P_Key table entry") != NULL);
	unsetenv("NCCL_IB_PKEY");
	setenv("NCCL_IB_HCA", "=simroce0", 1);
	CHECK(n && n->init(&ctx, 1, NULL, logger, NULL) == ncclSuccess);
	if (n && ctx) {
		int nd = 0;

		CHECK(n->devices(&nd) == ncclSuccess && nd == 1);
		CHECK(n->finalize(ctx) == ncclSuccess);
	}
}

/* init/finalize from several threads at once (NCCL serializes them, other
 * hosts of the plugin may not): the refcount must end at zero, no crash. */
static ncclNet_v12_t *conc_net;

static void *conc_worker(void *arg)
{
	ncclNetProperties_v12_t p;
	int nd = 0;

	(void)arg;
	for (int i = 0; i < 10; i++) {
		void *ctx = NULL;

		if (conc_net->init(&ctx, (uint64_t)i, NULL, logger, NULL) != ncclSuccess || !ctx) {
			nvt_failures++;
			continue;
		}
		if (conc_net->devices(&nd) != ncclSuccess || nd < 2 ||
		    conc_net->getProperties(nd - 1, &p) != ncclSuccess)
			nvt_failures++;
		conc_net->finalize(ctx);
	}
	return NULL;
}

static void sc_concurrent(void)
{
	pthread_t t[4];
	void *h = open_plugin();
	int nd = -1;

	conc_net = h ? dlsym(h, "ncclNetPlugin_v12") : NULL;
	if (!conc_net) {
		nvt_failures++;
		return;
	}
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, conc_worker, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	CHECK(conc_net->devices(&nd) == ncclSuccess && nd == 0); /* everything released */
}

int main(void)
{
	plugin_path = getenv("NV_TEST_PLUGIN");
	if (!plugin_path || access(plugin_path, R_OK) != 0) {
		printf("test_plugin: NV_TEST_PLUGIN not set or unreadable: skipped\n");
		return 77;
	}
	run("symbols", sc_symbols);
	run("v12 lifecycle", sc_v12_lifecycle);
	run("old versions", sc_old_versions);
	run("disabled", sc_disabled);
	run("bad config", sc_bad_config);
	run("concurrent init/finalize", sc_concurrent);
	return nvt_exit("test_plugin");
}
