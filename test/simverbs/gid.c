/*
 * GID tables.  InfiniBand ports: fe80::<port GUID> (subnet 0) or
 * fec0:0:0:<subnet>::<port GUID>, plus the routable fec0:0:<flid>:<subnet>::
 * GID at index 1 when the port has an FLID.
 * RoCE ports are bound to one netdev of their host and fill the table the
 * way the kernel's roce_gid_mgmt does: the default GID fe80::<EUI-64 of the
 * netdev's MAC> as RoCE v1 and v2, then the netdev's IPv4 addresses
 * (IPv4-mapped, ::ffff:a.b.c.d) and its non-link-local IPv6 addresses, then
 * those of its VLAN uppers, each as v1 and v2.  Never loopback, never an
 * address of another interface.  A port without a netdev has no GIDs.
 */
#include <arpa/inet.h>
#include <linux/if_addr.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "sv.h"

static void sv_gid_add(struct sv_port *pt, const union ibv_gid *g, uint32_t type,
		       const char *ndev)
{
	struct sv_gid *e;

	if (pt->ngids >= SV_GID_TBL_LEN)
		return;
	e = &pt->gids[pt->ngids++];
	e->gid = *g;
	e->type = type;
	e->valid = true;
	snprintf(e->ndev, sizeof(e->ndev), "%s", ndev);
}

static void sv_gid_add_pair(struct sv_port *pt, const union ibv_gid *g, const char *ndev)
{
	if (sv_gid_lookup(pt, g) >= 0)
		return;
	sv_gid_add(pt, g, IBV_GID_TYPE_ROCE_V1, ndev);
	sv_gid_add(pt, g, IBV_GID_TYPE_ROCE_V2, ndev);
}

/* The addresses of one netdev, IPv4 first (sv_nl_addrs lists them so). */
static void sv_gid_add_netdev(struct sv_port *pt, const struct sv_nl_link *l,
			      const struct sv_nl_addr *addrs, int naddrs)
{
	for (int i = 0; i < naddrs; i++) {
		const struct sv_nl_addr *a = &addrs[i];
		union ibv_gid g;

		if (a->ifindex != l->ifindex || (a->flags & IFA_F_TENTATIVE))
			continue;
		memset(&g, 0, sizeof(g));
		if (a->family == AF_INET) {
			g.raw[10] = 0xff;
			g.raw[11] = 0xff;
			memcpy(&g.raw[12], a->addr, 4);
		} else {
			if (IN6_IS_ADDR_LINKLOCAL((const struct in6_addr *)a->addr))
				continue;
			memcpy(g.raw, a->addr, 16);
		}
		sv_gid_add_pair(pt, &g, l->name);
	}
}

static void sv_gid_add_roce(struct sv_port *pt, const struct sv_nl_link *links, int nlinks,
			    const struct sv_nl_addr *addrs, int naddrs)
{
	const struct sv_nl_link *l = NULL;
	union ibv_gid g;

	for (int i = 0; i < nlinks; i++)
		if (links[i].ifindex == pt->ifindex)
			l = &links[i];
	if (!l)
		return;
	memset(&g, 0, sizeof(g));
	g.raw[0] = 0xfe;
	g.raw[1] = 0x80;
	g.raw[8] = (uint8_t)(l->mac[0] ^ 2);
	g.raw[9] = l->mac[1];
	g.raw[10] = l->mac[2];
	g.raw[11] = 0xff;
	g.raw[12] = 0xfe;
	g.raw[13] = l->mac[3];
	g.raw[14] = l->mac[4];
	g.raw[15] = l->mac[5];
	sv_gid_add_pair(pt, &g, l->name);
	sv_gid_add_netdev(pt, l, addrs, naddrs);
	for (int i = 0; i < nlinks; i++)
		if (links[i].vlan && links[i].lower == l->ifindex)
			sv_gid_add_netdev(pt, &links[i], addrs, naddrs);
}

/*
 * link-down / link-up (fault.c): a netdev flap takes the port's addresses
 * away and the kernel removes their GIDs; when they come back they take the
 * first free slots, which need not be the old ones (another address took
 * them meanwhile). Modelled as: the address GIDs (everything after the
 * default pair) gone while bit p of addr_gone is set, and two slots further
 * on, after two empty ones, while bit p of addr_moved is set (each link-up
 * toggles it), so a GID index chosen before the flap is wrong after it.
 */
static void sv_gid_flap(struct sv_device *dev, struct sv_port *pt)
{
	uint32_t bit = 1u << (uint32_t)(pt - dev->ports + 1);
	struct sv_dev_knobs *k = dev->knobs;

	if (!k || pt->ngids <= 2)
		return;
	if (atomic_load(&k->addr_gone) & bit) {
		memset(&pt->gids[2], 0, sizeof(pt->gids[0]) * (pt->ngids - 2));
		pt->ngids = 2;
	} else if ((atomic_load(&k->addr_moved) & bit) && pt->ngids + 2 <= SV_GID_TBL_LEN) {
		memmove(&pt->gids[4], &pt->gids[2], sizeof(pt->gids[0]) * (pt->ngids - 2));
		memset(&pt->gids[2], 0, sizeof(pt->gids[0]) * 2);
		pt->ngids += 2;
	}
}

void sv_build_gid_table(struct sv_device *dev, struct sv_port *pt,
			const struct sv_nl_link *links, int nlinks,
			const struct sv_nl_addr *addrs, int naddrs)
{
	union ibv_gid g;

	memset(pt->gids, 0, sizeof(pt->gids));
	pt->ngids = 0;
	if (dev->link_layer == IBV_LINK_LAYER_ETHERNET) {
		sv_gid_add_roce(pt, links, nlinks, addrs, naddrs);
		sv_gid_flap(dev, pt);
		return;
	}
	memset(&g, 0, sizeof(g));
	g.raw[0] = 0xfe;
	g.raw[1] = 0x80;
	memcpy(&g.raw[8], &dev->node_guid, 8);
	g.raw[15] = (uint8_t)(g.raw[15] + (pt - dev->ports));
	if (pt->subnet) { /* routed subnet: site-local prefix fec0:0:0:<subnet> */
		g.raw[1] = 0xc0;
		g.raw[6] = (uint8_t)(pt->subnet >> 8);
		g.raw[7] = (uint8_t)pt->subnet;
	}
	sv_gid_add(pt, &g, IBV_GID_TYPE_IB, "");
	if (pt->flid) { /* index 1: the routable GID, FLID in bytes 4-5 */
		g.raw[4] = (uint8_t)(pt->flid >> 8);
		g.raw[5] = (uint8_t)pt->flid;
		sv_gid_add(pt, &g, IBV_GID_TYPE_IB, "");
	}
}

int sv_gid_find(const struct sv_gid *tbl, uint32_t n, const union ibv_gid *gid, uint32_t type)
{
	for (uint32_t i = 0; i < n && i < SV_GID_TBL_LEN; i++)
		if (tbl[i].valid && tbl[i].type == type && !memcmp(tbl[i].gid.raw, gid->raw, 16))
			return (int)i;
	return -1;
}

/* Index of the first entry holding gid, or -1. */
int sv_gid_lookup(const struct sv_port *pt, const union ibv_gid *gid)
{
	for (uint32_t i = 0; i < pt->ngids; i++)
		if (pt->gids[i].valid && !memcmp(pt->gids[i].gid.raw, gid->raw, 16))
			return (int)i;
	return -1;
}
