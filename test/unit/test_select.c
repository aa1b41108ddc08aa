/*
 * test_select - the device layer's pure decisions without devices:
 * NCCL_IB_HCA matching with NCCL's syntax, port speed math, and RoCE GID
 * auto-selection over crafted GID tables.
 */
#include "config.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "nvtest.h"
#include "device.h"
#include "param.h"
#include "select.h"

static bool keep(const char *spec, const char *name, int port)
{
	struct nv_hca_filter f;

	if (nv_hca_filter_parse(spec, &f) != NV_OK) {
		fprintf(stderr, "unexpected parse failure: %s\n", spec);
		nvt_failures++;
		return false;
	}
	return nv_hca_filter_match(&f, name, port, NULL, NULL);
}

static void test_hca_filter(void)
{
	struct nv_hca_filter f;
	int16_t rail, plane;

	/* no filter, empty filter: everything */
	CHECK(keep(NULL, "mlx5_0", 1) && keep("", "mlx5_7", 2));
	/* prefix match: mlx5_1 also matches mlx5_10 */
	CHECK(keep("mlx5_1", "mlx5_1", 1) && keep("mlx5_1", "mlx5_10", 1));
	CHECK(!keep("mlx5_1", "mlx5_2", 1) && !keep("mlx5_10", "mlx5_1", 1));
	CHECK(keep("mlx5", "mlx5_3", 1));
	/* '=' exact */
	CHECK(keep("=mlx5_1", "mlx5_1", 1) && !keep("=mlx5_1", "mlx5_10", 1));
	/* '^' exclude, '^=' exclude exact */
	CHECK(!keep("^mlx5_1", "mlx5_1", 1) && !keep("^mlx5_1", "mlx5_12", 1));
	CHECK(keep("^mlx5_1", "mlx5_2", 1));
	CHECK(!keep("^=mlx5_1", "mlx5_1", 1) && keep("^=mlx5_1", "mlx5_12", 1));
	CHECK(!keep("^", "mlx5_0", 1)); /* NCCL: an empty exclude list excludes all */
	/* ports */
	CHECK(keep("mlx5_0:1", "mlx5_0", 1) && !keep("mlx5_0:1", "mlx5_0", 2));
	CHECK(keep("mlx5_0:1,mlx5_0:2", "mlx5_0", 2));
	CHECK(!keep("^mlx5_0:2", "mlx5_0", 2) && keep("^mlx5_0:2", "mlx5_0", 1));
	CHECK(keep("mlx5_0::3:4", "mlx5_0", 2)); /* empty port = any */
	/* lists, empty entries ignored */
	CHECK(keep("mlx5_0,,mlx5_3", "mlx5_3", 1) && !keep("mlx5_0,,mlx5_3", "mlx5_2", 1));
	CHECK(keep("simib0,simroce0", "simroce0", 1));
	/* rail / plane */
	CHECK(nv_hca_filter_parse("=mlx5_0:1:7:2,mlx5_1:1", &f) == NV_OK && f.n == 2 && f.exact);
	CHECK(nv_hca_filter_match(&f, "mlx5_0", 1, &rail, &plane) && rail == 7 && plane == 2);
	CHECK(nv_hca_filter_match(&f, "mlx5_1", 1, &rail, &plane) && rail == -1 && plane == -1);
	CHECK(!nv_hca_filter_match(&f, "mlx5_2", 1, &rail, &plane) && rail == -1);
	/* malformed */
	CHECK(nv_hca_filter_parse("mlx5_0:a", &f) == NV_ERR_USAGE);
	CHECK(nv_hca_filter_parse("mlx5_0:1x", &f) == NV_ERR_USAGE);
	CHECK(nv_hca_filter_parse("mlx5_0:1:2:3:4", &f) == NV_ERR_USAGE);
	CHECK(nv_hca_filter_parse(":1", &f) == NV_ERR_USAGE);
	CHECK(nv_hca_filter_parse("mlx5_0:256", &f) == NV_ERR_USAGE);
	CHECK(nv_hca_filter_parse("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
				  &f) == NV_ERR_USAGE);
	CHECK(f.why && strstr(f.why, "64 or more characters"));
	CHECK(nv_hca_filter_parse("mlx5_0:256", &f) == NV_ERR_USAGE && f.why &&
	      strstr(f.why, "port 0..255"));
	{	/* 32 entries fit, 33 say which limit was hit; a 63-character name fits */
		char spec[33 * 8 + 1] = "", name[64];

		for (int i = 0; i < 33; i++)
			snprintf(spec + strlen(spec), sizeof(spec) - strlen(spec), "%smlx5_%d",
				 i ? "," : "", i);
		CHECK(nv_hca_filter_parse(spec, &f) == NV_ERR_USAGE && f.why &&
		      strstr(f.why, "more than 32 entries"));
		*strrchr(spec, ',') = '\0';
		CHECK(nv_hca_filter_parse(spec, &f) == NV_OK && f.n == 32);
		memset(name, 'a', 63);
		name[63] = '\0';
		CHECK(nv_hca_filter_parse(name, &f) == NV_OK && f.n == 1);
	}
}

static void test_speed(void)
{
	/* active_speed bits: SDR 1, DDR 2, QDR 4, FDR10 8, FDR 16, EDR 32, HDR 64, NDR 128,
	 * XDR 256 (active_speed_ex); width bits: 1x 1, 4x 2, 8x 4, 12x 8, 2x 16 */
	CHECK(nv_port_speed_mbps(1, 1) == 2500);
	CHECK(nv_port_speed_mbps(2, 2) == 20000);
	CHECK(nv_port_speed_mbps(4, 2) == 40000);
	CHECK(nv_port_speed_mbps(8, 2) == 40000);
	CHECK(nv_port_speed_mbps(16, 2) == 56000);
	CHECK(nv_port_speed_mbps(32, 2) == 100000);
	CHECK(nv_port_speed_mbps(64, 2) == 200000);
	CHECK(nv_port_speed_mbps(128, 2) == 400000);
	CHECK(nv_port_speed_mbps(256, 2) == 800000);
	CHECK(nv_port_speed_mbps(64, 16) == 100000); /* HDR 2x */
	CHECK(nv_port_speed_mbps(128, 8) == 1200000); /* NDR 12x */
	CHECK(nv_port_speed_mbps(32, 4) == 200000);  /* EDR 8x */
	CHECK(nv_port_speed_mbps(32, 1) == 25000);
	CHECK(nv_port_speed_mbps(0, 2) == 0 && nv_port_speed_mbps(32, 0) == 0);
	CHECK(nv_port_speed_mbps(1u << 12, 2) == 0); /* unknown encoding */
}

/* GID table builders */
static void gid_v4(struct nv_gid_entry *e, const char *ip, int type)
{
	memset(e, 0, sizeof(*e));
	e->readable = true;
	e->type = type;
	e->gid.raw[10] = 0xff;
	e->gid.raw[11] = 0xff;
	inet_pton(AF_INET, ip, &e->gid.raw[12]);
}

static void gid_v6(struct nv_gid_entry *e, const char *ip, int type)
{
	memset(e, 0, sizeof(*e));
	e->readable = true;
	e->type = type;
	inet_pton(AF_INET6, ip, e->gid.raw);
}

static void policy(struct nv_gid_policy *p, int forced, int fam, const char *range, int ver)
{
	memset(p, 0, sizeof(*p));
	p->forced_index = forced;
	p->family = fam;
	p->roce_version = ver;
	if (range && nv_gid_parse_range(range, p) != NV_OK) {
		fprintf(stderr, "bad test range %s\n", range);
		nvt_failures++;
	}
}

#define V1 IBV_GID_TYPE_ROCE_V1
#define V2 IBV_GID_TYPE_ROCE_V2

static void test_gid_typical(void)
{
	struct nv_gid_entry t[8];
	struct nv_gid_policy p;
	struct nv_gid_info g;

	/* The usual mlx5 layout: link-local v1/v2, then IPv4 v1/v2, then IPv6 v1/v2. */
	gid_v6(&t[0], "fe80::1", V1);
	gid_v6(&t[1], "fe80::1", V2);
	gid_v4(&t[2], "10.1.2.3", V1);
	gid_v4(&t[3], "10.1.2.3", V2);
	gid_v6(&t[4], "fd00::5", V1);
	gid_v6(&t[5], "fd00::5", V2);
	policy(&p, -1, AF_INET, NULL, 2);
	CHECK(nv_gid_select(t, 6, &p, &g) == 3 && g.valid && g.type == V2);
	CHECK(strstr(g.why, "10.1.2.3") && strstr(g.why, "RoCE v2"));
	policy(&p, -1, AF_INET, NULL, 1);
	CHECK(nv_gid_select(t, 6, &p, &g) == 2);
	policy(&p, -1, AF_INET6, NULL, 2);
	CHECK(nv_gid_select(t, 6, &p, &g) == 5);  /* never the link-local ones */
	policy(&p, -1, AF_INET6, NULL, 1);
	CHECK(nv_gid_select(t, 6, &p, &g) == 4);
	/* forced index wins, even a link-local one (the user asked) */
	policy(&p, 1, AF_INET, NULL, 2);
	CHECK(nv_gid_select(t, 6, &p, &g) == 1 && !g.valid && strstr(g.why, "NCCL_IB_GID_INDEX"));
	policy(&p, 9, AF_INET, NULL, 2);
	CHECK(nv_gid_select(t, 6, &p, &g) == -1 && strstr(g.why, "beyond"));
}

static void test_gid_range_and_holes(void)
{
	struct nv_gid_entry t[8];
	struct nv_gid_policy p;
	struct nv_gid_info g;

	gid_v6(&t[0], "fe80::1", V2);
	gid_v4(&t[1], "192.168.1.5", V2);
	memset(&t[2], 0, sizeof(t[2])); /* zero entry (unused slot) */
	t[2].readable = true;
	t[2].type = V2;
	t[3].readable = false;          /* not mapped into this container */
	gid_v4(&t[4], "10.9.8.7", V2);
	gid_v4(&t[5], "10.200.0.1", V1);
	policy(&p, -1, AF_INET, "10.0.0.0/8", 2);
	CHECK(nv_gid_select(t, 6, &p, &g) == 4);
	CHECK(strstr(g.why, "1 unreadable") != NULL);
	policy(&p, -1, AF_INET, "192.168.0.0/16", 2);
	CHECK(nv_gid_select(t, 6, &p, &g) == 1);
	policy(&p, -1, AF_INET, "10.9.8.0/25", 2);
	CHECK(nv_gid_select(t, 6, &p, &g) == 4);
	policy(&p, -1, AF_INET, "10.9.8.128/25", 2);
	/* nothing in range: NCCL keeps index 0, which is link-local: reported unusable */
	CHECK(nv_gid_select(t, 6, &p, &g) == 0 && !g.valid && strstr(g.why, "NOT usable"));
	/* forced index on an empty entry */
	policy(&p, 2, AF_INET, NULL, 2);
	CHECK(nv_gid_select(t, 6, &p, &g) == -1 && strstr(g.why, "empty GID entry"));
	/* forced index on an unreadable entry */
	policy(&p, 3, AF_INET, NULL, 2);
	CHECK(nv_gid_select(t, 6, &p, &g) == -1 && strstr(g.why, "unreadable"));
	/* everything unreadable */
	for (int i = 0; i < 6; i++)
		t[i].readable = false;
	policy(&p, -1, AF_INET, NULL, 2);
	CHECK(nv_gid_select(t, 6, &p, &g) == -1 && strstr(g.why, "no usable GID"));
}

static void test_gid_version_preference(void)
{
	struct nv_gid_entry t[4];
	struct nv_gid_policy p;
	struct nv_gid_info g;

	/* index 0 unreadable; only v1 IPv4 entries and an unknown-type one */
	t[0].readable = false;
	gid_v4(&t[1], "10.0.0.1", V1);
	gid_v4(&t[2], "10.0.0.2", -1);
	gid_v4(&t[3], "10.0.0.3", V1);
	policy(&p, -1, AF_INET, NULL, 2);
	/* family rule picks the first IPv4 one; no entry has v2, so it stays */
	CHECK(nv_gid_select(t, 4, &p, &g) == 1 && g.valid);
	/* IPv6 preferred but only IPv4 present: first valid IPv4 is all we have?
	 * NCCL would keep its start entry; ours (unreadable) gives none. */
	policy(&p, -1, AF_INET6, NULL, 2);
	CHECK(nv_gid_select(t, 4, &p, &g) == -1);
	CHECK(nv_gid_family(&t[1].gid) == AF_INET && nv_gid_is_valid(&t[1].gid));
}

static void test_gid_policy_init(void)
{
	struct nv_gid_policy p;

	nvt_log_clear();
	CHECK(nv_gid_policy_init(&p, -1, 2, "AF_INET6", "10.0.0.0/8") == NV_ERR_USAGE); /* family mismatch */
	CHECK(strstr(nvt_warns, "NCCL_IB_ADDR_FAMILY") != NULL);
	CHECK(nv_gid_policy_init(&p, -1, 2, "AF_INET", "10.0.0.0/") == NV_ERR_USAGE);
	CHECK(strstr(nvt_warns, "not a CIDR") != NULL);
	CHECK(nv_gid_policy_init(&p, 4, 1, NULL, "10.0.0.0/8") == NV_OK);
	CHECK(p.forced_index == 4 && p.roce_version == 1 && p.family == AF_INET);
	CHECK(p.range_family == AF_INET && p.range_prefix == 8 && p.range_addr[0] == 10);
	CHECK(nv_gid_policy_init(&p, -1, 2, "af_inet6", NULL) == NV_OK);
	CHECK(p.forced_index == -1 && p.family == AF_INET6 && p.range_family == 0);
}

/* NCCL's subnet test, the IB GID fields, the routable-FLID index, transports. */
static void test_routing_helpers(void)
{
	struct nv_gid_entry a, b, t[2];

	gid_v4(&a, "10.1.2.3", 2);
	gid_v4(&b, "10.1.2.200", 2);
	CHECK(nv_gid_same_subnet(a.gid.raw, b.gid.raw, 24));
	gid_v4(&b, "10.1.3.3", 2);
	CHECK(!nv_gid_same_subnet(a.gid.raw, b.gid.raw, 24));
	CHECK(nv_gid_same_subnet(a.gid.raw, b.gid.raw, 16));
	CHECK(nv_gid_same_subnet(a.gid.raw, a.gid.raw, 32));
	gid_v6(&b, "fd00:1:2:3::5", 2);
	CHECK(!nv_gid_same_subnet(a.gid.raw, b.gid.raw, 24)); /* families differ */
	gid_v6(&a, "fd00:1:2:3::9", 2);
	CHECK(nv_gid_same_subnet(a.gid.raw, b.gid.raw, 24)); /* IPv6: 64-bit prefix */
	gid_v6(&a, "fd00:1:2:4::5", 2);
	CHECK(!nv_gid_same_subnet(a.gid.raw, b.gid.raw, 24));

	gid_v6(&a, "fec0:0:201:2:1:2:3:4", 0);
	CHECK(nv_gid_flid(a.gid.raw) == 0x201 && nv_gid_ib_subnet(a.gid.raw) == 2);
	gid_v6(&t[0], "fe80::1", 0);
	t[1] = a;
	CHECK(nv_ib_gid_index(t, 2, 1) == 1); /* NCCL_IB_ROUTABLE_FLID_GID_INDEX default 1 */
	CHECK(nv_ib_gid_index(t, 1, 1) == 0);
	CHECK(nv_ib_gid_index(t, 2, 0) == 0); /* the knob at 0: GID 0 */
	t[1].gid.raw[4] = t[1].gid.raw[5] = 0;
	CHECK(nv_ib_gid_index(t, 2, 1) == 0); /* no FLID there */

	CHECK(nv_transport_skip_reason(IBV_TRANSPORT_IB) == NULL);
	CHECK(strstr(nv_transport_skip_reason(IBV_TRANSPORT_IWARP), "iWARP") != NULL);
	CHECK(nv_transport_skip_reason(IBV_TRANSPORT_UNSPECIFIED) != NULL);
}

int main(void)
{
	nvt_log_capture();
	test_routing_helpers();
	test_hca_filter();
	test_speed();
	test_gid_typical();
	test_gid_range_and_holes();
	test_gid_version_preference();
	test_gid_policy_init();
	return nvt_exit("test_select");
}
