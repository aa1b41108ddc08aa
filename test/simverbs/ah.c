/*
 * UD address handles.  An AH names a destination port: its LID on
 * InfiniBand (a GRH optional), its GID on Ethernet (the GRH mandatory, with a
 * valid local sgid_index), as rdma-core/the kernel require; the destination
 * QP comes with each work request (wr.ud.remote_qpn), so an AH is only
 * checked and copied here and read by the UD engine (ud.c) at execution.
 */
#include <errno.h>
#include <stdlib.h>

#include "sv.h"

SV_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr);
struct ibv_ah *ibv_create_ah(struct ibv_pd *ibpd, struct ibv_ah_attr *attr)
{
	struct sv_context *ctx = ibpd ? sv_ctx(ibpd->context) : NULL;
	const struct sv_device *dev = ctx ? ctx->dev : NULL;
	const struct sv_port *pt;
	struct sv_ah *ah;

	if (!dev || !attr || attr->port_num < 1 || attr->port_num > dev->nports) {
		errno = EINVAL;
		return NULL;
	}
	pt = &dev->ports[attr->port_num - 1];
	if ((dev->link_layer == IBV_LINK_LAYER_ETHERNET && !attr->is_global) ||
	    (attr->is_global && (attr->grh.sgid_index >= SV_GID_TBL_LEN ||
				 !pt->gids[attr->grh.sgid_index].valid)) ||
	    (dev->link_layer == IBV_LINK_LAYER_INFINIBAND && !attr->dlid)) {
		SV_DBG("create_ah on %s: GRH %d sgid_index %u dlid %u: invalid", dev->ibv.name,
		       attr->is_global, attr->grh.sgid_index, attr->dlid);
		errno = EINVAL;
		return NULL;
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	ah->pd = (struct sv_pd *)ibpd;
	ah->attr = *attr;
	ah->ibv.context = ibpd->context;
	ah->ibv.pd = ibpd;
	atomic_fetch_add(&ah->pd->children, 1);
	ah->obj.dev = ctx->dev;
	sv_obj_add(&ah->obj, SV_K_AH);
	return &ah->ibv;
}

SV_EXPORT int ibv_destroy_ah(struct ibv_ah *ah);
int ibv_destroy_ah(struct ibv_ah *ibah)
{
	struct sv_ah *ah = (struct sv_ah *)ibah;

	if (!ah)
		return EINVAL;
	atomic_fetch_sub(&ah->pd->children, 1);
	sv_obj_del(&ah->obj);
	free(ah);
	return 0;
}
