/*
 * select.h - the device layer's pure decisions (select.c), testable without
 * devices and without the parameter table: NCCL_IB_HCA parsing and matching,
 * port speed, transports, RoCE GID auto-selection and the IB GID fields.
 * Callers read the knobs and pass their values in.
 */
#ifndef NV_SELECT_H
#define NV_SELECT_H

#include <stdbool.h>
#include <stdint.h>
#include <infiniband/verbs.h>
#include "device.h"

/* NCCL_IB_HCA: [^][=]name[:port[:rail[:plane]]][,...] with NCCL's semantics:
 * prefix match unless '=', '^' excludes, empty port field = any port. */
#define NV_HCA_FILTER_MAX 32    /* select.c's message says 32 */
struct nv_hca_filter {
	bool exclude, exact;
	const char *why;        /* static text when parsing failed: the rule broken */
	int n;                  /* 0: no list (matches everything unless exclude) */
	struct {
		char name[NV_NAME_MAX];
		int port;       /* -1 any */
		int16_t rail, plane;
	} e[NV_HCA_FILTER_MAX];
};
nv_status_t nv_hca_filter_parse(const char *spec, struct nv_hca_filter *f); /* spec may be NULL */
/* True when the port is kept. rail/plane (may be NULL) receive the matching
 * entry's values, -1 when none. */
bool nv_hca_filter_match(const struct nv_hca_filter *f, const char *name, int port,
			 int16_t *rail, int16_t *plane);

/* Speed in Mbps from ibv_port_attr active_speed (or active_speed_ex) and
 * active_width bits: per-lane SDR 2.5G .. XDR 200G times 1x/2x/4x/8x/12x.
 * Returns 0 for unknown encodings. */
int nv_port_speed_mbps(uint32_t active_speed, uint8_t active_width);

/* RoCE GID auto-selection as NCCL does it, over a snapshot of the GID table. */
struct nv_gid_entry {
	bool readable;          /* false: query failed (e.g. not mapped in a container) */
	union ibv_gid gid;
	int type;               /* IBV_GID_TYPE_*, -1 unknown */
};
struct nv_gid_policy {
	int forced_index;       /* NCCL_IB_GID_INDEX, -1 auto */
	int family;             /* AF_INET or AF_INET6 (NCCL_IB_ADDR_FAMILY) */
	int range_family;       /* AF_INET / AF_INET6 of range_addr (0: no range) */
	uint8_t range_addr[16]; /* NCCL_IB_ADDR_RANGE network (IPv4 in bytes 0..3) */
	int range_prefix;       /* prefix length; 0 = everything */
	int roce_version;       /* NCCL_IB_ROCE_VERSION_NUM: 1 or 2 */
};
/*
 * The policy from the knobs' values: forced (NCCL_IB_GID_INDEX), roce
 * (NCCL_IB_ROCE_VERSION_NUM), fam (NCCL_IB_ADDR_FAMILY; NULL: AF_INET) and
 * range (NCCL_IB_ADDR_RANGE; NULL: none). NV_ERR_USAGE (WARN) when the range
 * is malformed or of the other family.
 */
nv_status_t nv_gid_policy_init(struct nv_gid_policy *pol, int forced, int roce, const char *fam,
			       const char *range);
/* Parses "a.b.c.d/n" or "x:y::z/n" into pol->range_*; NV_ERR_USAGE if bad. */
nv_status_t nv_gid_parse_range(const char *s, struct nv_gid_policy *pol);
/* Returns the chosen index (or -1) and explains in out->why. */
int nv_gid_select(const struct nv_gid_entry *tbl, int n, const struct nv_gid_policy *pol,
		  struct nv_gid_info *out);
bool nv_gid_is_valid(const union ibv_gid *gid);    /* not zero, not fe80::/64 */
/* NULL when a device of this transport can carry our RC transport (InfiniBand
 * and RoCE both report IBV_TRANSPORT_IB), else why not (iWARP, usNIC, ...). */
const char *nv_transport_skip_reason(int transport_type);
/* IB GIDs as NCCL reads them: bytes 4-5 the FLID (IB routers), bytes 6-7 the
 * local subnet prefix. */
uint16_t nv_gid_flid(const uint8_t raw[16]);
uint16_t nv_gid_ib_subnet(const uint8_t raw[16]);
/* The IB GID index to use: routable (NCCL_IB_ROUTABLE_FLID_GID_INDEX) when that
 * entry exists and has a non-zero FLID, else 0. */
int nv_ib_gid_index(const struct nv_gid_entry *tbl, int n, int routable);
/* RoCE GIDs on one subnet, as NCCL's subnet-aware routing: IPv4-mapped GIDs
 * by their first prefix_len (1..32) bits, IPv6 ones by the 64-bit prefix;
 * GIDs of different families never match. */
bool nv_gid_same_subnet(const uint8_t a[16], const uint8_t b[16], int prefix_len);
int nv_gid_family(const union ibv_gid *gid);       /* AF_INET if ::ffff:a.b.c.d */

#endif /* NV_SELECT_H */
