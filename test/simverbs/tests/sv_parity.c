/*
 * sv_parity - the simverbs features that NCCL-parity tests of the plugin
 * rely on, checked at the verbs level: mlx5-like ECE (options before RTR,
 * set_ece rules, the intersection from RTR on), an iWARP device (transport,
 * node type, no RDMA Write with immediate), IB subnets joined by a router
 * (LID within, GRH + FLID across: any other address is accepted by RTR and
 * its write times out), rtr_timeouts, ibv_query_port_speed.
 */
#include "svt.h"

static void ece(void)
{
	struct ibv_ece x = { 0 };
	struct svt_ep a, b;
	struct svt_info ai, bi;

	svt_ep_init(&a, "e0", 16, 8, 4096, IBV_ACCESS_LOCAL_WRITE);
	svt_ep_init(&b, "e1", 16, 8, 4096, IBV_ACCESS_LOCAL_WRITE);
	SVT_EQ(ibv_query_ece(a.qp, &x), 0);
	SVT_EQ(x.vendor_id, 0x15b3);
	SVT_EQ(x.options, 0x3f); /* a new QP: the device's options */
	SVT_EQ(ibv_set_ece(a.qp, &(struct ibv_ece){ .vendor_id = 0x1234, .options = 1 }), EINVAL);
	SVT_EQ(ibv_set_ece(a.qp, &(struct ibv_ece){ .vendor_id = 0x15b3, .comp_mask = 1 }), EINVAL);
	SVT_EQ(ibv_query_ece(b.qp, &x), 0);
	SVT_EQ(ibv_set_ece(a.qp, &x), 0); /* b's options, before RTR */
	ai = svt_ep_info(&a);
	bi = svt_ep_info(&b);
	svt_connect(&a, &bi, 14, 7);
	svt_connect(&b, &ai, 14, 7);
	SVT_EQ(ibv_query_ece(a.qp, &x), 0);
	SVT_EQ(x.options, 0x3f & 0x15); /* the intersection */
	SVT_EQ(ibv_query_ece(b.qp, &x), 0);
	SVT_EQ(x.options, 0x15); /* never given a's: its own */
	SVT_EQ(ibv_set_ece(a.qp, &x), EINVAL); /* after RTR */
	svt_ep_fini(&a);
	svt_ep_fini(&b);
}

static void iwarp(void)
{
	struct svt_ep a;
	struct svt_info ai;

	svt_ep_init(&a, "iw0", 16, 8, 4096,
		    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	SVT_EQ(a.ctx->device->transport_type, IBV_TRANSPORT_IWARP);
	SVT_EQ(a.ctx->device->node_type, IBV_NODE_RNIC);
	SVT_EQ(a.pattr.link_layer, IBV_LINK_LAYER_ETHERNET);
	ai = svt_ep_info(&a);
	svt_connect(&a, &ai, 14, 7);
	SVT_EQ(svt_post_write(&a, IBV_WR_RDMA_WRITE_WITH_IMM, (uintptr_t)a.buf, 8, a.mr->lkey,
			      ai.addr, ai.rkey, 1, IBV_SEND_SIGNALED, 1), EINVAL);
	SVT_EQ(svt_post_write(&a, IBV_WR_RDMA_WRITE, (uintptr_t)a.buf, 8, a.mr->lkey, ai.addr + 8,
			      ai.rkey, 0, IBV_SEND_SIGNALED, 2), 0);
	SVT_EQ(svt_poll1(a.cq, 2000).status, IBV_WC_SUCCESS);
	svt_ep_fini(&a);
}

/* a's write with RTR attributes at (b is connected back to a over GRH + FLID):
 * its status.  An address with no path is accepted by RTR and the write times
 * out. */
static int router_write(struct svt_ep *a, struct ibv_qp_attr *at)
{
	struct ibv_qp_attr rts;
	int st;

	SVT_EQ(svt_to_init(a, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE), 0);
	SVT_EQ(ibv_modify_qp(a->qp, at, SVT_RTR_MASK), 0);
	svt_rts_attr(&rts, 14, 7, 7);
	SVT_EQ(ibv_modify_qp(a->qp, &rts, SVT_RTS_MASK), 0);
	SVT_EQ(svt_post_write(a, IBV_WR_RDMA_WRITE, 0, 0, 0, 0, 0, 0, IBV_SEND_SIGNALED, 1), 0);
	st = svt_poll1(a->cq, 20000).status;
	rts.qp_state = IBV_QPS_RESET;
	SVT_EQ(ibv_modify_qp(a->qp, &rts, IBV_QP_STATE), 0);
	return st;
}

static void router(void)
{
	struct svt_ep a, b;
	struct svt_info ai, bi;
	struct ibv_qp_attr at;
	union ibv_gid g, ga;

	svt_ep_init(&a, "ra", 16, 8, 0, 0);
	svt_ep_init(&b, "rb", 16, 8, 0, 0);
	SVT_EQ(ibv_query_gid(b.ctx, 1, 1, &g), 0); /* routable GID: FLID 0x201, subnet 2 */
	SVT_EQ(g.raw[4] << 8 | g.raw[5], 0x201);
	SVT_EQ(g.raw[6] << 8 | g.raw[7], 2);
	SVT_EQ(ibv_query_gid(a.ctx, 1, 1, &ga), 0);
	ai = svt_ep_info(&a);
	bi = svt_ep_info(&b);
	SVT_EQ(svt_to_init(&b, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE), 0);
	svt_rtr_attr(&b, &ai, &at); /* b -> a: GRH + a's FLID */
	at.ah_attr.is_global = 1;
	at.ah_attr.grh.dgid = ga;
	at.ah_attr.grh.sgid_index = 1;
	at.ah_attr.grh.hop_limit = 255;
	at.ah_attr.dlid = 0x101;
	SVT_EQ(ibv_modify_qp(b.qp, &at, SVT_RTR_MASK), 0);
	svt_rts_attr(&at, 14, 7, 7);
	SVT_EQ(ibv_modify_qp(b.qp, &at, SVT_RTS_MASK), 0);
	svt_rtr_attr(&a, &bi, &at); /* by LID: another subnet, no path */
	SVT_EQ(router_write(&a, &at), IBV_WC_RETRY_EXC_ERR);
	at.ah_attr.is_global = 1; /* GRH but DLID = LID: the router drops it */
	at.ah_attr.grh.dgid = g;
	at.ah_attr.grh.sgid_index = 1;
	at.ah_attr.grh.hop_limit = 255;
	SVT_EQ(router_write(&a, &at), IBV_WC_RETRY_EXC_ERR);
	at.ah_attr.dlid = 0x201; /* GRH + FLID */
	SVT_EQ(router_write(&a, &at), IBV_WC_SUCCESS);
	svt_ep_fini(&a);
	svt_ep_fini(&b);
}

static void rtr_timeouts(void)
{
	struct svt_ep a;
	struct svt_info ai;
	struct ibv_qp_attr at;

	svt_ep_init(&a, "rt", 16, 8, 0, 0);
	ai = svt_ep_info(&a);
	SVT_EQ(svt_to_init(&a, IBV_ACCESS_LOCAL_WRITE), 0);
	svt_rtr_attr(&a, &ai, &at);
	SVT_EQ(ibv_modify_qp(a.qp, &at, SVT_RTR_MASK), ETIMEDOUT);
	SVT_EQ(ibv_modify_qp(a.qp, &at, SVT_RTR_MASK), ETIMEDOUT);
	SVT_EQ(ibv_modify_qp(a.qp, &at, SVT_RTR_MASK), 0);
	svt_ep_fini(&a);
}

static void port_speed(void)
{
	int (*qps)(struct ibv_context *, uint8_t, uint64_t *) =
		(int (*)(struct ibv_context *, uint8_t, uint64_t *))(uintptr_t)dlsym(
			RTLD_DEFAULT, "ibv_query_port_speed");
	struct ibv_context *c;
	uint64_t s = 0;

	SVT_CHECK(qps);
	c = svt_open("sp");
	SVT_EQ(qps(c, 1, &s), 0);
	SVT_EQ(s, 1234); /* speed_mbps=123400, in 100 Mb/s */
	SVT_EQ(qps(c, 2, &s), EINVAL);
	SVT_EQ(ibv_close_device(c), 0);
	c = svt_open("e0");
	SVT_EQ(qps(c, 1, &s), 0);
	SVT_EQ(s, 2000); /* HDR 4x */
	SVT_EQ(ibv_close_device(c), 0);
}

int main(void)
{
	setenv("SIMVERBS_DEVICES",
	       "e0:ll=ib,ece_vendor=0x15b3,ece_options=0x3f;"
	       "e1:ll=ib,ece_vendor=0x15b3,ece_options=0x15;"
	       "iw0:transport=iwarp;"
	       "ra:ll=ib,subnet=1,flid=0x101;rb:ll=ib,subnet=2,flid=0x201;"
	       "rt:ll=ib,rtr_timeouts=2;sp:ll=ib,speed_mbps=123400", 1);
	svt_control_fn_get();
	ece();
	iwarp();
	router();
	rtr_timeouts();
	port_speed();
	printf("sv_parity: ok\n");
	return 0;
}
