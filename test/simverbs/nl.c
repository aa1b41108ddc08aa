/*
 * rtnetlink queries of the calling process's network namespace (the simulated
 * host): links (name, flags, MTU, MAC, VLAN lower), addresses, a route lookup
 * and neighbour resolution.  Control path only.
 */
#include <errno.h>
#include <linux/if_link.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sv.h"

#define SV_NL_BUF 32768

static int sv_nl_open(unsigned int groups)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = groups };
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);

	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return -1;
	}
	return fd;
}

int sv_nl_monitor_open(void)
{
	return sv_nl_open(RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR);
}

/* msg: the whole request buffer (header and room for attributes) */
static void sv_rta_add(void *msg, unsigned short type, const void *data, size_t len)
{
	struct nlmsghdr *h = msg;
	struct rtattr *a = (struct rtattr *)((char *)msg + NLMSG_ALIGN(h->nlmsg_len));

	a->rta_type = type;
	a->rta_len = (unsigned short)RTA_LENGTH(len);
	memcpy(RTA_DATA(a), data, len);
	h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + RTA_ALIGN(a->rta_len);
}

/* Sends req and calls cb for every answer until DONE (dump) or the single
 * reply.  Returns 0, or a positive errno (an NLMSG_ERROR's). */
static int sv_nl_talk(struct nlmsghdr *req, int (*cb)(struct nlmsghdr *, void *), void *arg)
{
	static _Thread_local char buf[SV_NL_BUF];
	int fd = sv_nl_open(0), rc = 0;
	bool dump = req->nlmsg_flags & NLM_F_DUMP;

	if (fd < 0)
		return errno;
	req->nlmsg_seq = 1;
	if (send(fd, req, req->nlmsg_len, 0) < 0) {
		rc = errno;
		goto out;
	}
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);

		if (n < 0) {
			rc = errno;
			goto out;
		}
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE)
				goto out;
			if (h->nlmsg_type == NLMSG_ERROR) {
				rc = -((struct nlmsgerr *)NLMSG_DATA(h))->error;
				goto out;
			}
			cb(h, arg);
			if (!dump)
				goto out;
		}
	}
out:
	close(fd);
	return rc;
}

struct sv_nl_links {
	struct sv_nl_link *v;
	int n, max;
};

static int sv_link_cb(struct nlmsghdr *h, void *arg)
{
	struct sv_nl_links *l = arg;
	struct ifinfomsg *ifi = NLMSG_DATA(h);
	int len = (int)IFLA_PAYLOAD(h);
	struct sv_nl_link *k;

	if (h->nlmsg_type != RTM_NEWLINK || l->n >= l->max)
		return 0;
	k = &l->v[l->n++];
	memset(k, 0, sizeof(*k));
	k->ifindex = ifi->ifi_index;
	k->flags = ifi->ifi_flags;
	for (struct rtattr *a = IFLA_RTA(ifi); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		switch (a->rta_type) {
		case IFLA_IFNAME:
			snprintf(k->name, sizeof(k->name), "%s", (char *)RTA_DATA(a));
			break;
		case IFLA_MTU:
			memcpy(&k->mtu, RTA_DATA(a), 4);
			break;
		case IFLA_LINK:
			memcpy(&k->lower, RTA_DATA(a), 4);
			break;
		case IFLA_ADDRESS:
			if (RTA_PAYLOAD(a) == 6)
				memcpy(k->mac, RTA_DATA(a), 6);
			break;
		case IFLA_LINKINFO: {
			int l2 = (int)RTA_PAYLOAD(a);

			for (struct rtattr *b = RTA_DATA(a); RTA_OK(b, l2); b = RTA_NEXT(b, l2))
				if (b->rta_type == IFLA_INFO_KIND &&
				    !strcmp((char *)RTA_DATA(b), "vlan"))
					k->vlan = true;
			break;
		}
		default:
			break;
		}
	}
	return 0;
}

/* Every link of the namespace; returns how many (<= max) or -1. */
int sv_nl_links(struct sv_nl_link *v, int max)
{
	struct {
		struct nlmsghdr h;
		struct ifinfomsg i;
	} req = {
		.h = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg)),
		       .nlmsg_type = RTM_GETLINK, .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP },
		.i = { .ifi_family = AF_UNSPEC },
	};
	struct sv_nl_links l = { v, 0, max };

	return sv_nl_talk(&req.h, sv_link_cb, &l) ? -1 : l.n;
}

struct sv_nl_addrs {
	struct sv_nl_addr *v;
	int n, max;
};

static int sv_addr_cb(struct nlmsghdr *h, void *arg)
{
	struct sv_nl_addrs *l = arg;
	struct ifaddrmsg *ifa = NLMSG_DATA(h);
	int len = (int)IFA_PAYLOAD(h);
	struct sv_nl_addr *k;
	bool got = false;

	if (h->nlmsg_type != RTM_NEWADDR || l->n >= l->max ||
	    (ifa->ifa_family != AF_INET && ifa->ifa_family != AF_INET6))
		return 0;
	k = &l->v[l->n];
	memset(k, 0, sizeof(*k));
	k->ifindex = (int)ifa->ifa_index;
	k->family = ifa->ifa_family;
	k->flags = ifa->ifa_flags;
	for (struct rtattr *a = IFA_RTA(ifa); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		/* IFA_LOCAL is the own address on point-to-point links */
		if ((a->rta_type == IFA_ADDRESS && !got) || a->rta_type == IFA_LOCAL) {
			memcpy(k->addr, RTA_DATA(a), ifa->ifa_family == AF_INET ? 4 : 16);
			got = true;
		}
	}
	if (got)
		l->n++;
	return 0;
}

/* Every IPv4 and IPv6 address of the namespace, IPv4 first. */
int sv_nl_addrs(struct sv_nl_addr *v, int max)
{
	struct {
		struct nlmsghdr h;
		struct ifaddrmsg i;
	} req = {
		.h = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct ifaddrmsg)),
		       .nlmsg_type = RTM_GETADDR, .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP },
	};
	struct sv_nl_addrs l = { v, 0, max };

	req.i.ifa_family = AF_INET;
	if (sv_nl_talk(&req.h, sv_addr_cb, &l))
		return -1;
	req.i.ifa_family = AF_INET6;
	if (sv_nl_talk(&req.h, sv_addr_cb, &l))
		return -1;
	return l.n;
}

struct sv_nl_rt {
	int oif;
	int type;
	bool has_gw;
	uint8_t gw[16];
};

static int sv_route_cb(struct nlmsghdr *h, void *arg)
{
	struct sv_nl_rt *r = arg;
	struct rtmsg *rt = NLMSG_DATA(h);
	int len = (int)RTM_PAYLOAD(h);

	if (h->nlmsg_type != RTM_NEWROUTE)
		return 0;
	r->type = rt->rtm_type;
	for (struct rtattr *a = RTM_RTA(rt); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (a->rta_type == RTA_OIF)
			memcpy(&r->oif, RTA_DATA(a), 4);
		if (a->rta_type == RTA_GATEWAY && RTA_PAYLOAD(a) <= 16) {
			memcpy(r->gw, RTA_DATA(a), RTA_PAYLOAD(a));
			r->has_gw = true;
		}
	}
	return 0;
}

/* Route to dst leaving through oif (the way the kernel resolves a RoCE
 * destination from the SGID's netdev).  *local: dst is an address of this
 * host.  nexthop gets the gateway or dst.  Returns 0 or a positive errno
 * (ENETUNREACH, EHOSTUNREACH...). */
int sv_nl_route(int family, const uint8_t *dst, int oif, bool *local, uint8_t *nexthop)
{
	struct {
		struct nlmsghdr h;
		struct rtmsg r;
		char attrs[64];
	} req = {
		.h = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg)),
		       .nlmsg_type = RTM_GETROUTE, .nlmsg_flags = NLM_F_REQUEST },
		.r = { .rtm_family = (unsigned char)family,
		       .rtm_dst_len = family == AF_INET ? 32 : 128 },
	};
	struct sv_nl_rt r = { 0 };
	size_t alen = family == AF_INET ? 4 : 16;
	int rc;

	sv_rta_add(&req, RTA_DST, dst, alen);
	rc = sv_nl_talk(&req.h, sv_route_cb, &r);
	if (rc)
		return rc;
	*local = r.type == RTN_LOCAL;
	if (*local)
		return 0;
	if (r.type != RTN_UNICAST)
		return EHOSTUNREACH;
	if (r.oif != oif) {
		/* not the best route; is there one through the SGID's netdev? */
		req.h.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
		sv_rta_add(&req, RTA_DST, dst, alen);
		sv_rta_add(&req, RTA_OIF, &oif, 4);
		memset(&r, 0, sizeof(r));
		rc = sv_nl_talk(&req.h, sv_route_cb, &r);
		if (rc)
			return rc;
		if (r.type != RTN_UNICAST || r.oif != oif)
			return ENETUNREACH;
	}
	memcpy(nexthop, r.has_gw ? r.gw : dst, alen);
	return 0;
}

struct sv_nl_nb {
	const uint8_t *addr;
	size_t alen;
	int ifindex;
	uint16_t state;
	uint8_t mac[6];
	bool found;
};

static int sv_neigh_cb(struct nlmsghdr *h, void *arg)
{
	struct sv_nl_nb *q = arg;
	struct ndmsg *nd = NLMSG_DATA(h);
	int len = (int)RTM_PAYLOAD(h);
	bool match = false, mac = false;
	uint8_t m[6];

	if (h->nlmsg_type != RTM_NEWNEIGH || nd->ndm_ifindex != q->ifindex)
		return 0;
	for (struct rtattr *a = (struct rtattr *)((char *)nd + NLMSG_ALIGN(sizeof(*nd)));
	     RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (a->rta_type == NDA_DST && RTA_PAYLOAD(a) == q->alen &&
		    !memcmp(RTA_DATA(a), q->addr, q->alen))
			match = true;
		if (a->rta_type == NDA_LLADDR && RTA_PAYLOAD(a) == 6) {
			memcpy(m, RTA_DATA(a), 6);
			mac = true;
		}
	}
	if (match) {
		q->found = true;
		q->state = nd->ndm_state;
		if (mac)
			memcpy(q->mac, m, 6);
	}
	return 0;
}

static int sv_neigh_get(int family, const uint8_t *addr, int ifindex, uint8_t *mac)
{
	struct {
		struct nlmsghdr h;
		struct ndmsg n;
	} req = {
		.h = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct ndmsg)),
		       .nlmsg_type = RTM_GETNEIGH, .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP },
		.n = { .ndm_family = (unsigned char)family },
	};
	struct sv_nl_nb q = { addr, family == AF_INET ? 4 : 16, ifindex, 0, { 0 }, false };

	if (sv_nl_talk(&req.h, sv_neigh_cb, &q) || !q.found)
		return EAGAIN;
	if (q.state & (NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT |
		       NUD_NOARP)) {
		memcpy(mac, q.mac, 6);
		return 0;
	}
	return q.state & NUD_FAILED ? EHOSTUNREACH : EAGAIN;
}

/* Resolves nexthop's MAC on ifindex as the kernel does for a RoCE address
 * vector: a datagram towards dst out of that interface triggers ARP or
 * neighbour discovery, then the neighbour table is read (up to wait_ms).
 * An entry that FAILED earlier is probed again, as the kernel does when new
 * traffic goes to it (FAILED -> INCOMPLETE), so a next hop that came back is
 * found. Returns 0 (mac filled), EHOSTUNREACH or ETIMEDOUT. */
int sv_nl_resolve(int family, const uint8_t *dst, const uint8_t *nexthop, int ifindex,
		  const char *ifname, int wait_ms, uint8_t *mac)
{
	int rc = sv_neigh_get(family, nexthop, ifindex, mac);
	int fd;

	if (rc == 0)
		return 0;
	fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		struct sockaddr_in6 s6 = { .sin6_family = AF_INET6, .sin6_port = htons(9) };
		struct sockaddr_in s4 = { .sin_family = AF_INET, .sin_port = htons(9) };
		char b = 0;

		if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, ifname, (socklen_t)strlen(ifname))) {
			uint32_t idx = htonl((uint32_t)ifindex);
			int idx6 = ifindex;

			if (family == AF_INET)
				setsockopt(fd, IPPROTO_IP, IP_UNICAST_IF, &idx, sizeof(idx));
			else
				setsockopt(fd, IPPROTO_IPV6, IPV6_UNICAST_IF, &idx6, sizeof(idx6));
		}
		if (family == AF_INET) {
			memcpy(&s4.sin_addr, dst, 4);
			sendto(fd, &b, 1, MSG_DONTWAIT, (struct sockaddr *)&s4, sizeof(s4));
		} else {
			memcpy(&s6.sin6_addr, dst, 16);
			s6.sin6_scope_id = (uint32_t)ifindex;
			sendto(fd, &b, 1, MSG_DONTWAIT, (struct sockaddr *)&s6, sizeof(s6));
		}
		close(fd);
	}
	for (int t = 0; t < wait_ms; t++) {
		rc = sv_neigh_get(family, nexthop, ifindex, mac);
		if (rc != EAGAIN)
			return rc;
		poll(NULL, 0, 1);
	}
	return ETIMEDOUT;
}
