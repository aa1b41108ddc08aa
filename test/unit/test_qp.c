/*
 * test_qp - QP bring-up as configured, checked on the QPs themselves
 * (ibv_query_qp over simverbs): NCCL_IB_SL/TC/FIFO_TC/TIMEOUT/RETRY_CNT/PKEY/USE_INLINE,
 * QPS_PER_CONNECTION, GRH only when needed on IB and always on RoCE, the
 * communicator's trafficClass as SL/TC fallback, and the MTU negotiated per
 * connection (min of both ports) without touching the device table, so a
 * later connection between two 4096-byte ports gets 4096. Last, a device-wide
 * fatal event reaches the comms on that device through their one health word.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "device.h"
#include "devset.h"
#include "event.h"
#include "ibv.h"
#include "nv_api.h"
#include "param.h"

#include "nvcomm.h"
#include "nvtest.h"

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
	int d = nvt_find_dev("simroce0"), i;

	nvt_pair(d, d, -1, &s, &r);
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
	int big = nvt_find_dev("simib0"), small = nvt_find_dev("simib1");

	nvt_pair(big, small, -1, &s, &r);
	query(s, 0, &a);
	CHECK(a.path_mtu == IBV_MTU_1024);
	CHECK(a.ah_attr.is_global == 0); /* IB, same subnet: LID routed, no GRH */
	query(r, 0, &a);
	CHECK(a.path_mtu == IBV_MTU_1024 && a.ah_attr.is_global == 0);
	CHECK(nv_net_close_send(s) == NV_OK && nv_net_close_recv(r) == NV_OK);
	/* the device table was not lowered: 4096 <-> 4096 still negotiates 4096 */
	CHECK(nv_dev_get(nv_vdev_get(big)->devs[0])->active_mtu == IBV_MTU_4096);
	nvt_pair(big, big, -1, &s, &r);
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
	int d = nvt_find_dev("simroce0");

	CHECK(nv_param_load_from(env_without_sl_tc, NULL) == NV_OK);
	nvt_pair(d, d, 5, &s, &r);
	query(s, 0, &a);
	CHECK(a.ah_attr.sl == 5 && a.ah_attr.grh.traffic_class == 5);
	query(r, 0, &a);
	CHECK(a.ah_attr.sl == 5 && a.ah_attr.grh.traffic_class == 5); /* follows the sender */
	CHECK(nv_net_close_send(s) == NV_OK && nv_net_close_recv(r) == NV_OK);
}

/* Feasible: the device gives the smallest working queues their CQ entries. */
static int plan_feasible(int type, int nqp, int max_cqe, int max_qp_wr)
{
	int min_send = type == NV_COMM_SEND ? NV_MIN_SEND_QP_WR : NV_MIN_CTS_QP_WR;

	return max_qp_wr >= NV_MIN_QP_WR &&
	       max_cqe >= nqp * (min_send + 2) + (type == NV_COMM_RECV) && max_cqe >= 1;
}

static void plan_check_one(int type, int nqp, int max_cqe, int max_qp_wr)
{
	int send = type == NV_COMM_SEND;
	int ws = send ? NV_SEND_QP_WR : NV_RECV_QP_SEND_WR, wr = send ? 1 : NV_RECV_QP_RECV_WR;
	int wf = send ? 0 : NV_MAX_REQUESTS, full, ok, bad = 0;
	int min_send = send ? NV_MIN_SEND_QP_WR : NV_MIN_CTS_QP_WR;
	struct nv_cq_plan p;
	char why[256] = "";

	ws = ws < max_qp_wr ? ws : max_qp_wr;
	wr = wr < max_qp_wr ? wr : max_qp_wr;
	wf = wf < max_qp_wr ? wf : max_qp_wr;
	full = nqp * (ws + wr + 1) + wf;
	ok = nv_cq_plan(type, nqp, max_cqe, max_qp_wr, &p, why, sizeof(why)) == 0;
	if (ok != plan_feasible(type, nqp, max_cqe, max_qp_wr))
		bad = 1;
	else if (!ok)
		bad = why[0] == 0;
	else
		/* every WR that can be outstanding has its CQ entry, within max_cqe */
		bad = p.depth != (nqp * (p.send_wr + p.recv_wr + 1) + p.flush_wr ?: 1) ||
		      p.depth > max_cqe || p.send_wr < min_send || p.send_wr > ws ||
		      p.recv_wr < 1 || p.recv_wr > wr || p.flush_wr > wf ||
		      (!send && p.flush_wr < 1) || p.reduced != (full > max_cqe) ||
		      (!p.reduced && (p.send_wr != ws || p.recv_wr != wr || p.flush_wr != wf));
	if (bad) {
		fprintf(stderr, "nv_cq_plan(%s, nqp %d, max_cqe %d, max_qp_wr %d): ok %d depth %d "
			"send %d recv %d flush %d reduced %d (%s)\n", send ? "send" : "recv", nqp,
			max_cqe, max_qp_wr, ok, p.depth, p.send_wr, p.recv_wr, p.flush_wr,
			p.reduced, why);
		nvt_failures++;
	}
}

/* CQ sizing arithmetic, exhaustively over small limits. */
static void cq_plan(void)
{
	static const int qp_wr[] = { 1, 17, 18, 19, 40, 64, 300, 16384 };
	struct nv_cq_plan p;
	char why[256];
	int t, nqp, cqe, w, before = nvt_failures;

	/* defaults on a large device: nothing lowered */
	CHECK(nv_cq_plan(NV_COMM_SEND, 1, 65535, 16384, &p, why, sizeof(why)) == 0);
	CHECK(p.depth == 514 && p.send_wr == 512 && p.recv_wr == 1 && !p.flush_wr && !p.reduced);
	CHECK(nv_cq_plan(NV_COMM_RECV, 1, 65535, 16384, &p, why, sizeof(why)) == 0);
	CHECK(p.depth == 353 && p.send_wr == 256 && p.recv_wr == 64 && p.flush_wr == 32);
	/* e2e_cq's receiver: 32 entries still carry a working comm */
	CHECK(nv_cq_plan(NV_COMM_RECV, 1, 32, 16384, &p, why, sizeof(why)) == 0 && p.reduced);
	CHECK(p.depth <= 32 && p.send_wr >= NV_MIN_CTS_QP_WR && p.recv_wr >= 1 && p.flush_wr >= 1);
	/* fault_cq's 16 entries too; 8 sender QPs on 80 cannot work */
	CHECK(nv_cq_plan(NV_COMM_SEND, 1, 16, 16384, &p, why, sizeof(why)) == 0 && p.depth <= 16);
	CHECK(nv_cq_plan(NV_COMM_RECV, 1, 16, 16384, &p, why, sizeof(why)) == 0 && p.depth <= 16);
	CHECK(nv_cq_plan(NV_COMM_SEND, 8, 80, 16384, &p, why, sizeof(why)) < 0);
	CHECK(strstr(why, "max_cqe") != NULL);
	for (t = NV_COMM_SEND; t <= NV_COMM_RECV; t++)
		for (nqp = 0; nqp <= 20; nqp++)
			for (w = 0; w < (int)(sizeof(qp_wr) / sizeof(qp_wr[0])); w++)
				for (cqe = 0; cqe <= 1400 && nvt_failures - before < 10; cqe++)
					plan_check_one(t, nqp, cqe, qp_wr[w]);
}

/* Clock reads of the liveness check: sparse for busy pollers only. */
static void liveness_stride(void)
{
	uint32_t st = 0;
	int i;

	CHECK(nv_liveness_stride(0, 0) == 1);
	for (i = 0; i < 10; i++)
		st = nv_liveness_stride(st, NV_LIVENESS_STRIDE_NS / 2);
	CHECK(st == NV_LIVENESS_POLLS); /* busy: 1, 2, 4, ... capped */
	CHECK(nv_liveness_stride(st, NV_LIVENESS_STRIDE_NS) == 1); /* slowed down: every poll */
	CHECK(nv_liveness_stride(1, 5 * NV_LIVENESS_STRIDE_NS) == 1);
	CHECK(nv_liveness_stride(4, 0) == 8);
}

/* The comm's QPs and CQs are built from the plan (2 QPs per connection here). */
static void cq_built(void)
{
	struct nv_comm *s, *r;
	int d = nvt_find_dev("simib0"), i;

	nvt_pair(d, d, -1, &s, &r);
	CHECK(s->dev[0].plan.depth == 2 * (NV_SEND_QP_WR + 1 + 1));
	CHECK(r->dev[0].plan.depth == 2 * (NV_RECV_QP_SEND_WR + NV_RECV_QP_RECV_WR + 1) +
					     NV_MAX_REQUESTS);
	CHECK(s->dev[0].cq->cqe >= s->dev[0].plan.depth);
	CHECK(r->dev[0].cq->cqe >= r->dev[0].plan.depth);
	for (i = 0; i < 2; i++) {
		CHECK(s->qps[i].max_wr == s->dev[0].plan.send_wr);
		CHECK(r->qps[i].max_wr == r->dev[0].plan.send_wr);
		CHECK(r->qps[i].max_recv == r->dev[0].plan.recv_wr);
	}
	CHECK(nv_net_close_send(s) == NV_OK && nv_net_close_recv(r) == NV_OK);
}

/* DEVICE_FATAL on an HCA fails the comms on it at their next call (health word). */
static void device_fatal(void)
{
	struct ibv_async_event ev = { .event_type = IBV_EVENT_DEVICE_FATAL };
	struct nv_comm *s, *r;
	void *req = (void *)1, *mh = NULL;
	char buf[64];
	void *data = buf;
	size_t size = sizeof(buf);
	int tag = 1, d = nvt_find_dev("simib1");

	struct nv_hca *hca;

	nvt_pair(d, d, -1, &s, &r);
	hca = s->dev[0].hca;
	CHECK(nv_net_reg_mr(r, buf, sizeof(buf), NV_MEM_HOST, 0, -1, &mh) == NV_OK);
	CHECK(atomic_load(&s->sink.fatal) == 0 && atomic_load(&r->sink.fatal) == 0);
	nvt_log_clear();
	nv_event_handle(hca, &ev);
	CHECK(nv_net_isend(s, buf, 8, 1, NULL, NULL, &req) == NV_ERR_SYSTEM && req == NULL);
	CHECK(strstr(nvt_warns, "device simib1 failed") != NULL);
	CHECK(nv_net_irecv(r, 1, &data, &size, &tag, &mh, NULL, &req) == NV_ERR_SYSTEM);
	CHECK(strstr(nvt_warns, "device simib1 failed") != NULL);
	CHECK(nv_net_dereg_mr(r, mh) == NV_OK);
	CHECK(nv_net_close_send(s) == NV_OK && nv_net_close_recv(r) == NV_OK);
	CHECK(hca->sinks == NULL); /* both comms detached at close */
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
	cq_plan();
	liveness_stride();
	cq_built();
	knobs_roce();
	mtu_ib();
	traffic_class();
	nvt_log_capture();
	device_fatal();
	nv_devices_fini();
	return nvt_exit("test_qp");
}
