/*
 * comm.c - the bottom of the connection layer: a comm's identity for
 * messages, the sticky-error bookkeeping every layer above reports into, and
 * memory registration through the per-HCA cache (one MR per comm device).
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "comm.h"
#include "ibv.h"
#include "mr.h"
#include "nv_api.h"

const char *nv_comm_ident(const struct nv_comm *c, char *buf, size_t len)
{
	const struct nv_comm_dev *d = &c->dev[0];

	if (!c->nqps || !c->qps || !c->qps[0].qp || !c->rmeta || !d->dev) {
		snprintf(buf, len, "peer %s", c->peer);
		return buf;
	}
	snprintf(buf, len, "%s:%u QPN 0x%x -> peer %s %.32s QPN 0x%x", d->hca->name, d->dev->port,
		 c->qps[0].qp->qp_num, c->peer, c->rmeta->dev[c->qps[0].rdev].name,
		 c->qps[0].rqpn);
	return buf;
}

const char *nv_comm_hs_ident(const struct nv_comm *c, const char *word, char *buf, size_t len)
{
	const struct nv_comm_qp *q = c->qps && c->nqps > 0 ? &c->qps[0] : NULL;
	const struct nv_comm_dev *d = q ? &c->dev[q->dev] : NULL;
	char more[32] = "", lg[64], rg[64];
	int n;

	buf[0] = 0;
	if (!q || !q->qp || !d->dev)
		return buf; /* no QP yet: the peer's address says it all */
	if (c->nqps > 1)
		snprintf(more, sizeof(more), " (first of %d)", c->nqps);
	n = snprintf(buf, len, " %s %s:%u GID %s QPN 0x%x%s", word, d->hca->name, d->dev->port,
		     nv_ibv_gid_str(&d->gid.gid, lg, sizeof(lg)), q->qp->qp_num, more);
	/* rqpn is set only from validated metadata, when the QP goes to RTR */
	if (q->rqpn && c->rmeta && n > 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, " (peer %.32s GID %s QPN 0x%x)",
			 c->rmeta->dev[q->rdev].name,
			 nv_ibv_gid_str((const union ibv_gid *)c->rmeta->dev[q->rdev].gid, rg,
					sizeof(rg)), q->rqpn);
	return buf;
}

void nv_comm_fail(struct nv_comm *c, nv_status_t st, const char *fmt, ...)
{
	va_list ap;

	if (c->error != NV_OK)
		return;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
	c->error = st;
	/* the data path's one health word (device.h) */
	atomic_fetch_or_explicit(&c->sink.fatal, NV_SINK_STICKY, memory_order_relaxed);
	NV_WARN("%s", c->why);
}

/* ---- registration and close --------------------------------------------------- */

static struct nv_comm *nv_comm_of(void *comm, const char *fn)
{
	struct nv_comm *c = comm;

	if (!c || (c->type != NV_COMM_SEND && c->type != NV_COMM_RECV)) {
		NV_WARN("%s: %p is not a send or receive comm", fn, comm);
		return NULL;
	}
	return c;
}

nv_status_t nv_net_reg_mr(void *comm, void *data, size_t size, int type, uint64_t offset,
			  int fd, void **mhandle)
{
	struct nv_comm *c = nv_comm_of(comm, "regMr");
	struct nv_mhandle *mh;
	nv_status_t st = NV_OK;
	int d;

	*mhandle = NULL;
	if (!c)
		return NV_ERR_INTERNAL;
	if (type != NV_MEM_HOST && type != NV_MEM_CUDA && type != NV_MEM_DMABUF) {
		NV_WARN("regMr: unknown pointer type %d", type);
		return NV_ERR_INVALID;
	}
	mh = calloc(1, sizeof(*mh));
	if (!mh) {
		NV_WARN("regMr: out of memory");
		return NV_ERR_SYSTEM;
	}
	mh->kind = type;
	for (d = 0; d < c->ndevs && st == NV_OK; d++) {
		mh->hca[d] = c->dev[d].hca;
		st = nv_mr_acquire(mh->hca[d], data, size, (enum nv_mem_kind)type, offset, fd,
				   NV_MR_DATA, &mh->mr[d]);
		if (st == NV_OK) {
			mh->ndevs = d + 1;
			mh->lkey[d] = mh->mr[d]->lkey;
			mh->rkey[d] = mh->mr[d]->rkey;
		}
	}
	if (st != NV_OK) {
		for (d = 0; d < mh->ndevs; d++)
			nv_mr_release(mh->hca[d], mh->mr[d]);
		free(mh);
		return st;
	}
	*mhandle = mh;
	return NV_OK;
}

nv_status_t nv_net_dereg_mr(void *comm, void *mhandle)
{
	struct nv_mhandle *mh = mhandle;
	nv_status_t first = NV_OK, st;
	int d;

	if (!nv_comm_of(comm, "deregMr"))
		return NV_ERR_INTERNAL;
	if (!mh)
		return NV_OK;
	for (d = 0; d < mh->ndevs; d++) {
		st = nv_mr_release(mh->hca[d], mh->mr[d]);
		if (first == NV_OK)
			first = st;
		mh->mr[d] = NULL;
	}
	mh->ndevs = 0;
	free(mh);
	return first;
}
