/*
 * Addressing: where an RC address vector leads, decided as a fabric would.
 *  - InfiniBand: the DLID must be a port of the source port's subnet (same
 *    subnet prefix); with a GRH the DGID must also be that port's GID.  A
 *    DGID of another subnet is reached only through a configured router
 *    (`ib-route`), and then the DGID alone names the port.
 *  - RoCE: the DGID must be a GID of some port with the same GID type as the
 *    SGID; the source host's kernel must route the address out of the SGID's
 *    netdev (RoCE v2; v1 and link-local GIDs only on the same L2 segment),
 *    and the neighbour it resolves must be that port's netdev (or a
 *    gateway).
 *  - The destination QPN must live on the port found.
 * An address that leads nowhere is not an error at modify_qp: the QP's
 * requests are never answered and complete with RETRY_EXC_ERR after the
 * timeout, as on hardware.
 */
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "sv.h"

struct sv_cand {
	uint32_t host, dev, port;
	struct sv_shm_port p;
};

static bool sv_gid_ip(const union ibv_gid *g, int *family, uint8_t *addr)
{
	static const uint8_t v4map[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	if (!memcmp(g->raw, v4map, 12)) {
		*family = AF_INET;
		memcpy(addr, &g->raw[12], 4);
		return true;
	}
	*family = AF_INET6;
	memcpy(addr, g->raw, 16);
	return g->raw[0] != 0xfe || (g->raw[1] & 0xc0) != 0x80;	/* routable */
}

/* The source host's kernel decides: route out of the SGID's netdev, then
 * the neighbour it resolves must be the destination port's netdev. */
static bool sv_roce_reachable(const struct sv_gid *sgid, const uint8_t *smac,
			      const struct sv_cand *c, const union ibv_gid *dgid, char *why,
			      size_t wl)
{
	uint8_t dst[16], nh[16], mac[6];
	int family, oif = (int)if_nametoindex(sgid->ndev), rc;
	bool routable = sv_gid_ip(dgid, &family, dst), local = false;
	bool v2 = sgid->type == IBV_GID_TYPE_ROCE_V2;

	if (!oif) {
		snprintf(why, wl, "the SGID's netdev %s is gone", sgid->ndev);
		return false;
	}
	if (routable) {
		rc = sv_nl_route(family, dst, oif, &local, nh);
		if (rc) {
			snprintf(why, wl, "no route to it from %s (%s)", sgid->ndev, strerror(rc));
			return false;
		}
		if (local) {
			/* loopback inside the NIC: only to a GID of the same netdev (the
			 * kernel would send to another local netdev's MAC on this wire) */
			if (c->host == sv_g.host && !memcmp(c->p.mac, smac, 6))
				return true;
			snprintf(why, wl, "it is an address of this host on another netdev than %s",
				 sgid->ndev);
			return false;
		}
		if (!v2 && memcmp(nh, dst, family == AF_INET ? 4 : 16)) {
			snprintf(why, wl, "RoCE v1 is not routed (next hop is a gateway)");
			return false;
		}
	} else {
		if (c->host == sv_g.host && !memcmp(c->p.mac, smac, 6))
			return true;	/* link-local GID of the same netdev */
		memcpy(nh, dst, 16);
	}
	rc = sv_nl_resolve(family, dst, nh, oif, sgid->ndev, 300, mac);
	if (rc) {
		snprintf(why, wl, "neighbour resolution on %s failed (%s): not on its L2 segment",
			 sgid->ndev, strerror(rc));
		return false;
	}
	if (!memcmp(nh, dst, family == AF_INET ? 4 : 16) && memcmp(mac, c->p.mac, 6)) {
		snprintf(why, wl, "its address resolves on %s to %02x:%02x:%02x:%02x:%02x:%02x, "
			 "not the destination port's netdev", sgid->ndev, mac[0], mac[1], mac[2],
			 mac[3], mac[4], mac[5]);
		return false;
	}
	return true;
}

/* Does the address vector lead to port c (IB)?  Within a subnet packets go
 * by LID; across subnets (the 16-bit local subnet prefixes differ) they reach
 * the router only with a GRH whose DGID is one of the destination port's GIDs
 * and DLID = that port's FLID.  why says why not. */
static bool sv_ib_leads(const struct sv_qp *qp, const struct ibv_ah_attr *ah,
			const struct sv_cand *c, char *why, size_t wl)
{
	const struct sv_port *pt = &qp->ctx->dev->ports[qp->sh->port - 1];
	bool has_gid = sv_gid_find(c->p.gids, c->p.ngids, &ah->grh.dgid, IBV_GID_TYPE_IB) >= 0;

	if (c->p.subnet != pt->subnet) {
		if (!ah->is_global || !c->p.flid || ah->dlid != c->p.flid || !has_gid) {
			snprintf(why, wl, "across IB subnets 0x%x -> 0x%x the router needs a GRH to "
				 "the port's GID and DLID = its FLID 0x%x (GRH %d, DLID 0x%x)",
				 pt->subnet, c->p.subnet, c->p.flid, ah->is_global, ah->dlid);
			return false;
		}
		return true;
	}
	if (c->p.lid != ah->dlid) {
		snprintf(why, wl, "DLID 0x%x is not the destination port's LID 0x%x", ah->dlid,
			 c->p.lid);
		return false;
	}
	if (ah->is_global && !has_gid) {
		snprintf(why, wl, "the GRH's DGID is not a GID of the port with DLID 0x%x",
			 ah->dlid);
		return false;
	}
	return true;
}

static int sv_sgid_copy(struct sv_qp *qp, uint8_t idx, struct sv_gid *out, uint8_t *mac)
{
	pthread_mutex_lock(&sv_g.port_lock);
	*out = qp->ctx->dev->ports[qp->sh->port - 1].gids[idx % SV_GID_TBL_LEN];
	memcpy(mac, qp->ctx->dev->ports[qp->sh->port - 1].mac, 6);
	pthread_mutex_unlock(&sv_g.port_lock);
	return out->valid ? 0 : -1;
}

/* Does the address vector lead to port c (RoCE)? */
static bool sv_roce_leads(struct sv_qp *qp, const struct ibv_ah_attr *ah,
			  const struct sv_cand *c, char *why, size_t wl)
{
	struct sv_gid sgid;
	uint8_t smac[6];

	if (sv_sgid_copy(qp, ah->grh.sgid_index, &sgid, smac)) {
		snprintf(why, wl, "SGID index %u is empty", ah->grh.sgid_index);
		return false;
	}
	qp->sgid_type = sgid.type;
	if (sv_gid_find(c->p.gids, c->p.ngids, &ah->grh.dgid, sgid.type) < 0) {
		snprintf(why, wl, "the DGID is no %s GID of the destination QP's port",
			 sgid.type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2" : "RoCE v1");
		return false;
	}
	return sv_roce_reachable(&sgid, smac, c, &ah->grh.dgid, why, wl);
}

/* The destination QP the address vector and QPN lead to, or NULL with the
 * reason in why.  *port gets the destination QP's port when it is reached. */
struct sv_shm_qp *sv_resolve_dest(struct sv_qp *qp, const struct ibv_qp_attr *a,
				  struct sv_shm_port **port, char *why, size_t wl)
{
	struct sv_shm_qp *d = &sv_g.fab->qps[a->dest_qp_num & (SV_MAX_QP_SLOTS - 1)];
	uint32_t ll = qp->ctx->dev->link_layer;
	const struct sv_shm_host *h;
	struct sv_cand c;
	bool ok;

	*port = NULL;
	if (!a->dest_qp_num || atomic_load(&d->qpn) != a->dest_qp_num || !sv_pid_alive(d->pid)) {
		snprintf(why, wl, "QPN 0x%x does not exist on this fabric", a->dest_qp_num);
		return NULL;
	}
	c.host = d->host % SV_MAX_HOSTS;
	c.dev = d->dev_idx;
	c.port = d->port;
	h = &sv_g.fab->hosts[c.host];
	if (c.dev >= h->ndevs || c.dev >= SV_MAX_DEVICES || h->devs[c.dev].link_layer != ll ||
	    c.port < 1 || c.port > SV_MAX_PORTS) {
		snprintf(why, wl, "QPN 0x%x is on a port of another link layer", a->dest_qp_num);
		return NULL;
	}
	sv_shm_port_read(sv_shm_port_of(c.host, c.dev, c.port), &c.p);
	ok = ll == IBV_LINK_LAYER_ETHERNET ? sv_roce_leads(qp, &a->ah_attr, &c, why, wl)
					   : sv_ib_leads(qp, &a->ah_attr, &c, why, wl);
	if (!ok) {
		size_t n = strlen(why);

		snprintf(why + n, wl - n, " (QPN 0x%x is on host %s, %s port %u)", a->dest_qp_num,
			 h->name, h->devs[c.dev].name, c.port);
		return NULL;
	}
	*port = sv_shm_port_of(c.host, c.dev, c.port);
	qp->peer_seq = c.p.seq;
	return d;
}

/* The destination port's table changed: does the DGID (IB: the LID) still
 * name it?  Data path, rare (only when its seq moved). */
bool sv_addr_recheck(struct sv_qp *qp)
{
	const struct ibv_ah_attr *ah = &qp->attr.ah_attr;
	struct sv_shm_port p;

	sv_shm_port_read(qp->peer_port, &p);
	qp->peer_seq = p.seq;
	if (qp->ctx->dev->link_layer == IBV_LINK_LAYER_ETHERNET)
		return sv_gid_find(p.gids, p.ngids, &ah->grh.dgid, qp->sgid_type) >= 0;
	return p.lid == ah->dlid || ah->is_global;
}
