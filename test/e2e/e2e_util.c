/*
 * e2e_util.c - polling loops, content patterns and process helpers of the
 * end-to-end harness (see e2e.h).
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "e2e.h"

long e2e_eager_max(void)
{
	const char *v = getenv("NCCL_VERBS_EAGER_MAX");

	return v && *v ? strtol(v, NULL, 0) : 4096;
}

double e2e_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int e2e_find_dev(struct e2e_net *n, const char *prefix)
{
	struct e2e_props p;
	int ndev = 0, i;

	E2E_OK(e2e_devices(n, &ndev));
	for (i = 0; i < ndev; i++) {
		E2E_OK(e2e_props(n, i, &p));
		if (!strncmp(p.name, prefix, strlen(prefix)))
			return i;
	}
	return -1;
}

/* NV_TEST_DEVICES split at commas, read once (the environment does not change it later). */
static char e2e_real_buf[256];
static const char *e2e_real_names[E2E_MAX_REAL_DEVS];
static int e2e_real_n = -1;

static void e2e_real_parse(void)
{
	const char *v = getenv("NV_TEST_DEVICES");
	char *save = NULL, *tok;

	e2e_real_n = 0;
	if (!v || !*v)
		return;
	snprintf(e2e_real_buf, sizeof(e2e_real_buf), "%s", v);
	for (tok = strtok_r(e2e_real_buf, ",", &save); tok && e2e_real_n < E2E_MAX_REAL_DEVS;
	     tok = strtok_r(NULL, ",", &save))
		e2e_real_names[e2e_real_n++] = tok;
}

int e2e_real(void)
{
	if (e2e_real_n < 0)
		e2e_real_parse();
	return e2e_real_n;
}

const char *e2e_real_dev(int i)
{
	return i >= 0 && i < e2e_real() ? e2e_real_names[i] : NULL;
}

const char *e2e_dev(const char *sim)
{
	return e2e_real() ? e2e_real_names[0] : sim;
}

int e2e_ndevs(int n)
{
	return e2e_real() ? 1 : n;
}

int e2e_skip_real(const char *what, const char *why)
{
	if (!e2e_real())
		return 0;
	e2e_note("%s: skipped on real devices (%s)", what, why);
	return 1;
}

void e2e_pair2(struct e2e_net *n, int rdev, int sdev, void **sc, void **rc, double timeout_s)
{
	char handle[E2E_HANDLE_SIZE];
	void *lc = NULL;
	double t0 = e2e_now();

	*sc = *rc = NULL;
	memset(handle, 0, sizeof(handle));
	E2E_OK(e2e_listen(n, rdev, handle, &lc));
	E2E_CHECK(lc != NULL);
	while (!*sc || !*rc) {
		if (!*sc)
			E2E_OK(e2e_connect(n, sdev, handle, sc));
		if (!*rc)
			E2E_OK(e2e_accept(n, lc, rc));
		if (e2e_now() - t0 > timeout_s)
			E2E_FAIL("loopback connect/accept did not finish in %.0f s", timeout_s);
	}
	E2E_OK(e2e_close_listen(n, lc));
}

void e2e_pair(struct e2e_net *n, int dev, void **sc, void **rc, double timeout_s)
{
	e2e_pair2(n, dev, dev, sc, rc, timeout_s);
}

ncclResult_t e2e_connect_wait(struct e2e_net *n, int dev, void *handle, void **sc, double t)
{
	double t0 = e2e_now();
	ncclResult_t r;

	*sc = NULL;
	do {
		r = e2e_connect(n, dev, handle, sc);
		if (r != ncclSuccess || *sc)
			return r;
		usleep(100);
	} while (e2e_now() - t0 < t);
	return ncclSuccess;
}

ncclResult_t e2e_accept_wait(struct e2e_net *n, void *lc, void **rc, double t)
{
	double t0 = e2e_now();
	ncclResult_t r;

	*rc = NULL;
	do {
		r = e2e_accept(n, lc, rc);
		if (r != ncclSuccess || *rc)
			return r;
		usleep(100);
	} while (e2e_now() - t0 < t);
	return ncclSuccess;
}

ncclResult_t e2e_wait(struct e2e_net *n, void *req, int *sizes, double timeout_s)
{
	double t0 = e2e_now();
	int done = 0;
	ncclResult_t r;

	for (;;) {
		r = e2e_test(n, req, &done, sizes);
		if (r != ncclSuccess || done)
			return r;
		if (e2e_now() - t0 > timeout_s)
			E2E_FAIL("request %p not done after %.0f s", req, timeout_s);
	}
}

void *e2e_isend_wait(struct e2e_net *n, void *sc, void *data, size_t size, int tag, void *mh,
		     double timeout_s)
{
	double t0 = e2e_now();
	void *req = NULL;

	while (!req) {
		E2E_OK(e2e_isend(n, sc, data, size, tag, mh, &req));
		if (!req && e2e_now() - t0 > timeout_s)
			E2E_FAIL("isend of %zu bytes (tag %d) got no request in %.0f s", size, tag,
				 timeout_s);
	}
	return req;
}

void *e2e_irecv_wait(struct e2e_net *n, void *rc, int nr, void **data, size_t *sizes, int *tags,
		     void **mh, double timeout_s)
{
	double t0 = e2e_now();
	void *req = NULL;

	while (!req) {
		E2E_OK(e2e_irecv(n, rc, nr, data, sizes, tags, mh, &req));
		if (!req && e2e_now() - t0 > timeout_s)
			E2E_FAIL("irecv of %d buffer(s) got no request in %.0f s", nr, timeout_s);
	}
	return req;
}

void e2e_fill(void *buf, size_t len, uint32_t id)
{
	uint8_t *b = buf;
	size_t i;

	for (i = 0; i < len; i++)
		b[i] = e2e_byte(id, i);
}

long e2e_verify(const void *buf, size_t len, uint32_t id)
{
	const uint8_t *b = buf;
	size_t i;

	for (i = 0; i < len; i++)
		if (b[i] != e2e_byte(id, i))
			return (long)i;
	return -1;
}

pid_t e2e_spawn(const char *hca, int (*fn)(void *), void *arg)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		E2E_FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		if (hca)
			setenv("NCCL_IB_HCA", hca, 1);
		exit(fn(arg)); /* exit, not _exit: simverbs' leak report runs at exit */
	}
	return pid;
}

int e2e_reap(pid_t pid, double timeout_s)
{
	double t0 = e2e_now();
	int status;
	pid_t r;

	for (;;) {
		r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			break;
		if (r < 0)
			return -1;
		if (e2e_now() - t0 > timeout_s) {
			e2e_note("pid %d still running after %.0f s: killing it", (int)pid, timeout_s);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -1;
		}
		usleep(2000);
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	e2e_note("pid %d died from signal %d", (int)pid, WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	return -1;
}

void e2e_pipe_write(int fd, const void *buf, size_t len)
{
	size_t off = 0;

	while (off < len) {
		ssize_t w = write(fd, (const char *)buf + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			E2E_FAIL("pipe write: %s", strerror(errno));
		off += (size_t)w;
	}
}

void e2e_pipe_read(int fd, void *buf, size_t len, double timeout_s)
{
	double t0 = e2e_now();
	size_t off = 0;

	while (off < len) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t r;

		if (e2e_now() - t0 > timeout_s)
			E2E_FAIL("pipe read timed out after %.0f s", timeout_s);
		if (poll(&p, 1, 100) <= 0)
			continue;
		r = read(fd, (char *)buf + off, len - off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			E2E_FAIL("pipe read: %s", r == 0 ? "peer exited" : strerror(errno));
		off += (size_t)r;
	}
}
