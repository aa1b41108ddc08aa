/*
 * nccl-net-verbs-info - what the Verbs plugin sees on this host: every verbs
 * device and port (kept or skipped, and why), the GID the plugin would pick
 * on each RoCE port and why (with the whole GID table on request), GPUDirect
 * status and why, the memlock limit, and every knob with its value.
 * Uses the plugin's own code (libnvcore), so it answers with the plugin's
 * rules and the current environment. --watch reads the ports' NIC counters
 * instead (nccl-net-verbs-info-watch.c).
 */
#include "config.h"

#include <arpa/inet.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "device.h"
#include "devset.h"
#include "ibv.h"
#include "info-watch.h"
#include "mr.h"
#include "param.h"
#include "select.h"

static void usage(FILE *out)
{
	fprintf(out, "Usage: nccl-net-verbs-info [-g] [-k] [-h]\n"
		     "       nccl-net-verbs-info --watch[=SECONDS] [--count N]\n"
		     "  -g, --gids     print the whole GID table of every kept port\n"
		     "  -k, --knobs    print only the knobs\n"
		     "      --watch[=SECONDS]  every SECONDS (default 10), each port's data and\n"
		     "                 packet rates from its NIC counters, the loss and recovery\n"
		     "                 counters that moved, and a diagnosis when it lost packets\n"
		     "      --count N  with --watch: stop after N intervals (default: run until\n"
		     "                 interrupted)\n"
		     "  -h, --help     this help\n"
		     "      --version  print the version and exit\n"
		     "Environment: every NCCL_IB_* / NCCL_VERBS_* knob listed below; NCCL_DEBUG=INFO\n"
		     "shows the plugin's own log lines.\n");
}

static const char *ll_str(uint8_t ll)
{
	switch (ll) {
	case IBV_LINK_LAYER_ETHERNET:
		return "Ethernet (RoCE)";
	case IBV_LINK_LAYER_INFINIBAND:
		return "InfiniBand";
	case IBV_LINK_LAYER_UNSPECIFIED:
		return "unspecified (InfiniBand)";
	default:
		return "other";
	}
}

/* Every port of every device, with the decision the plugin makes on it. */
static void print_ports(void)
{
	struct ibv_device **list = NULL;
	struct nv_hca_filter f;
	int n = 0;

	printf("\nVerbs devices and ports (NCCL_IB_HCA=%s):\n",
	       nv_param_str(NV_PARAM_IB_HCA) ? nv_param_str(NV_PARAM_IB_HCA) : "(unset)");
	nv_hca_filter_parse(nv_param_str(NV_PARAM_IB_HCA), &f);
	if (nv_ibv_load(nv_param_str(NV_PARAM_IBVERBS_LIB)) != NV_OK ||
	    nv_ibv_get_device_list(&list, &n) != NV_OK || n == 0) {
		printf("  none found (is the ib_uverbs kernel module loaded, and /dev/infiniband "
		       "visible in this container?)\n");
		nv_ibv_free_device_list(list);
		return;
	}
	for (int i = 0; i < n; i++) {
		struct ibv_context *ctx;
		struct ibv_device_attr da;
		const char *skip = nv_transport_skip_reason(list[i]->transport_type);

		printf("  %s (%s)\n", nv_ibv_device_name(list[i]), list[i]->ibdev_path);
		if (skip) {
			printf("    skipped: %s\n", skip);
			continue;
		}
		if (nv_ibv_open_device(list[i], &ctx) != NV_OK)
			continue;
		if (nv_ibv_query_device(ctx, &da) == NV_OK) {
			for (int p = 1; p <= da.phys_port_cnt; p++) {
				struct ibv_port_attr pa;
				const char *why = "candidate (GID checked below)";
				uint32_t speed;

				if (nv_ibv_query_port(ctx, (uint8_t)p, &pa) != NV_OK)
					continue;
#ifdef HAVE_STRUCT_IBV_PORT_ATTR_ACTIVE_SPEED_EX
				speed = pa.active_speed_ex ? pa.active_speed_ex : pa.active_speed;
#else
				speed = pa.active_speed;
#endif
				if (pa.state != IBV_PORT_ACTIVE)
					why = "skipped: port not ACTIVE";
				else if (!nv_hca_filter_match(&f, nv_ibv_device_name(list[i]), p, NULL,
							      NULL))
					why = "skipped by NCCL_IB_HCA";
				printf("    port %d: %-6s %-24s %7d Mbps (speed 0x%x width 0x%x) mtu %d "
				       "lid %u -> %s\n", p, nv_ibv_port_state_str(pa.state),
				       ll_str(pa.link_layer),
				       nv_port_speed_mbps(speed, pa.active_width), speed,
				       pa.active_width, 128 << pa.active_mtu, pa.lid,
				       why);
			}
		}
		nv_ibv_close_device(ctx);
	}
	nv_ibv_free_device_list(list);
}

static void print_gid_table(struct nv_dev *d, int chosen)
{
	struct nv_gid_entry *t;
	int n;

	if (nv_dev_gid_table(d, &t, &n) != NV_OK)
		return;
	for (int i = 0; i < n; i++) {
		char g[INET6_ADDRSTRLEN];

		if (!t[i].readable) {
			printf("      [%3d] unreadable\n", i);
			continue;
		}
		if (!nv_gid_is_valid(&t[i].gid) && i != chosen && !memcmp(t[i].gid.raw,
		    (uint8_t[16]){ 0 }, 16))
			continue; /* empty slot */
		printf("    %s [%3d] %-40s %-5s %s%s\n", i == chosen ? "=>" : "  ", i,
		       nv_ibv_gid_str(&t[i].gid, g, sizeof(g)),
		       nv_gid_family(&t[i].gid) == AF_INET ? "IPv4" : "IPv6",
		       t[i].type == IBV_GID_TYPE_ROCE_V2   ? "RoCE v2"
		       : t[i].type == IBV_GID_TYPE_ROCE_V1 ? "RoCE v1"
		       : t[i].type == IBV_GID_TYPE_IB	   ? "IB"
							   : "type ?",
		       nv_gid_is_valid(&t[i].gid) || d->link_layer != IBV_LINK_LAYER_ETHERNET
			       ? ""
			       : " (link-local: never auto-picked)");
	}
	free(t);
}

static void print_devices(bool gids)
{
	printf("\nDevices the plugin reports to NCCL:\n");
	for (int i = 0; i < nv_vdev_count(); i++) {
		ncclNetProperties_v12_t p;
		struct nv_dev *d = nv_dev_get(i);
		struct nv_gid_info g;

		if (nv_vdev_properties(i, &p) != NV_OK)
			continue;
		printf("  dev %d: %s  port %d  %s  %d Mbps  guid 0x%016llx  maxComms %d  maxRecvs %d\n",
		       i, p.name, p.port, ll_str(d->link_layer), p.speed, (unsigned long long)p.guid,
		       p.maxComms, p.maxRecvs);
		printf("    pciPath   %s\n", p.pciPath ? p.pciPath : "(none: NCCL places it on CPU 0)");
		printf("    GPUDirect %s%s\n", d->hca->gdr.why,
		       d->hca->relaxed_ordering ? "; relaxed ordering on data MRs" : "");
		printf("    ptrSupport%s%s%s  rail %d  plane %d\n",
		       (p.ptrSupport & NCCL_PTR_HOST) ? " HOST" : "",
		       (p.ptrSupport & NCCL_PTR_CUDA) ? " CUDA" : "",
		       (p.ptrSupport & NCCL_PTR_DMABUF) ? " DMABUF" : "", p.railId, p.planeId);
		if (nv_dev_gid(d, &g) == NV_OK || g.why[0])
			printf("    GID       %s\n", g.why);
		if (gids)
			print_gid_table(d, g.index);
	}
}

/* Reads a one-line sysfs file into buf (trimmed); false when absent. */
static bool read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	bool ok;

	if (!f)
		return false;
	ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	if (ok)
		buf[strcspn(buf, "\n")] = '\0';
	return ok;
}

/* "3 4" for the priorities whose <dir>/<prio> file reads 1; false if none exist. */
static bool read_prio_dir(const char *dir, char *out, size_t len)
{
	bool any = false;

	out[0] = '\0';
	for (int prio = 0; prio < 8; prio++) {
		char path[PATH_MAX + 16], v[16];

		snprintf(path, sizeof(path), "%s/%d", dir, prio);
		if (!read_line(path, v, sizeof(v)))
			continue;
		any = true;
		if (atoi(v) == 1)
			snprintf(out + strlen(out), len - strlen(out), "%s%d", out[0] ? " " : "", prio);
	}
	if (any && !out[0])
		snprintf(out, len, "none");
	return any;
}

/* A RoCE port's netdev, the TC/SL the plugin will put on its packets, and the
 * PFC/ECN state where the driver exposes it in sysfs (mlx5: the netdev's
 * ecn/roce_np and ecn/roce_rp per priority; MLNX_OFED: qos/pfc). */
static void print_lossless(struct nv_dev *d)
{
	const char *ibpath = d->hca->ctx->device->ibdev_path, *cls;
	char root[PATH_MAX], path[PATH_MAX + 96], ndev[64] = "", np[32], rp[32], pfc[64];
	int64_t tc = nv_param_int(NV_PARAM_IB_TC), sl = nv_param_int(NV_PARAM_IB_SL);
	struct nv_gid_info g;
	bool has_np, has_rp, has_pfc;

	cls = strstr(ibpath, "/class/infiniband/");
	snprintf(root, sizeof(root), "%.*s", cls ? (int)(cls - ibpath) : 0, ibpath);
	if (nv_dev_gid(d, &g) == NV_OK) {
		snprintf(path, sizeof(path), "%s/ports/%d/gid_attrs/ndevs/%d", ibpath, d->port,
			 g.index);
		read_line(path, ndev, sizeof(ndev));
	}
	printf("  %s:%d  netdev %s\n", d->name, d->port, ndev[0] ? ndev : "(unknown)");
	if (tc >= 0)
		printf("    traffic class %lld (NCCL_IB_TC; DSCP %lld)\n", (long long)tc,
		       (long long)(tc >> 2));
	else
		printf("    traffic class: the communicator's, else 0 (NCCL_IB_TC unset)\n");
	printf("    service level %lld%s\n", (long long)(sl >= 0 ? sl : 0),
	       sl >= 0 ? " (NCCL_IB_SL)" : " (NCCL_IB_SL unset: the communicator's, else 0)");
	snprintf(path, sizeof(path), "%s/class/net/%s/ecn/roce_np/enable", root, ndev);
	has_np = ndev[0] && read_prio_dir(path, np, sizeof(np));
	snprintf(path, sizeof(path), "%s/class/net/%s/ecn/roce_rp/enable", root, ndev);
	has_rp = ndev[0] && read_prio_dir(path, rp, sizeof(rp));
	snprintf(path, sizeof(path), "%s/class/net/%s/qos/pfc", root, ndev);
	has_pfc = ndev[0] && read_line(path, pfc, sizeof(pfc));
	if (has_np || has_rp)
		printf("    ECN       notification point on priorities: %s; reaction point on: %s\n",
		       has_np ? np : "(not exposed)", has_rp ? rp : "(not exposed)");
	if (has_pfc)
		printf("    PFC       per priority 0..7: %s (qos/pfc)\n", pfc);
	if (!has_np && !has_rp && !has_pfc)
		printf("    WARNING: no PFC or ECN state found in sysfs for %s: RoCE needs a lossless "
		       "fabric (PFC, or ECN congestion control); without one it retransmits and can "
		       "lose an order of magnitude of bandwidth. Check with mlnx_qos / lldptool.\n",
		       ndev[0] ? ndev : "this port");
}

static void print_roce(void)
{
	bool header = false;

	for (int i = 0; i < nv_dev_count(); i++) {
		struct nv_dev *d = nv_dev_get(i);

		if (!d || d->link_layer != IBV_LINK_LAYER_ETHERNET)
			continue;
		if (!header)
			printf("\nLossless Ethernet (RoCE ports):\n");
		header = true;
		print_lossless(d);
	}
}

int main(int argc, char **argv)
{
	bool gids = false, knobs_only = false, watch = false;
	double interval = 10;
	long count = 0;
	char lim[64], *end;
	int c;

	static const struct option longopts[] = {
		{ "gids", no_argument, NULL, 'g' }, { "knobs", no_argument, NULL, 'k' },
		{ "help", no_argument, NULL, 'h' }, { "version", no_argument, NULL, 'v' },
		{ "watch", optional_argument, NULL, 'W' }, { "count", required_argument, NULL, 'C' },
		{ NULL, 0, NULL, 0 }
	};

	while ((c = getopt_long(argc, argv, "gkh", longopts, NULL)) != -1) {
		switch (c) {
		case 'g':
			gids = true;
			break;
		case 'k':
			knobs_only = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'v':
			printf("nccl-net-verbs-info (nccl-net-verbs) %s\n", PACKAGE_VERSION);
			return 0;
		case 'W':
			watch = true;
			if (!optarg && optind < argc && argv[optind][0] >= '0' && argv[optind][0] <= '9')
				optarg = argv[optind++];	/* --watch SECONDS */
			if (optarg) {
				interval = strtod(optarg, &end);
				if (end == optarg || *end || !(interval > 0 && interval <= 86400)) {
					fprintf(stderr, "--watch: '%s' is not a number of seconds\n",
						optarg);
					return 2;
				}
			}
			break;
		case 'C':
			count = strtol(optarg, &end, 10);
			if (end == optarg || *end || count < 1) {
				fprintf(stderr, "--count: '%s' is not a positive number\n", optarg);
				return 2;
			}
			break;
		default:
			usage(stderr);
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0); /* keep stdout and the WARNs on stderr in order */
	printf("nccl-net-verbs %s (plugin name \"Verbs\", ncclNet v6..v12)\n", PACKAGE_VERSION);
	if (nv_param_load() != NV_OK) {
		printf("\nThe configuration is invalid (see the WARN lines above); the plugin would "
		       "refuse to start.\n");
		return 1;
	}
	if (watch)
		return nv_info_watch(interval, count);
	printf("\nKnobs (environment; \"(set)\" = overridden):\n");
	nv_param_dump(stdout);
	if (knobs_only)
		return 0;
	printf("\nRLIMIT_MEMLOCK: %s%s\n", nv_memlock_str(lim, sizeof(lim)),
	       nv_memlock_applies() ? "  (applies, no CAP_IPC_LOCK: large registrations may fail)"
				    : "  (does not apply: unlimited, or CAP_IPC_LOCK)");
	if (nv_param_int(NV_PARAM_IB_DISABLE)) {
		printf("\nNCCL_IB_DISABLE=1: the plugin would not start.\n");
		return 0;
	}
	print_ports();
	printf("\nlibibverbs (%s):\n", nv_param_str(NV_PARAM_IBVERBS_LIB) ?
	       nv_param_str(NV_PARAM_IBVERBS_LIB) : "libibverbs.so.1");
	nv_ibv_describe(stdout);
	if (nv_devices_init() != NV_OK) {
		printf("\nThe plugin would not start: no usable device (see above).\n");
		return 1;
	}
	print_devices(gids);
	print_roce();
	nv_devices_fini();
	return 0;
}
