/*
 * eager_ring.c - lifetime of a receive comm's eager ring (protocol in comm.h,
 * data path in eager.c): allocated and registered at accept when both sides
 * want eager, told to the sender in our version-4 META, freed with the comm.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "mr.h"
#include "param.h"

/* Not with NCCL_VERBS_LINK_HOLD_MS: a ride-through resends clear-to-send messages only. */
int nv_eager_send_offer(const struct nv_comm *c)
{
	return nv_param_int(NV_PARAM_VERBS_EAGER_MAX) > 0 && c->ndevs == 1 && c->nqps == 1 &&
	       !nv_param_int(NV_PARAM_VERBS_LINK_HOLD_MS);
}

nv_status_t nv_eager_ring_setup(struct nv_recv_comm *rc)
{
	struct nv_comm *c = &rc->base;
	struct nv_eager_recv *E = &rc->eager;
	uint32_t max = (uint32_t)nv_param_int(NV_PARAM_VERBS_EAGER_MAX);
	size_t bytes;
	nv_status_t st;
	void *ring;

	memset(E, 0, sizeof(*E));
	/* both sides one device and one QP, and the sender announced eager */
	if (!max || nv_param_int(NV_PARAM_VERBS_LINK_HOLD_MS) || c->ndevs != 1 || c->nqps != 1 ||
	    c->rmeta->ndevs != 1 ||
	    c->rmeta->role != NV_META_ROLE_SEND ||
	    (c->rmeta->region_len != NV_SEND_CTRL_REMOTE_LEN_EAGER &&
	     c->rmeta->region_len != NV_SEND_CTRL_REMOTE_LEN_EAGER_CTS))
		return NV_OK;
	E->entry = NV_EAGER_ENTRY(max);
	bytes = NV_EAGER_RING_BYTES(E->entry);
	if (posix_memalign(&ring, 4096, bytes)) {
		NV_WARN("cannot allocate the %zu-byte eager ring of a comm from %s", bytes, c->peer);
		return NV_ERR_SYSTEM;
	}
	memset(ring, 0, bytes); /* every trailer's flag 0: no sequence has arrived */
	/* strictly ordered (NV_MR_CTRL): a trailer lands after the data before it */
	st = nv_mr_acquire(c->dev[0].hca, ring, bytes, NV_MEM_HOST, 0, -1, NV_MR_CTRL, &E->mr);
	if (st != NV_OK) {
		free(ring);
		return st;
	}
	E->ring = ring;
	E->granted = NV_EAGER_SLOTS; /* the first ring's worth needs no grant */
	E->cts_grant = c->rmeta->region_len == NV_SEND_CTRL_REMOTE_LEN_EAGER_CTS;
	E->max = max;
	return NV_OK;
}

void nv_eager_ring_free(struct nv_recv_comm *rc)
{
	struct nv_eager_recv *E = &rc->eager;

	if (E->mr)
		(void)nv_mr_release(rc->base.dev[0].hca, E->mr);
	E->mr = NULL;
	free(E->ring);
	E->ring = NULL;
	E->max = 0;
}

void nv_eager_send_setup(struct nv_send_comm *sc)
{
	const struct nv_meta *rm = sc->base.rmeta;
	uint32_t mine = (uint32_t)nv_param_int(NV_PARAM_VERBS_EAGER_MAX);

	memset(&sc->eager, 0, sizeof(sc->eager));
	/* the receiver answered our offer with its ring (version 4): the smaller limit */
	if (rm->version < 4 || !nv_eager_send_offer(&sc->base))
		return;
	sc->eager.max = mine < rm->eager.max ? mine : rm->eager.max;
	NV_INFO(NV_SUB_NET, "send comm to %s: eager messages up to %u bytes (ours %u, the "
		"receiver's %u)", sc->base.peer, sc->eager.max, mine, rm->eager.max);
	sc->eager.entry = rm->eager.entry;
	sc->eager.ring_addr = rm->eager.ring_addr;
	sc->eager.rkey = rm->eager.ring_rkey;
	sc->eager.grant = NV_EAGER_SLOTS; /* the first ring's worth needs no grant */
	sc->eager.cts_took = UINT64_MAX;  /* no CTS grant taken yet */
}
