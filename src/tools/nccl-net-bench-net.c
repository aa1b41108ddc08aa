/*
 * nccl-net-bench-net.c - loading an ncclNet plugin and calling it through one
 * interface whatever table version (v6 .. v12) it exports, with the
 * conversions a caller of each version needs (docs/net-api.md, "Loading" and
 * "The tables"). Also the logger handed to the plugin.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl/net_ib_profiler.h"
#include "tools/nccl-net-bench.h"

#define T(v) ((const ncclNet_v##v##_t *)net->table)

static char nb_last_warn[1024];
static int nb_log_level = -1;

const char *nb_net_last_warn(void)
{
	return nb_last_warn;
}

const char *nb_result_str(int res)
{
	static const char *const names[] = {
		"ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
		"ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress",
	};
	if (res < 0 || res >= (int)(sizeof(names) / sizeof(names[0])))
		return "unknown ncclResult_t";
	return names[res];
}

static int nb_parse_level(void)
{
	const char *s = getenv("NCCL_DEBUG");

	if (!s || !*s || !strcasecmp(s, "WARN"))
		return NCCL_LOG_WARN;
	if (!strcasecmp(s, "VERSION"))
		return NCCL_LOG_VERSION;
	if (!strcasecmp(s, "INFO"))
		return NCCL_LOG_INFO;
	if (!strcasecmp(s, "TRACE"))
		return NCCL_LOG_TRACE;
	if (!strcasecmp(s, "NONE"))
		return NCCL_LOG_NONE;
	return NCCL_LOG_WARN;
}

static const char *nb_level_name(int level)
{
	switch (level) {
	case NCCL_LOG_WARN: return "WARN";
	case NCCL_LOG_INFO: return "INFO";
	case NCCL_LOG_TRACE: return "TRACE";
	case NCCL_LOG_ABORT: return "ABORT";
	case NCCL_LOG_VERSION: return "VERSION";
	default: return "LOG";
	}
}

/* The logger NCCL would pass: WARNs always kept (and shown with the rank). */
NB_FMT(5, 6)
static void nb_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		      const char *fmt, ...)
{
	char msg[960];
	va_list ap;

	(void)flags;
	if (nb_log_level < 0)
		nb_log_level = nb_parse_level();
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (level == NCCL_LOG_WARN || level == NCCL_LOG_ABORT)
		snprintf(nb_last_warn, sizeof(nb_last_warn), "%s", msg);
	if ((int)level > nb_log_level && level != NCCL_LOG_ABORT)
		return;
	if (nb_rank >= 0)
		fprintf(stderr, "rank %d: NET %s %s:%d %s\n", nb_rank, nb_level_name(level),
			file ? file : "?", line, msg);
	else
		fprintf(stderr, "nccl-net-bench: NET %s %s:%d %s\n", nb_level_name(level),
			file ? file : "?", line, msg);
}

static int nb_try_open(struct nb_net *net, const char *name, char *errs, size_t elen)
{
	size_t used = strlen(errs);

	dlerror();
	net->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (net->lib) {
		snprintf(net->path, sizeof(net->path), "%s", name);
		return 0;
	}
	if (used < elen)
		snprintf(errs + used, elen - used, "\n  %s", dlerror());
	return -1;
}

/* NCCL_NET_PLUGIN rules (2.27+): the name as given, then libnccl-net-<name>.so. */
static int nb_open_spec(struct nb_net *net, const char *spec, char *errs, size_t elen)
{
	char alt[PATH_MAX];
	size_t n = strlen(spec);

	if (nb_try_open(net, spec, errs, elen) == 0)
		return 0;
	if (strchr(spec, '/') || (strncmp(spec, "lib", 3) == 0 && n > 3 &&
				   strcmp(spec + n - 3, ".so") == 0))
		return -1;
	snprintf(alt, sizeof(alt), "libnccl-net-%s.so", spec);
	return nb_try_open(net, alt, errs, elen);
}

/* Default: the plugin of the build tree this program lives in, then the installed one. */
static int nb_open_default(struct nb_net *net, char *errs, size_t elen)
{
	char exe[PATH_MAX], cand[PATH_MAX + 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n > 0) {
		char *slash;

		exe[n] = '\0';
		slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			snprintf(cand, sizeof(cand), "%s/.libs/libnccl-net-verbs.so", exe);
			if (access(cand, R_OK) == 0 && nb_try_open(net, cand, errs, elen) == 0)
				return 0;
		}
	}
#ifdef NB_LIBDIR
	snprintf(cand, sizeof(cand), "%s/libnccl-net-verbs.so", NB_LIBDIR);
	if (access(cand, R_OK) == 0 && nb_try_open(net, cand, errs, elen) == 0)
		return 0;
#endif
	return nb_try_open(net, "libnccl-net-verbs.so", errs, elen);
}

static int nb_probe(struct nb_net *net, int want)
{
	char sym[32];
	int v;

	for (v = 12; v >= 6; v--) {
		if (want && v != want)
			continue;
		snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", v);
		net->table = dlsym(net->lib, sym);
		if (net->table) {
			net->version = v;
			net->name = *(const char *const *)net->table;
			return 0;
		}
	}
	if (want)
		nb_err("plugin %s does not export ncclNetPlugin_v%d", net->path, want);
	else
		nb_err("plugin %s exports no ncclNetPlugin_v6 .. v12 table", net->path);
	return -1;
}

int nb_net_load(struct nb_net *net, const char *spec, int want_version)
{
	char errs[2048] = "";
	int rc;

	memset(net, 0, sizeof(*net));
	if (!spec || !*spec)
		spec = getenv("NCCL_NET_PLUGIN");
	if (spec && (!strcmp(spec, NB_NCCL_IB) || !strncmp(spec, NB_NCCL_IB ":", 8))) {
		if (nb_net_load_nccl_ib(net, spec[7] ? spec + 8 : NULL) != 0)
			return -1;
		if (want_version && want_version != net->version) {
			nb_err("NCCL's IB transport in %s has a v%d table, not v%d", net->path,
			       net->version, want_version);
			return -1;
		}
		return 0;
	}
	rc = (spec && *spec) ? nb_open_spec(net, spec, errs, sizeof(errs))
			     : nb_open_default(net, errs, sizeof(errs));
	if (rc != 0) {
		nb_err("cannot load the net plugin %s:%s", spec && *spec ? spec : "(default)",
		       errs);
		return -1;
	}
	if (nb_probe(net, want_version) != 0) {
		dlclose(net->lib);
		net->lib = NULL;
		return -1;
	}
	return 0;
}

static int nb_chk(int res, const char *call)
{
	if (res == ncclSuccess)
		return 0;
	nb_err("plugin %s failed: %s (%d)%s%s", call, nb_result_str(res), res,
	       nb_last_warn[0] ? "; plugin said: " : "", nb_last_warn);
	return -1;
}

/* ---- --profile: a line per network profiler event ----------------------------- */

static FILE *nb_prof_out;
static pthread_mutex_t nb_prof_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t nb_prof_events, nb_prof_ops;

int nb_prof_open(const char *path, int rank)
{
	char name[1024];

	if (rank >= 0)
		snprintf(name, sizeof(name), "%s.%d", path, rank);
	else
		snprintf(name, sizeof(name), "%s", path);
	nb_prof_out = fopen(name, "w");
	if (!nb_prof_out) {
		nb_err("--profile %s: %s", name, strerror(errno));
		return -1;
	}
	setvbuf(nb_prof_out, NULL, _IOLBF, 0);
	return 0;
}

/* The recording callback: "start ev=N op=P plugin=0x.. type=qp dev= qpn= opcode= length=
 * wr_id=" with the event handle it returns, and "stop ev=N". */
static ncclResult_t nb_prof_cb(void **ev, int type, void *phandle, int64_t plugin, void *data)
{
	pthread_mutex_lock(&nb_prof_lock);
	if (type == ncclProfilerNetEventStart) {
		const ncclProfilerNetIbDescr_v1_t *d = data;

		*ev = (void *)(uintptr_t)++nb_prof_events;
		if ((plugin & ~0xffffLL) == NCCL_PROFILER_NET_TYPE_IB && d && d->type == ncclProfileQp)
			fprintf(nb_prof_out, "start ev=%llu op=%llu plugin=0x%llx type=qp dev=%d "
				"qpn=0x%x opcode=%d length=%zu wr_id=0x%llx\n",
				(unsigned long long)(uintptr_t)*ev,
				(unsigned long long)(uintptr_t)phandle, (unsigned long long)plugin,
				d->qp.device, (unsigned)d->qp.qpNum, d->qp.opcode, d->qp.length,
				(unsigned long long)d->qp.wr_id);
		else
			fprintf(nb_prof_out, "start ev=%llu op=%llu plugin=0x%llx type=?\n",
				(unsigned long long)(uintptr_t)*ev,
				(unsigned long long)(uintptr_t)phandle, (unsigned long long)plugin);
	} else if (type == ncclProfilerNetEventStop) {
		fprintf(nb_prof_out, "stop ev=%llu\n", (unsigned long long)(uintptr_t)*ev);
	} else {
		fprintf(nb_prof_out, "event type=%d ev=%llu\n", type,
			(unsigned long long)(uintptr_t)*ev);
	}
	pthread_mutex_unlock(&nb_prof_lock);
	return ncclSuccess;
}

/* The profiler handle NCCL would pass for one operation (NULL: not profiling). */
static void *nb_prof_op(void)
{
	void *p;

	if (!nb_prof_out)
		return NULL;
	pthread_mutex_lock(&nb_prof_lock);
	p = (void *)(uintptr_t)++nb_prof_ops;
	pthread_mutex_unlock(&nb_prof_lock);
	return p;
}

int nb_net_init(struct nb_net *net)
{
	ncclProfilerCallback_t prof = nb_prof_out ? nb_prof_cb : NULL;
	ncclNetCommConfig_v12_t cfg = { .trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF };
	uint64_t comm_id = 0x6e63636c6e6e6231ULL;
	int res;

	switch (net->version) {
	case 6: res = T(6)->init(nb_logger); break;
	case 7: res = T(7)->init(nb_logger); break;
	case 8: res = T(8)->init(nb_logger); break;
	case 9: res = T(9)->init(nb_logger); break;
	case 10: res = T(10)->init(nb_logger, prof); break;
	case 11: res = T(11)->init(&net->ctx, comm_id, &cfg, nb_logger, prof); break;
	default: res = T(12)->init(&net->ctx, comm_id, &cfg, nb_logger, prof); break;
	}
	if (res == ncclSuccess)
		net->initialized = 1;
	return nb_chk(res, "init");
}

int nb_net_devices(struct nb_net *net, int *ndev)
{
	/* devices() has the same prototype and slot in every version */
	return nb_chk(T(6)->devices(ndev), "devices");
}

#define NB_COPY_V6(p, q) do {							\
	snprintf((p)->name, sizeof((p)->name), "%s", (q).name ? (q).name : "?");	\
	snprintf((p)->pci, sizeof((p)->pci), "%s", (q).pciPath ? (q).pciPath : "-");	\
	(p)->guid = (q).guid; (p)->ptr_support = (q).ptrSupport;		\
	(p)->speed = (q).speed; (p)->port = (q).port; (p)->latency = (q).latency;	\
	(p)->max_comms = (q).maxComms; (p)->max_recvs = (q).maxRecvs;		\
} while (0)

static int nb_props_v9(struct nb_net *net, int dev, struct nb_props *p)
{
	ncclNetProperties_v11_t q;	/* v9/v10 are a prefix of v11 */
	int res;

	memset(&q, 0, sizeof(q));
	if (net->version == 9)
		res = T(9)->getProperties(dev, (ncclNetProperties_v9_t *)&q);
	else if (net->version == 10)
		res = T(10)->getProperties(dev, (ncclNetProperties_v10_t *)&q);
	else
		res = T(11)->getProperties(dev, &q);
	NB_COPY_V6(p, q);
	p->reg_is_global = q.regIsGlobal;
	p->force_flush = q.forceFlush;
	p->dev_type = q.netDeviceType;
	p->max_p2p_bytes = q.maxP2pBytes;
	return res;
}

static int nb_props_old(struct nb_net *net, int dev, struct nb_props *p)
{
	ncclNetProperties_v6_t q6;
	ncclNetProperties_v7_t q7;
	ncclNetProperties_v8_t q8;
	int res;

	p->max_p2p_bytes = NCCL_MAX_NET_SIZE;
	if (net->version == 6) {
		memset(&q6, 0, sizeof(q6));
		res = T(6)->getProperties(dev, &q6);
		NB_COPY_V6(p, q6);
	} else if (net->version == 7) {
		memset(&q7, 0, sizeof(q7));
		res = T(7)->getProperties(dev, &q7);
		NB_COPY_V6(p, q7);
		p->dev_type = q7.netDeviceType;
	} else {
		memset(&q8, 0, sizeof(q8));
		res = T(8)->getProperties(dev, &q8);
		NB_COPY_V6(p, q8);
		p->dev_type = q8.netDeviceType;
		p->reg_is_global = q8.regIsGlobal;
	}
	return res;
}

int nb_net_props(struct nb_net *net, int dev, struct nb_props *p)
{
	ncclNetProperties_v12_t q;
	int res;

	memset(p, 0, sizeof(*p));
	if (net->version <= 8) {
		res = nb_props_old(net, dev, p);
	} else if (net->version <= 11) {
		res = nb_props_v9(net, dev, p);
	} else {
		memset(&q, 0, sizeof(q));
		res = T(12)->getProperties(dev, &q);
		NB_COPY_V6(p, q);
		p->reg_is_global = q.regIsGlobal;
		p->force_flush = q.forceFlush;
		p->dev_type = q.netDeviceType;
		p->max_p2p_bytes = q.maxP2pBytes;
	}
	return nb_chk(res, "getProperties");
}

int nb_net_make_vdevice(struct nb_net *net, const char *list, int *dev)
{
	ncclNetVDeviceProps_v12_t p12;
	ncclNetVDeviceProps_v9_t p9;
	char *end;
	int n = 0, res;

	memset(&p12, 0, sizeof(p12));
	for (const char *c = list; *c; c = *end ? end + 1 : end) {
		long d = strtol(c, &end, 10);

		if (end == c || (*end && *end != ',') || d < 0 || n >= NCCL_NET_MAX_DEVS_PER_NIC_V12) {
			nb_err("--vdev '%s': want a list of device indices like 0,1", list);
			return -1;
		}
		p12.devs[n++] = (int)d;
	}
	p12.ndevs = n;
	if (net->version < 9 || !n) {
		nb_err("--vdev needs ncclNet v9 or newer and at least one device");
		return -1;
	}
	if (net->version == 12) {
		res = T(12)->makeVDevice(dev, &p12);
	} else {
		if (n > NCCL_NET_MAX_DEVS_PER_NIC_V11) {
			nb_err("--vdev: ncclNet v%d fuses at most %d devices", net->version,
			       NCCL_NET_MAX_DEVS_PER_NIC_V11);
			return -1;
		}
		p9.ndevs = n;
		memcpy(p9.devs, p12.devs, sizeof(p9.devs));
		res = net->version == 9 ? T(9)->makeVDevice(dev, &p9) :
		      net->version == 10 ? T(10)->makeVDevice(dev, &p9) : T(11)->makeVDevice(dev, &p9);
	}
	return nb_chk(res, "makeVDevice");
}

int nb_net_listen(struct nb_net *net, int dev, void *handle, void **lcomm)
{
	int res;

	*lcomm = NULL;
	if (net->version >= 11)
		res = T(11)->listen(net->ctx, dev, handle, lcomm);
	else
		res = T(6)->listen(dev, handle, lcomm);
	if (res == ncclSuccess && !*lcomm) {
		nb_err("plugin listen returned success but no listen comm");
		return -1;
	}
	return nb_chk(res, "listen");
}

int nb_net_connect(struct nb_net *net, int dev, void *handle, void **scomm)
{
	ncclNetCommConfig_v10_t cfg = { .trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF };
	ncclNetDeviceHandle_v7_t *devh = NULL;
	int res;

	switch (net->version) {
	case 6: res = T(6)->connect(dev, handle, scomm); break;
	case 7: res = T(7)->connect(dev, handle, scomm, &devh); break;
	case 8: res = T(8)->connect(dev, handle, scomm, &devh); break;
	case 9: res = T(9)->connect(dev, handle, scomm, &devh); break;
	case 10: res = T(10)->connect(dev, &cfg, handle, scomm, &devh); break;
	case 11: res = T(11)->connect(net->ctx, dev, handle, scomm, &devh); break;
	default: res = T(12)->connect(net->ctx, dev, handle, scomm, &devh); break;
	}
	return nb_chk(res, "connect");
}

int nb_net_accept(struct nb_net *net, void *lcomm, void **rcomm)
{
	ncclNetDeviceHandle_v7_t *devh = NULL;
	int res;

	if (net->version == 6)
		res = T(6)->accept(lcomm, rcomm);
	else	/* v7 .. v12: same prototype (device handle type is one layout) */
		res = T(7)->accept(lcomm, rcomm, &devh);
	return nb_chk(res, "accept");
}

int nb_net_regmr(struct nb_net *net, void *comm, void *data, size_t size, void **mh)
{
	int res;

	if (net->version <= 7) {
		if (size >= (1ULL << 31)) {
			nb_err("regMr of %zu bytes does not fit a v%d plugin's int size", size,
			       net->version);
			return -1;
		}
		res = T(6)->regMr(comm, data, (int)size, NCCL_PTR_HOST, mh);
	} else {
		res = T(8)->regMr(comm, data, size, NCCL_PTR_HOST, mh);
	}
	return nb_chk(res, "regMr");
}

int nb_net_deregmr(struct nb_net *net, void *comm, void *mh)
{
	return nb_chk(T(6)->deregMr(comm, mh), "deregMr");
}

int nb_net_isend(struct nb_net *net, void *scomm, void *data, size_t size, int tag, void *mh,
		 void **req)
{
	int res;

	*req = NULL;
	if (net->version <= 8) {
		if (size > NCCL_MAX_NET_SIZE) {
			nb_err("isend of %zu bytes exceeds a v%d plugin's 1 GiB limit", size,
			       net->version);
			return -1;
		}
		res = T(6)->isend(scomm, data, (int)size, tag, mh, req);
	} else if (net->version == 9) {
		res = T(9)->isend(scomm, data, size, tag, mh, req);
	} else {
		res = T(10)->isend(scomm, data, size, tag, mh, nb_prof_op(), req);
	}
	net->calls.isend++;
	net->calls.isend_null += !*req;
	return nb_chk(res, "isend");
}

int nb_net_irecv(struct nb_net *net, void *rcomm, int n, void **data, size_t *sizes, int *tags,
		 void **mhs, void **req)
{
	int isz[NB_MAX_GROUP];
	int i, res;

	*req = NULL;
	if (net->version <= 8) {
		for (i = 0; i < n; i++)
			isz[i] = sizes[i] > NCCL_MAX_NET_SIZE ? (int)NCCL_MAX_NET_SIZE
							      : (int)sizes[i];
		res = T(6)->irecv(rcomm, n, data, isz, tags, mhs, req);
	} else if (net->version == 9) {
		res = T(9)->irecv(rcomm, n, data, sizes, tags, mhs, req);
	} else {
		void *ph[NB_MAX_GROUP];

		for (i = 0; i < n; i++)
			ph[i] = nb_prof_op();
		res = T(10)->irecv(rcomm, n, data, sizes, tags, mhs, nb_prof_out ? ph : NULL, req);
	}
	net->calls.irecv++;
	net->calls.irecv_null += !*req;
	return nb_chk(res, "irecv");
}

int nb_net_iflush(struct nb_net *net, void *rcomm, int n, void **data, int *sizes, void **mhs,
		  void **req)
{
	*req = NULL;
	return nb_chk(T(6)->iflush(rcomm, n, data, sizes, mhs, req), "iflush");
}

int nb_net_test(struct nb_net *net, void *req, int *done, int *sizes)
{
	int res = T(6)->test(req, done, sizes);

	net->calls.test++;
	net->calls.test_idle += !*done;
	return nb_chk(res, "test");
}

void nb_net_print_calls(const struct nb_net *net, int rank)
{
	const struct nb_calls *k = &net->calls;

	printf("# calls rank %d plugin %s: isend %" PRIu64 " null %" PRIu64 " irecv %" PRIu64
	       " null %" PRIu64 " test %" PRIu64 " idle %" PRIu64 "\n", rank, net->name, k->isend,
	       k->isend_null, k->irecv, k->irecv_null, k->test, k->test_idle);
}

int nb_net_close_send(struct nb_net *net, void *comm)
{
	return nb_chk(T(6)->closeSend(comm), "closeSend");
}

int nb_net_close_recv(struct nb_net *net, void *comm)
{
	return nb_chk(T(6)->closeRecv(comm), "closeRecv");
}

int nb_net_close_listen(struct nb_net *net, void *comm)
{
	return nb_chk(T(6)->closeListen(comm), "closeListen");
}

void nb_net_unload(struct nb_net *net)
{
	if (net->initialized && net->version >= 11) {
		int res = net->version == 11 ? T(11)->finalize(net->ctx)
					     : T(12)->finalize(net->ctx);
		nb_chk(res, "finalize");
	}
	net->initialized = 0;
	/* Like NCCL 2.26/2.27 (REF_COUNT 1), keep the library mapped: v6..v10
	 * plugins get no shutdown call and may still own threads. */
	net->lib = NULL;
	net->table = NULL;
}
