/*
 * Addressing as strict as a fabric (one host): modify_qp(RTR) accepts any
 * locally valid address vector, but requests reach the destination only when
 * the address leads to the port the destination QP lives on.  Otherwise they
 * complete with RETRY_EXC_ERR after the (scaled) timeout:
 *  - IB: a DLID of another port, a QPN that does not exist, a QPN that lives
 *    on another device than the DLID's, a GRH whose DGID is not that port's,
 *    a port of another subnet by LID or by GRH without its FLID (with a GRH
 *    to its routable GID and DLID = FLID it is delivered);
 *  - RoCE: a DGID nobody has, a DGID of another device's port;
 *  - a handle from another fabric (a child process on its own fabric).
 * The correct address works on the same QPs' twins (control case).
 */
#define _GNU_SOURCE
#include <sys/wait.h>

#include "svt.h"

#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

/* a -> b with the attributes tweak() changes; returns the write's status. */
static int try_write(const char *da, const char *db, void (*tweak)(struct ibv_qp_attr *,
								   const struct svt_ep *))
{
	struct svt_ep a, b;
	struct svt_info ai, bi;
	struct ibv_qp_attr at;
	struct ibv_wc wc;
	uint64_t t0;

	svt_ep_init(&a, da, 16, 16, 4096, ACC);
	svt_ep_init(&b, db, 16, 16, 4096, ACC);
	ai = svt_ep_info(&a);
	bi = svt_ep_info(&b);
	svt_connect(&b, &ai, 14, 7);
	SVT_EQ(svt_to_init(&a, ACC), 0);
	svt_rtr_attr(&a, &bi, &at);
	if (tweak)
		tweak(&at, &b);
	SVT_EQ(ibv_modify_qp(a.qp, &at, SVT_RTR_MASK), 0);	/* never an RTR error */
	svt_rts_attr(&at, 14, 7, 7);
	SVT_EQ(ibv_modify_qp(a.qp, &at, SVT_RTS_MASK), 0);
	memset(a.buf, 0x5a, 64);
	t0 = svt_now_ns();
	SVT_EQ(svt_post_write(&a, IBV_WR_RDMA_WRITE, (uintptr_t)a.buf, 64, a.mr->lkey, bi.addr,
			      bi.rkey, 0, IBV_SEND_SIGNALED, 1), 0);
	wc = svt_poll1(a.cq, 20000);
	if (wc.status == IBV_WC_SUCCESS)
		SVT_EQ(b.buf[63], 0x5a);
	else
		SVT_CHECK(svt_now_ns() - t0 > 5000000ull);	/* after the retry timeout (5.4 ms) */
	svt_ep_fini(&a);
	svt_ep_fini(&b);
	return wc.status;
}

static void wrong_lid(struct ibv_qp_attr *at, const struct svt_ep *b)
{
	(void)b;
	at->ah_attr.dlid = (uint16_t)(at->ah_attr.dlid + 5);
}

static void no_qpn(struct ibv_qp_attr *at, const struct svt_ep *b)
{
	(void)b;
	at->dest_qp_num = 0xfff0f;
}

static void bad_dgid(struct ibv_qp_attr *at, const struct svt_ep *b)
{
	(void)b;
	at->ah_attr.grh.dgid.raw[5] ^= 0x20;	/* a GID nobody has */
}

static void ib_grh(struct ibv_qp_attr *at, const struct svt_ep *b)
{
	at->ah_attr.is_global = 1;
	at->ah_attr.grh.sgid_index = 0;
	at->ah_attr.grh.hop_limit = 1;
	SVT_EQ(ibv_query_gid(b->ctx, 1, 0, &at->ah_attr.grh.dgid), 0);
}

static void ib_grh_wrong(struct ibv_qp_attr *at, const struct svt_ep *b)
{
	ib_grh(at, b);
	at->ah_attr.grh.dgid.raw[15] ^= 1;
}

/* GRH to the routable GID (index 1) with DLID = the FLID */
static void ib_flid(struct ibv_qp_attr *at, const struct svt_ep *b)
{
	ib_grh(at, b);
	SVT_EQ(ibv_query_gid(b->ctx, 1, 1, &at->ah_attr.grh.dgid), 0);
	at->ah_attr.dlid = 0xc042;
}

/* simib0's LID (simib1's is 3, simib0's 1): the QPN lives on another port */
static void other_dev_lid(struct ibv_qp_attr *at, const struct svt_ep *b)
{
	(void)b;
	at->ah_attr.dlid = (uint16_t)(at->ah_attr.dlid - 2);
}

/* The peer lives on another fabric: its handle must not connect here. */
static void foreign_handle(void)
{
	struct svt_pipe p;
	struct svt_ep a;
	struct svt_info ai, bi;
	struct ibv_wc wc;
	pid_t pid;
	int st;

	svt_pipe_init(&p);
	pid = fork();
	SVT_CHECK(pid >= 0);
	if (!pid) {
		char fab[128];
		struct svt_ep b;

		svt_pipe_side(&p, 1);
		snprintf(fab, sizeof(fab), "%s-other", getenv("SIMVERBS_FABRIC") ?
			 getenv("SIMVERBS_FABRIC") : "sv-addr");
		setenv("SIMVERBS_FABRIC", fab, 1);
		svt_ep_init(&b, "simib0", 16, 16, 4096, ACC);
		bi = svt_ep_info(&b);
		svt_send(&p, &bi, sizeof(bi));
		svt_recv(&p, &ai, sizeof(ai));
		svt_connect(&b, &ai, 14, 7);
		svt_sync(&p);
		svt_ep_fini(&b);
		_exit(0);
	}
	svt_pipe_side(&p, 0);
	svt_ep_init(&a, "simib0", 16, 16, 4096, ACC);
	ai = svt_ep_info(&a);
	svt_recv(&p, &bi, sizeof(bi));
	svt_send(&p, &ai, sizeof(ai));
	SVT_CHECK(bi.qpn != ai.qpn);	/* fabrics hand out different QPNs */
	svt_connect(&a, &bi, 14, 7);
	SVT_EQ(svt_post_write(&a, IBV_WR_RDMA_WRITE, (uintptr_t)a.buf, 64, a.mr->lkey, bi.addr,
			      bi.rkey, 0, IBV_SEND_SIGNALED, 1), 0);
	wc = svt_poll1(a.cq, 20000);
	SVT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR);
	svt_sync(&p);
	SVT_EQ(waitpid(pid, &st, 0), pid);
	SVT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	svt_ep_fini(&a);
}

int main(void)
{
	/* two devices of each link layer; GID tables of the RoCE pair coincide
	 * (one netdev), so a DGID names a port but the QPN decides which */
	setenv("SIMVERBS_DEVICES", "simib0:ll=ib;simib1:ll=ib;simroce0:ll=eth;"
	       "simib2:ll=ib,subnet=0x42,flid=0xc042", 1);
	svt_control_fn_get();
	SVT_EQ(svt_control("timeout-scale 0.01"), 0);
	SVT_EQ(try_write("simib0", "simib0", NULL), IBV_WC_SUCCESS);
	SVT_EQ(try_write("simib0", "simib1", NULL), IBV_WC_SUCCESS);
	SVT_EQ(try_write("simib0", "simib0", wrong_lid), IBV_WC_RETRY_EXC_ERR);
	SVT_EQ(try_write("simib0", "simib0", no_qpn), IBV_WC_RETRY_EXC_ERR);
	SVT_EQ(try_write("simib0", "simib1", ib_grh), IBV_WC_SUCCESS);
	SVT_EQ(try_write("simib0", "simib1", ib_grh_wrong), IBV_WC_RETRY_EXC_ERR);
	SVT_EQ(try_write("simib0", "simib1", other_dev_lid), IBV_WC_RETRY_EXC_ERR);
	/* simib2 is on subnet 0x42 behind a router: not by LID, not by GRH with
	 * its LID; a GRH to its routable GID with DLID = its FLID is delivered */
	SVT_EQ(try_write("simib0", "simib2", NULL), IBV_WC_RETRY_EXC_ERR);
	SVT_EQ(try_write("simib0", "simib2", ib_grh), IBV_WC_RETRY_EXC_ERR);
	SVT_EQ(try_write("simib0", "simib2", ib_flid), IBV_WC_SUCCESS);
	SVT_EQ(try_write("simroce0", "simroce0", NULL), IBV_WC_SUCCESS);
	SVT_EQ(try_write("simroce0", "simroce0", bad_dgid), IBV_WC_RETRY_EXC_ERR);
	foreign_handle();
	printf("addressing: DLID, QPN, GRH DGID, subnets, RoCE DGID, foreign fabric: ok\n");
	return 0;
}
