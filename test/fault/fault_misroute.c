/*
 * fault_misroute - the connect-time path check proves BOTH directions.
 *
 * A handle taken to another fabric reaches QPs there that happen to carry
 * the peer's QPNs: every RDMA write completes, but lands somewhere other
 * than in the peer. The same situation, injected deterministically: a TCP
 * proxy between connector and listener rewrites one side's metadata so that
 * the other side's path-check write goes to another word of its control
 * region (a completed write that never lands where the peer looks).
 *  - listener's probe word moved: the connector's write is lost;
 *  - connector's probe word moved: the listener's write is lost.
 * In both cases connect AND accept must fail within the bound, neither may
 * return a comm, and the failing side's message names both NICs and GIDs
 * ("path check failed ... local <dev> ... GID ... remote <dev> ... GID").
 * The same proxy without rewriting connects fine (the proxy is not the
 * cause). IB and RoCE.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm.h"
#include "fh.h"
#include "ibv.h"
#include "wire.h"

#define TIMEOUT_MS 1000
#define BOUND (6.0 * fh_scale())

enum { MODE_NONE, MODE_LISTENER_WORD, MODE_CONNECTOR_WORD };

struct pipe_dir {
	int from, to;
	uint8_t buf[NV_WIRE_HDR_SIZE + NV_WIRE_META_SIZE_V4]; /* the longest META */
	size_t have;
	int rewrite;		/* rewrite the META passing this way */
};

struct proxy {
	int lfd;
	struct pipe_dir up, down;	/* connector -> listener, listener -> connector */
	struct sockaddr_storage real;
	socklen_t real_len;
};

static void nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* Binds the proxy to the handle's address and points a copy of the handle at it. */
static void proxy_open(struct proxy *p, const char *handle, char *h2)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int fam = handle[6] == 6 ? AF_INET6 : AF_INET;

	memset(p, 0, sizeof(*p));
	p->up.from = p->up.to = p->down.from = p->down.to = -1;
	memset(&p->real, 0, sizeof(p->real));
	if (fam == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&p->real;

		s6->sin6_family = AF_INET6;
		memcpy(&s6->sin6_addr, handle + 16, 16);
		memcpy(&s6->sin6_port, handle + 8, 2);
		p->real_len = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&p->real;

		s4->sin_family = AF_INET;
		memcpy(&s4->sin_addr, handle + 16, 4);
		memcpy(&s4->sin_port, handle + 8, 2);
		p->real_len = sizeof(*s4);
	}
	memcpy(&ss, &p->real, sizeof(ss));
	if (fam == AF_INET6)
		((struct sockaddr_in6 *)&ss)->sin6_port = 0;
	else
		((struct sockaddr_in *)&ss)->sin_port = 0;
	p->lfd = socket(fam, SOCK_STREAM, 0);
	FH_CHECK(p->lfd >= 0 && !bind(p->lfd, (struct sockaddr *)&ss, p->real_len) &&
			 !listen(p->lfd, 4) && !getsockname(p->lfd, (struct sockaddr *)&ss, &len),
		 "proxy socket: %s", strerror(errno));
	nonblock(p->lfd);
	memcpy(h2, handle, NCCL_NET_HANDLE_MAXSIZE);
	memcpy(h2 + 8, fam == AF_INET6 ? (void *)&((struct sockaddr_in6 *)&ss)->sin6_port
				       : (void *)&((struct sockaddr_in *)&ss)->sin_port, 2);
}

static void proxy_close(struct proxy *p)
{
	if (p->up.from >= 0)
		close(p->up.from);
	if (p->up.to >= 0)
		close(p->up.to);
	close(p->lfd);
}

/* The other side's path-check write goes to the word before the probe word (same MR). */
static void rewrite_meta(uint8_t *msg, size_t len)
{
	struct nv_meta m;
	char why[NV_WIRE_WHY_LEN];

	FH_CHECK(nv_wire_meta_decode(msg + NV_WIRE_HDR_SIZE, len, &m, why,
				     sizeof(why)) == NV_OK, "proxy: metadata undecodable: %s", why);
	FH_CHECK(m.probe_addr >= m.addr + 8, "proxy: no word before the probe word");
	m.probe_addr -= 8;
	nv_wire_meta_encode(&m, msg + NV_WIRE_HDR_SIZE);
}

/* Moves whole messages from d->from to d->to; -1 when a side closed. */
static int pump(struct pipe_dir *d)
{
	struct nv_msg_hdr h;
	char why[NV_WIRE_WHY_LEN];
	size_t want;
	ssize_t n;

	for (;;) {
		want = NV_WIRE_HDR_SIZE;
		if (d->have >= NV_WIRE_HDR_SIZE) {
			FH_CHECK(nv_wire_hdr_decode(d->buf, NV_WIRE_HDR_SIZE, &h, why, sizeof(why)) ==
					 NV_OK, "proxy: bad header: %s", why);
			want += h.len;
		}
		if (d->have < want) {
			n = read(d->from, d->buf + d->have, want - d->have);
			if (n == 0 || (n < 0 && errno != EAGAIN))
				return -1;
			if (n < 0)
				return 0;
			d->have += (size_t)n;
			continue;
		}
		if (want == NV_WIRE_HDR_SIZE)
			continue; /* header complete: now its payload */
		if (h.type == NV_MSG_META && d->rewrite)
			rewrite_meta(d->buf, h.len);
		FH_CHECK(fh_write_all(d->to, d->buf, want) == 0, "proxy: forwarding failed");
		d->have = 0;
	}
}

/* One step of the proxy; returns 0 while both ends are open. */
static int proxy_step(struct proxy *p, int mode)
{
	int fd, up, down;

	if (p->up.from < 0) {
		fd = accept(p->lfd, NULL, NULL);
		if (fd < 0)
			return 0;
		p->up.from = p->down.to = fd;
		fd = socket(p->real.ss_family, SOCK_STREAM, 0);
		FH_CHECK(fd >= 0 && !connect(fd, (struct sockaddr *)&p->real, p->real_len),
			 "proxy: connect to the listener: %s", strerror(errno));
		p->up.to = p->down.from = fd;
		nonblock(p->up.from);
		nonblock(p->up.to);
		p->up.rewrite = mode == MODE_CONNECTOR_WORD;
		p->down.rewrite = mode == MODE_LISTENER_WORD;
	}
	up = pump(&p->up);
	down = pump(&p->down);
	return up < 0 || down < 0 ? -1 : 0;
}

static void run(struct fh *f, const char *devname, int mode)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE], h2[NCCL_NET_HANDLE_MAXSIZE], gid[64];
	ncclNetDeviceHandle_v12_t *dh = NULL;
	ncclResult_t cres = ncclSuccess, ares = ncclSuccess;
	void *lc, *s = NULL, *r = NULL;
	int dev = fh_dev_by_name(f, devname), w0, wl, wc, closed = 0;
	struct nv_comm *probe_s;
	struct proxy p;
	double t0;

	FH_CHECK(dev >= 0, "no %s", devname);
	fh_pair(f, dev, &s, &r, 20); /* the GID this device uses, for the message check */
	probe_s = s;
	nv_ibv_gid_str(&probe_s->dev[0].gid.gid, gid, sizeof(gid));
	FH_OK(f->net->closeSend(s));
	FH_OK(f->net->closeRecv(r));
	s = r = NULL;

	FH_OK(f->net->listen(f->ctx, dev, handle, &lc));
	proxy_open(&p, handle, h2);
	w0 = fh_warn_count();
	t0 = fh_now();
	while ((cres == ncclSuccess && !s) || (ares == ncclSuccess && !r)) {
		if (cres == ncclSuccess && !s)
			cres = f->net->connect(f->ctx, dev, h2, &s, &dh);
		if (ares == ncclSuccess && !r)
			ares = f->net->accept(lc, &r, &dh);
		if (!closed && proxy_step(&p, mode) < 0)
			closed = 1; /* a side gave up; the other must notice by itself */
		FH_CHECK(fh_now() - t0 < BOUND, "%s mode %d: connect %d (comm %p), accept %d (comm "
			 "%p) still pending after %.0f s", devname, mode, cres, s, ares, r, BOUND);
		if (mode != MODE_NONE && (s || r))
			FH_FAIL("%s mode %d: %s returned a comm although a path-check write never "
				"landed", devname, mode, s ? "connect" : "accept");
	}
	if (mode == MODE_NONE) {
		FH_CHECK(s && r, "through the proxy without rewriting: connect %d accept %d", cres,
			 ares);
		FH_OK(f->net->closeSend(s));
		FH_OK(f->net->closeRecv(r));
		fh_log("%s: through the proxy unchanged: connected in %.2f s", devname, fh_now() - t0);
	} else {
		/* The side whose word was moved sees nothing land; the other is told so. */
		wl = fh_warn_find(w0, "path check failed", "none reached us", "local ", devname, gid,
				  "remote ", "hint:", NULL);
		wc = fh_warn_find(w0, "path check failed", "never reached it", "local ", devname, gid,
				  "remote ", NULL);
		if (wl < 0 || wc < 0)
			fh_warn_dump();
		FH_CHECK(wl >= 0, "%s mode %d: no message of the side that saw nothing land",
			 devname, mode);
		FH_CHECK(wc >= 0, "%s mode %d: no message of the side whose write was lost", devname,
			 mode);
		{
			const char *w = fh_warn_get(wl), *rm = strstr(w, "remote ");

			FH_CHECK(rm && strstr(rm, devname) && strstr(rm, "GID"),
				 "the remote part must name the peer's NIC and GID: %s", w);
		}
		FH_CHECK(fh_warn_find(w0, mode == MODE_LISTENER_WORD ? "accept on" : "connect to",
				      "path check", NULL) >= 0,
			 "the side that saw nothing land did not fail with the path check");
		fh_log("%s mode %d: both sides failed in %.2f s: %s", devname, mode, fh_now() - t0,
		       fh_warn_get(wl));
	}
	proxy_close(&p);
	FH_OK(f->net->closeListen(lc));
}

int main(void)
{
	static const char *const devs[] = { "simib0", "simroce0" };
	char tmo[16];
	struct fh f;
	int rc, i;

	fh_watchdog(120);
	snprintf(tmo, sizeof(tmo), "%d", (int)(TIMEOUT_MS * fh_scale()));
	setenv("NCCL_VERBS_CONNECT_TIMEOUT_MS", tmo, 1);
	rc = fh_open(&f);
	if (rc)
		return rc;
	for (i = 0; i < e2e_ndevs(2); i++) {
		const char *dev = e2e_dev(devs[i]);

		if (fh_dev_by_name(&f, dev) < 0) {
			fh_log("no %s; skipping it", dev);
			continue;
		}
		run(&f, dev, MODE_NONE);
		run(&f, dev, MODE_LISTENER_WORD);
		run(&f, dev, MODE_CONNECTOR_WORD);
	}
	fh_close(&f);
	fh_log("PASS");
	return 0;
}
