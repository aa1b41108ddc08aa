/*
 * fault_storm - the listener under load (loopback only, bounded in count
 * and time).
 *  1. A storm of silent TCP connections from another process (as fast as
 *     it can open them, for at most STORM_S seconds, at most STORM_OPEN of
 *     them open at once) while NLEGIT legitimate connects, up to 8 at a time,
 *     go to the same listener: every one of them connects (legitimate
 *     connectors never lose to junk), and the listener's WARNs stay within
 *     the rate limit: at most (burst + 1 summary) lines per second, with a
 *     summary line giving count, sources and reasons.
 *  2. NMANY legitimate connectors at once on one listener with the default
 *     NCCL_VERBS_LISTEN_BACKLOG: all of them connect as the caller accepts.
 *  3. In a child with NCCL_VERBS_LISTEN_BACKLOG=8: 15 raw connectors present
 *     the right secret and then stall; the first accept call queues 8 (and
 *     starts accepting the oldest) and tells each of the other 7
 *     NV_WST_BACKLOG. A real connect to a listener that always answers so
 *     retries, then fails within its timeout, printing that reason.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "admit.h"
#include "fh.h"
#include "wire.h"

#define STORM_S 20.0
#define STORM_OPEN 256
#define NLEGIT 200
#define NMANY 256
#define INFLIGHT 8
#define TIMEOUT_MS 5000

/*
 * How many times over the CPUs are busy (1-minute load average per online
 * CPU, at least 1). NMANY connectors handshake at once against one accepting
 * thread; on a machine whose CPUs other work already fills, each connector's
 * "no progress" deadline is stretched by this factor. What is checked (every
 * connector connects) does not change.
 */
static double load_factor(void)
{
	double load = 0;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	FILE *f = fopen("/proc/loadavg", "r");

	if (f) {
		if (fscanf(f, "%lf", &load) != 1)
			load = 0;
		fclose(f);
	}
	if (ncpu < 1)
		ncpu = 1;
	return load / (double)ncpu > 1.0 ? load / (double)ncpu : 1.0;
}

static struct fh F;

static socklen_t handle_addr(const char *handle, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (handle[6] == 6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

		s6->sin6_family = AF_INET6;
		memcpy(&s6->sin6_addr, handle + 16, 16);
		memcpy(&s6->sin6_port, handle + 8, 2);
		return sizeof(*s6);
	}
	{
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

		s4->sin_family = AF_INET;
		memcpy(&s4->sin_addr, handle + 16, 4);
		memcpy(&s4->sin_port, handle + 8, 2);
		return sizeof(*s4);
	}
}

/* The storm process: silent connections, STORM_OPEN open at a time; reports how many. */
static void storm(const char *handle, int out)
{
	struct sockaddr_storage ss;
	socklen_t len = handle_addr(handle, &ss);
	int ring[STORM_OPEN], i;
	unsigned long n = 0;
	double end = fh_now() + STORM_S;

	for (i = 0; i < STORM_OPEN; i++)
		ring[i] = -1;
	while (fh_now() < end && getppid() != 1) {
		int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);

		if (fd < 0)
			break;
		(void)connect(fd, (struct sockaddr *)&ss, len);
		if (ring[n % STORM_OPEN] >= 0)
			close(ring[n % STORM_OPEN]);
		ring[n % STORM_OPEN] = fd;
		n++;
		if (n % 64 == 0)
			(void)write(out, &n, sizeof(n)); /* progress, so the parent can stop us */
	}
	(void)write(out, &n, sizeof(n));
	_exit(0);
}

struct legit {
	char h[NCCL_NET_HANDLE_MAXSIZE];
	void *s;
	int active;
};

/*
 * Runs `total` connects against lc, `inflight` at a time, accepting as it
 * goes; each finished pair is closed. Returns the number that failed.
 */
static int run_connects(void *lc, const char *handle, int total, int inflight, double bound,
			int keep_open)
{
	static struct legit l[NMANY];
	static void *recvs[NMANY], *sends[NMANY];
	ncclNetDeviceHandle_v12_t *dh = NULL;
	int started = 0, done_s = 0, done_r = 0, failed = 0, i;
	double t0 = fh_now();

	memset(l, 0, sizeof(l));
	while (done_s < total || done_r < total - failed) {
		void *r = NULL;

		for (i = 0; i < inflight && started < total; i++) {
			if (l[i].active)
				continue;
			memcpy(l[i].h, handle, NCCL_NET_HANDLE_MAXSIZE);
			l[i].active = 1;
			l[i].s = NULL;
			started++;
		}
		for (i = 0; i < inflight; i++) {
			if (!l[i].active)
				continue;
			if (F.net->connect(F.ctx, 0, l[i].h, &l[i].s, &dh) != ncclSuccess) {
				failed++;
				done_s++;
				l[i].active = 0;
			} else if (l[i].s) {
				sends[done_s++] = l[i].s;
				l[i].active = 0;
			}
		}
		if (done_r < total && F.net->accept(lc, &r, &dh) == ncclSuccess && r)
			recvs[done_r++] = r;
		if (!keep_open) {
			for (i = 0; i < done_s; i++)
				if (sends[i]) {
					FH_OK(F.net->closeSend(sends[i]));
					sends[i] = NULL;
				}
			for (i = 0; i < done_r; i++)
				if (recvs[i]) {
					FH_OK(F.net->closeRecv(recvs[i]));
					recvs[i] = NULL;
				}
		}
		FH_CHECK(fh_now() - t0 < bound, "%d connects (%d in flight): after %.0f s %d connected, "
			 "%d accepted, %d failed", total, inflight, bound, done_s - failed, done_r,
			 failed);
	}
	for (i = 0; i < done_s; i++)
		if (sends[i])
			FH_OK(F.net->closeSend(sends[i]));
	for (i = 0; i < done_r; i++)
		if (recvs[i])
			FH_OK(F.net->closeRecv(recvs[i]));
	return failed;
}

static void under_storm(void)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	int p[2], w0, nwarn, failed, summary;
	unsigned long n = 0, k;
	double t0, dt;
	void *lc;
	pid_t pid;

	FH_OK(F.net->listen(F.ctx, 0, handle, &lc));
	FH_CHECK(pipe(p) == 0, "pipe");
	fflush(NULL);
	pid = fork();
	FH_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		close(p[0]);
		storm(handle, p[1]);
	}
	close(p[1]);
	FH_CHECK(fh_read_all(p[0], &n, sizeof(n), 10) == 0, "the storm did not start");
	w0 = fh_warn_count();
	t0 = fh_now();
	failed = run_connects(lc, handle, NLEGIT, INFLIGHT, 60 * fh_scale(), 0);
	dt = fh_now() - t0;
	kill(pid, SIGKILL);
	fh_waitpid(pid, 10);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	while (read(p[0], &k, sizeof(k)) == (ssize_t)sizeof(k))
		n = k;
	close(p[0]);
	/* The interval's summary is written when it ends or, at the latest, at closeListen. */
	FH_OK(F.net->closeListen(lc));
	nwarn = fh_warn_count() - w0;
	summary = fh_warn_find(w0, "more connection(s) refused or dropped", "source(s)", NULL);
	fh_log("storm: %lu silent connections (%.0f/s) beside %d legitimate connects (%d failed) "
	       "in %.2f s; %d WARN lines", n, n / dt, NLEGIT, failed, dt, nwarn);
	if (summary >= 0)
		fh_log("summary: %s", fh_warn_get(summary));
	FH_CHECK(failed == 0, "%d of %d legitimate connects failed under the storm", failed, NLEGIT);
	FH_CHECK(nwarn <= (int)((dt + 2) * (NV_ADMIT_WARN_BURST + 2)),
		 "%d WARN lines in %.1f s: not rate limited", nwarn, dt);
	FH_CHECK(n < 2000 || summary >= 0, "no summary line after %lu refused connections", n);
}

static void many_connectors(void)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	double t0 = fh_now();
	void *lc;
	int failed;

	FH_OK(F.net->listen(F.ctx, 0, handle, &lc));
	failed = run_connects(lc, handle, NMANY, NMANY, 90 * fh_scale(), 1);
	FH_CHECK(failed == 0, "%d of %d simultaneous connectors failed", failed, NMANY);
	fh_log("%d connectors at once on one listener: all connected in %.2f s", NMANY,
	       fh_now() - t0);
	FH_OK(F.net->closeListen(lc));
}

/* ---- 3: the backlog bound, in a child with its own knob ------------------------ */
static int raw_hello(const char *handle)
{
	struct sockaddr_storage ss;
	socklen_t len = handle_addr(handle, &ss);
	uint8_t buf[NV_WIRE_HDR_SIZE + NV_WIRE_HELLO_SIZE];
	struct nv_msg_hdr m = { .type = NV_MSG_HELLO, .len = NV_WIRE_HELLO_SIZE };
	struct nv_hello h = { .conn_id = 7 };
	int fd = socket(ss.ss_family, SOCK_STREAM, 0);

	FH_CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&ss, len) == 0, "raw connect");
	nv_wire_hdr_encode(&m, buf);
	memcpy(h.secret, handle + 32, NV_WIRE_SECRET_LEN); /* wire.c: the secret's offset */
	nv_wire_hello_encode(&h, buf + NV_WIRE_HDR_SIZE);
	FH_CHECK(fh_write_all(fd, buf, sizeof(buf)) == 0, "raw hello");
	fcntl(fd, F_SETFL, O_NONBLOCK);
	return fd;
}

/* 1 when fd received a STATUS with `code` (then closed), 0 when nothing came. */
static int got_status(int fd, uint32_t code)
{
	uint8_t buf[NV_WIRE_HDR_SIZE + NV_WIRE_STATUS_SIZE];
	struct nv_msg_hdr m;
	uint32_t c;
	char why[NV_WIRE_WHY_LEN];
	ssize_t k = recv(fd, buf, sizeof(buf), MSG_PEEK);

	if (k != (ssize_t)sizeof(buf))
		return 0;
	FH_CHECK(nv_wire_hdr_decode(buf, NV_WIRE_HDR_SIZE, &m, why, sizeof(why)) == NV_OK &&
			 m.type == NV_MSG_STATUS &&
			 nv_wire_status_decode(buf + NV_WIRE_HDR_SIZE, m.len, &c, why, sizeof(why)) ==
				 NV_OK,
		 "refused raw connector got no valid status: %s", why);
	FH_CHECK(c == code, "status %u, expected %u", c, code);
	return 1;
}

/* A plain socket on the handle's address; h2 = the handle pointing at it. */
static void fake_backlog_listener(const char *handle, char *h2, int *fd)
{
	struct sockaddr_storage ss;
	socklen_t len = handle_addr(handle, &ss), l2 = len;

	if (ss.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&ss)->sin6_port = 0;
	else
		((struct sockaddr_in *)&ss)->sin_port = 0;
	*fd = socket(ss.ss_family, SOCK_STREAM, 0);
	FH_CHECK(*fd >= 0 && !bind(*fd, (struct sockaddr *)&ss, len) && !listen(*fd, 16) &&
			 !getsockname(*fd, (struct sockaddr *)&ss, &l2),
		 "fake listener: %s", strerror(errno));
	fcntl(*fd, F_SETFL, O_NONBLOCK);
	memcpy(h2, handle, NCCL_NET_HANDLE_MAXSIZE);
	memcpy(h2 + 8, ss.ss_family == AF_INET6 ? (void *)&((struct sockaddr_in6 *)&ss)->sin6_port
						: (void *)&((struct sockaddr_in *)&ss)->sin_port, 2);
}

/* What the fake listener says to a connector it accepted: the hello read (so the close is no
 * RST), "backlog full", closed. */
static void fake_refuse(int fd)
{
	uint8_t buf[NV_WIRE_HDR_SIZE + NV_WIRE_STATUS_SIZE];

	nv_wire_hdr_encode(&(struct nv_msg_hdr){ .type = NV_MSG_STATUS, .len = NV_WIRE_STATUS_SIZE },
			   buf);
	nv_wire_status_encode(NV_WST_BACKLOG, buf + NV_WIRE_HDR_SIZE);
	usleep(2000); /* let the hello arrive */
	(void)recv(fd, (uint8_t[8192]){ 0 }, 8192, MSG_DONTWAIT);
	(void)write(fd, buf, sizeof(buf));
	close(fd);
}

/*
 * One refusal, then the caller comes back only after the connect's deadline (a loaded
 * machine, a caller that polls rarely): the retry due meanwhile never ran, and the connect
 * fails with the same message as one whose retries ran out (it printed the reply of the
 * last refusal alone, "the peer gave up", when the deadline passed before its retry).
 */
static void backlog_refused_then_late(const char *handle)
{
	char h2[NCCL_NET_HANDLE_MAXSIZE];
	ncclNetDeviceHandle_v12_t *dh = NULL;
	ncclResult_t cres = ncclSuccess;
	int fake, fd = -1, i, w0 = fh_warn_count(), wi;
	void *s = NULL;
	double t0 = fh_now();

	fake_backlog_listener(handle, h2, &fake);
	while (fd < 0 && cres == ncclSuccess && !s) {
		cres = F.net->connect(F.ctx, 0, h2, &s, &dh);
		fd = accept(fake, NULL, NULL);
		FH_CHECK(fh_now() - t0 < 10 * fh_scale(), "the connector never reached the fake listener");
		usleep(1000);
	}
	for (i = 0; i < 5 && cres == ncclSuccess && !s; i++, usleep(1000)) /* its hello goes out */
		cres = F.net->connect(F.ctx, 0, h2, &s, &dh);
	FH_CHECK(fd >= 0 && cres == ncclSuccess && !s, "connect to the fake listener: %d, comm %p",
		 cres, s);
	fake_refuse(fd);
	usleep(20000);
	cres = F.net->connect(F.ctx, 0, h2, &s, &dh); /* reads the refusal; a retry due in 2 ms */
	FH_CHECK(cres == ncclSuccess && !s, "one refusal ended the connect (%d)", cres);
	usleep(1700 * 1000); /* past NCCL_VERBS_CONNECT_TIMEOUT_MS=1500 */
	cres = F.net->connect(F.ctx, 0, h2, &s, &dh);
	close(fake);
	FH_CHECK(!s && cres != ncclSuccess, "a connect past its deadline did not fail");
	wi = fh_warn_find(w0, "connect to", "turned us away 1 time(s)", "NCCL_VERBS_LISTEN_BACKLOG",
			  NULL);
	if (wi < 0)
		fh_warn_dump();
	FH_CHECK(wi >= 0, "a refused connector whose deadline passed before its retry does not "
		 "print the listener's reason");
	fh_log("backlog: refused, retry not run before the deadline: %s", fh_warn_get(wi));
}

static int backlog_child(void *arg)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE], h2[NCCL_NET_HANDLE_MAXSIZE];
	ncclNetDeviceHandle_v12_t *dh = NULL;
	int fds[15], i, refused = 0, refusals = 0, rc, wi, fake;
	void *lc, *r = NULL, *s = NULL;
	ncclResult_t cres = ncclSuccess;
	double t0;

	(void)arg;
	setenv("NCCL_VERBS_LISTEN_BACKLOG", "8", 1);
	setenv("NCCL_VERBS_CONNECT_TIMEOUT_MS", "1500", 1);
	rc = fh_open(&F);
	if (rc)
		return rc;
	FH_OK(F.net->listen(F.ctx, 0, handle, &lc));
	for (i = 0; i < 15; i++)
		fds[i] = raw_hello(handle);
	t0 = fh_now();
	while (refused < 7 && fh_now() - t0 < 1.0 * fh_scale()) {
		FH_OK(F.net->accept(lc, &r, &dh));
		for (i = 0, refused = 0; i < 15; i++)
			refused += got_status(fds[i], NV_WST_BACKLOG);
		usleep(1000);
	}
	FH_CHECK(refused == 7, "%d of 15 stalled connectors were refused, expected 15 - 8 = 7",
		 refused);
	for (i = 0; i < 15; i++)
		close(fds[i]);
	FH_OK(F.net->closeListen(lc));
	/* The connector's side, deterministic: a listener that always says "backlog full". */
	fake_backlog_listener(handle, h2, &fake);
	t0 = fh_now();
	while (cres == ncclSuccess && !s) {
		cres = F.net->connect(F.ctx, 0, h2, &s, &dh);
		rc = accept(fake, NULL, NULL);
		if (rc >= 0) {
			fake_refuse(rc);
			refusals++;
		}
		FH_CHECK(fh_now() - t0 < 10 * fh_scale(), "connect neither failed nor finished");
		usleep(1000);
	}
	close(fake);
	FH_CHECK(!s && cres != ncclSuccess, "connected to a listener whose backlog is full");
	wi = fh_warn_find(0, "connect to", "turned us away", "NCCL_VERBS_LISTEN_BACKLOG", NULL);
	if (wi < 0)
		fh_warn_dump();
	FH_CHECK(wi >= 0, "the refused connector does not print the listener's reason");
	FH_CHECK(refusals > 1, "the connector did not retry a busy listener (%d attempt)", refusals);
	fh_log("backlog 8: 7 of 15 stalled connectors refused with the reason; a connect to a "
	       "full listener, %d attempts: %s", refusals, fh_warn_get(wi));
	backlog_refused_then_late(handle);
	fh_close(&F);
	return 0;
}

int main(void)
{
	char tmo[16];
	pid_t pid;
	int rc;

	fh_watchdog(240);
	signal(SIGPIPE, SIG_IGN);
	/* Thousands of connections a second: on the loopback interface only, unless told. */
	setenv("NCCL_SOCKET_IFNAME", "lo", 0);
	pid = e2e_spawn(NULL, backlog_child, NULL); /* first: no plugin loaded yet */
	FH_CHECK(e2e_reap(pid, 60 * fh_scale()) == 0, "the backlog child failed");
	snprintf(tmo, sizeof(tmo), "%d", (int)(TIMEOUT_MS * fh_scale() * load_factor()));
	setenv("NCCL_VERBS_CONNECT_TIMEOUT_MS", tmo, 1);
	rc = fh_open(&F);
	if (rc)
		return rc;
	many_connectors();
	under_storm();
	fh_close(&F);
	fh_log("PASS");
	return 0;
}
