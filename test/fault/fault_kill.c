/*
 * fault_kill - the peer process is killed (SIGKILL) during connect, while the
 * connection is idle, and during a transfer. The survivor's error must come
 * within BOUND seconds and name the peer's address, our device and the QPNs
 * (once QPs exist); every later call on that comm fails within a second
 * with the same explanation; closing the failed comm works and leaks nothing.
 * (test/e2e/e2e_kill covers more kill points; this test pins the message.)
 *
 * The peer runs in a child forked before the plugin is loaded; the survivor
 * is the parent: receiver when idle, sender during the transfer.
 */
#include "config.h"

#include <arpa/inet.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm.h"
#include "fh.h"

#define BOUND (15.0 * fh_scale())
#define BIG (8u << 20)

enum kcase { K_CONNECT, K_IDLE, K_TRANSFER };

/*
 * fault_kill checks the cases without a known bug; the copy named
 * fault_kill_xfail (in XFAIL_TESTS while such a bug is open; none is) runs the
 * connect case requiring the local device and QPN in the message too.
 */
static int strict_connect;
static const char *const knames[] = { "killed during connect", "killed while idle",
				      "killed during a transfer" };

struct peer {
	pid_t pid;
	int to_child[2], from_child[2];
};

/* The child: listens, ships the handle, then plays its part until killed. */
static int child(struct fh *fp, enum kcase kc, int devidx, int in, int out)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	struct fh f = *fp;
	void *lc, *r = NULL, *mh, *req = NULL;
	char *buf;
	int tag = 9, done;
	size_t size = BIG;

	memset(handle, 0, sizeof(handle));
	FH_OK(f.net->listen(f.ctx, devidx, handle, &lc));
	fh_write_all(out, handle, sizeof(handle));
	if (kc == K_CONNECT) {
		/*
		 * Stall before accept: the kernel completes the TCP handshake, the
		 * connector sends hello + metadata and waits for ours; killed there.
		 */
		for (;;)
			pause();
	}
	FH_OK(fh_accept(&f, lc, &r, 30));
	buf = aligned_alloc(4096, BIG);
	FH_CHECK(buf != NULL, "out of memory");
	memset(buf, 0, BIG);
	mh = fh_reg(&f, r, buf, BIG);
	fh_write_all(out, "R", 1);
	for (;;) {
		/* idle: nothing; transfer: keep receiving whatever the parent sends */
		if (kc == K_TRANSFER) {
			if (!req)
				FH_OK(f.net->irecv(r, 1, (void **)&buf, &size, &tag, &mh, NULL, &req));
			if (req && f.net->test(req, &done, NULL) == ncclSuccess && done)
				req = NULL;
		} else {
			usleep(1000);
		}
	}
	(void)in;
	return 0;
}

/* Forked by main() before anything is loaded, like the survivor. */
static void spawn(struct peer *p, enum kcase kc, const char *devname)
{
	FH_CHECK(pipe(p->to_child) == 0 && pipe(p->from_child) == 0, "pipe");
	p->pid = fork();
	FH_CHECK(p->pid >= 0, "fork");
	if (p->pid == 0) {
		struct fh f;
		int dev;

		fh_watchdog(60);
		close(p->to_child[1]);
		close(p->from_child[0]);
		if (fh_open(&f))
			_exit(77);
		dev = fh_dev_by_name(&f, devname);
		FH_CHECK(dev >= 0, "no %s", devname);
		_exit(child(&f, kc, dev, p->to_child[0], p->from_child[1]));
	}
	close(p->to_child[0]);
	close(p->from_child[1]);
}

/* The survivor kills the peer; main() reaps it. */
static void kill_peer(struct peer *p)
{
	kill(p->pid, SIGKILL);
}

/* The WARN names the address, device and (if given) both QPNs. */
static int check_message(int from, const char *addr, const char *dev, uint32_t lq, uint32_t rq)
{
	char lqs[32], rqs[32];
	int i;

	snprintf(lqs, sizeof(lqs), "0x%x", lq);
	snprintf(rqs, sizeof(rqs), "0x%x", rq);
	if (lq)
		i = fh_warn_find(from, addr, dev, lqs, rqs, NULL);
	else
		i = fh_warn_find(from, addr, NULL);
	FH_CHECK(i >= 0, "no WARN naming peer %s, device %s, QPNs %s/%s", addr, dev, lq ? lqs : "-",
		 lq ? rqs : "-");
	return i;
}

static void handle_addr(const char *handle, char *addr, size_t len)
{
	struct nv_handle h;
	char why[NV_WIRE_WHY_LEN], a[64];

	FH_CHECK(nv_wire_handle_decode(handle, NV_WIRE_HANDLE_SIZE, &h, why, sizeof(why)) == NV_OK,
		 "handle: %s", why);
	inet_ntop(h.family, h.addr, a, sizeof(a));
	snprintf(addr, len, h.family == AF_INET ? "%s:%u" : "[%s", a, h.port);
}

static void run(struct fh *f, int dev, const char *devname, enum kcase kc, struct peer *pp)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE], addr[80], c;
	struct peer p = *pp;
	void *s = NULL, *mh = NULL, *req = NULL;
	char *buf = NULL;
	double t0;
	int w0, wi, done = 0;
	uint32_t lq = 0, rq = 0;
	ncclResult_t r = ncclSuccess;

	FH_CHECK(fh_read_all(p.from_child[0], handle, sizeof(handle), 30) == 0, "no handle");
	handle_addr(handle, addr, sizeof(addr));
	w0 = fh_warn_count();
	if (kc == K_CONNECT) {
		ncclNetDeviceHandle_v12_t *dh = NULL;

		/* Two calls: TCP up, hello and metadata sent; the child never answers. */
		for (int i = 0; i < 20 && !s; i++) {
			FH_OK(f->net->connect(f->ctx, dev, handle, &s, &dh));
			usleep(5000);
		}
		FH_CHECK(s == NULL, "connect completed against a stalled listener");
		kill_peer(&p);
		t0 = fh_now();
		while (r == ncclSuccess && !s && fh_now() - t0 < BOUND)
			r = f->net->connect(f->ctx, dev, handle, &s, &dh);
		FH_CHECK(r != ncclSuccess, "%s: connect did not fail within %.0f s", knames[kc], BOUND);
		wi = check_message(w0, addr, devname, 0, 0);
		fh_log("%s on %s: connect failed after %.2f s: %s", knames[kc], devname,
		       fh_now() - t0, fh_warn_get(wi));
		if (strict_connect) {
			/* The connector's QPs exist here; the message names them (fixed). */
			FH_CHECK(fh_warn_find(w0, addr, devname, "QPN", NULL) >= 0,
				 "connect failure does not name our device %s and QPN", devname);
		}
		return;
	}
	FH_OK(fh_connect(f, dev, handle, &s, 30));
	FH_CHECK(fh_read_all(p.from_child[0], &c, 1, 30) == 0, "child not ready");
	lq = ((struct nv_comm *)s)->qps[0].qp->qp_num;
	rq = ((struct nv_comm *)s)->qps[0].rqpn;
	buf = aligned_alloc(4096, BIG);
	FH_CHECK(buf != NULL, "out of memory");
	fh_fill(buf, BIG, 7);
	mh = fh_reg(f, s, buf, BIG);
	if (kc == K_TRANSFER) {
		/* Some traffic first, so the kill lands while data moves. */
		for (int i = 0; i < 4; i++) {
			req = NULL;
			while (!req)
				FH_OK(f->net->isend(s, buf, BIG, 9, mh, NULL, &req));
			FH_CHECK(fh_wait(f, req, NULL, &r, 20) == 0 && r == ncclSuccess, "warm-up send");
		}
	}
	req = NULL;
	/* idle: a send waits for a clear-to-send the dead receiver never writes */
	while (!req && r == ncclSuccess && kc == K_TRANSFER)
		r = f->net->isend(s, buf, BIG, 9, mh, NULL, &req);
	kill_peer(&p);
	t0 = fh_now();
	while (r == ncclSuccess && fh_now() - t0 < BOUND) {
		if (!req)
			r = f->net->isend(s, buf, BIG, 9, mh, NULL, &req);
		else
			r = f->net->test(req, &done, NULL);
		if (done) /* the last send may have landed before the kill */
			req = NULL, done = 0;
	}
	FH_CHECK(r != ncclSuccess, "%s: no error within %.0f s", knames[kc], BOUND);
	wi = check_message(w0, addr, devname, lq, rq);
	fh_log("%s on %s: error after %.2f s: %s", knames[kc], devname, fh_now() - t0,
	       fh_warn_get(wi));
	/* fail fast, same explanation */
	{
		char why[160];
		const char *w = fh_warn_get(wi);
		const char *colon = strstr(w, " : ");

		snprintf(why, sizeof(why), "%s", colon ? colon + 3 : w);
		w0 = fh_warn_count();
		t0 = fh_now();
		req = NULL;
		r = f->net->isend(s, buf, BIG, 9, mh, NULL, &req);
		FH_CHECK(r != ncclSuccess && !req && fh_now() - t0 < 1.0 * fh_scale(), "later isend not failing fast");
		FH_CHECK(fh_warn_find(w0, why, NULL) >= 0, "later call does not repeat '%s'", why);
	}
	FH_OK(f->net->deregMr(s, mh));
	FH_OK(f->net->closeSend(s));
	free(buf);
}

int main(int argc, char **argv)
{
	static const char *const devs[] = { "simib0", "simroce0" };
	struct fh f;
	int rc, d, k;

	strict_connect = argc > 0 && strstr(argv[0], "_xfail") != NULL;
	fh_watchdog(200);
	signal(SIGPIPE, SIG_IGN);
	setenv("NCCL_VERBS_CONNECT_TIMEOUT_MS", "5000", 1);
	/* The children are forked from here; each loads the plugin itself. */
	for (d = 0; d < e2e_ndevs(2); d++) {
		const char *dname = e2e_dev(devs[d]);

		for (k = K_CONNECT; k <= (strict_connect ? K_CONNECT : K_TRANSFER); k++) {
			struct peer p;
			pid_t pid;
			int st;

			spawn(&p, (enum kcase)k, dname);
			pid = fork();
			FH_CHECK(pid >= 0, "fork");
			if (pid == 0) {
				int dev;

				rc = fh_open(&f);
				if (rc)
					_exit(rc);
				dev = fh_dev_by_name(&f, dname);
				FH_CHECK(dev >= 0, "no %s", dname);
				run(&f, dev, dname, (enum kcase)k, &p);
				fh_close(&f);
				_exit(0);
			}
			st = fh_waitpid(pid, 90);
			kill(p.pid, SIGKILL);
			fh_waitpid(p.pid, 10);
			close(p.to_child[1]);
			close(p.from_child[0]);
			if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
				if (st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 77)
					return 77;
				FH_FAIL("%s on %s: survivor failed (status 0x%x)", knames[k], dname, st);
			}
		}
	}
	fh_log("PASS");
	return 0;
}
