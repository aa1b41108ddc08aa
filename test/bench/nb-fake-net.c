/*
 * nb-fake-net.c - a small ncclNet plugin over loopback TCP, used only to test
 * nccl-net-bench independently of the verbs plugin: it exports every table
 * v6 .. v12 (so each adapter of the benchmark is exercised), implements
 * grouped receives with tag matching against the oldest pending group, and
 * fails on request (NBFAKE_FAIL_AFTER=N: the N-th test() call returns
 * ncclSystemError after logging a WARN).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "nccl/net.h"

#define FK_EXPORT __attribute__((visibility("default")))
#define FK_MAGIC 0x6e62666bU
#define FK_REQS 256
#define FK_GROUP 8

struct fk_hdr {
	uint32_t tag;
	uint32_t pad;
	uint64_t size;
};

struct fk_comm;

struct fk_req {
	struct fk_comm *comm;
	int used, done, is_send, n, filled;
	struct fk_hdr hdr;
	char *data[FK_GROUP];
	size_t cap[FK_GROUP], got[FK_GROUP];
	int tags[FK_GROUP], have[FK_GROUP];
	size_t off;			/* send: bytes of hdr+data written */
	struct fk_req *next;
};

struct fk_comm {
	int fd, connected, is_send;
	struct fk_req reqs[FK_REQS];
	struct fk_req *head, *tail;	/* FIFO of pending requests */
	struct fk_hdr rhdr;		/* recv: header being read */
	size_t rhdr_got, rdata_got;
	int rsub;			/* recv: sub-receive being filled, -1 none */
};

struct fk_handle {
	uint32_t magic;
	uint16_t port;
};

static ncclDebugLogger_t fk_log;
static long fk_tests, fk_fail_after = -1;
static int fk_max_recvs = FK_GROUP;
static long fk_corrupt, fk_msgs;	/* NBFAKE_CORRUPT=N: flip a bit in every N-th message */

#define FK_WARN(...) fk_log(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, __VA_ARGS__)

static ncclResult_t fk_init(ncclDebugLogger_t logf)
{
	const char *s = getenv("NBFAKE_FAIL_AFTER");

	fk_log = logf;
	fk_fail_after = s && *s ? atol(s) : -1;
	s = getenv("NBFAKE_MAXRECVS");
	fk_max_recvs = s && *s ? atoi(s) : FK_GROUP;
	s = getenv("NBFAKE_CORRUPT");
	fk_corrupt = s && *s ? atol(s) : 0;
	if (fk_max_recvs < 1 || fk_max_recvs > FK_GROUP)
		fk_max_recvs = FK_GROUP;
	return ncclSuccess;
}

static ncclResult_t fk_devices(int *n)
{
	*n = 1;
	return ncclSuccess;
}

static void fk_props(ncclNetProperties_v12_t *p)
{
	memset(p, 0, sizeof(*p));
	p->name = (char *)"nbfake0";
	p->pciPath = NULL;
	p->guid = 0x1234;
	p->ptrSupport = NCCL_PTR_HOST;
	p->speed = 10000;
	p->port = 1;
	p->maxComms = 1024;
	p->maxRecvs = fk_max_recvs;
	p->netDeviceType = NCCL_NET_DEVICE_HOST;
	p->vProps.ndevs = 1;
	p->maxP2pBytes = NCCL_MAX_NET_SIZE_BYTES;
	p->maxCollBytes = MAX_COLLNET_SIZE;
	p->maxMultiRequestSize = 1;
	p->railId = p->planeId = -1;
}

static struct fk_comm *fk_comm_new(int fd, int is_send)
{
	struct fk_comm *c = calloc(1, sizeof(*c));
	int one = 1;

	if (!c)
		return NULL;
	c->fd = fd;
	c->is_send = is_send;
	c->rsub = -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return c;
}

static ncclResult_t fk_listen(int dev, void *handle, void **lcomm)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	struct fk_handle *h = handle;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	(void)dev;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 16) ||
	    getsockname(fd, (struct sockaddr *)&a, &al)) {
		FK_WARN("nbfake: listen: %s", strerror(errno));
		return ncclSystemError;
	}
	h->magic = FK_MAGIC;
	h->port = ntohs(a.sin_port);
	*lcomm = fk_comm_new(fd, 0);
	return *lcomm ? ncclSuccess : ncclSystemError;
}

/* Non-blocking: the first call starts the connect, later ones finish it. */
static ncclResult_t fk_connect(void *handle, void **scomm)
{
	static struct fk_comm *pending[64];
	static uint16_t pport[64];
	struct fk_handle *h = handle;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(h->port) };
	struct pollfd pf;
	int err = 0, k;
	socklen_t el = sizeof(err);

	*scomm = NULL;
	if (h->magic != FK_MAGIC) {
		FK_WARN("nbfake: bad handle");
		return ncclInvalidUsage;
	}
	for (k = 0; k < 64 && !(pending[k] && pport[k] == h->port); k++)
		;
	if (k == 64) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

		for (k = 0; k < 64 && pending[k]; k++)
			;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (k == 64 || fd < 0 ||
		    (connect(fd, (struct sockaddr *)&a, sizeof(a)) && errno != EINPROGRESS)) {
			FK_WARN("nbfake: connect to port %u: %s", h->port, strerror(errno));
			return ncclSystemError;
		}
		pending[k] = fk_comm_new(fd, 1);
		pport[k] = h->port;
		return ncclSuccess;
	}
	pf.fd = pending[k]->fd;
	pf.events = POLLOUT;
	if (poll(&pf, 1, 0) <= 0)
		return ncclSuccess;
	getsockopt(pending[k]->fd, SOL_SOCKET, SO_ERROR, &err, &el);
	if (err) {
		FK_WARN("nbfake: connect to port %u: %s", h->port, strerror(err));
		return ncclSystemError;
	}
	*scomm = pending[k];
	pending[k] = NULL;
	return ncclSuccess;
}

static ncclResult_t fk_accept(void *lcomm, void **rcomm)
{
	struct fk_comm *l = lcomm;
	int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);

	*rcomm = NULL;
	if (fd < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? ncclSuccess : ncclSystemError;
	*rcomm = fk_comm_new(fd, 0);
	return ncclSuccess;
}

static ncclResult_t fk_regmr(void *comm, void *data, size_t size, int type, void **mh)
{
	(void)comm, (void)type;
	*mh = calloc(1, 16);
	((void **)*mh)[0] = data;
	((size_t *)*mh)[1] = size;
	return ncclSuccess;
}

static ncclResult_t fk_regmr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t off,
				    int fd, void **mh)
{
	(void)comm, (void)data, (void)size, (void)type, (void)off, (void)fd, (void)mh;
	return ncclInternalError;
}

static ncclResult_t fk_deregmr(void *comm, void *mh)
{
	(void)comm;
	free(mh);
	return ncclSuccess;
}

static struct fk_req *fk_req_get(struct fk_comm *c)
{
	int i;

	for (i = 0; i < FK_REQS; i++)
		if (!c->reqs[i].used) {
			memset(&c->reqs[i], 0, sizeof(c->reqs[i]));
			c->reqs[i].used = 1;
			c->reqs[i].comm = c;
			if (c->tail)
				c->tail->next = &c->reqs[i];
			else
				c->head = &c->reqs[i];
			c->tail = &c->reqs[i];
			return &c->reqs[i];
		}
	return NULL;
}

static ncclResult_t fk_isend(void *scomm, void *data, size_t size, int tag, void **req)
{
	struct fk_req *r = fk_req_get(scomm);

	*req = r;
	if (!r)
		return ncclSuccess;	/* no slot: NCCL retries */
	r->is_send = 1;
	r->hdr.tag = (uint32_t)tag;
	r->hdr.size = size;
	r->data[0] = data;
	r->cap[0] = size;
	return ncclSuccess;
}

static ncclResult_t fk_irecv(void *rcomm, int n, void **data, size_t *sizes, int *tags,
			     void **req)
{
	struct fk_req *r;
	int i;

	*req = NULL;
	if (n < 1 || n > fk_max_recvs) {
		FK_WARN("nbfake: irecv with n=%d (maxRecvs %d)", n, fk_max_recvs);
		return ncclInternalError;
	}
	r = fk_req_get(rcomm);
	*req = r;
	if (!r)
		return ncclSuccess;
	r->n = n;
	for (i = 0; i < n; i++) {
		r->data[i] = data[i];
		r->cap[i] = sizes[i];
		r->tags[i] = tags[i];
	}
	return ncclSuccess;
}

static void fk_pop(struct fk_comm *c)
{
	c->head->done = 1;
	c->head = c->head->next;
	if (!c->head)
		c->tail = NULL;
}

static ncclResult_t fk_send_progress(struct fk_comm *c)
{
	while (c->head) {
		struct fk_req *r = c->head;
		size_t total = sizeof(r->hdr) + r->hdr.size;
		ssize_t n;

		if (r->off < sizeof(r->hdr))
			n = send(c->fd, (char *)&r->hdr + r->off, sizeof(r->hdr) - r->off,
				 MSG_NOSIGNAL);
		else
			n = send(c->fd, r->data[0] + (r->off - sizeof(r->hdr)), total - r->off,
				 MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return ncclSuccess;
		if (n <= 0) {
			FK_WARN("nbfake: send: %s", n < 0 ? strerror(errno) : "closed");
			return ncclSystemError;
		}
		r->off += (size_t)n;
		if (r->off == total)
			fk_pop(c);
	}
	return ncclSuccess;
}

/* Matches the header just read to a sub-receive of the oldest pending group. */
static ncclResult_t fk_match(struct fk_comm *c)
{
	struct fk_req *r = c->head;
	int i;

	for (i = 0; i < r->n; i++)
		if (!r->have[i] && r->tags[i] == (int)c->rhdr.tag)
			break;
	if (i == r->n || c->rhdr.size > r->cap[i]) {
		FK_WARN("nbfake: message tag %u size %llu matches no posted receive", c->rhdr.tag,
			(unsigned long long)c->rhdr.size);
		return ncclInternalError;
	}
	c->rsub = i;
	c->rdata_got = 0;
	return ncclSuccess;
}

static ncclResult_t fk_recv_progress(struct fk_comm *c)
{
	while (c->head) {
		struct fk_req *r = c->head;
		ssize_t n;

		if (c->rsub < 0) {
			n = recv(c->fd, (char *)&c->rhdr + c->rhdr_got,
				 sizeof(c->rhdr) - c->rhdr_got, 0);
		} else {
			n = (ssize_t)(c->rhdr.size - c->rdata_got);
			if (n > 0)
				n = recv(c->fd, r->data[c->rsub] + c->rdata_got, (size_t)n, 0);
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return ncclSuccess;
		if (n < 0 || (n == 0 && (c->rsub < 0 || c->rhdr.size > c->rdata_got))) {
			FK_WARN("nbfake: recv: %s", n < 0 ? strerror(errno) : "peer closed");
			return ncclRemoteError;
		}
		if (c->rsub < 0) {
			c->rhdr_got += (size_t)n;
			if (c->rhdr_got == sizeof(c->rhdr) && fk_match(c) != ncclSuccess)
				return ncclInternalError;
			continue;
		}
		c->rdata_got += (size_t)n;
		if (c->rdata_got < c->rhdr.size)
			continue;
		if (fk_corrupt > 0 && c->rhdr.size > 0 && ++fk_msgs % fk_corrupt == 0)
			r->data[c->rsub][c->rhdr.size / 2] ^= 0x10;
		r->have[c->rsub] = 1;
		r->got[c->rsub] = c->rhdr.size;
		c->rsub = -1;
		c->rhdr_got = 0;
		if (++r->filled == r->n)
			fk_pop(c);
	}
	return ncclSuccess;
}

static ncclResult_t fk_test(void *request, int *done, int *sizes)
{
	struct fk_req *r = request;
	struct fk_comm *c = r->comm;
	ncclResult_t res;
	int i;

	*done = 0;
	if (fk_fail_after >= 0 && ++fk_tests > fk_fail_after) {
		FK_WARN("nbfake: injected failure after %ld test() calls", fk_fail_after);
		return ncclSystemError;
	}
	res = c->is_send ? fk_send_progress(c) : fk_recv_progress(c);
	if (res != ncclSuccess || !r->done)
		return res;
	*done = 1;
	for (i = 0; sizes && i < (r->is_send ? 1 : r->n); i++)
		sizes[i] = (int)(r->is_send ? r->hdr.size : r->got[i]);
	r->used = 0;
	return ncclSuccess;
}

static ncclResult_t fk_iflush(void *rcomm, int n, void **data, int *sizes, void **mh, void **req)
{
	(void)rcomm, (void)n, (void)data, (void)sizes, (void)mh;
	*req = NULL;
	return ncclSuccess;
}

static ncclResult_t fk_close(void *comm)
{
	struct fk_comm *c = comm;

	if (c) {
		close(c->fd);
		free(c);
	}
	return ncclSuccess;
}

#include "nb-fake-net-tables.h"
