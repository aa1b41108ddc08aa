/*
 * nccl-net-verbs-info --watch: every port's NIC counters (hwcnt.c) read each
 * interval, the per-port rates, the loss and recovery counters that moved,
 * and a diagnosis when a port lost packets (see docs/troubleshooting.md).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hwcnt.h"
#include "ibv.h"
#include "info-watch.h"
#include "os.h"
#include "param.h"

#define WATCH_MAX_PORTS 64

struct watch_port {
	char name[64];			/* "simroce0:1" */
	char ibdev_path[256];
	int port;
	bool roce;
	struct nv_hwcnt last;
};

static uint64_t cnt(const struct nv_hwcnt *d, int id)
{
	return nv_hwcnt_has(d, id) ? d->v[id] : 0;
}

/*
 * The diagnosis for port `name` from counter delta d over span_s seconds;
 * false (and buf "") when d shows no loss. tc: the traffic class in words.
 */
bool nv_watch_diagnose(const char *name, bool roce, const struct nv_hwcnt *d, double span_s,
		       const char *tc, char *buf, size_t len)
{
	uint64_t naks = cnt(d, NV_HWCNT_PACKET_SEQ_ERR) + cnt(d, NV_HWCNT_RCVD_SEQ_ERR) +
			cnt(d, NV_HWCNT_IMPLIED_NAK_SEQ_ERR);
	uint64_t oos = cnt(d, NV_HWCNT_OUT_OF_SEQUENCE) + cnt(d, NV_HWCNT_OUT_OF_SEQ_REQUEST);
	uint64_t dup = cnt(d, NV_HWCNT_DUPLICATE_REQUEST), tmo = 0;
	bool tmo_known = nv_hwcnt_has(d, NV_HWCNT_LOCAL_ACK_TIMEOUT_ERR);
	size_t o;

	buf[0] = '\0';
	if (tmo_known) {
		tmo = d->v[NV_HWCNT_LOCAL_ACK_TIMEOUT_ERR];
	} else if (nv_hwcnt_has(d, NV_HWCNT_COMPLETER_RETRY_ERR)) {
		/* rxe counts every retry; those no NAK started followed a timeout */
		uint64_t r = d->v[NV_HWCNT_COMPLETER_RETRY_ERR];

		tmo = r > naks ? r - naks : 0;
	}
	if (!naks && !oos && !tmo && !dup)
		return false;
	o = (size_t)snprintf(buf, len, "%s is losing packets: %llu out-of-sequence NAKs and %llu "
			     "ACK timeouts%s in %.0f s", name, (unsigned long long)naks,
			     (unsigned long long)tmo, tmo_known ? "" : " (retries without a NAK)",
			     span_s);
	if (o < len && (oos || dup))
		o += (size_t)snprintf(buf + o, len - o, " (as receiver: %llu out-of-sequence packets "
				      "dropped, %llu duplicates)", (unsigned long long)oos,
				      (unsigned long long)dup);
	if (o < len && roce)
		snprintf(buf + o, len - o, "; RoCE needs PFC on the traffic class in use (%s) or "
			 "ECN/DCQCN; see docs/troubleshooting.md", tc);
	else if (o < len)
		snprintf(buf + o, len - o, "; InfiniBand does not drop packets on a healthy link: "
			 "check symbol_error, link_downed and port_rcv_errors here, at the peer and "
			 "on the switch ports between; see docs/troubleshooting.md");
	return true;
}

static int watch_ports(struct watch_port *wp, int max)
{
	struct ibv_device **list = NULL;
	int n = 0, np = 0;

	if (nv_ibv_get_device_list(&list, &n) != NV_OK)
		return 0;
	for (int i = 0; i < n && np < max; i++) {
		struct ibv_context *ctx;
		struct ibv_device_attr da;

		if (nv_ibv_open_device(list[i], &ctx) != NV_OK)
			continue;
		if (nv_ibv_query_device(ctx, &da) == NV_OK) {
			for (int p = 1; p <= da.phys_port_cnt && np < max; p++) {
				struct ibv_port_attr pa;

				if (nv_ibv_query_port(ctx, (uint8_t)p, &pa) != NV_OK)
					continue;
				snprintf(wp[np].name, sizeof(wp[np].name), "%s:%d",
					 nv_ibv_device_name(list[i]), p);
				snprintf(wp[np].ibdev_path, sizeof(wp[np].ibdev_path), "%s",
					 list[i]->ibdev_path);
				wp[np].port = p;
				wp[np].roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
				np++;
			}
		}
		nv_ibv_close_device(ctx);
	}
	nv_ibv_free_device_list(list);
	return np;
}

/* "12.3 Gb/s" from bytes over s seconds; "-" when the counter is absent. */
static const char *rate_str(bool have, double bytes, double s, char *buf, size_t len)
{
	if (!have)
		return "-";
	snprintf(buf, len, "%.2f Gb/s", bytes * 8 / s / 1e9);
	return buf;
}

static const char *pkt_str(bool have, double pkts, double s, char *buf, size_t len)
{
	if (!have)
		return "-";
	snprintf(buf, len, "%.1f kpkt/s", pkts / s / 1e3);
	return buf;
}

static void watch_print(const struct watch_port *w, const struct nv_hwcnt *d, const char *tc)
{
	double s = d->t_ns / 1e9;
	bool txd = nv_hwcnt_has(d, NV_HWCNT_PORT_XMIT_DATA), rxd = nv_hwcnt_has(d, NV_HWCNT_PORT_RCV_DATA);
	int txp = nv_hwcnt_has(d, NV_HWCNT_PORT_XMIT_PACKETS) ? NV_HWCNT_PORT_XMIT_PACKETS
								: NV_HWCNT_SENT_PKTS;
	int rxp = nv_hwcnt_has(d, NV_HWCNT_PORT_RCV_PACKETS) ? NV_HWCNT_PORT_RCV_PACKETS
							       : NV_HWCNT_RCVD_PKTS;
	char a[32], b[32], c[32], e[32], loss[512], diag[768];

	if (s <= 0)
		s = 1e-9;
	printf("  %-16s tx %-12s %-14s rx %-12s %-14s", w->name,
	       rate_str(txd, 4.0 * (double)cnt(d, NV_HWCNT_PORT_XMIT_DATA), s, a, sizeof(a)),
	       pkt_str(nv_hwcnt_has(d, txp), (double)cnt(d, txp), s, b, sizeof(b)),
	       rate_str(rxd, 4.0 * (double)cnt(d, NV_HWCNT_PORT_RCV_DATA), s, c, sizeof(c)),
	       pkt_str(nv_hwcnt_has(d, rxp), (double)cnt(d, rxp), s, e, sizeof(e)));
	printf("  loss/recovery: %s\n", nv_hwcnt_format(d, 1, 1, loss, sizeof(loss)));
	if (nv_watch_diagnose(w->name, w->roce, d, s, tc, diag, sizeof(diag)))
		printf("  DIAGNOSIS: %s\n", diag);
}

static void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };

	while (nanosleep(&ts, &ts))
		;
}

int nv_info_watch(double interval_s, long count)
{
	static struct watch_port wp[WATCH_MAX_PORTS];
	int64_t tcv = nv_param_int(NV_PARAM_IB_TC);
	char tc[96];
	int n;

	if (tcv >= 0)
		snprintf(tc, sizeof(tc), "TC %lld, NCCL_IB_TC", (long long)tcv);
	else
		snprintf(tc, sizeof(tc), "TC 0 unless the communicator sets one; NCCL_IB_TC unset");
	if (nv_ibv_load(nv_param_str(NV_PARAM_IBVERBS_LIB)) != NV_OK ||
	    (n = watch_ports(wp, WATCH_MAX_PORTS)) == 0) {
		printf("no verbs device: nothing to watch\n");
		return 1;
	}
	for (int i = 0; i < n; i++)
		if (!nv_hwcnt_read(wp[i].ibdev_path, wp[i].port, &wp[i].last))
			printf("  %s: no counters in %s/ports/%d (counters/, hw_counters/)\n",
			       wp[i].name, wp[i].ibdev_path, wp[i].port);
	for (long k = 0; count <= 0 || k < count; k++) {
		sleep_s(interval_s);
		printf("[%s every %.1f s] per port: data rate, packet rate, loss and recovery "
		       "counters that moved\n", k ? "again" : "counters", interval_s);
		for (int i = 0; i < n; i++) {
			struct nv_hwcnt now, d;

			if (!nv_hwcnt_read(wp[i].ibdev_path, wp[i].port, &now))
				continue;
			nv_hwcnt_delta(&wp[i].last, &now, &d);
			wp[i].last = now;
			watch_print(&wp[i], &d, tc);
		}
		fflush(stdout);
	}
	return 0;
}
