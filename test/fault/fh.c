/*
 * fh.c - the fault-test harness (contract in fh.h).
 */
#include "config.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fh.h"

double fh_now(void)
{
	return e2e_now();
}

void fh_log(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "[fault %d] ", (int)getpid());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

double fh_scale(void)
{
	const char *s = getenv("FH_TIME_SCALE");
	double v = s ? atof(s) : 1.0;

	return v >= 1.0 ? v : 1.0;
}

static void fh_alarm(int sig)
{
	static const char msg[] = "[fault] FAIL: watchdog expired (the test hung)\n";

	(void)sig;
	(void)!write(2, msg, sizeof(msg) - 1);
	_exit(1);
}

void fh_watchdog(unsigned seconds)
{
	signal(SIGALRM, fh_alarm);
	alarm((unsigned)(seconds * fh_scale()));
}

void fh_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "[fault %d] FAIL %s:%d: ", (int)getpid(), file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fh_warn_dump();
	exit(1);
}

/* ---- recorded WARNs: e2e_logger records them, in raw mode too ---------------- */

/* Copy of line i (0-based) of the recorded text, or NULL. */
static char fh_line_buf[4][2048];
static int fh_line_next;

const char *fh_warn_get(int i)
{
	const char *p = e2e_warn_text(), *nl;
	char *out;
	size_t n;

	for (; i > 0 && p; i--) {
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
	if (!p || !*p)
		return NULL;
	nl = strchr(p, '\n');
	n = nl ? (size_t)(nl - p) : strlen(p);
	out = fh_line_buf[fh_line_next++ & 3];
	if (n >= sizeof(fh_line_buf[0]))
		n = sizeof(fh_line_buf[0]) - 1;
	memcpy(out, p, n);
	out[n] = '\0';
	return out;
}

int fh_warn_count(void)
{
	const char *p = e2e_warn_text();
	int n = 0;

	for (; (p = strchr(p, '\n')); p++)
		n++;
	return n;
}

void fh_warn_reset(void)
{
	e2e_warn_reset();
}

int fh_warn_find(int from, const char *needle, ...)
{
	int i, n = fh_warn_count();

	for (i = from < 0 ? 0 : from; i < n; i++) {
		const char *w = fh_warn_get(i), *k = needle;
		va_list ap;
		int all = w != NULL;

		va_start(ap, needle);
		while (k && all) {
			all = strstr(w, k) != NULL;
			k = va_arg(ap, const char *);
		}
		va_end(ap);
		if (all)
			return i;
	}
	return -1;
}

int fh_warn_count_with(const char *needle)
{
	int i, n = fh_warn_count(), c = 0;

	for (i = 0; i < n; i++) {
		const char *w = fh_warn_get(i);

		c += w && strstr(w, needle) != NULL;
	}
	return c;
}

void fh_warn_dump(void)
{
	fprintf(stderr, "[fault %d] %d WARN(s) recorded:\n%s", (int)getpid(), fh_warn_count(),
		e2e_warn_text());
}

/* ---- the plugin -------------------------------------------------------------- */

ncclResult_t fh_open_raw(struct fh *f)
{
	const char *path = getenv("NV_TEST_PLUGIN");
	ncclNetCommConfig_v12_t cfg = { .trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF };

	memset(f, 0, sizeof(*f));
	f->raw = 1;
	if (!path || !*path) {
		fh_log("NV_TEST_PLUGIN is not set (run through make check)");
		return ncclSystemError;
	}
	f->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!f->dl) {
		fh_log("cannot load %s: %s", path, dlerror());
		return ncclSystemError;
	}
	f->net = dlsym(f->dl, "ncclNetPlugin_v12");
	if (!f->net) {
		fh_log("%s has no ncclNetPlugin_v12", path);
		return ncclSystemError;
	}
	return f->net->init(&f->ctx, 0x1234, &cfg, e2e_logger, NULL);
}

int fh_open(struct fh *f)
{
	int rc;

	memset(f, 0, sizeof(*f));
	rc = e2e_open(&f->e2e, 12);
	if (rc)
		return rc;
	f->net = (ncclNet_v12_t *)f->e2e.tbl;
	f->ctx = f->e2e.ctx;
	FH_OK(f->net->devices(&f->ndev));
	return f->ndev < 1 ? FH_SKIP : 0;
}

void fh_close(struct fh *f)
{
	if (!f->raw) {
		e2e_close(&f->e2e);
	} else {
		if (f->net && f->ctx)
			f->net->finalize(f->ctx);
		/* The plugin is linked -z nodelete; dlclose only drops our reference. */
		if (f->dl)
			dlclose(f->dl);
	}
	memset(f, 0, sizeof(*f));
}

int fh_dev_by_name(struct fh *f, const char *prefix)
{
	ncclNetProperties_v12_t p;
	int i;

	for (i = 0; i < f->ndev; i++) {
		if (f->net->getProperties(i, &p) != ncclSuccess)
			continue;
		if (p.name && !strncmp(p.name, prefix, strlen(prefix)))
			return i;
	}
	return -1;
}

const char *const fh_sim_devs[FH_SIM_NDEVS] = { "simib0", "simroce0" };

int fh_sim_dev(struct fh *f, int i)
{
	int dev = fh_dev_by_name(f, e2e_dev(fh_sim_devs[i]));

	FH_CHECK(dev >= 0, "no device %s", e2e_dev(fh_sim_devs[i]));
	return dev;
}

/* ---- connections --------------------------------------------------------------- */

void fh_pair(struct fh *f, int dev, void **send, void **recv, double timeout_s)
{
	e2e_pair(&f->e2e, dev, send, recv, timeout_s * fh_scale());
}

ncclResult_t fh_connect(struct fh *f, int dev, void *handle, void **send, double timeout_s)
{
	ncclResult_t r = e2e_connect_wait(&f->e2e, dev, handle, send, timeout_s * fh_scale());

	if (r == ncclSuccess && !*send)
		FH_FAIL("connect did not finish nor fail in %.0f s", timeout_s);
	return r;
}

ncclResult_t fh_accept(struct fh *f, void *listen, void **recv, double timeout_s)
{
	ncclResult_t r = e2e_accept_wait(&f->e2e, listen, recv, timeout_s * fh_scale());

	if (r == ncclSuccess && !*recv)
		FH_FAIL("accept did not finish nor fail in %.0f s", timeout_s);
	return r;
}

void fh_join(struct fh *f, void *listen, int dev, void *handle, void **send, void **recv,
	     double timeout_s, const char *what)
{
	ncclNetDeviceHandle_v12_t *dh = NULL;
	double t0 = fh_now();

	*send = *recv = NULL;
	while (!*send || !*recv) {
		if (!*send)
			FH_OK(f->net->connect(f->ctx, dev, handle, send, &dh));
		if (!*recv)
			FH_OK(f->net->accept(listen, recv, &dh));
		FH_CHECK(fh_now() - t0 < timeout_s * fh_scale(), "%s", what);
	}
}

void *fh_reg(struct fh *f, void *comm, void *buf, size_t size)
{
	void *mh = NULL;

	FH_OK(f->net->regMr(comm, buf, size, NCCL_PTR_HOST, &mh));
	FH_CHECK(mh != NULL, "regMr returned no handle");
	return mh;
}

int fh_open_simverbs(struct fh *f)
{
	int rc = fh_open(f);

	if (rc)
		return rc;
	if (fh_sv_control("status") < 0) {
		fh_log("simverbs_control not found: not running on simverbs; skipping");
		fh_close(f);
		return FH_SKIP;
	}
	return 0;
}

void fh_conn_open(struct fh *f, int dev, size_t len, struct fh_conn *c)
{
	memset(c, 0, sizeof(*c));
	c->f = f;
	c->dev = dev;
	fh_pair(f, dev, &c->s, &c->r, 20);
	c->sbuf = aligned_alloc(4096, len);
	c->rbuf = aligned_alloc(4096, len);
	FH_CHECK(c->sbuf && c->rbuf, "out of memory");
	c->smh = fh_reg(f, c->s, c->sbuf, len);
	c->rmh = fh_reg(f, c->r, c->rbuf, len);
}

void fh_conn_close(struct fh_conn *c)
{
	if (c->s) {
		FH_OK(c->f->net->deregMr(c->s, c->smh));
		FH_CHECK(c->f->net->closeSend(c->s) == ncclSuccess, "closeSend failed");
	}
	if (c->r) {
		FH_OK(c->f->net->deregMr(c->r, c->rmh));
		FH_CHECK(c->f->net->closeRecv(c->r) == ncclSuccess, "closeRecv failed");
	}
	free(c->sbuf);
	free(c->rbuf);
	memset(c, 0, sizeof(*c));
}

void fh_conn_other_side_fails(struct fh_conn *c, int failed_side, size_t len, int tag,
			      double bound)
{
	double end = fh_now() + bound;
	void *req = NULL;
	int done = 0;
	ncclResult_t r = ncclSuccess;

	if (failed_side == 0) {
		FH_OK(c->f->net->deregMr(c->s, c->smh));
		FH_OK(c->f->net->closeSend(c->s));
		c->s = NULL;
	} else {
		FH_OK(c->f->net->deregMr(c->r, c->rmh));
		FH_OK(c->f->net->closeRecv(c->r));
		c->r = NULL;
	}
	while (r == ncclSuccess && fh_now() < end) {
		if (req)
			r = c->f->net->test(req, &done, NULL);
		else if (failed_side == 0)
			r = c->f->net->irecv(c->r, 1, (void **)&c->rbuf, &len, &tag, &c->rmh, NULL,
					     &req);
		else
			r = c->f->net->isend(c->s, c->sbuf, len, tag, c->smh, NULL, &req);
		FH_CHECK(!done, "a %s completed after its peer failed and closed",
			 failed_side == 0 ? "receive" : "send");
	}
	FH_CHECK(r != ncclSuccess, "the other side did not notice within %.0f s", bound);
}

int fh_wait(struct fh *f, void *req, int *sizes, ncclResult_t *res, double timeout_s)
{
	double end = fh_now() + timeout_s * fh_scale();
	int done = 0;

	for (;;) {
		*res = f->net->test(req, &done, sizes);
		if (*res != ncclSuccess || done)
			return 0;
		if (fh_now() > end)
			return -1;
	}
}

ncclResult_t fh_xfer(struct fh *f, void *s, void *r, void *sbuf, void *smh, size_t ssize,
		     void *rbuf, void *rmh, size_t rsize, int tag, int *got, double timeout_s)
{
	double end = fh_now() + timeout_s * fh_scale();
	void *sreq = NULL, *rreq = NULL;
	int sdone = 0, rdone = 0, size = 0;
	ncclResult_t res;

	while (!sreq || !rreq || !sdone || !rdone) {
		if (!rreq && r) {
			res = f->net->irecv(r, 1, &rbuf, &rsize, &tag, &rmh, NULL, &rreq);
			if (res != ncclSuccess)
				return res;
		}
		if (!sreq && s) {
			res = f->net->isend(s, sbuf, ssize, tag, smh, NULL, &sreq);
			if (res != ncclSuccess)
				return res;
		}
		if (!s)
			sdone = 1, sreq = (void *)1;
		if (!r)
			rdone = 1, rreq = (void *)1;
		if (sreq && !sdone) {
			res = f->net->test(sreq, &sdone, NULL);
			if (res != ncclSuccess)
				return res;
		}
		if (rreq && !rdone) {
			res = f->net->test(rreq, &rdone, &size);
			if (res != ncclSuccess)
				return res;
		}
		if (fh_now() > end) {
			fh_log("transfer of %zu bytes (tag %d) did not finish in %.0f s", ssize, tag,
			       timeout_s);
			return ncclInternalError;
		}
	}
	if (got)
		*got = size;
	return ncclSuccess;
}

/* ---- processes and resources ------------------------------------------------------ */

int fh_sv_control(const char *cmd)
{
	/* The plugin loads libibverbs.so.1 (simverbs) RTLD_LOCAL: look it up there. */
	void *iv = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
	void *sym = dlsym(iv ? iv : RTLD_DEFAULT, "simverbs_control");
	int (*ctl)(const char *);
	int rc;

	if (!sym) {
		if (iv)
			dlclose(iv);
		return -1;
	}
	memcpy(&ctl, &sym, sizeof(ctl));
	rc = ctl(cmd);
	if (iv)
		dlclose(iv);
	return rc;
}

int fh_count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the DIR's own descriptor */
}

long fh_rss_kb(void)
{
	FILE *fp = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;

	if (!fp)
		return -1;
	while (fgets(line, sizeof(line), fp))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(fp);
	return kb;
}

int fh_write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t k = write(fd, p, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

int fh_read_all(int fd, void *buf, size_t n, double timeout_s)
{
	double end = fh_now() + timeout_s * fh_scale();
	char *p = buf;

	while (n) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int ms = (int)((end - fh_now()) * 1000);
		ssize_t k;

		if (ms <= 0 || poll(&pfd, 1, ms) <= 0)
			return -1;
		k = read(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

int fh_waitpid(pid_t pid, double timeout_s)
{
	double end = fh_now() + timeout_s * fh_scale();
	int status;

	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return status;
		if (r < 0)
			return -1;
		if (fh_now() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -1;
		}
		usleep(2000);
	}
}

uint64_t fh_rand(uint64_t *s)
{
	/* splitmix64 */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void fh_fill(void *buf, size_t n, uint64_t seed)
{
	uint8_t *p = buf;
	uint64_t s = seed, v = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		if ((i & 7) == 0)
			v = fh_rand(&s);
		p[i] = (uint8_t)(v >> ((i & 7) * 8));
	}
}

int fh_check_pattern(const void *buf, size_t n, uint64_t seed)
{
	const uint8_t *p = buf;
	uint64_t s = seed, v = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		if ((i & 7) == 0)
			v = fh_rand(&s);
		if (p[i] != (uint8_t)(v >> ((i & 7) * 8)))
			return -1;
	}
	return 0;
}
