/*
 * nb-fake-net-tables.h - the v6 .. v12 tables of the fake plugin: thin
 * per-version wrappers around the fk_* core in nb-fake-net.c (included there).
 */

/* ---- init ---- */
static ncclResult_t fk_init10(ncclDebugLogger_t l, ncclProfilerCallback_t p)
{
	(void)p;
	return fk_init(l);
}

static ncclResult_t fk_init11(void **ctx, uint64_t id, ncclNetCommConfig_v11_t *cfg,
			      ncclDebugLogger_t l, ncclProfilerCallback_t p)
{
	(void)id, (void)cfg, (void)p;
	*ctx = (void *)&fk_log;
	return fk_init(l);
}

static ncclResult_t fk_finalize(void *ctx)
{
	return ctx == (void *)&fk_log ? ncclSuccess : ncclInternalError;
}

/* ---- properties ---- */
#define FK_V6(q, p) do {						\
	(q)->name = (p).name; (q)->pciPath = (p).pciPath; (q)->guid = (p).guid;	\
	(q)->ptrSupport = (p).ptrSupport; (q)->speed = (p).speed;		\
	(q)->port = (p).port; (q)->latency = (p).latency;			\
	(q)->maxComms = (p).maxComms; (q)->maxRecvs = (p).maxRecvs;		\
} while (0)

static ncclResult_t fk_props6(int d, ncclNetProperties_v6_t *q)
{
	ncclNetProperties_v12_t p;

	(void)d;
	fk_props(&p);
	FK_V6(q, p);
	return ncclSuccess;
}

static ncclResult_t fk_props7(int d, ncclNetProperties_v7_t *q)
{
	ncclNetProperties_v12_t p;

	(void)d;
	fk_props(&p);
	FK_V6(q, p);
	q->netDeviceType = p.netDeviceType;
	q->netDeviceVersion = p.netDeviceVersion;
	return ncclSuccess;
}

static ncclResult_t fk_props8(int d, ncclNetProperties_v8_t *q)
{
	ncclNetProperties_v12_t p;

	(void)d;
	fk_props(&p);
	FK_V6(q, p);
	q->regIsGlobal = 0;
	q->netDeviceType = p.netDeviceType;
	q->netDeviceVersion = p.netDeviceVersion;
	return ncclSuccess;
}

static ncclResult_t fk_props11(int d, ncclNetProperties_v11_t *q)
{
	ncclNetProperties_v12_t p;

	(void)d;
	fk_props(&p);
	memset(q, 0, sizeof(*q));
	FK_V6(q, p);
	q->netDeviceType = p.netDeviceType;
	q->vProps.ndevs = 1;
	q->maxP2pBytes = p.maxP2pBytes;
	q->maxCollBytes = p.maxCollBytes;
	q->maxMultiRequestSize = 1;
	return ncclSuccess;
}

static ncclResult_t fk_props9(int d, ncclNetProperties_v9_t *q)
{
	ncclNetProperties_v11_t p;

	fk_props11(d, &p);
	memcpy(q, &p, sizeof(*q));	/* v9 is a prefix of v11 */
	return ncclSuccess;
}

static ncclResult_t fk_props12(int d, ncclNetProperties_v12_t *q)
{
	(void)d;
	fk_props(q);
	return ncclSuccess;
}

/* ---- connection ---- */
static ncclResult_t fk_listen11(void *ctx, int dev, void *h, void **l)
{
	(void)ctx;
	return fk_listen(dev, h, l);
}

static ncclResult_t fk_connect6(int dev, void *h, void **s)
{
	(void)dev;
	return fk_connect(h, s);
}

static ncclResult_t fk_connect7(int dev, void *h, void **s, ncclNetDeviceHandle_v7_t **dh)
{
	(void)dev, (void)dh;
	return fk_connect(h, s);
}

static ncclResult_t fk_connect10(int dev, ncclNetCommConfig_v10_t *cfg, void *h, void **s,
				 ncclNetDeviceHandle_v10_t **dh)
{
	(void)dev, (void)cfg, (void)dh;
	return fk_connect(h, s);
}

static ncclResult_t fk_connect11(void *ctx, int dev, void *h, void **s,
				 ncclNetDeviceHandle_v11_t **dh)
{
	(void)ctx, (void)dev, (void)dh;
	return fk_connect(h, s);
}

static ncclResult_t fk_accept6(void *l, void **r)
{
	return fk_accept(l, r);
}

static ncclResult_t fk_accept7(void *l, void **r, ncclNetDeviceHandle_v7_t **dh)
{
	(void)dh;
	return fk_accept(l, r);
}

/* ---- memory ---- */
static ncclResult_t fk_regmr6(void *c, void *d, int size, int type, void **mh)
{
	return fk_regmr(c, d, (size_t)size, type, mh);
}

/* ---- data ---- */
static ncclResult_t fk_isend6(void *s, void *d, int size, int tag, void *mh, void **req)
{
	(void)mh;
	return fk_isend(s, d, (size_t)size, tag, req);
}

static ncclResult_t fk_isend9(void *s, void *d, size_t size, int tag, void *mh, void **req)
{
	(void)mh;
	return fk_isend(s, d, size, tag, req);
}

static ncclResult_t fk_isend10(void *s, void *d, size_t size, int tag, void *mh, void *ph,
			       void **req)
{
	(void)mh, (void)ph;
	return fk_isend(s, d, size, tag, req);
}

static ncclResult_t fk_irecv6(void *r, int n, void **d, int *sizes, int *tags, void **mh,
			      void **req)
{
	size_t sz[FK_GROUP];
	int i;

	(void)mh;
	for (i = 0; i < n && i < FK_GROUP; i++)
		sz[i] = (size_t)sizes[i];
	return fk_irecv(r, n, d, sz, tags, req);
}

static ncclResult_t fk_irecv9(void *r, int n, void **d, size_t *sizes, int *tags, void **mh,
			      void **req)
{
	(void)mh;
	return fk_irecv(r, n, d, sizes, tags, req);
}

static ncclResult_t fk_irecv10(void *r, int n, void **d, size_t *sizes, int *tags, void **mh,
			       void **ph, void **req)
{
	(void)mh, (void)ph;
	return fk_irecv(r, n, d, sizes, tags, req);
}

#define FK_COMMON_TAIL fk_iflush, fk_test, fk_close, fk_close, fk_close

FK_EXPORT const ncclNet_v6_t ncclNetPlugin_v6 = {
	"nbfake", fk_init, fk_devices, fk_props6, fk_listen, fk_connect6, fk_accept6, fk_regmr6,
	fk_regmr_dmabuf, fk_deregmr, fk_isend6, fk_irecv6, FK_COMMON_TAIL
};
FK_EXPORT const ncclNet_v7_t ncclNetPlugin_v7 = {
	"nbfake", fk_init, fk_devices, fk_props7, fk_listen, fk_connect7, fk_accept7, fk_regmr6,
	fk_regmr_dmabuf, fk_deregmr, fk_isend6, fk_irecv6, FK_COMMON_TAIL, NULL, NULL
};
FK_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
	"nbfake", fk_init, fk_devices, fk_props8, fk_listen, fk_connect7, fk_accept7, fk_regmr,
	fk_regmr_dmabuf, fk_deregmr, fk_isend6, fk_irecv6, FK_COMMON_TAIL, NULL, NULL
};
FK_EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
	"nbfake", fk_init, fk_devices, fk_props9, fk_listen, fk_connect7, fk_accept7, fk_regmr,
	fk_regmr_dmabuf, fk_deregmr, fk_isend9, fk_irecv9, FK_COMMON_TAIL, NULL, NULL, NULL
};
FK_EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
	"nbfake", fk_init10, fk_devices, fk_props9, fk_listen, fk_connect10, fk_accept7, fk_regmr,
	fk_regmr_dmabuf, fk_deregmr, fk_isend10, fk_irecv10, FK_COMMON_TAIL, NULL, NULL, NULL
};
FK_EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
	"nbfake", fk_init11, fk_devices, fk_props11, fk_listen11, fk_connect11, fk_accept7,
	fk_regmr, fk_regmr_dmabuf, fk_deregmr, fk_isend10, fk_irecv10, FK_COMMON_TAIL, NULL, NULL,
	NULL, fk_finalize, NULL
};
FK_EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
	"nbfake", fk_init11, fk_devices, fk_props12, fk_listen11, fk_connect11, fk_accept7,
	fk_regmr, fk_regmr_dmabuf, fk_deregmr, fk_isend10, fk_irecv10, FK_COMMON_TAIL, NULL, NULL,
	NULL, fk_finalize, NULL
};
