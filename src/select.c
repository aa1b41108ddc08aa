/*
 * select.c - the device layer's pure decisions, testable without devices:
 * NCCL_IB_HCA parsing and matching, port speed, RoCE GID auto-selection.
 * Reads no parameter: the callers pass the knobs' values in (select.h).
 */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "ibv.h"
#include "select.h"

/* ---- NCCL_IB_HCA ---------------------------------------------------------- */

/* Parses an optional non-negative decimal field ending at ':' ',' or NUL.
 * Empty field -> *out = -1. */
static const char *nv_parse_field(const char *p, long max, long *out, bool *ok)
{
	char *end;

	if (*p == ':' || *p == ',' || *p == '\0') {
		*out = -1;
		return p;
	}
	if (!isdigit((unsigned char)*p)) {
		*ok = false;
		return p;
	}
	*out = strtol(p, &end, 10);
	if (*out > max)
		*ok = false;
	if (*end != ':' && *end != ',' && *end != '\0')
		*ok = false;
	return end;
}

static nv_status_t nv_hca_entry_parse(const char **pp, struct nv_hca_filter *f)
{
	const char *p = *pp;
	size_t len = strcspn(p, ":,");
	long port = -1, rail = -1, plane = -1;
	bool ok = true;

	if (f->n >= NV_HCA_FILTER_MAX) {
		f->why = "more than 32 entries (the limit is 32 devices)"; /* NV_HCA_FILTER_MAX */
		return NV_ERR_USAGE;
	}
	if (len >= NV_NAME_MAX) {
		f->why = "a device name of 64 or more characters (the limit is 63)"; /* NV_NAME_MAX */
		return NV_ERR_USAGE;
	}
	memcpy(f->e[f->n].name, p, len);
	f->e[f->n].name[len] = '\0';
	p += len;
	if (*p == ':')
		p = nv_parse_field(p + 1, 255, &port, &ok);
	if (ok && *p == ':')
		p = nv_parse_field(p + 1, 0x3fff, &rail, &ok);
	if (ok && *p == ':')
		p = nv_parse_field(p + 1, 0x3fff, &plane, &ok);
	if (!ok || (*p != ',' && *p != '\0')) {
		f->why = "expected [^][=]name[:port[:rail[:plane]]],... with port 0..255, rail "
			 "and plane 0..16383";
		return NV_ERR_USAGE;
	}
	f->e[f->n].port = (int)port;
	f->e[f->n].rail = (int16_t)rail;
	f->e[f->n].plane = (int16_t)plane;
	f->n++;
	*pp = p;
	return NV_OK;
}

nv_status_t nv_hca_filter_parse(const char *spec, struct nv_hca_filter *f)
{
	const char *p = spec;

	memset(f, 0, sizeof(*f));
	if (!p)
		return NV_OK;
	if (*p == '^') {
		f->exclude = true;
		p++;
	}
	if (*p == '=') {
		f->exact = true;
		p++;
	}
	while (*p) {
		if (*p == ',') { /* empty entries are ignored, as NCCL does */
			p++;
			continue;
		}
		if (*p == ':') {
			f->why = "an entry without a device name";
			return NV_ERR_USAGE;
		}
		if (nv_hca_entry_parse(&p, f) != NV_OK)
			return NV_ERR_USAGE;
	}
	return NV_OK;
}

bool nv_hca_filter_match(const struct nv_hca_filter *f, const char *name, int port,
			 int16_t *rail, int16_t *plane)
{
	bool hit = (f->n == 0);
	int i;

	if (rail)
		*rail = -1;
	if (plane)
		*plane = -1;
	for (i = 0; i < f->n && !hit; i++) {
		const char *ref = f->e[i].name;
		bool name_ok = f->exact ? strcmp(name, ref) == 0
					: strncmp(name, ref, strlen(ref)) == 0;

		if (!name_ok || (f->e[i].port != -1 && f->e[i].port != port))
			continue;
		hit = true;
		if (!f->exclude && rail)
			*rail = f->e[i].rail;
		if (!f->exclude && plane)
			*plane = f->e[i].plane;
	}
	return hit != f->exclude;
}

/* ---- speed ---------------------------------------------------------------- */

int nv_port_speed_mbps(uint32_t active_speed, uint8_t active_width)
{
	/* Per-lane Mbps by bit of active_speed(_ex): SDR DDR QDR FDR10 FDR EDR HDR NDR XDR. */
	static const int lane[] = { 2500, 5000, 10000, 10000, 14000, 25000, 50000, 100000, 200000 };
	/* Lanes by bit of active_width: 1x 4x 8x 12x 2x. */
	static const int lanes[] = { 1, 4, 8, 12, 2 };
	int s = -1, w = -1;

	for (int i = 0; i < (int)NV_ARRAY_SIZE(lane); i++)
		if (active_speed & (1U << i)) {
			s = i;
			break;
		}
	for (int i = 0; i < (int)NV_ARRAY_SIZE(lanes); i++)
		if (active_width & (1U << i)) {
			w = i;
			break;
		}
	if (s < 0 || w < 0)
		return 0;
	return lane[s] * lanes[w];
}

/* ---- GIDs ------------------------------------------------------------------ */

uint16_t nv_gid_flid(const uint8_t raw[16])
{
	return (uint16_t)(raw[4] << 8 | raw[5]);
}

uint16_t nv_gid_ib_subnet(const uint8_t raw[16])
{
	return (uint16_t)(raw[6] << 8 | raw[7]);
}

int nv_ib_gid_index(const struct nv_gid_entry *tbl, int n, int routable)
{
	int r = routable;

	if (r > 0 && r < n && tbl[r].readable && nv_gid_flid(tbl[r].gid.raw))
		return r;
	return 0;
}

bool nv_gid_same_subnet(const uint8_t a[16], const uint8_t b[16], int prefix_len)
{
	union ibv_gid ga, gb;
	uint32_t ia, ib, mask;

	memcpy(ga.raw, a, 16);
	memcpy(gb.raw, b, 16);
	if (nv_gid_family(&ga) != nv_gid_family(&gb))
		return false;
	if (nv_gid_family(&ga) != AF_INET)
		return !memcmp(a, b, 8);
	if (prefix_len < 1 || prefix_len > 32)
		prefix_len = 32;
	memcpy(&ia, a + 12, 4);
	memcpy(&ib, b + 12, 4);
	mask = htonl(prefix_len == 32 ? 0xffffffffu : ~((1u << (32 - prefix_len)) - 1));
	return (ia & mask) == (ib & mask);
}

const char *nv_transport_skip_reason(int transport_type)
{
	switch (transport_type) {
	case IBV_TRANSPORT_IB:
		return NULL;
	case IBV_TRANSPORT_IWARP:
		return "iWARP transport: no RDMA Write with immediate, and its connections need the "
		       "RDMA connection manager (this plugin runs over InfiniBand and RoCE)";
	case IBV_TRANSPORT_USNIC:
	case IBV_TRANSPORT_USNIC_UDP:
		return "usNIC transport: no RC queue pairs (this plugin runs over InfiniBand and RoCE)";
	default:
		return "transport is neither InfiniBand nor RoCE (no RC queue pairs with RDMA Write "
		       "with immediate)";
	}
}

int nv_gid_family(const union ibv_gid *gid)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return memcmp(gid->raw, v4mapped, sizeof(v4mapped)) == 0 ? AF_INET : AF_INET6;
}

bool nv_gid_is_valid(const union ibv_gid *gid)
{
	static const uint8_t zero[16];
	static const uint8_t ll[8] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0 };

	if (!memcmp(gid->raw, zero, 16))
		return false;
	if (!memcmp(gid->raw, ll, 8)) /* fe80::/64 link-local */
		return false;
	return true;
}

nv_status_t nv_gid_parse_range(const char *s, struct nv_gid_policy *pol)
{
	char addr[INET6_ADDRSTRLEN + 1];
	const char *slash = strchr(s, '/');
	size_t alen = slash ? (size_t)(slash - s) : strlen(s);
	long prefix;
	char *end;
	int fam;

	if (!slash || alen == 0 || alen >= sizeof(addr))
		return NV_ERR_USAGE;
	memcpy(addr, s, alen);
	addr[alen] = '\0';
	memset(pol->range_addr, 0, sizeof(pol->range_addr));
	if (inet_pton(AF_INET, addr, pol->range_addr) == 1)
		fam = AF_INET;
	else if (inet_pton(AF_INET6, addr, pol->range_addr) == 1)
		fam = AF_INET6;
	else
		return NV_ERR_USAGE;
	if (!isdigit((unsigned char)slash[1]))
		return NV_ERR_USAGE;
	prefix = strtol(slash + 1, &end, 10);
	if (*end || prefix > (fam == AF_INET ? 32 : 128))
		return NV_ERR_USAGE;
	pol->range_family = fam;
	pol->range_prefix = (int)prefix;
	return NV_OK;
}

nv_status_t nv_gid_policy_init(struct nv_gid_policy *pol, int forced, int roce, const char *fam,
			       const char *range)
{
	memset(pol, 0, sizeof(*pol));
	pol->forced_index = forced;
	pol->roce_version = roce;
	pol->family = (fam && !strcasecmp(fam, "AF_INET6")) ? AF_INET6 : AF_INET;
	if (!range)
		return NV_OK;
	if (nv_gid_parse_range(range, pol) != NV_OK) {
		NV_WARN("NCCL_IB_ADDR_RANGE='%s' is not a CIDR (a.b.c.d/n or x::y/n)", range);
		return NV_ERR_USAGE;
	}
	if (pol->range_family != pol->family) {
		NV_WARN("NCCL_IB_ADDR_RANGE='%s' is %s but NCCL_IB_ADDR_FAMILY is %s; set them to "
			"the same family", range, pol->range_family == AF_INET ? "IPv4" : "IPv6",
			pol->family == AF_INET ? "AF_INET" : "AF_INET6");
		return NV_ERR_USAGE;
	}
	return NV_OK;
}

/* Is the GID inside the configured range (compared in the user's family)? */
static bool nv_gid_in_range(const union ibv_gid *gid, const struct nv_gid_policy *pol)
{
	const uint8_t *a = gid->raw;
	int bits = pol->range_prefix, i;

	if (pol->range_family == 0 || bits == 0)
		return true;
	if (pol->family == AF_INET)
		a += 12;
	for (i = 0; bits >= 8; i++, bits -= 8)
		if (a[i] != pol->range_addr[i])
			return false;
	if (bits) {
		uint8_t mask = (uint8_t)(0xff << (8 - bits));

		if ((a[i] & mask) != (pol->range_addr[i] & mask))
			return false;
	}
	return true;
}

static int nv_gid_roce_version(int type)
{
	if (type == IBV_GID_TYPE_ROCE_V2)
		return 2;
	if (type == IBV_GID_TYPE_ROCE_V1)
		return 1;
	return 0;
}

/* NCCL's update rule: does candidate c replace the current best b (-1: none)? */
static bool nv_gid_better(const struct nv_gid_entry *tbl, int b, int c,
			  const struct nv_gid_policy *pol)
{
	const struct nv_gid_entry *cand = &tbl[c];
	int cfam = nv_gid_family(&cand->gid);
	bool in_range = nv_gid_in_range(&cand->gid, pol);
	bool cvalid = nv_gid_is_valid(&cand->gid);
	int bfam = b >= 0 ? nv_gid_family(&tbl[b].gid) : 0;
	bool bvalid = b >= 0 && nv_gid_is_valid(&tbl[b].gid);

	/* 1: the candidate has the wanted family and the best does not. */
	if (cfam != bfam && cfam == pol->family && in_range && cvalid)
		return true;
	if (cfam != pol->family || !cvalid || !in_range)
		return false;
	/* 2: same family; prefer the wanted RoCE version over another/invalid best. */
	return (b < 0 || !bvalid ||
		nv_gid_roce_version(tbl[b].type) != nv_gid_roce_version(cand->type)) &&
	       nv_gid_roce_version(cand->type) == pol->roce_version;
}

static void nv_gid_explain(const struct nv_gid_entry *e, const struct nv_gid_policy *pol,
			   int skipped, int unreadable, struct nv_gid_info *out, const char *how)
{
	char g[INET6_ADDRSTRLEN];
	int ver = nv_gid_roce_version(e->type);
	int fam = nv_gid_family(&e->gid);

	nv_ibv_gid_str(&e->gid, g, sizeof(g));
	snprintf(out->why, sizeof(out->why),
		 "index %d %s (%s, %s%s%s)%s; %d empty or link-local, %d unreadable", out->index,
		 g, fam == AF_INET ? "IPv4" : "IPv6",
		 ver ? (ver == 2 ? "RoCE v2" : "RoCE v1") : "RoCE version unknown",
		 fam != pol->family ? ", NOT the preferred family" : "",
		 nv_gid_in_range(&e->gid, pol) ? "" : ", OUTSIDE NCCL_IB_ADDR_RANGE",
		 how, skipped, unreadable);
}

int nv_gid_select(const struct nv_gid_entry *tbl, int n, const struct nv_gid_policy *pol,
		  struct nv_gid_info *out)
{
	int best = -1, skipped = 0, unreadable = 0;

	memset(out, 0, sizeof(*out));
	out->index = -1;
	out->type = -1;
	if (pol->forced_index >= 0) {
		if (pol->forced_index >= n || !tbl[pol->forced_index].readable) {
			snprintf(out->why, sizeof(out->why),
				 "NCCL_IB_GID_INDEX=%d is %s (table has %d entries)",
				 pol->forced_index, pol->forced_index >= n ? "beyond the GID table"
									   : "unreadable", n);
			return -1;
		}
		best = pol->forced_index;
		if (!memcmp(tbl[best].gid.raw, (uint8_t[16]){ 0 }, 16)) {
			snprintf(out->why, sizeof(out->why),
				 "NCCL_IB_GID_INDEX=%d is an empty GID entry (table has %d entries)",
				 best, n);
			return -1;
		}
	} else {
		for (int i = 0; i < n; i++) {
			if (!tbl[i].readable) {
				unreadable++;
				continue;
			}
			if (!nv_gid_is_valid(&tbl[i].gid))
				skipped++;
			/* NCCL starts from index 0 whatever it holds, then scans 1..n-1. */
			if ((best < 0 && i == 0) || nv_gid_better(tbl, best, i, pol))
				best = i;
		}
	}
	if (best < 0) {
		snprintf(out->why, sizeof(out->why),
			 "no usable GID: %d entries, %d zero/link-local, %d unreadable%s", n, skipped,
			 unreadable,
			 pol->range_prefix ? " - check NCCL_IB_ADDR_RANGE" : "");
		return -1;
	}
	out->index = best;
	out->gid = tbl[best].gid;
	out->type = tbl[best].type;
	out->valid = nv_gid_is_valid(&tbl[best].gid);
	nv_gid_explain(&tbl[best], pol, skipped, unreadable, out,
		       pol->forced_index >= 0 ? " forced by NCCL_IB_GID_INDEX"
		       : out->valid	     ? " auto-selected"
					     : " auto-selected but NOT usable (zero/link-local)");
	return best;
}
