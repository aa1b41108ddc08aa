/*
 * fault_handshake - abuse of one listener's out-of-band handshake.
 *
 * Raw TCP clients (written here, aimed at the address in the listen handle)
 * send a truncated hello, an oversized one, garbage, a wrong protocol
 * version, a wrong secret, a non-hello first message, nothing at all
 * (slowloris), and a flood of connections. Each must be refused with a WARN
 * that names the listener and the offending peer and says what was wrong,
 * accept() must never return an error for an unauthenticated connection, and
 * a legitimate connect to the SAME listener must still succeed, also while
 * the abusers are connected. Hostile metadata from a peer that does know the
 * secret fails that accept with a clear message; the next one still works.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fh.h"
#include "wire.h"

#define TIMEOUT_MS 1500 /* NCCL_VERBS_CONNECT_TIMEOUT_MS for this test */
#define FLOOD 40

static struct fh F;
static int dev;
static void *lc;
static char handle[NCCL_NET_HANDLE_MAXSIZE];
static struct nv_handle H;
static char laddr[64];

static int raw_connect(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd;

	memset(&ss, 0, sizeof(ss));
	if (H.family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		a->sin_family = AF_INET;
		a->sin_port = htons(H.port);
		memcpy(&a->sin_addr, H.addr, 4);
		len = sizeof(*a);
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		a->sin6_family = AF_INET6;
		a->sin6_port = htons(H.port);
		a->sin6_scope_id = H.scope_id;
		memcpy(&a->sin6_addr, H.addr, 16);
		len = sizeof(*a);
	}
	fd = socket(ss.ss_family, SOCK_STREAM, 0);
	FH_CHECK(fd >= 0, "socket: %s", strerror(errno));
	FH_CHECK(connect(fd, (struct sockaddr *)&ss, len) == 0, "connect to the listener: %s",
		 strerror(errno));
	return fd;
}

/* Our own local port, as the listener will print it ("addr:port"). */
static int local_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	getsockname(fd, (struct sockaddr *)&ss, &len);
	return ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
					     : ((struct sockaddr_in6 *)&ss)->sin6_port);
}

static void send_all(int fd, const void *buf, size_t n)
{
	FH_CHECK(fh_write_all(fd, buf, n) == 0, "raw send failed: %s", strerror(errno));
}

/* 1 when the listener closed our socket (EOF/RST) within timeout_s. Data before EOF is returned. */
static int closed_by_peer(int fd, double timeout_s, uint8_t *got, size_t *ngot)
{
	double end = fh_now() + timeout_s;
	size_t n = 0;

	while (fh_now() < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t k;

		/* The listener only acts inside accept(): keep calling it, as NCCL does. */
		void *rc = NULL;
		ncclNetDeviceHandle_v12_t *dh = NULL;

		FH_OK(F.net->accept(lc, &rc, &dh));
		FH_CHECK(rc == NULL, "accept returned a comm for an abusive connection");
		if (poll(&p, 1, 5) <= 0)
			continue;
		k = recv(fd, got ? got + n : (uint8_t[256]){ 0 }, got ? 256 - n : 256, 0);
		if (k == 0 || (k < 0 && errno == ECONNRESET)) {
			if (ngot)
				*ngot = n;
			return 1;
		}
		if (k > 0 && got)
			n += (size_t)k;
	}
	return 0;
}

static void hdr(uint8_t *buf, uint16_t type, uint32_t len)
{
	struct nv_msg_hdr m = { .type = type, .len = len };

	nv_wire_hdr_encode(&m, buf);
}

static void hello(uint8_t *buf, const uint8_t *secret)
{
	struct nv_hello h;

	hdr(buf, NV_MSG_HELLO, NV_WIRE_HELLO_SIZE);
	memcpy(h.secret, secret, NV_WIRE_SECRET_LEN);
	h.conn_id = 42;
	nv_wire_hello_encode(&h, buf + NV_WIRE_HDR_SIZE);
}

/* One abuse: run `send`, expect the connection refused and a WARN with `what`. */
static void expect_refused(const char *name, int fd, const char *what)
{
	char peer[32];
	int w0 = fh_warn_count(), i;
	double t0 = fh_now();

	snprintf(peer, sizeof(peer), ":%d", local_port(fd));
	FH_CHECK(closed_by_peer(fd, TIMEOUT_MS / 1000.0 + 5, NULL, NULL),
		 "%s: the listener did not drop the connection", name);
	i = fh_warn_find(w0, "listener", laddr, peer, what, NULL);
	FH_CHECK(i >= 0, "%s: no WARN naming the listener %s, the peer (port%s) and '%s'", name,
		 laddr, peer, what);
	fh_log("%s: refused in %.2f s: %s", name, fh_now() - t0, fh_warn_get(i));
	close(fd);
}

/* A legitimate connect + accept on the same listener, interleaved, must succeed. */
static void legit(const char *when)
{
	char h2[NCCL_NET_HANDLE_MAXSIZE];
	void *s = NULL, *r = NULL;
	ncclNetDeviceHandle_v12_t *dh = NULL;
	double end = fh_now() + 20;
	char buf[64] = "legit", rbuf[64];
	void *smh, *rmh;
	int got = 0;

	memcpy(h2, handle, sizeof(h2));
	while (!s || !r) {
		if (!s)
			FH_OK(F.net->connect(F.ctx, dev, h2, &s, &dh));
		if (!r)
			FH_OK(F.net->accept(lc, &r, &dh));
		FH_CHECK(fh_now() < end, "legitimate connect %s did not finish", when);
	}
	smh = fh_reg(&F, s, buf, sizeof(buf));
	rmh = fh_reg(&F, r, rbuf, sizeof(rbuf));
	FH_OK(fh_xfer(&F, s, r, buf, smh, sizeof(buf), rbuf, rmh, sizeof(rbuf), 7, &got, 10));
	FH_CHECK(got == (int)sizeof(buf) && !strcmp(rbuf, "legit"), "legit transfer %s", when);
	FH_OK(F.net->deregMr(s, smh));
	FH_OK(F.net->deregMr(r, rmh));
	FH_OK(F.net->closeSend(s));
	FH_OK(F.net->closeRecv(r));
	fh_log("legitimate connection %s: ok", when);
}

static void abuse_pre_auth(void)
{
	uint8_t buf[1 << 16], bad[NV_WIRE_SECRET_LEN];
	int fd;

	/* truncated: half a hello, then close */
	fd = raw_connect();
	hello(buf, H.secret);
	send_all(fd, buf, NV_WIRE_HDR_SIZE + 10);
	shutdown(fd, SHUT_WR);
	expect_refused("truncated hello", fd, "closed before its hello");

	/* oversized: a hello header announcing 1 MiB, followed by 64 KiB */
	fd = raw_connect();
	memset(buf, 0xab, sizeof(buf));
	hdr(buf, NV_MSG_HELLO, 1u << 20);
	send_all(fd, buf, 4096);
	expect_refused("oversized hello", fd, "length 1048576");

	/* garbage */
	fd = raw_connect();
	fh_fill(buf, 512, 99);
	send_all(fd, buf, 512);
	expect_refused("garbage", fd, "bad magic");

	/* HTTP, as a port scanner would send */
	fd = raw_connect();
	send_all(fd, "GET / HTTP/1.1\r\nHost: x\r\n\r\n0123456789012345678901234567890123456789", 68);
	expect_refused("http", fd, "bad magic");

	/* wrong protocol version */
	fd = raw_connect();
	hello(buf, H.secret);
	buf[5] = 9; /* version field, big-endian u16 at offset 4 */
	buf[4] = 0;
	send_all(fd, buf, NV_WIRE_HDR_SIZE + NV_WIRE_HELLO_SIZE);
	expect_refused("wrong version", fd, "protocol version 9");

	/* first message not a hello */
	fd = raw_connect();
	hdr(buf, NV_MSG_STATUS, NV_WIRE_STATUS_SIZE);
	memset(buf + NV_WIRE_HDR_SIZE, 0, 48);
	send_all(fd, buf, NV_WIRE_HDR_SIZE + NV_WIRE_HELLO_SIZE);
	expect_refused("status first", fd, "not a hello");

	/* wrong secret: refused, and told so with a STATUS(bad secret) */
	fd = raw_connect();
	memcpy(bad, H.secret, sizeof(bad));
	bad[3] ^= 0x40;
	hello(buf, bad);
	send_all(fd, buf, NV_WIRE_HDR_SIZE + NV_WIRE_HELLO_SIZE);
	{
		uint8_t got[256];
		size_t n = 0;
		struct nv_msg_hdr m;
		uint32_t code = 0;
		char why[NV_WIRE_WHY_LEN];
		int w0 = fh_warn_count();

		FH_CHECK(closed_by_peer(fd, 5, got, &n), "wrong secret: connection not dropped");
		FH_CHECK(fh_warn_find(w0, "listener", laddr, "wrong secret", NULL) >= 0,
			 "wrong secret: no WARN");
		FH_CHECK(n == NV_WIRE_HDR_SIZE + NV_WIRE_STATUS_SIZE &&
				 nv_wire_hdr_decode(got, n, &m, why, sizeof(why)) == NV_OK &&
				 m.type == NV_MSG_STATUS &&
				 nv_wire_status_decode(got + NV_WIRE_HDR_SIZE, m.len, &code, why,
						       sizeof(why)) == NV_OK &&
				 code == NV_WST_BAD_SECRET,
			 "wrong secret: expected a STATUS(bad secret) reply, got %zu bytes", n);
		close(fd);
		fh_log("wrong secret: refused with STATUS(bad secret)");
	}

	/* slowloris: connects and sends nothing; dropped at the deadline */
	fd = raw_connect();
	expect_refused("slowloris", fd, "no valid hello within NCCL_VERBS_CONNECT_TIMEOUT_MS");

	/* slowloris with one byte: still dropped at the deadline */
	fd = raw_connect();
	send_all(fd, "N", 1);
	expect_refused("slow hello", fd, "(1 of 64 bytes)");
}

/* Silent connections and a flood while a legitimate connect happens. */
static void abuse_concurrent(void)
{
	int fds[FLOOD], i, w0;
	double t0;

	/* Two silent connections first: a legit connect must not wait for their deadline. */
	fds[0] = raw_connect();
	fds[1] = raw_connect();
	t0 = fh_now();
	legit("beside 2 silent connections");
	FH_CHECK(fh_now() - t0 < TIMEOUT_MS / 1000.0 * fh_scale(),
		 "legit connect waited %.2f s behind silent connections", fh_now() - t0);
	close(fds[0]);
	close(fds[1]);

	/* A flood of FLOOD silent connections at once, then a legitimate connect. */
	w0 = fh_warn_count();
	for (i = 0; i < FLOOD; i++)
		fds[i] = raw_connect();
	legit("after a flood of 40 silent connections");
	FH_CHECK(fh_warn_find(w0, "listener", laddr, "have not authenticated", NULL) >= 0,
		 "flood: no WARN about unauthenticated connections");
	for (i = 0; i < FLOOD; i++)
		close(fds[i]);
}

/*
 * A legitimate connector whose hello is already queued, then a flood: the
 * listener must not evict the connection that would authenticate.
 */
static void flood_after_legit(void)
{
	char h2[NCCL_NET_HANDLE_MAXSIZE];
	void *s = NULL, *r = NULL;
	ncclNetDeviceHandle_v12_t *dh = NULL;
	int fds[FLOOD], i;
	double end = fh_now() + 20;
	ncclResult_t res;

	memcpy(h2, handle, sizeof(h2));
	FH_OK(F.net->connect(F.ctx, dev, h2, &s, &dh)); /* TCP + hello + meta sent */
	for (i = 0; i < 3 && !s; i++) {
		usleep(20000);
		FH_OK(F.net->connect(F.ctx, dev, h2, &s, &dh));
	}
	for (i = 0; i < FLOOD; i++)
		fds[i] = raw_connect();
	usleep(50000);
	while (!s || !r) {
		if (!s) {
			res = F.net->connect(F.ctx, dev, h2, &s, &dh);
			FH_CHECK(res == ncclSuccess, "flood after legit: the legitimate connect failed "
				 "(%d): the flood evicted an authenticating connection", (int)res);
		}
		if (!r)
			FH_OK(F.net->accept(lc, &r, &dh));
		FH_CHECK(fh_now() < end, "flood after legit: connect did not finish");
	}
	FH_OK(F.net->closeSend(s));
	FH_OK(F.net->closeRecv(r));
	for (i = 0; i < FLOOD; i++)
		close(fds[i]);
	fh_log("legitimate connection queued before a flood: ok");
}

/* A peer that knows the secret but sends hostile metadata. */
static void hostile_meta(void)
{
	static uint8_t buf[NV_WIRE_HDR_SIZE * 2 + NV_WIRE_HELLO_SIZE + NV_WIRE_META_SIZE];
	void *r = NULL;
	ncclNetDeviceHandle_v12_t *dh = NULL;
	double end = fh_now() + 10;
	ncclResult_t res = ncclSuccess;
	int fd, w0 = fh_warn_count(), i;
	size_t off;

	fd = raw_connect();
	hello(buf, H.secret);
	off = NV_WIRE_HDR_SIZE + NV_WIRE_HELLO_SIZE;
	hdr(buf + off, NV_MSG_META, NV_WIRE_META_SIZE);
	off += NV_WIRE_HDR_SIZE;
	memset(buf + off, 0, NV_WIRE_META_SIZE);
	buf[off] = 1;		/* role: send */
	buf[off + 1] = 200;	/* ndevs: out of range */
	send_all(fd, buf, off + NV_WIRE_META_SIZE);
	while (res == ncclSuccess && fh_now() < end) {
		res = F.net->accept(lc, &r, &dh);
		FH_CHECK(r == NULL, "hostile metadata: accept returned a comm");
	}
	FH_CHECK(res != ncclSuccess, "hostile metadata: accept did not fail");
	i = fh_warn_find(w0, laddr, "device count 200", NULL);
	FH_CHECK(i >= 0, "hostile metadata: no WARN naming the listener and the bad field");
	fh_log("hostile metadata: accept failed (%d): %s", (int)res, fh_warn_get(i));
	close(fd);
}

int main(void)
{
	char why[NV_WIRE_WHY_LEN];
	char tmo[16];
	int rc;

	snprintf(tmo, sizeof(tmo), "%d", TIMEOUT_MS);
	setenv("NCCL_VERBS_CONNECT_TIMEOUT_MS", tmo, 1);
	setenv("NCCL_VERBS_LISTEN_PENDING", "16", 1); /* the floods of FLOOD must overflow it */
	fh_watchdog(120);
	rc = fh_open(&F);
	if (rc)
		return rc;
	dev = 0;
	memset(handle, 0, sizeof(handle));
	FH_OK(F.net->listen(F.ctx, dev, handle, &lc));
	FH_CHECK(nv_wire_handle_decode(handle, NV_WIRE_HANDLE_SIZE, &H, why, sizeof(why)) == NV_OK,
		 "our own handle does not decode: %s", why);
	{
		char a[INET6_ADDRSTRLEN];

		inet_ntop(H.family, H.addr, a, sizeof(a));
		snprintf(laddr, sizeof(laddr), H.family == AF_INET ? "%s:%u" : "[%s", a, H.port);
	}
	fh_log("listener at %s", laddr);
	signal(SIGPIPE, SIG_IGN);

	legit("before any abuse");
	abuse_pre_auth();
	legit("after the pre-authentication abuse");
	abuse_concurrent();
	hostile_meta();
	legit("after hostile metadata");
	flood_after_legit();
	legit("after a flood that followed a legitimate connect");
	FH_OK(F.net->closeListen(lc));
	fh_close(&F);
	fh_log("PASS");
	return 0;
}
