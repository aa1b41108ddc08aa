/*
 * rma_load.c - rma_harness's loader: dlopen of the plugin and dlsym of
 * ncclRmaPlugin_v15, then _v14, then _v13 (or the one -v names), as NCCL's
 * rma.cc does, the older tables adapted to the v15 shape the cases call.
 */
#include <dlfcn.h>
#include <string.h>

#include "rma_harness.h"

ncclRma_v15_t rma;
static ncclRma_v14_t *v14;
ncclRma_v13_t *v13;

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

static ncclResult_t a13_ctx(void *cc, ncclRmaConfig_v15_t *cfg, void **ctx)
{
	ncclGinConfig_v13_t g = { .nContexts = cfg->nContexts, .trafficClass = cfg->trafficClass };
	ncclNetDeviceHandle_v11_t *dh = (void *)1;
	ncclResult_t r = v13->createContext(cc, &g, ctx, &dh);

	if (r == ncclSuccess && dh != NULL)
		FAIL("v13 createContext handed back a device handle %p (a proxy plugin has none)", dh);
	return r;
}

static ncclResult_t a13_reg(void *cc, void *d, size_t n, int t, uint64_t fl, void **mh)
{
	void *gh = (void *)1;
	ncclResult_t r = v13->regMrSym(cc, d, n, t, fl, mh, &gh);

	if (r == ncclSuccess && gh != NULL)
		FAIL("v13 regMrSym handed back a GIN handle");
	return r;
}

void load(void)
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

