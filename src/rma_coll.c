/*
 * rma_coll.c - the RMA collective: listen, the ring of TCP connections a
 * collective connect builds, the allgather over it, and symmetric window
 * registration (each rank's base, size and rkey exchanged by allgather).
 *
 * connect and the allgathers block (NCCL calls them once per communicator,
 * outside the data path), bounded by NV_RMA_COLL_TIMEOUT_S; a peer that closes
 * its socket fails them at once with its rank named.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device.h"
#include "handshake.h"
#include "ibv.h"
#include "os.h"
#include "rma.h"

#define NV_RMA_COLL_TIMEOUT_S 120

/* The 128-byte handle NCCL exchanges: where this rank listens. */
struct nv_rma_handle {
	uint32_t magic;
	uint16_t family;
	uint16_t port;          /* network order */
	uint32_t scope_id;
	uint8_t addr[16];
};
_Static_assert(sizeof(struct nv_rma_handle) <= 128, "fits NCCL_NET_HANDLE_MAXSIZE");

/* First message on each ring connection: who is calling. */
struct nv_rma_hello {
	uint32_t magic;
	uint32_t rank;
	uint32_t nranks;
	uint32_t pad;
};

static void nv_rma_addr_to_handle(const struct nv_sock_addr *a, struct nv_rma_handle *h)
{
	memset(h, 0, sizeof(*h));
	h->magic = NV_RMA_HANDLE_MAGIC;
	h->family = (uint16_t)a->ss.ss_family;
	if (a->ss.ss_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)&a->ss;

		h->port = s->sin_port;
		memcpy(h->addr, &s->sin_addr, 4);
	} else {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)&a->ss;

		h->port = s->sin6_port;
		h->scope_id = s->sin6_scope_id;
		memcpy(h->addr, &s->sin6_addr, 16);
	}
}

static void nv_rma_addr_from_handle(const struct nv_rma_handle *h, struct nv_sock_addr *a)
{
	memset(a, 0, sizeof(*a));
	if (h->family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)&a->ss;

		s->sin_family = AF_INET;
		s->sin_port = h->port;
		memcpy(&s->sin_addr, h->addr, 4);
		a->len = sizeof(*s);
	} else {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)&a->ss;

		s->sin6_family = AF_INET6;
		s->sin6_port = h->port;
		s->sin6_scope_id = h->scope_id;
		memcpy(&s->sin6_addr, h->addr, 16);
		a->len = sizeof(*s);
	}
}

nv_status_t nv_rma_listen(int vdev, void *handle, struct nv_rma_listen **out)
{
	struct nv_sock_addr addr;
	struct nv_rma_listen *l;
	char s[NV_SOCK_ADDR_STRLEN];
	nv_status_t st = nv_if_get(&addr);
	int rc;

	*out = NULL;
	if (st != NV_OK)
		return st;
	l = calloc(1, sizeof(*l));
	if (!l) {
		NV_WARN("RMA listen: out of memory");
		return NV_ERR_SYSTEM;
	}
	l->dev = vdev;
	rc = nv_sock_listen(&addr, &l->fd, &l->addr);
	if (rc < 0) {
		NV_WARN("RMA listen on %s: %s", nv_sock_addr_str(&addr, s, sizeof(s)), strerror(-rc));
		free(l);
		return NV_ERR_SYSTEM;
	}
	memset(handle, 0, 128);
	nv_rma_addr_to_handle(&l->addr, handle);
	NV_INFO(NV_SUB_INIT | NV_SUB_NET, "RMA listening on %s for device %d",
		nv_sock_addr_str(&l->addr, s, sizeof(s)), vdev);
	*out = l;
	return NV_OK;
}

nv_status_t nv_rma_close_listen(struct nv_rma_listen *l)
{
	if (!l)
		return NV_OK;
	nv_sock_close(&l->fd);
	free(l);
	return NV_OK;
}

static uint64_t nv_rma_coll_deadline(void)
{
	return nv_now_ns() + (uint64_t)NV_RMA_COLL_TIMEOUT_S * 1000000000ull;
}

/* Waits (at most 10 ms) for any of the two fds to be ready. */
static void nv_rma_wait(int rfd, int wfd)
{
	struct pollfd p[2] = { { .fd = rfd, .events = POLLIN }, { .fd = wfd, .events = POLLOUT } };

	(void)poll(p, 2, 10);
}

/*
 * Sends slen bytes to the next rank while receiving rlen from the previous,
 * both to completion (either may be 0).
 */
static nv_status_t nv_rma_ring_xfer(struct nv_rma_coll *c, const void *sbuf, size_t slen,
				    void *rbuf, size_t rlen, const char *what)
{
	size_t soff = 0, roff = 0;
	uint64_t end = nv_rma_coll_deadline();
	int next = (c->rank + 1) % c->nranks, prev = (c->rank + c->nranks - 1) % c->nranks;

	while (soff < slen || roff < rlen) {
		int rs = soff < slen ? nv_sock_send(c->next_fd, sbuf, slen, &soff) : 1;
		int rr = roff < rlen ? nv_sock_recv(c->prev_fd, rbuf, rlen, &roff) : 1;

		if (rs < 0 || rr < 0) {
			NV_WARN("RMA %s: rank %d lost its ring link to rank %d: %s", what, c->rank,
				rs < 0 ? next : prev, strerror(rs < 0 ? -rs : -rr));
			return NV_ERR_REMOTE;
		}
		if (nv_now_ns() > end) {
			NV_WARN("RMA %s: rank %d: no progress with ranks %d/%d in %d s", what, c->rank,
				prev, next, NV_RMA_COLL_TIMEOUT_S);
			return NV_ERR_REMOTE;
		}
		if (!rs || !rr)
			nv_rma_wait(roff < rlen ? c->prev_fd : -1, soff < slen ? c->next_fd : -1);
	}
	return NV_OK;
}

nv_status_t nv_rma_allgather(struct nv_rma_coll *c, const void *mine, void *all, size_t len)
{
	uint8_t *a = all;

	memcpy(a + (size_t)c->rank * len, mine, len);
	for (int s = 0; s < c->nranks - 1; s++) {
		int sb = (c->rank - s + c->nranks) % c->nranks;
		int rb = (c->rank - s - 1 + c->nranks) % c->nranks;
		nv_status_t st = nv_rma_ring_xfer(c, a + (size_t)sb * len, len, a + (size_t)rb * len,
						  len, "allgather");

		if (st != NV_OK)
			return st;
	}
	return NV_OK;
}

/* Connects to the next rank's handle and accepts the previous rank. */
static nv_status_t nv_rma_ring_build(struct nv_rma_coll *c, void *handles[], struct nv_rma_listen *l)
{
	int next = (c->rank + 1) % c->nranks, prev = (c->rank + c->nranks - 1) % c->nranks;
	struct nv_rma_hello me = { NV_RMA_HANDLE_MAGIC, (uint32_t)c->rank, (uint32_t)c->nranks, 0 };
	struct nv_rma_hello them;
	const struct nv_rma_handle *h = handles[next];
	struct nv_sock_addr a, peer;
	uint64_t end = nv_rma_coll_deadline();
	size_t soff = 0, roff = 0;
	bool connected = false;
	int rc;

	if (h->magic != NV_RMA_HANDLE_MAGIC) {
		NV_WARN("RMA connect: rank %d's handle is not ours (magic 0x%x)", next, h->magic);
		return NV_ERR_INTERNAL;
	}
	nv_rma_addr_from_handle(h, &a);
	rc = nv_sock_connect_start(&a, &c->next_fd);
	while (rc >= 0) {
		if (!connected && (rc = nv_sock_connect_check(c->next_fd)) < 0)
			break;
		connected = connected || rc > 0;
		if (connected && soff < sizeof(me) &&
		    (rc = nv_sock_send(c->next_fd, &me, sizeof(me), &soff)) < 0)
			break;
		if (c->prev_fd < 0 && (rc = nv_sock_accept(l->fd, &c->prev_fd, &peer)) < 0)
			break;
		if (c->prev_fd >= 0 && roff < sizeof(them) &&
		    (rc = nv_sock_recv(c->prev_fd, &them, sizeof(them), &roff)) < 0)
			break;
		if (connected && soff == sizeof(me) && roff == sizeof(them))
			break;
		if (nv_now_ns() > end) {
			rc = -ETIMEDOUT;
			break;
		}
		nv_rma_wait(c->prev_fd >= 0 ? c->prev_fd : l->fd, connected ? -1 : c->next_fd);
	}
	if (rc < 0) {
		NV_WARN("RMA connect: rank %d of %d joining ranks %d and %d: %s", c->rank, c->nranks,
			prev, next, strerror(-rc));
		return NV_ERR_REMOTE;
	}
	if (them.magic != NV_RMA_HANDLE_MAGIC || them.rank != (uint32_t)prev ||
	    them.nranks != (uint32_t)c->nranks) {
		NV_WARN("RMA connect: rank %d expected rank %d of %d on its listener, got rank %u of %u",
			c->rank, prev, c->nranks, them.rank, them.nranks);
		return NV_ERR_INTERNAL;
	}
	nv_sock_keepalive(c->next_fd, 10, 5, 3);
	nv_sock_keepalive(c->prev_fd, 10, 5, 3);
	return NV_OK;
}

nv_status_t nv_rma_connect(void *handles[], int nranks, int rank, struct nv_rma_listen *l,
			   struct nv_rma_coll **out)
{
	const struct nv_vdev *vd;
	struct nv_rma_coll *c;
	nv_status_t st;

	*out = NULL;
	if (!handles || !l || nranks < 1 || nranks > NV_RMA_MAX_RANKS || rank < 0 || rank >= nranks) {
		NV_WARN("RMA connect: rank %d of %d (1..%d ranks) or its handles/listener invalid",
			rank, nranks, NV_RMA_MAX_RANKS);
		return NV_ERR_INTERNAL;
	}
	vd = nv_vdev_get(l->dev);
	c = calloc(1, sizeof(*c));
	if (!c || !vd) {
		free(c);
		NV_WARN("RMA connect: %s", vd ? "out of memory" : "the listener's device is gone");
		return NV_ERR_SYSTEM;
	}
	c->nranks = nranks;
	c->rank = rank;
	c->vdev = l->dev;
	c->next_fd = c->prev_fd = -1;
	c->dev = nv_dev_get(vd->devs[0]);
	c->hca = c->dev->hca;
	c->atomics = c->hca->attr.atomic_cap != IBV_ATOMIC_NONE;
	NV_CHECK_GOTO(nv_hca_pd_get(c->hca, &c->pd), st, fail);
	if (nranks > 1)
		NV_CHECK_GOTO(nv_rma_ring_build(c, handles, l), st, fail);
	NV_INFO(NV_SUB_INIT | NV_SUB_NET, "RMA collective: rank %d of %d on %s:%u (atomics %s)", rank,
		nranks, c->hca->name, c->dev->port, c->atomics ? "yes" : "no");
	*out = c;
	return NV_OK;
fail:
	nv_rma_close_coll(c);
	return st;
}

nv_status_t nv_rma_close_coll(struct nv_rma_coll *c)
{
	if (!c)
		return NV_OK;
	if (c->nwins || c->nctxs) {
		NV_WARN("RMA closeColl: %d window(s) and %d context(s) still open", c->nwins, c->nctxs);
		return NV_ERR_INTERNAL;
	}
	nv_sock_close(&c->next_fd);
	nv_sock_close(&c->prev_fd);
	if (c->pd)
		nv_hca_pd_put(c->hca);
	free(c);
	return NV_OK;
}

int nv_rma_ring_dead(struct nv_rma_coll *c)
{
	uint64_t now;

	if (c->nranks == 1)
		return -1;
	now = nv_now_ns();
	if (now < c->next_alive_check)
		return -1;
	c->next_alive_check = now + 100000000ull;
	if (!nv_sock_alive(c->next_fd))
		return (c->rank + 1) % c->nranks;
	if (!nv_sock_alive(c->prev_fd))
		return (c->rank + c->nranks - 1) % c->nranks;
	return -1;
}

/* What every rank publishes about its window. */
struct nv_rma_win_info {
	uint64_t base, size;
	uint32_t rkey, pad;
};

static nv_status_t nv_rma_reg_mr(struct nv_rma_coll *c, void *data, size_t size, int type,
				 uint64_t offset, int fd, struct ibv_mr **mr)
{
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		     (c->atomics ? IBV_ACCESS_REMOTE_ATOMIC : 0);

	if (fd >= 0)
		return nv_ibv_reg_dmabuf_mr(c->pd, offset, size, (uintptr_t)data, fd, access,
					    "RMA window (dma-buf)", mr);
	return nv_ibv_reg_mr(c->pd, data, size, access,
			     type == 0x2 ? "RMA window (GPU)" : "RMA window", mr);
}

nv_status_t nv_rma_reg(struct nv_rma_coll *c, void *data, size_t size, int type, uint64_t offset,
		       int fd, struct nv_rma_win **out)
{
	struct nv_rma_win_info mine = { 0 }, *all = NULL;
	struct nv_rma_win *w;
	nv_status_t st = NV_ERR_SYSTEM;

	*out = NULL;
	w = calloc(1, sizeof(*w));
	all = calloc((size_t)c->nranks, sizeof(*all));
	if (!w || !all)
		goto fail;
	w->coll = c;
	w->base = calloc((size_t)c->nranks, sizeof(*w->base));
	w->size = calloc((size_t)c->nranks, sizeof(*w->size));
	w->rkey = calloc((size_t)c->nranks, sizeof(*w->rkey));
	if (!w->base || !w->size || !w->rkey)
		goto fail;
	if (size) /* a rank may take part with an empty window */
		NV_CHECK_GOTO(nv_rma_reg_mr(c, data, size, type, offset, fd, &w->mr), st, fail);
	mine.base = (uintptr_t)data;
	mine.size = size;
	mine.rkey = w->mr ? w->mr->rkey : 0;
	NV_CHECK_GOTO(nv_rma_allgather(c, &mine, all, sizeof(mine)), st, fail);
	for (int r = 0; r < c->nranks; r++) {
		w->base[r] = all[r].base;
		w->size[r] = all[r].size;
		w->rkey[r] = all[r].rkey;
	}
	free(all);
	c->nwins++;
	NV_INFO(NV_SUB_NET | NV_SUB_REG, "RMA window %p (%zu bytes, rkey 0x%x) on rank %d of %d",
		data, size, mine.rkey, c->rank, c->nranks);
	*out = w;
	return NV_OK;
fail:
	if (st == NV_ERR_SYSTEM && (!w || !all || !w->base || !w->size || !w->rkey))
		NV_WARN("RMA regMrSym: out of memory");
	free(all);
	if (w && w->mr)
		nv_ibv_dereg_mr(w->mr);
	if (w) {
		free(w->base);
		free(w->size);
		free(w->rkey);
	}
	free(w);
	return st;
}

nv_status_t nv_rma_dereg(struct nv_rma_coll *c, struct nv_rma_win *w)
{
	nv_status_t st = NV_OK;

	if (!w)
		return NV_OK;
	if (w->coll != c) {
		NV_WARN("RMA deregMrSym: window %p belongs to another collective", (void *)w);
		return NV_ERR_INTERNAL;
	}
	if (w->mr)
		st = nv_ibv_dereg_mr(w->mr);
	if (st != NV_OK)
		return st; /* still valid: may be retried */
	free(w->base);
	free(w->size);
	free(w->rkey);
	free(w);
	c->nwins--;
	return NV_OK;
}
