/*
 * test_qp - QP bring-up as configured, checked on the QPs themselves
 * (ibv_query_qp over simverbs): NCCL_IB_SL/TC/FIFO_TC/TIMEOUT/RETRY_CNT/PKEY/USE_INLINE,
 * QPS_PER_CONNECTION, GRH only when needed on IB and always on RoCE, the
 * communicator's trafficClass as SL/TC fallback, and the MTU negotiated per
 * connection (min of both ports) without touching the device table, so a
 * later connection between two 4096-byte ports gets 4096.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "device.h"
#include "ibv.h"
#include "nv_api.h"
#include "param.h"

static int failures;

#define CHECK(cond)                                                                  \
	do {                                                                         \
		if (!(cond)) {                                                       \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, \
				#cond);                                              \
			failures++;                                                  \
		}                                                                    \
	} while (0)

static int find(const char *name)
{
	int i;

	for (i = 0; i < nv_vdev_count(); i++)
		if (!strcmp(nv_vdev_get(i)->name, name))
			return i;
	fprintf(stderr, "no device %s\n", name);
	exit(1);
}

static void pair_tc(int sdev, int rdev, int tc, struct nv_comm **s, struct nv_comm **r)
{
	char handle[128];
	void *lc, *sc = NULL, *rc = NULL;
	int i;

	if (nv_net_listen(NULL, rdev, handle, &lc) != NV_OK)
		exit(1);
	for (i = 0; (!sc || !rc) && i < 2000000; i++) {
		if (!sc && nv_net_connect(NULL, sdev, handle, tc, &sc) != NV_OK)
			exit(1);
		if (!rc && nv_net_accept(lc, &rc) != NV_OK)
			exit(1);
	}
	if (!sc || !rc) {
		fprintf(stderr, "connect/accept did not finish\n");
		exit(1);
	}
	nv_net_close_listen(lc);
	*s = sc;
	*r = rc;
}

static void pair(int sdev, int rdev, struct nv_comm **s, struct nv_comm **r)
{
	pair_tc(sdev, rdev, -1, s, r);
}

static void query(struct nv_comm *c, int i, struct ibv_qp_attr *a)
{
	struct ibv_qp_init_attr init;

	memset(a, 0, sizeof(*a));
	CHECK(nv_ibv_query_qp(c->qps[i].qp, a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
						       IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
						       IBV_QP_PKEY_INDEX,
			      &init) == NV_OK);
}

static void knobs_roce(void)
{
	struct nv_comm *s, *r;
	struct ibv_qp_attr a;
	int d = find("simroce0"), i;

	pair(d, d, &s, &r);
	CHECK(s->nqps == 2 && r->nqps == 2);
	for (i = 0; i < 2; i++) {
		query(s, i, &a);
		CHECK(a.qp_state == IBV_QPS_RTS);
		CHECK(a.timeout == 14 && a.retry_cnt == 5 && a.pkey_index == 0);
		CHECK(a.ah_attr.is_global == 1 && a.ah_attr.sl == 3);
		CHECK(a.ah_attr.grh.traffic_class == 96); /* data direction: NCCL_IB_TC */
		query(r, i, &a);
		CHECK(a.ah_attr.is_global == 1 && a.ah_attr.sl == 3);
		CHECK(a.ah_attr.grh.traffic_class == 184); /* CTS direction: NCCL_IB_FIFO_TC */
		CHECK(r->qps[i].max_inline >= 64 && s->qps[i].max_inline == 0); /* USE_INLINE */
	}
	CHECK(nv_net_close_send(s) == NV_OK && nv_net_close_recv(r) == NV_OK);
}

static void mtu_ib(void)
{
	struct nv_comm *s, *r;
	struct ibv_qp_attr a;
	int big = find("simib0"), small = find("simib1");

	pair(big, small, &s, &r);
	query(s, 0, &a);
	CHECK(a.path_mtu == IBV_MTU_1024);
	CHECK(a.ah_attr.is_global == 0); /* IB, same subnet: LID routed, no GRH */
	query(r, 0, &a);
	CHECK(a.path_mtu == IBV_MTU_1024 && a.ah_attr.is_global == 0);
	CHECK(nv_net_close_send(s) == NV_OK && nv_net_close_recv(r) == NV_OK);
	/* the device table was not lowered: 4096 <-> 4096 still negotiates 4096 */
	CHECK(nv_dev_get(nv_vdev_get(big)->devs[0])->active_mtu == IBV_MTU_4096);
	pair(big, big, &s, &r);
	query(s, 0, &a);
	CHECK(a.path_mtu == IBV_MTU_4096);
	CHECK(nv_net_close_send(s) == NV_OK && nv_net_close_recv(r) == NV_OK);
}

/* The environment minus the SL/TC knobs. */
static const char *env_without_sl_tc(const char *name, void *arg)
{
	(void)arg;
	if (!strcmp(name, "NCCL_IB_SL") || !strcmp(name, "NCCL_IB_TC") ||
	    !strcmp(name, "NCCL_IB_FIFO_TC"))
		return NULL;
	return getenv(name);
}

/* Without NCCL_IB_SL/TC the communicator's trafficClass gives both (as NCCL). */
static void traffic_class(void)
{
	struct nv_comm *s, *r;
	struct ibv_qp_attr a;
	int d = find("simroce0");

	CHECK(nv_param_load_from(env_without_sl_tc, NULL) == NV_OK);
	pair_tc(d, d, 5, &s, &r);
	query(s, 0, &a);
	CHECK(a.ah_attr.sl == 5 && a.ah_attr.grh.traffic_class == 5);
	query(r, 0, &a);
	CHECK(a.ah_attr.sl == 5 && a.ah_attr.grh.traffic_class == 5); /* follows the sender */
	CHECK(nv_net_close_send(s) == NV_OK && nv_net_close_recv(r) == NV_OK);
}

int main(void)
{
	alarm(60);
	setenv("SIMVERBS_DEVICES", "simib0:ll=ib;simib1:ll=ib,mtu=1024;simroce0:ll=eth", 1);
	setenv("NCCL_IB_SL", "3", 1);
	setenv("NCCL_IB_TC", "96", 1);
	setenv("NCCL_IB_FIFO_TC", "184", 1);
	setenv("NCCL_IB_TIMEOUT", "14", 1);
	setenv("NCCL_IB_RETRY_CNT", "5", 1);
	setenv("NCCL_IB_QPS_PER_CONNECTION", "2", 1);
	setenv("NCCL_IB_USE_INLINE", "1", 1);
	if (nv_param_load() != NV_OK || nv_devices_init() != NV_OK) {
		fprintf(stderr, "test_qp: no simverbs devices; skipping\n");
		return 77;
	}
	knobs_roce();
	mtu_ib();
	traffic_class();
	nv_devices_fini();
	if (failures) {
		fprintf(stderr, "test_qp: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_qp: all checks passed\n");
	return 0;
}
