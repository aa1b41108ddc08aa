/*
 * test_qp_knobs - QP set-up knobs over simverbs.
 *
 * ECE: Enhanced Connection Establishment negotiated through the
 * connect/accept handshake over simverbs' mlx5-like ECE (ece_vendor=,
 * ece_options=): the connector offers its options, the acceptor sets them
 * before RTR and answers with the reduced ones (the intersection), which the
 * connector sets before its RTR; both QPs end with the intersection, in both
 * directions. A peer without ECE, a peer of another vendor and
 * NCCL_IB_ECE_ENABLE=0 leave each QP with its own options, and no WARN.
 *
 * NCCL_IB_MQP_RETRY_CNT/_SLEEP_MSEC: simverbs' rtr_timeouts=N makes the first
 * N INIT->RTR transitions on a device time out (ETIMEDOUT); the connection
 * still comes up, with one INFO per retry and no WARN, when N <= the retry
 * count, and fails with one WARN naming the knob when N exceeds it.
 *
 * InfiniBand subnets joined by a router (simverbs subnet=, flid=): within a
 * subnet LID routing without GRH; across subnets GRH with DLID = the peer's
 * FLID (its GID at NCCL_IB_ROUTABLE_FLID_GID_INDEX), which simverbs' router
 * requires; a peer without FLID: WARN, no path. INFO says why per device.
 * NCCL_IB_WARN_RAIL_LOCAL=1: INFO when the two sides' devices differ.
 *
 * NCCL_IB_SUBNET_AWARE_ROUTING=1: the listen handle carries the listener's
 * RoCE GIDs and a connect asked for an InfiniBand device goes out of the
 * RoCE device on the listener's subnet (without the knob: no path, it fails);
 * an acceptor picks the device on the connector's subnet the same way.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "device.h"
#include "devset.h"
#include "ibv.h"
#include "nv_api.h"
#include "param.h"

#include "nvcomm.h"
#include "nvtest.h"

/* Connects sname to a listener on rname; false when either side failed. */
static bool try_pair(const char *sname, const char *rname, struct nv_comm **s, struct nv_comm **r)
{
	char handle[128];
	void *lc, *sc = NULL, *rc = NULL;
	bool sfail = false, rfail = false;

	if (nv_net_listen(NULL, nvt_find_dev(rname), handle, &lc) != NV_OK)
		exit(1);
	for (int i = 0; (!sc && !sfail) || (!rc && !rfail); i++) {
		if (i > 2000000) {
			fprintf(stderr, "connect/accept did not finish\n");
			exit(1);
		}
		if (!sc && !sfail)
			sfail = nv_net_connect(NULL, nvt_find_dev(sname), handle, -1, &sc) != NV_OK;
		if (!rc && !rfail)
			rfail = nv_net_accept(lc, &rc) != NV_OK;
	}
	nv_net_close_listen(lc);
	if (sc && sfail + rfail)
		nv_net_close_send(sc);
	if (rc && sfail + rfail)
		nv_net_close_recv(rc);
	*s = sc;
	*r = rc;
	return !sfail && !rfail;
}

static void pair(const char *sname, const char *rname, struct nv_comm **s, struct nv_comm **r)
{
	if (!try_pair(sname, rname, s, r)) {
		fprintf(stderr, "%s -> %s failed:\n%s", sname, rname, nvt_warns);
		exit(1);
	}
}

/* Options QP 0 of c runs with; -1 when it has no ECE. */
static long options(struct nv_comm *c)
{
	uint32_t v, o, m;

	return nv_ibv_query_ece(c->qps[0].qp, &v, &o, &m) ? -1 : (long)o;
}

static void expect(const char *sname, const char *rname, long want_s, long want_r)
{
	struct nv_comm *s, *r;

	nvt_log_clear();
	pair(sname, rname, &s, &r);
	if (options(s) != want_s || options(r) != want_r)
		fprintf(stderr, "%s -> %s: options 0x%lx / 0x%lx, expected 0x%lx / 0x%lx\n", sname,
			rname, options(s), options(r), want_s, want_r);
	CHECK(options(s) == want_s);
	CHECK(options(r) == want_r);
	CHECK(nvt_nwarn == 0);
	nv_net_close_send(s);
	nv_net_close_recv(r);
}

static int infos_retry;
static char infos[32768];

__attribute__((format(printf, 5, 6)))
static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		   const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (level == NCCL_LOG_INFO && strstr(msg, "ibv_modify_qp") && strstr(msg, "retry"))
		infos_retry++;
	if (level == NCCL_LOG_INFO && strlen(infos) + strlen(msg) + 2 < sizeof(infos))
		strcat(strcat(infos, msg), "\n");
	if (level == NCCL_LOG_WARN)
		nvt_logger(level, flags, file, line, "%s", msg);
}

static void av(struct nv_comm *c, struct ibv_qp_attr *a)
{
	struct ibv_qp_init_attr init;

	memset(a, 0, sizeof(*a));
	CHECK(nv_ibv_query_qp(c->qps[0].qp, a, IBV_QP_AV, &init) == NV_OK);
}

static void ib_subnets(void)
{
	struct ibv_qp_attr sa, ra;
	struct nv_comm *s, *r;

	nvt_log_clear();
	infos[0] = '\0';
	pair("sa0", "sb0", &s, &r); /* across the router, both have FLIDs */
	av(s, &sa);
	av(r, &ra);
	CHECK(sa.ah_attr.is_global && sa.ah_attr.dlid == 0x201);
	CHECK(ra.ah_attr.is_global && ra.ah_attr.dlid == 0x101);
	CHECK(sa.ah_attr.grh.sgid_index == 1 && ra.ah_attr.grh.sgid_index == 1);
	CHECK(strstr(infos, "peer on IB subnet 0x0002, ours 0x0001: GRH, DLID = its FLID 0x201") != NULL);
	CHECK(nvt_nwarn == 0);
	nv_net_close_send(s);
	nv_net_close_recv(r);

	infos[0] = '\0';
	pair("sa0", "sa1", &s, &r); /* one subnet: LIDs */
	av(s, &sa);
	CHECK(!sa.ah_attr.is_global && sa.ah_attr.dlid == nv_dev_get(nv_vdev_get(nvt_find_dev("sa1"))->devs[0])->lid);
	CHECK(strstr(infos, "same IB subnet 0x0001: LID routing, no GRH") != NULL);
	if (!strstr(infos, "same IB subnet"))
		fprintf(stderr, "INFO:\n%s", infos);
	nv_net_close_send(s);
	nv_net_close_recv(r);

	nvt_log_clear();
	CHECK(!try_pair("sa1", "sb0", &s, &r)); /* sa1 has no FLID: sb0 cannot reach it */
	CHECK(strstr(nvt_warns, "has no FLID") != NULL);
}

static void rail_local(void)
{
	struct nv_comm *s, *r;

	infos[0] = '\0';
	pair("ece0", "ece0", &s, &r);
	CHECK(strstr(infos, "mismatched physical devices") == NULL);
	nv_net_close_send(s);
	nv_net_close_recv(r);
	pair("ece0", "ece1", &s, &r);
	CHECK(strstr(infos, "mismatched physical devices between local (ece0) and remote") != NULL);
	CHECK(strstr(infos, "(ece1); to silence this, set NCCL_IB_WARN_RAIL_LOCAL=0") != NULL);
	nv_net_close_send(s);
	nv_net_close_recv(r);
}

static void subnet_aware(void)
{
	char handle[128];
	void *lc, *sc = NULL, *rc = NULL;

	infos[0] = '\0';
	nvt_log_clear();
	if (nv_net_listen(NULL, nvt_find_dev("rc0"), handle, &lc) != NV_OK)
		exit(1);
	for (int i = 0; (!sc || !rc) && i < 2000000; i++) {
		if (!sc && nv_net_connect(NULL, nvt_find_dev("ece0"), handle, -1, &sc) != NV_OK)
			break;
		if (!rc && nv_net_accept(lc, &rc) != NV_OK)
			break;
	}
	CHECK(sc && rc && nvt_nwarn == 0);
	CHECK(strstr(infos, "subnet-aware routing: connecting from device") != NULL);
	CHECK(sc && ((struct nv_comm *)sc)->dev[0].dev->link_layer == IBV_LINK_LAYER_ETHERNET);
	if (sc)
		nv_net_close_send(sc);
	if (rc)
		nv_net_close_recv(rc);
	nv_net_close_listen(lc);
}

/* Accept side: a listener on an IB device accepts a RoCE connector (whose
 * metadata carries its RoCE GID) on the RoCE device of that subnet. */
static void subnet_aware_accept(void)
{
	char handle[128];
	void *lc, *sc = NULL, *rc = NULL;

	infos[0] = '\0';
	nvt_log_clear();
	if (nv_net_listen(NULL, nvt_find_dev("ece0"), handle, &lc) != NV_OK)
		exit(1);
	for (int i = 0; (!sc || !rc) && i < 2000000; i++) {
		if (!sc && nv_net_connect(NULL, nvt_find_dev("rc0"), handle, -1, &sc) != NV_OK)
			break;
		if (!rc && nv_net_accept(lc, &rc) != NV_OK)
			break;
	}
	CHECK(sc && rc && nvt_nwarn == 0);
	CHECK(strstr(infos, "subnet-aware routing: accepting on device") != NULL);
	CHECK(rc && ((struct nv_comm *)rc)->dev[0].dev->link_layer == IBV_LINK_LAYER_ETHERNET);
	if (sc)
		nv_net_close_send(sc);
	if (rc)
		nv_net_close_recv(rc);
	nv_net_close_listen(lc);
}

static void mqp_retry(void)
{
	struct nv_comm *s, *r;

	nvt_log_clear();
	infos_retry = 0;
	pair("rt0", "rt0", &s, &r); /* 3 timeouts, 34 retries allowed */
	CHECK(infos_retry == 3);
	CHECK(nvt_nwarn == 0);
	nv_net_close_send(s);
	nv_net_close_recv(r);
	nv_devices_fini();
	nv_param_reset();
	setenv("NCCL_IB_MQP_RETRY_CNT", "2", 1);
	if (nv_param_load() != NV_OK || nv_devices_init() != NV_OK)
		exit(1);
	nvt_log_clear();
	infos_retry = 0;
	CHECK(!try_pair("rt1", "rt1", &s, &r)); /* 5 timeouts, 2 retries */
	CHECK(infos_retry == 2);
	CHECK(strstr(nvt_warns, "ibv_modify_qp failed") != NULL);
	CHECK(strstr(nvt_warns, "NCCL_IB_MQP_RETRY_CNT") != NULL);
	CHECK(strstr(nvt_warns, strerror(ETIMEDOUT)) != NULL);
	if (!strstr(nvt_warns, "NCCL_IB_MQP_RETRY_CNT"))
		fprintf(stderr, "WARNs:\n%s", nvt_warns);
	unsetenv("NCCL_IB_MQP_RETRY_CNT");
}

int main(void)
{
	alarm(60);
	setenv("SIMVERBS_DEVICES",
	       "ece0:ll=ib,ece_vendor=0x15b3,ece_options=0x3f;"
	       "ece1:ll=ib,ece_vendor=0x15b3,ece_options=0x15;"
	       "plain0:ll=ib;"
	       "other0:ll=ib,ece_vendor=0x8086,ece_options=0xff;"
	       "rt0:ll=ib,rtr_timeouts=3;rt1:ll=ib,rtr_timeouts=5;"
	       "sa0:ll=ib,subnet=0x1,flid=0x101;sb0:ll=ib,subnet=0x2,flid=0x201;"
	       "sa1:ll=ib,subnet=0x1;rc0:ll=eth", 1);
	setenv("NCCL_IB_MQP_RETRY_SLEEP_MSEC", "1", 1);
	nv_log_set_logger(logger);
	if (nv_param_load() != NV_OK || nv_devices_init() != NV_OK) {
		fprintf(stderr, "test_qp_knobs: no simverbs devices; skipping\n");
		return 77;
	}
	expect("ece0", "ece1", 0x15, 0x15);	/* both ways: the intersection */
	expect("ece1", "ece0", 0x15, 0x15);
	expect("ece0", "ece0", 0x3f, 0x3f);
	expect("ece0", "plain0", 0x3f, -1);	/* peer without ECE */
	expect("plain0", "ece0", -1, 0x3f);
	expect("ece0", "other0", 0x3f, 0xff);	/* another vendor's options */
	expect("other0", "ece1", 0xff, 0x15);
	ib_subnets();
	mqp_retry();
	nv_devices_fini();
	nv_param_reset();

	setenv("NCCL_IB_ECE_ENABLE", "0", 1);
	setenv("NCCL_IB_WARN_RAIL_LOCAL", "1", 1);
	if (nv_param_load() != NV_OK || nv_devices_init() != NV_OK)
		return 1;
	expect("ece0", "ece1", 0x3f, 0x15);	/* off: each keeps its own */
	expect("ece1", "ece0", 0x15, 0x3f);
	rail_local();
	nv_devices_fini();
	nv_param_reset();
	setenv("NCCL_IB_SUBNET_AWARE_ROUTING", "1", 1);
	if (nv_param_load() != NV_OK || nv_devices_init() != NV_OK)
		return 1;
	subnet_aware();
	subnet_aware_accept();
	nv_devices_fini();
	return nvt_exit("test_qp_knobs");
}
