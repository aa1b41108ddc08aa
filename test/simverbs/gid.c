/*
 * GID tables.  InfiniBand ports: one IB GID (fe80::<port guid>).  RoCE ports,
 * in the order Linux fills them: link-local fe80::<guid> as RoCE v1 and v2,
 * then every IPv4 address of the host as an IPv4-mapped GID (::ffff:a.b.c.d,
 * 127.0.0.1 included) and every IPv6 address, each as v1 and v2.
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <string.h>

#include "sv.h"

static void sv_gid_add(struct sv_port *pt, const union ibv_gid *g, uint32_t type)
{
	if (pt->ngids >= SV_GID_TBL_LEN)
		return;
	pt->gids[pt->ngids].gid = *g;
	pt->gids[pt->ngids].type = type;
	pt->gids[pt->ngids].valid = true;
	pt->ngids++;
}

static void sv_gid_add_pair(struct sv_port *pt, const union ibv_gid *g)
{
	sv_gid_add(pt, g, IBV_GID_TYPE_ROCE_V1);
	sv_gid_add(pt, g, IBV_GID_TYPE_ROCE_V2);
}

static void sv_gid_add_ifaddrs(struct sv_port *pt)
{
	struct ifaddrs *ifa, *i;
	union ibv_gid g;

	if (getifaddrs(&ifa))
		return;
	for (int fam = 0; fam < 2; fam++) {
		for (i = ifa; i; i = i->ifa_next) {
			if (!i->ifa_addr)
				continue;
			memset(&g, 0, sizeof(g));
			if (fam == 0 && i->ifa_addr->sa_family == AF_INET) {
				struct sockaddr_in *s = (struct sockaddr_in *)i->ifa_addr;

				g.raw[10] = 0xff;
				g.raw[11] = 0xff;
				memcpy(&g.raw[12], &s->sin_addr, 4);
			} else if (fam == 1 && i->ifa_addr->sa_family == AF_INET6) {
				struct sockaddr_in6 *s = (struct sockaddr_in6 *)i->ifa_addr;

				if (IN6_IS_ADDR_LINKLOCAL(&s->sin6_addr))
					continue;
				memcpy(g.raw, &s->sin6_addr, 16);
			} else {
				continue;
			}
			if (sv_gid_lookup(pt, &g) < 0)
				sv_gid_add_pair(pt, &g);
		}
	}
	freeifaddrs(ifa);
}

int sv_build_gid_table(struct sv_device *dev, struct sv_port *pt)
{
	union ibv_gid g;

	memset(pt->gids, 0, sizeof(pt->gids));
	pt->ngids = 0;
	memset(&g, 0, sizeof(g));
	g.raw[0] = 0xfe;
	g.raw[1] = 0x80;
	memcpy(&g.raw[8], &dev->node_guid, 8);
	g.raw[15] = (uint8_t)(g.raw[15] + (pt - dev->ports));
	if (dev->link_layer == IBV_LINK_LAYER_INFINIBAND) {
		if (pt->subnet) { /* routed subnet: site-local prefix fec0:0:0:<subnet> */
			g.raw[1] = 0xc0;
			g.raw[6] = (uint8_t)(pt->subnet >> 8);
			g.raw[7] = (uint8_t)pt->subnet;
		}
		sv_gid_add(pt, &g, IBV_GID_TYPE_IB);
		if (pt->flid) { /* index 1: the routable GID, FLID in bytes 4-5 */
			g.raw[4] = (uint8_t)(pt->flid >> 8);
			g.raw[5] = (uint8_t)pt->flid;
			sv_gid_add(pt, &g, IBV_GID_TYPE_IB);
		}
		return 0;
	}
	sv_gid_add_pair(pt, &g);
	sv_gid_add_ifaddrs(pt);
	return 0;
}

/* Index of the first entry holding gid, or -1. */
int sv_gid_lookup(const struct sv_port *pt, const union ibv_gid *gid)
{
	for (uint32_t i = 0; i < pt->ngids; i++)
		if (pt->gids[i].valid && !memcmp(pt->gids[i].gid.raw, gid->raw, 16))
			return (int)i;
	return -1;
}
