/*
 * simverbs device configuration: the default device pair, SIMVERBS_DEVICES,
 * SIMVERBS_CONFIG and SIMVERBS_LIMITS (syntax in README.md).  Every process of
 * one simulated host must see the same device list (same HCAs).
 */
#include <ctype.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sv.h"

static const struct {
	const char *name;
	uint8_t val;
} sv_speeds[] = {
	{ "sdr", 1 }, { "ddr", 2 }, { "qdr", 4 }, { "fdr10", 8 }, { "fdr", 16 },
	{ "edr", 32 }, { "hdr", 64 }, { "ndr", 128 },
};

static int sv_parse_speed(const char *v, uint8_t *out)
{
	for (size_t i = 0; i < sizeof(sv_speeds) / sizeof(sv_speeds[0]); i++) {
		if (!strcasecmp(v, sv_speeds[i].name)) {
			*out = sv_speeds[i].val;
			return 0;
		}
	}
	return EINVAL;
}

static int sv_parse_width(const char *v, uint8_t *out)
{
	static const char *names[] = { "1x", "4x", "8x", "12x", "2x" };
	static const uint8_t vals[] = { 1, 2, 4, 8, 16 };

	for (int i = 0; i < 5; i++) {
		if (!strcasecmp(v, names[i])) {
			*out = vals[i];
			return 0;
		}
	}
	return EINVAL;
}

static int sv_parse_mtu(const char *v, uint32_t *out)
{
	long m = strtol(v, NULL, 0);

	for (uint32_t e = 1; e <= 5; e++) {
		if (m == (128L << e)) {
			*out = e;
			return 0;
		}
	}
	return EINVAL;
}

static int sv_parse_state(const char *v, uint32_t *out)
{
	if (!strcasecmp(v, "active"))
		*out = IBV_PORT_ACTIVE;
	else if (!strcasecmp(v, "down"))
		*out = IBV_PORT_DOWN;
	else if (!strcasecmp(v, "init"))
		*out = IBV_PORT_INIT;
	else
		return EINVAL;
	return 0;
}

/* Limits: a key may only lower the default. */
static int sv_parse_limit(struct sv_limits *l, const char *k, const char *v)
{
	static const struct sv_limits dflt = SV_DEFAULT_LIMITS;
	unsigned long long n = strtoull(v, NULL, 0);
	struct {
		const char *key;
		uint32_t *p32;
		uint64_t *p64;
		uint64_t max;
	} tab[] = {
		{ "max_qp", &l->max_qp, NULL, dflt.max_qp },
		{ "max_qp_wr", &l->max_qp_wr, NULL, dflt.max_qp_wr },
		{ "max_sge", &l->max_sge, NULL, dflt.max_sge },
		{ "max_inline", &l->max_inline_data, NULL, dflt.max_inline_data },
		{ "max_inline_data", &l->max_inline_data, NULL, dflt.max_inline_data },
		{ "max_cqe", &l->max_cqe, NULL, dflt.max_cqe },
		{ "max_mr_size", NULL, &l->max_mr_size, dflt.max_mr_size },
		{ "max_mr", &l->max_mr, NULL, dflt.max_mr },
		{ "max_pd", &l->max_pd, NULL, dflt.max_pd },
		{ "max_cq", &l->max_cq, NULL, dflt.max_cq },
		{ "max_qp_rd_atom", &l->max_qp_rd_atom, NULL, dflt.max_qp_rd_atom },
		{ "max_srq", &l->max_srq, NULL, dflt.max_srq },
		{ "max_srq_wr", &l->max_srq_wr, NULL, dflt.max_srq_wr },
		{ "max_srq_sge", &l->max_srq_sge, NULL, dflt.max_srq_sge },
		{ "max_msg_sz", NULL, &l->max_msg_sz, dflt.max_msg_sz },
	};

	for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
		if (strcmp(k, tab[i].key))
			continue;
		if (n > tab[i].max)
			n = tab[i].max;
		if (tab[i].p32)
			*tab[i].p32 = (uint32_t)n;
		else
			*tab[i].p64 = n;
		return 0;
	}
	return ENOENT;
}

static void sv_dev_defaults(struct sv_device *d, const char *name, uint32_t ll)
{
	static const struct sv_limits dflt = SV_DEFAULT_LIMITS;

	memset(d, 0, sizeof(*d));
	snprintf(d->ibv.name, sizeof(d->ibv.name), "%s", name);
	d->link_layer = ll;
	d->nports = 1;
	d->lim = dflt;
	for (int p = 0; p < SV_MAX_PORTS; p++) {
		d->ports[p].state = IBV_PORT_ACTIVE;
		d->ports[p].cfg_mtu = SV_DEFAULT_MTU;
		d->ports[p].speed = ll == IBV_LINK_LAYER_ETHERNET ? SV_DEFAULT_ETH_SPEED
								  : SV_DEFAULT_IB_SPEED;
		d->ports[p].width = SV_DEFAULT_WIDTH;
	}
}

static int sv_apply_kv(struct sv_device *d, const char *k, const char *v)
{
	int rc = 0;

	if (!strcmp(k, "ll") || !strcmp(k, "link_layer")) {
		if (!strcasecmp(v, "ib") || !strcasecmp(v, "infiniband"))
			d->link_layer = IBV_LINK_LAYER_INFINIBAND;
		else if (!strcasecmp(v, "eth") || !strcasecmp(v, "roce") ||
			 !strcasecmp(v, "ethernet"))
			d->link_layer = IBV_LINK_LAYER_ETHERNET;
		else
			rc = EINVAL;
		for (int p = 0; p < SV_MAX_PORTS && !rc; p++)
			d->ports[p].speed = d->link_layer == IBV_LINK_LAYER_ETHERNET ?
					    SV_DEFAULT_ETH_SPEED : SV_DEFAULT_IB_SPEED;
		return rc;
	}
	if (!strcmp(k, "transport")) { /* ib (also RoCE) or iwarp: an RNIC, Ethernet */
		if (!strcasecmp(v, "iwarp")) {
			d->ibv.transport_type = IBV_TRANSPORT_IWARP;
			d->link_layer = IBV_LINK_LAYER_ETHERNET;
			for (int p = 0; p < SV_MAX_PORTS; p++)
				d->ports[p].speed = SV_DEFAULT_ETH_SPEED;
			return 0;
		}
		d->ibv.transport_type = IBV_TRANSPORT_IB;
		return strcasecmp(v, "ib") ? EINVAL : 0;
	}
	if (!strcmp(k, "ecn_np") || !strcmp(k, "ecn_rp") || !strcmp(k, "pfc")) {
		uint16_t *m = k[0] == 'p' ? &d->pfc : k[4] == 'n' ? &d->ecn_np : &d->ecn_rp;
		unsigned long b = strtoul(v, NULL, 0); /* priorities 0..7 as a bitmask */

		*m = (uint16_t)(SV_LOSSLESS_SET | (b & 0xff));
		return b > 0xff ? EINVAL : 0;
	}
	if (!strcmp(k, "ece_vendor") || !strcmp(k, "ece_options") || !strcmp(k, "rtr_timeouts")) {
		uint32_t *m = k[0] == 'r' ? &d->rtr_timeouts : k[4] == 'v' ? &d->ece_vendor
										  : &d->ece_options;

		*m = (uint32_t)strtoul(v, NULL, 0);
		return 0;
	}
	if (!strcmp(k, "link_down")) {
		if (strcasecmp(v, "fatal") && strcasecmp(v, "local"))
			return EINVAL;
		d->link_down_local = !strcasecmp(v, "local");
		return 0;
	}
	if (!strcmp(k, "err_post")) {
		if (!strcasecmp(v, "flush"))
			d->err_post = SV_ERR_POST_FLUSH;
		else if (!strcasecmp(v, "drop"))
			d->err_post = SV_ERR_POST_DROP;
		else
			return EINVAL;
		return 0;
	}
	if (!strcmp(k, "atomics")) { /* hca (rxe, mlx5) or none (siw) */
		if (strcasecmp(v, "hca") && strcasecmp(v, "none"))
			return EINVAL;
		d->no_atomics = !strcasecmp(v, "none");
		return 0;
	}
	if (!strcmp(k, "pci")) { /* BB:DD.F in hex */
		unsigned int b, dv, fn;

		if (sscanf(v, "%x:%x.%x", &b, &dv, &fn) != 3 || b > 0xff || dv > 0x1f || fn > 7)
			return EINVAL;
		d->pci_set = 1;
		d->pci_bus = (uint8_t)b;
		d->pci_dev = (uint8_t)dv;
		d->pci_fn = (uint8_t)fn;
		return 0;
	}
	if (!strcmp(k, "ports")) {
		d->nports = (uint32_t)strtoul(v, NULL, 0);
		return d->nports >= 1 && d->nports <= SV_MAX_PORTS ? 0 : EINVAL;
	}
	if (!strcmp(k, "vendor")) {
		if (!strcasecmp(v, "soft") || !strcasecmp(v, "software"))
			d->identity = SV_IDENTITY_SOFT;
		else if (!strcasecmp(v, "mellanox") || !strcasecmp(v, "mlx"))
			d->identity = SV_IDENTITY_MELLANOX;
		else
			rc = EINVAL;
		return rc;
	}
	if (!strcmp(k, "guid")) {
		d->node_guid = htobe64(strtoull(v, NULL, 0));
		return 0;
	}
	if (!strcmp(k, "netdev") || !strcmp(k, "netdev2")) {
		struct sv_port *pt = &d->ports[k[6] ? 1 : 0];

		if (!*v || strlen(v) >= sizeof(pt->netdev))
			return EINVAL;
		snprintf(pt->netdev, sizeof(pt->netdev), "%s", v);
		return 0;
	}
	for (uint32_t p = 0; p < SV_MAX_PORTS && !rc; p++) {
		struct sv_port *pt = &d->ports[p];

		if (!strcmp(k, "state"))
			rc = sv_parse_state(v, &pt->state);
		else if (!strcmp(k, "speed"))
			rc = sv_parse_speed(v, &pt->speed);
		else if (!strcmp(k, "width"))
			rc = sv_parse_width(v, &pt->width);
		else if (!strcmp(k, "subnet"))
			pt->subnet = (uint16_t)strtoul(v, NULL, 0);
		else if (!strcmp(k, "flid"))
			pt->flid = (uint16_t)(strtoul(v, NULL, 0) + p);
		else if (!strcmp(k, "speed_mbps"))
			pt->speed_mbps = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(k, "mtu"))
			rc = sv_parse_mtu(v, &pt->cfg_mtu);
		else if (!strcmp(k, "lid"))
			pt->lid = (uint16_t)(strtoul(v, NULL, 0) + p);
		else
			return sv_parse_limit(&d->lim, k, v) ? EINVAL : 0;
	}
	return rc;
}

/* "k=v" items separated by ',' or blanks. */
static int sv_apply_kvs(struct sv_device *d, char *s)
{
	char *save = NULL;

	for (char *t = strtok_r(s, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save)) {
		char *eq = strchr(t, '=');

		if (!eq) {
			sv_log("config: '%s' is not key=value", t);
			return EINVAL;
		}
		*eq = '\0';
		if (sv_apply_kv(d, t, eq + 1)) {
			sv_log("config: bad value '%s' for '%s' on %s", eq + 1, t, d->ibv.name);
			return EINVAL;
		}
	}
	return 0;
}

/* One entry: "name[:k=v,...]" or "name k=v k=v" (config file). */
static int sv_parse_entry(struct sv_device *d, char *e)
{
	char *rest;
	size_t n;

	while (isspace((unsigned char)*e))
		e++;
	n = strcspn(e, ": \t");
	rest = e[n] ? e + n + 1 : e + n;
	e[n] = '\0';
	if (!n || n >= SV_NAME_MAX)
		return EINVAL;
	sv_dev_defaults(d, e, IBV_LINK_LAYER_INFINIBAND);
	if (strstr(e, "roce") || strstr(e, "eth"))
		sv_dev_defaults(d, e, IBV_LINK_LAYER_ETHERNET);
	return sv_apply_kvs(d, rest);
}

static int sv_add_entries(char *spec, const char *seps, struct sv_device *devs, int *n)
{
	char *save = NULL;

	for (char *e = strtok_r(spec, seps, &save); e; e = strtok_r(NULL, seps, &save)) {
		char *hash = strchr(e, '#');

		if (hash)
			*hash = '\0';
		if (strspn(e, " \t\r") == strlen(e))
			continue;
		if (*n >= SV_MAX_DEVICES)
			return E2BIG;
		if (sv_parse_entry(&devs[*n], e))
			return EINVAL;
		(*n)++;
	}
	return 0;
}

static char *sv_read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	size_t n;

	if (!f)
		return NULL;
	buf = calloc(1, 65536);
	if (buf) {
		n = fread(buf, 1, 65535, f);
		buf[n] = '\0';
	}
	fclose(f);
	return buf;
}

static void sv_finish_device(struct sv_device *d, int idx)
{
	d->idx = (uint32_t)idx;
	d->ibv.node_type = d->ibv.transport_type == IBV_TRANSPORT_IWARP ? IBV_NODE_RNIC
									  : IBV_NODE_CA;
	snprintf(d->ibv.dev_name, sizeof(d->ibv.dev_name), "uverbs%d", idx);
	if (!d->node_guid)
		d->node_guid = htobe64(0x0002c90300a1b000ull + ((uint64_t)idx << 4));
	d->sys_guid = d->node_guid;
	for (uint32_t p = 0; p < d->nports; p++) {
		struct sv_port *pt = &d->ports[p];

		if (d->link_layer == IBV_LINK_LAYER_INFINIBAND && !pt->lid)
			pt->lid = (uint16_t)(1 + idx * SV_MAX_PORTS + p);
		if (d->link_layer == IBV_LINK_LAYER_ETHERNET)
			pt->lid = 0;
		pt->mtu = pt->cfg_mtu;
		atomic_store(&pt->link, IBV_PORT_ACTIVE);
	}
	/* host.c adds the host's GUID and LID offsets and builds the GID
	 * tables once the process knows its host */
}

/* Builds sv_g.devs once per process.  Returns 0 or a positive errno. */
int sv_devices_init(void)
{
	struct sv_device *devs;
	const char *env = getenv("SIMVERBS_DEVICES");
	const char *cfg = getenv("SIMVERBS_CONFIG");
	const char *lims = getenv("SIMVERBS_LIMITS");
	char *spec = NULL;
	int n = 0, rc = 0;

	if (sv_g.devs)
		return 0;
	devs = calloc(SV_MAX_DEVICES, sizeof(*devs));
	if (!devs)
		return ENOMEM;
	if (env && *env)
		spec = strdup(env);
	else if (cfg && *cfg && !(spec = sv_read_file(cfg)))
		sv_log("cannot read SIMVERBS_CONFIG=%s: %s", cfg, strerror(errno));
	if (!spec)
		spec = strdup("simib0:ll=ib;simroce0:ll=eth");
	if (!spec) {
		free(devs);
		return ENOMEM;
	}
	rc = sv_add_entries(spec, ";\n", devs, &n);
	free(spec);
	for (int i = 0; i < n && !rc; i++) {
		if (lims && *lims) {
			char *l = strdup(lims);

			rc = l ? sv_apply_kvs(&devs[i], l) : ENOMEM;
			free(l);
		}
		sv_finish_device(&devs[i], i);
	}
	if (rc) {
		sv_log("invalid device configuration; no devices");
		n = 0;
	}
	sv_g.devs = devs;
	sv_g.ndevs = n;
	return rc;
}

struct sv_device *sv_dev_by_name(const char *name)
{
	for (int i = 0; i < sv_g.ndevs; i++)
		if (!strcmp(sv_g.devs[i].ibv.name, name))
			return &sv_g.devs[i];
	return NULL;
}
