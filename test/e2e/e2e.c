/*
 * e2e.c - the end-to-end harness (see e2e.h).
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "e2e.h"

#define E2E_WARN_BUF (256 * 1024)

static pthread_mutex_t e2e_log_lock = PTHREAD_MUTEX_INITIALIZER;
static char e2e_warn_buf[E2E_WARN_BUF];
static size_t e2e_warn_len;
static int e2e_warns;
int e2e_record_info;

void e2e_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "[%d] FAIL %s:%d: ", (int)getpid(), file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

void e2e_note(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "[%d] ", (int)getpid());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void e2e_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		const char *fmt, ...)
{
	char msg[2048];
	va_list ap;

	(void)flags;
	if (level != NCCL_LOG_WARN && !getenv("E2E_VERBOSE") &&
	    !(level == NCCL_LOG_INFO && e2e_record_info))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (level == NCCL_LOG_WARN || getenv("E2E_VERBOSE"))
		fprintf(stderr, "[%d] %s %s:%d %s\n", (int)getpid(),
			level == NCCL_LOG_WARN ? "WARN" : "INFO", file, line, msg);
	if (level != NCCL_LOG_WARN && !(level == NCCL_LOG_INFO && e2e_record_info))
		return;
	pthread_mutex_lock(&e2e_log_lock);
	e2e_warns++;
	e2e_warn_len += (size_t)snprintf(e2e_warn_buf + e2e_warn_len, E2E_WARN_BUF - e2e_warn_len,
					 "%s\n", msg);
	if (e2e_warn_len >= E2E_WARN_BUF - 1)
		e2e_warn_len = 0; /* wrap: tests only look at recent messages */
	pthread_mutex_unlock(&e2e_log_lock);
}

int e2e_warn_count(void)
{
	return e2e_warns;
}

int e2e_warned(const char *substring)
{
	int found;

	pthread_mutex_lock(&e2e_log_lock);
	found = strstr(e2e_warn_buf, substring) != NULL;
	pthread_mutex_unlock(&e2e_log_lock);
	return found;
}

void e2e_warn_reset(void)
{
	pthread_mutex_lock(&e2e_log_lock);
	e2e_warns = 0;
	e2e_warn_len = 0;
	e2e_warn_buf[0] = '\0';
	pthread_mutex_unlock(&e2e_log_lock);
}

const char *e2e_warn_text(void)
{
	return e2e_warn_buf;
}

#define V(ver) ((const ncclNet_v##ver##_t *)n->tbl)
/* Members whose signature is the same in every version still sit at
 * different offsets, so dispatch on the version like NCCL's adapters. */
#define E2E_SAME(member, ...) \
	do { \
		switch (n->ver) { \
		case 6: return V(6)->member(__VA_ARGS__); \
		case 7: return V(7)->member(__VA_ARGS__); \
		case 8: return V(8)->member(__VA_ARGS__); \
		case 9: return V(9)->member(__VA_ARGS__); \
		case 10: return V(10)->member(__VA_ARGS__); \
		case 11: return V(11)->member(__VA_ARGS__); \
		default: return V(12)->member(__VA_ARGS__); \
		} \
	} while (0)

int e2e_open(struct e2e_net *n, int ver)
{
	const char *path = getenv("NV_TEST_PLUGIN");
	char sym[32];
	ncclResult_t r;
	int ndev = 0;

	memset(n, 0, sizeof(*n));
	n->ver = ver;
	if (!path) {
		e2e_note("NV_TEST_PLUGIN is not set; skipping");
		return 77;
	}
	n->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!n->dl)
		E2E_FAIL("dlopen %s: %s", path, dlerror());
	snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", ver);
	n->tbl = dlsym(n->dl, sym);
	if (!n->tbl)
		E2E_FAIL("%s does not export %s", path, sym);
	switch (ver) {
	case 6: r = V(6)->init(e2e_logger); break;
	case 7: r = V(7)->init(e2e_logger); break;
	case 8: r = V(8)->init(e2e_logger); break;
	case 9: r = V(9)->init(e2e_logger); break;
	case 10: r = V(10)->init(e2e_logger, NULL); break;
	case 11: {
		ncclNetCommConfig_v11_t cfg = { .trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF };

		r = V(11)->init(&n->ctx, 0x1234, &cfg, e2e_logger, NULL);
		break;
	}
	default: {
		ncclNetCommConfig_v12_t cfg = { .trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF };

		r = V(12)->init(&n->ctx, 0x1234, &cfg, e2e_logger, NULL);
		break;
	}
	}
	if (r != ncclSuccess)
		E2E_FAIL("init (v%d) returned %d", ver, (int)r);
	E2E_OK(e2e_devices(n, &ndev));
	/* init's environment warnings (memlock limit) are not what the tests look at */
	e2e_warn_reset();
	if (ndev <= 0)
		E2E_FAIL("no devices after init (NCCL_IB_HCA=%s)", getenv("NCCL_IB_HCA"));
	return 0;
}

void e2e_close(struct e2e_net *n)
{
	if (n->ver == 11 && V(11)->finalize)
		E2E_OK(V(11)->finalize(n->ctx));
	else if (n->ver == 12 && V(12)->finalize)
		E2E_OK(V(12)->finalize(n->ctx));
	/* The plugin is linked -z nodelete; dlclose is what NCCL 2.28 does too. */
	if (n->dl)
		dlclose(n->dl);
	memset(n, 0, sizeof(*n));
}

ncclResult_t e2e_devices(struct e2e_net *n, int *ndev)
{
	E2E_SAME(devices, ndev);
}

#define E2E_COPY_PROPS(p, q) \
	do { \
		snprintf((p)->name, sizeof((p)->name), "%s", (q).name ? (q).name : ""); \
		(p)->ptr_support = (q).ptrSupport; \
		(p)->max_recvs = (q).maxRecvs; \
		(p)->speed = (q).speed; \
		(p)->port = (q).port; \
	} while (0)

ncclResult_t e2e_props(struct e2e_net *n, int dev, struct e2e_props *p)
{
	ncclResult_t r;

	p->max_p2p = 0; /* v6 .. v8 do not report it */
	switch (n->ver) {
	case 6: { ncclNetProperties_v6_t q; r = V(6)->getProperties(dev, &q); E2E_COPY_PROPS(p, q); break; }
	case 7: { ncclNetProperties_v7_t q; r = V(7)->getProperties(dev, &q); E2E_COPY_PROPS(p, q); break; }
	case 8: { ncclNetProperties_v8_t q; r = V(8)->getProperties(dev, &q); E2E_COPY_PROPS(p, q); break; }
	case 9: { ncclNetProperties_v9_t q; r = V(9)->getProperties(dev, &q); E2E_COPY_PROPS(p, q); p->max_p2p = q.maxP2pBytes; break; }
	case 10: { ncclNetProperties_v10_t q; r = V(10)->getProperties(dev, &q); E2E_COPY_PROPS(p, q); p->max_p2p = q.maxP2pBytes; break; }
	case 11: { ncclNetProperties_v11_t q; r = V(11)->getProperties(dev, &q); E2E_COPY_PROPS(p, q); p->max_p2p = q.maxP2pBytes; break; }
	default: { ncclNetProperties_v12_t q; r = V(12)->getProperties(dev, &q); E2E_COPY_PROPS(p, q); p->max_p2p = q.maxP2pBytes; break; }
	}
	return r;
}

ncclResult_t e2e_listen(struct e2e_net *n, int dev, void *handle, void **lc)
{
	switch (n->ver) {
	case 6: return V(6)->listen(dev, handle, lc);
	case 7: return V(7)->listen(dev, handle, lc);
	case 8: return V(8)->listen(dev, handle, lc);
	case 9: return V(9)->listen(dev, handle, lc);
	case 10: return V(10)->listen(dev, handle, lc);
	case 11: return V(11)->listen(n->ctx, dev, handle, lc);
	default: return V(12)->listen(n->ctx, dev, handle, lc);
	}
}

ncclResult_t e2e_connect(struct e2e_net *n, int dev, void *handle, void **sc)
{
	ncclNetDeviceHandle_v7_t *dh = NULL; /* NCCL passes a pointer to NULL for sends */
	ncclNetCommConfig_v10_t cfg = { .trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF };

	switch (n->ver) {
	case 6: return V(6)->connect(dev, handle, sc);
	case 7: return V(7)->connect(dev, handle, sc, &dh);
	case 8: return V(8)->connect(dev, handle, sc, (ncclNetDeviceHandle_v8_t **)&dh);
	case 9: return V(9)->connect(dev, handle, sc, (ncclNetDeviceHandle_v9_t **)&dh);
	case 10: return V(10)->connect(dev, &cfg, handle, sc, (ncclNetDeviceHandle_v10_t **)&dh);
	case 11: return V(11)->connect(n->ctx, dev, handle, sc, (ncclNetDeviceHandle_v11_t **)&dh);
	default: return V(12)->connect(n->ctx, dev, handle, sc, (ncclNetDeviceHandle_v12_t **)&dh);
	}
}

ncclResult_t e2e_accept(struct e2e_net *n, void *lc, void **rc)
{
	ncclNetDeviceHandle_v7_t *dh = NULL;

	switch (n->ver) {
	case 6: return V(6)->accept(lc, rc);
	case 7: return V(7)->accept(lc, rc, &dh);
	case 8: return V(8)->accept(lc, rc, (ncclNetDeviceHandle_v8_t **)&dh);
	case 9: return V(9)->accept(lc, rc, (ncclNetDeviceHandle_v9_t **)&dh);
	case 10: return V(10)->accept(lc, rc, (ncclNetDeviceHandle_v10_t **)&dh);
	case 11: return V(11)->accept(lc, rc, (ncclNetDeviceHandle_v11_t **)&dh);
	default: return V(12)->accept(lc, rc, (ncclNetDeviceHandle_v12_t **)&dh);
	}
}

ncclResult_t e2e_reg_mr(struct e2e_net *n, void *comm, void *data, size_t size, int type,
			void **mh)
{
	switch (n->ver) {
	case 6: return V(6)->regMr(comm, data, (int)size, type, mh);
	case 7: return V(7)->regMr(comm, data, (int)size, type, mh);
	default: break;
	}
	E2E_SAME(regMr, comm, data, size, type, mh);
}

ncclResult_t e2e_dereg_mr(struct e2e_net *n, void *comm, void *mh)
{
	E2E_SAME(deregMr, comm, mh);
}

ncclResult_t e2e_isend(struct e2e_net *n, void *sc, void *data, size_t size, int tag, void *mh,
		       void **req)
{
	switch (n->ver) {
	case 6: return V(6)->isend(sc, data, (int)size, tag, mh, req);
	case 7: return V(7)->isend(sc, data, (int)size, tag, mh, req);
	case 8: return V(8)->isend(sc, data, (int)size, tag, mh, req);
	case 9: return V(9)->isend(sc, data, size, tag, mh, req);
	case 10: return V(10)->isend(sc, data, size, tag, mh, NULL, req);
	case 11: return V(11)->isend(sc, data, size, tag, mh, NULL, req);
	default: return V(12)->isend(sc, data, size, tag, mh, NULL, req);
	}
}

ncclResult_t e2e_irecv(struct e2e_net *n, void *rc, int nr, void **data, size_t *sizes,
		       int *tags, void **mh, void **req)
{
	void *ph[8] = { 0 };
	int isz[8];
	int i;

	for (i = 0; i < nr && i < 8; i++)
		isz[i] = (int)sizes[i];
	switch (n->ver) {
	case 6: return V(6)->irecv(rc, nr, data, isz, tags, mh, req);
	case 7: return V(7)->irecv(rc, nr, data, isz, tags, mh, req);
	case 8: return V(8)->irecv(rc, nr, data, isz, tags, mh, req);
	case 9: return V(9)->irecv(rc, nr, data, sizes, tags, mh, req);
	case 10: return V(10)->irecv(rc, nr, data, sizes, tags, mh, ph, req);
	case 11: return V(11)->irecv(rc, nr, data, sizes, tags, mh, ph, req);
	default: return V(12)->irecv(rc, nr, data, sizes, tags, mh, ph, req);
	}
}

ncclResult_t e2e_iflush(struct e2e_net *n, void *rc, int nr, void **data, int *sizes, void **mh,
			void **req)
{
	E2E_SAME(iflush, rc, nr, data, sizes, mh, req);
}

ncclResult_t e2e_test(struct e2e_net *n, void *req, int *done, int *sizes)
{
	E2E_SAME(test, req, done, sizes);
}

ncclResult_t e2e_close_send(struct e2e_net *n, void *sc)
{
	E2E_SAME(closeSend, sc);
}

ncclResult_t e2e_close_recv(struct e2e_net *n, void *rc)
{
	E2E_SAME(closeRecv, rc);
}

ncclResult_t e2e_close_listen(struct e2e_net *n, void *lc)
{
	E2E_SAME(closeListen, lc);
}

ncclResult_t e2e_make_vdevice(struct e2e_net *n, int ndevs, const int *devs, int *vdev)
{
	ncclNetVDeviceProps_v12_t props;
	int i;

	if (n->ver != 12 || !V(12)->makeVDevice || ndevs > NCCL_NET_MAX_DEVS_PER_NIC_V12)
		return ncclInvalidUsage;
	memset(&props, 0, sizeof(props));
	props.ndevs = ndevs;
	for (i = 0; i < ndevs; i++)
		props.devs[i] = devs[i];
	return V(12)->makeVDevice(vdev, &props);
}
