/*
 * e2e_handshake - the listener under hostile or broken connectors, in one
 * process: a wrong secret, garbage, a truncated hello, a connector that
 * sends nothing (slowloris), and a flood of silent connections. Each is
 * refused with a message naming it, and a legitimate connection to the same
 * listener still succeeds. Also: a dead listener makes connect fail within
 * NCCL_VERBS_CONNECT_TIMEOUT_MS, naming the peer, instead of hanging.
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "e2e.h"
#include "wire.h"

#define T 20.0
#define TIMEOUT_MS 1500
#define SECRET_OFF 32 /* wire.c: the secret follows 32 bytes of magic, version, address */

/* Raw TCP connection to the address inside a handle (wire.c layout). */
static int raw_connect(const unsigned char *h)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd;

	memset(&ss, 0, sizeof(ss));
	if (h[6] == 6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		memcpy(&s6->sin6_addr, h + 16, 16);
		memcpy(&s6->sin6_port, h + 8, 2);
		len = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		memcpy(&s4->sin_addr, h + 16, 4);
		memcpy(&s4->sin_port, h + 8, 2);
		len = sizeof(*s4);
	}
	fd = socket(ss.ss_family, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&ss, len))
		E2E_FAIL("raw connect to the listener failed");
	return fd;
}

/* Polls accept until it returns a comm or fails; connect runs alongside when sc != NULL. */
static void *accept_with(struct e2e_net *n, void *lc, int dev, char *handle, void **sc)
{
	double t0 = e2e_now();
	void *rc = NULL;

	while (!rc || (sc && !*sc)) {
		if (sc && !*sc)
			E2E_OK(e2e_connect(n, dev, handle, sc));
		if (!rc)
			E2E_OK(e2e_accept(n, lc, &rc));
		if (e2e_now() - t0 > T)
			E2E_FAIL("good connection not established in %.0f s", T);
	}
	return rc;
}

/* Calls accept (which returns no comm) until a warning containing `what` shows up. */
static void poll_listener(struct e2e_net *n, void *lc, const char *what)
{
	double t0 = e2e_now();
	void *rc = NULL;

	while (!e2e_warned(what) && e2e_now() - t0 < T) {
		E2E_OK(e2e_accept(n, lc, &rc));
		E2E_CHECK(rc == NULL);
		usleep(1000);
	}
}

static void good_connection(struct e2e_net *n, void *lc, int dev, char *handle)
{
	void *sc = NULL, *rc;

	rc = accept_with(n, lc, dev, handle, &sc);
	E2E_OK(e2e_close_send(n, sc));
	E2E_OK(e2e_close_recv(n, rc));
}

static void wrong_secret(struct e2e_net *n, int dev)
{
	char handle[E2E_HANDLE_SIZE], bad[E2E_HANDLE_SIZE];
	void *lc, *sc = NULL, *rc = NULL;
	double t0 = e2e_now();
	ncclResult_t r = ncclSuccess;

	E2E_OK(e2e_listen(n, dev, handle, &lc));
	memcpy(bad, handle, sizeof(bad));
	bad[SECRET_OFF + 5] ^= 0x40;
	while (r == ncclSuccess && !sc && e2e_now() - t0 < T) {
		r = e2e_connect(n, dev, bad, &sc);
		E2E_OK(e2e_accept(n, lc, &rc));
		E2E_CHECK(rc == NULL);
	}
	if (r == ncclSuccess)
		E2E_FAIL("connect with a wrong secret was not refused (comm %p)", sc);
	if (!e2e_warned("wrong secret") || !e2e_warned("did not present the secret"))
		E2E_FAIL("the refusal is not explained on both sides:\n%s", e2e_warn_text());
	good_connection(n, lc, dev, handle);
	E2E_OK(e2e_close_listen(n, lc));
	e2e_note("wrong secret: refused, listener still accepts (%.2f s)", e2e_now() - t0);
}

/* A 64-byte "hello" with our magic but the given version and length fields. */
static int raw_hello(const unsigned char *h, unsigned version, unsigned len)
{
	unsigned char msg[64];
	int fd = raw_connect(h);

	memset(msg, 0, sizeof(msg));
	memcpy(msg, "NVM1", 4);
	msg[4] = (unsigned char)(version >> 8);
	msg[5] = (unsigned char)version;
	msg[7] = 1; /* HELLO */
	msg[8] = (unsigned char)(len >> 24);
	msg[9] = (unsigned char)(len >> 16);
	msg[10] = (unsigned char)(len >> 8);
	msg[11] = (unsigned char)len;
	E2E_CHECK(write(fd, msg, sizeof(msg)) == (ssize_t)sizeof(msg));
	return fd;
}

static void garbage_and_truncated(struct e2e_net *n, int dev)
{
	static const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n0123456789abcdef0123456789abcdef"
				   "0123456789abcdef";
	char handle[E2E_HANDLE_SIZE];
	char other_version[64];
	void *lc;
	int fd1, fd2, fd3, fd4;

	snprintf(other_version, sizeof(other_version), "protocol version %d, ours is %d",
		 NV_WIRE_VERSION + 1, NV_WIRE_VERSION);
	E2E_OK(e2e_listen(n, dev, handle, &lc));
	fd1 = raw_connect((unsigned char *)handle);
	E2E_CHECK(write(fd1, junk, sizeof(junk)) == (ssize_t)sizeof(junk));
	fd2 = raw_connect((unsigned char *)handle);
	E2E_CHECK(write(fd2, handle, 10) == 10); /* 10 bytes of something, then gone */
	close(fd2);
	fd3 = raw_hello((unsigned char *)handle, NV_WIRE_VERSION + 1, 48); /* another version */
	fd4 = raw_hello((unsigned char *)handle, NV_WIRE_VERSION, 1u << 30); /* oversized */
	good_connection(n, lc, dev, handle);
	poll_listener(n, lc, "closed before its hello");
	poll_listener(n, lc, "expected 48");
	if (!e2e_warned("bad magic") || !e2e_warned("closed before its hello") ||
	    !e2e_warned(other_version) || !e2e_warned("expected 48"))
		E2E_FAIL("garbage / truncated / foreign-version / oversized hello not reported:\n%s",
			 e2e_warn_text());
	close(fd1);
	close(fd3);
	close(fd4);
	E2E_OK(e2e_close_listen(n, lc));
	e2e_note("garbage, truncated, foreign-version and oversized hellos refused, good "
		 "connection accepted");
}

static void slowloris_and_flood(struct e2e_net *n, int dev)
{
	char handle[E2E_HANDLE_SIZE];
	int fds[40], i;
	void *lc;

	E2E_OK(e2e_listen(n, dev, handle, &lc));
	for (i = 0; i < 40; i++)
		fds[i] = raw_connect((unsigned char *)handle);
	good_connection(n, lc, dev, handle);
	/* the silent ones are dropped after the handshake timeout, never block the listener */
	poll_listener(n, lc, "no valid hello within");
	if (!e2e_warned("no valid hello within") || !e2e_warned("have not authenticated"))
		E2E_FAIL("slowloris / flood not reported:\n%s", e2e_warn_text());
	good_connection(n, lc, dev, handle);
	for (i = 0; i < 40; i++)
		close(fds[i]);
	E2E_OK(e2e_close_listen(n, lc));
	e2e_note("40 silent connections: evicted/dropped, good connections accepted");
}

static void dead_listener(struct e2e_net *n, int dev)
{
	char handle[E2E_HANDLE_SIZE];
	void *lc, *sc = NULL;
	double t0, dt;
	ncclResult_t r = ncclSuccess;

	E2E_OK(e2e_listen(n, dev, handle, &lc));
	E2E_OK(e2e_close_listen(n, lc));
	t0 = e2e_now();
	while (r == ncclSuccess && !sc && e2e_now() - t0 < T)
		r = e2e_connect(n, dev, handle, &sc);
	dt = e2e_now() - t0;
	if (r == ncclSuccess)
		E2E_FAIL("connect to a closed listener did not fail in %.0f s", T);
	if (dt > TIMEOUT_MS / 1000.0 + 5 || !e2e_warned("connect to "))
		E2E_FAIL("connect failed after %.1f s (limit %d ms) or without naming the peer:\n%s",
			 dt, TIMEOUT_MS, e2e_warn_text());
	e2e_note("dead listener: connect failed after %.2f s", dt);
}

int main(void)
{
	struct e2e_net n;
	char ms[16];
	int r, dev;

	alarm(120);
	snprintf(ms, sizeof(ms), "%d", TIMEOUT_MS);
	setenv("NCCL_VERBS_CONNECT_TIMEOUT_MS", ms, 1);
	setenv("NCCL_VERBS_LISTEN_PENDING", "16", 1); /* the flood of 40 must overflow it */
	r = e2e_open(&n, 12);
	if (r)
		return r;
	dev = e2e_find_dev(&n, e2e_dev("simroce0"));
	if (dev < 0)
		dev = 0;
	wrong_secret(&n, dev);
	e2e_warn_reset();
	garbage_and_truncated(&n, dev);
	e2e_warn_reset();
	slowloris_and_flood(&n, dev);
	e2e_warn_reset();
	dead_listener(&n, dev);
	e2e_close(&n);
	return 0;
}
