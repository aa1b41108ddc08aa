/*
 * Stream test between two processes: 50,000 WRITE_WITH_IMM of mixed sizes
 * into 64 slots, with credits returned by the receiver through RDMA writes
 * into the sender's memory (polled there, as NCCL polls its CTS fifo).  The
 * receiver checks every immediate arrives once and in order, and the slot's
 * data is complete when its completion is polled.  Small CQs make the rings
 * wrap many times; selective signalling exercises send-queue occupancy.
 * Also the ibv_wr_* API (ibv_create_qp_ex) for writes and inline sends.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "svt.h"

#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define SLOTS 64
#define SLOT 4096
#define N 50000

static struct svt_pipe P;

static uint32_t msg_len(uint32_t i)
{
	return i % 3 == 0 ? SLOT : (i % 3 == 1 ? 64 : 0);
}

static void fill_slot(char *p, uint32_t i)
{
	uint32_t len = msg_len(i);

	for (uint32_t k = 0; k + 4 <= len; k += 4)
		memcpy(p + k, &(uint32_t){ i ^ k }, 4);
}

static bool slot_ok(const char *p, uint32_t i)
{
	uint32_t len = msg_len(i);

	for (uint32_t k = 0; k + 4 <= len; k += 4) {
		uint32_t v;

		memcpy(&v, p + k, 4);
		if (v != (i ^ k))
			return false;
	}
	return true;
}

static void exchange(struct svt_ep *e, struct svt_info *peer, bool child)
{
	struct svt_info me = svt_ep_info(e);

	if (child) {
		svt_recv(&P, peer, sizeof(*peer));
		svt_send(&P, &me, sizeof(me));
	} else {
		svt_send(&P, &me, sizeof(me));
		svt_recv(&P, peer, sizeof(*peer));
	}
	svt_connect(e, peer, 14, 7);
	svt_sync(&P);
}

static void receiver(void)
{
	struct svt_ep e;
	struct svt_info peer;
	volatile uint64_t *credit;
	uint32_t expect = 0, credits = 0;

	svt_ep_init(&e, "simib0", 128, 128, SLOTS * SLOT + 4096, ACC);
	credit = (volatile uint64_t *)(e.buf + SLOTS * SLOT);
	exchange(&e, &peer, true);
	for (int i = 0; i < 100; i++)
		SVT_EQ(svt_post_recv(&e, 0, 0, 0, (uint64_t)i), 0);
	while (expect < N) {
		struct ibv_wc wc[16];
		int n = ibv_poll_cq(e.cq, 16, wc);

		SVT_CHECK(n >= 0);
		for (int k = 0; k < n; k++) {
			SVT_EQ(wc[k].status, IBV_WC_SUCCESS);
			if (wc[k].opcode == IBV_WC_RDMA_WRITE)
				continue;	/* our credit write */
			SVT_EQ(wc[k].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
			SVT_EQ(ntohl(wc[k].imm_data), expect);
			SVT_EQ(wc[k].byte_len, msg_len(expect));
			SVT_CHECK(slot_ok(e.buf + (expect % SLOTS) * SLOT, expect));
			expect++;
			SVT_EQ(svt_post_recv(&e, 0, 0, 0, expect), 0);
		}
		if (n) {	/* return credits: the count of consumed messages */
			*credit = expect;
			SVT_EQ(svt_post_write(&e, IBV_WR_RDMA_WRITE, (uintptr_t)credit, 8,
					      e.mr->lkey, peer.addr + SLOTS * SLOT, peer.rkey, 0,
					      ++credits % 32 == 0 ? IBV_SEND_SIGNALED : 0, 0), 0);
		}
	}
	svt_sync(&P);
	while (ibv_poll_cq(e.cq, 1, &(struct ibv_wc){ 0 }) > 0)
		;
	svt_ep_fini(&e);
	exit(0);
}

static void sender(void)
{
	struct svt_ep e;
	struct svt_info peer;
	volatile uint64_t *credit;
	uint32_t sent = 0, unsignalled = 0;

	svt_ep_init(&e, "simib0", 16, 128, SLOTS * SLOT + 4096, ACC);
	credit = (volatile uint64_t *)(e.buf + SLOTS * SLOT);
	exchange(&e, &peer, false);
	while (sent < N) {
		struct ibv_wc wc[8];
		int n = ibv_poll_cq(e.cq, 8, wc);
		int rc;

		for (int k = 0; k < n; k++)
			SVT_EQ(wc[k].status, IBV_WC_SUCCESS);
		if (sent - *credit >= SLOTS)
			continue;
		fill_slot(e.buf + (sent % SLOTS) * SLOT, sent);
		rc = svt_post_write(&e, IBV_WR_RDMA_WRITE_WITH_IMM,
				    (uintptr_t)e.buf + (sent % SLOTS) * SLOT, msg_len(sent),
				    e.mr->lkey, peer.addr + (sent % SLOTS) * SLOT, peer.rkey,
				    htonl(sent), ++unsignalled == 16 ? IBV_SEND_SIGNALED : 0, sent);
		if (rc == ENOMEM) {	/* send queue full until a completion is polled */
			unsignalled--;
			continue;
		}
		SVT_EQ(rc, 0);
		if (unsignalled == 16)
			unsignalled = 0;
		sent++;
	}
	svt_sync(&P);
	while (ibv_poll_cq(e.cq, 1, &(struct ibv_wc){ 0 }) > 0)
		;
	svt_ep_fini(&e);
}

/* ibv_create_cq_ex: a second send CQ polled with ibv_start_poll & co. */
static void check_cq_ex(struct svt_ep *a, const struct svt_info *bi)
{
	struct ibv_cq_init_attr_ex ca = { .cqe = 8, .wc_flags = IBV_WC_STANDARD_FLAGS };
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC, .cap = { 4, 1, 1, 1, 0 } };
	struct ibv_cq_ex *cx;
	struct ibv_qp *save = a->qp;
	int n = 0;

	ca.wc_flags |= IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
	errno = 0;
	SVT_CHECK(!ibv_create_cq_ex(a->ctx, &ca) && errno == EOPNOTSUPP);
	ca.wc_flags = IBV_WC_STANDARD_FLAGS;
	cx = ibv_create_cq_ex(a->ctx, &ca);
	SVT_CHECK(cx);
	SVT_EQ(ibv_start_poll(cx, &(struct ibv_poll_cq_attr){ 0 }), ENOENT);
	qa.send_cq = qa.recv_cq = ibv_cq_ex_to_cq(cx);
	a->qp = ibv_create_qp(a->pd, &qa);
	SVT_CHECK(a->qp);
	/* an unconnected QP: to ERR, then posts flush into the extended CQ */
	SVT_EQ(ibv_modify_qp(a->qp, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_ERR },
			     IBV_QP_STATE), 0);
	for (uint64_t i = 0; i < 3; i++)
		SVT_EQ(svt_post_write(a, IBV_WR_RDMA_WRITE, (uintptr_t)a->buf, 8, a->mr->lkey,
				      bi->addr, bi->rkey, 0, IBV_SEND_SIGNALED, 40 + i), 0);
	SVT_EQ(ibv_start_poll(cx, &(struct ibv_poll_cq_attr){ 0 }), 0);
	do {
		SVT_EQ(cx->wr_id, 40 + (uint64_t)n);
		SVT_EQ(cx->status, IBV_WC_WR_FLUSH_ERR);
		SVT_EQ(ibv_wc_read_qp_num(cx), a->qp->qp_num);
		n++;
	} while (ibv_next_poll(cx) == 0);
	ibv_end_poll(cx);
	SVT_EQ(n, 3);
	SVT_EQ(ibv_destroy_qp(a->qp), 0);
	SVT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cx)), 0);
	a->qp = save;
}

/* The ibv_wr_* API in one process, loopback. */
static void check_wr_api(void)
{
	struct svt_ep a, b;
	struct svt_info bi;
	struct ibv_qp_init_attr_ex xa;
	struct ibv_qp_ex *x;
	struct ibv_qp_attr at;
	struct ibv_qp *plain;

	svt_ep_init(&a, "simib0", 16, 16, 65536, ACC);
	svt_ep_init(&b, "simib0", 16, 16, 65536, ACC);
	SVT_CHECK(!ibv_qp_to_qp_ex(a.qp) && errno == EOPNOTSUPP);
	plain = a.qp;
	memset(&xa, 0, sizeof(xa));
	xa.send_cq = xa.recv_cq = a.cq;
	xa.qp_type = IBV_QPT_RC;
	xa.cap = (struct ibv_qp_cap){ 16, 16, 2, 2, 64 };
	xa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	xa.pd = a.pd;
	xa.send_ops_flags = IBV_QP_EX_WITH_BIND_MW;	/* memory windows: not emulated */
	errno = 0;
	SVT_CHECK(!ibv_create_qp_ex(a.ctx, &xa) && errno == EOPNOTSUPP);
	xa.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND;
	a.qp = ibv_create_qp_ex(a.ctx, &xa);
	SVT_CHECK(a.qp);
	SVT_EQ(ibv_destroy_qp(plain), 0);
	bi = svt_ep_info(&b);
	svt_connect(&a, &bi, 14, 7);
	{
		struct svt_info ai = svt_ep_info(&a);

		svt_connect(&b, &ai, 14, 7);
	}
	x = ibv_qp_to_qp_ex(a.qp);
	SVT_CHECK(x);
	memset(a.buf, 0x42, 4096);
	SVT_EQ(svt_post_recv(&b, (uintptr_t)b.buf + 8192, 64, b.mr->lkey, 5), 0);
	ibv_wr_start(x);
	x->wr_id = 1;
	x->wr_flags = 0;
	ibv_wr_rdma_write(x, bi.rkey, bi.addr);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 4096);
	x->wr_id = 2;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	ibv_wr_set_inline_data(x, "hello", 6);
	SVT_EQ(ibv_wr_complete(x), 0);
	SVT_EQ(svt_poll1(a.cq, 20000).wr_id, 2);
	{
		struct ibv_wc wc = svt_poll1(b.cq, 20000);

		SVT_EQ(wc.wr_id, 5);
		SVT_EQ(wc.byte_len, 6);
	}
	SVT_CHECK(!strcmp(b.buf + 8192, "hello"));
	check_cq_ex(&a, &bi);
	SVT_EQ(b.buf[4095], 0x42);
	memset(&at, 0, sizeof(at));
	svt_ep_fini(&a);
	svt_ep_fini(&b);
	printf("ibv_create_qp_ex + ibv_wr_* (write, inline send), ibv_create_cq_ex: ok\n");
}

/* Four threads post on four QPs sharing one send CQ; the main thread polls
 * it: every completion arrives once, in order per QP. */
enum { NT = 4, PER_T = 20000 };

struct tq {
	struct ibv_qp *qp;
	struct svt_ep *ep;
	struct svt_info dst;
	_Atomic uint64_t done;	/* completions seen by the poller */
};

static void *poster(void *arg)
{
	struct tq *t = arg;
	struct ibv_sge sge = { (uintptr_t)t->ep->buf, 64, t->ep->mr->lkey };

	for (uint64_t i = 0; i < PER_T;) {
		struct ibv_send_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;
		int rc;

		wr.wr.rdma.remote_addr = t->dst.addr;
		wr.wr.rdma.rkey = t->dst.rkey;
		rc = ibv_post_send(t->qp, &wr, &bad);
		if (rc == ENOMEM)
			continue;
		SVT_EQ(rc, 0);
		i++;
	}
	return NULL;
}

static void check_threads(void)
{
	struct svt_ep hub, dst;
	struct tq t[NT];
	pthread_t th[NT];
	struct ibv_qp *hq[NT], *dq[NT];
	uint64_t total = 0;

	svt_ep_init(&hub, "simib0", NT * 128, 128, 65536, ACC);
	svt_ep_init(&dst, "simib0", 16, 16, 65536, ACC);
	for (int i = 0; i < NT; i++) {
		struct ibv_qp_init_attr qa = { .send_cq = hub.cq, .recv_cq = hub.cq,
					       .qp_type = IBV_QPT_RC,
					       .cap = { 128, 1, 1, 1, 0 } };
		struct svt_ep h = hub, d = dst;
		struct svt_info hi, di;

		hq[i] = ibv_create_qp(hub.pd, &qa);
		qa.send_cq = qa.recv_cq = dst.cq;
		dq[i] = ibv_create_qp(dst.pd, &qa);
		SVT_CHECK(hq[i] && dq[i]);
		h.qp = hq[i];
		d.qp = dq[i];
		hi = svt_ep_info(&h);
		di = svt_ep_info(&d);
		svt_connect(&h, &di, 14, 7);
		svt_connect(&d, &hi, 14, 7);
		t[i].qp = hq[i];
		t[i].ep = &hub;
		t[i].dst = di;
		atomic_store(&t[i].done, 0);
	}
	for (int i = 0; i < NT; i++)
		SVT_EQ(pthread_create(&th[i], NULL, poster, &t[i]), 0);
	while (total < (uint64_t)NT * PER_T) {
		struct ibv_wc wc[32];
		int n = ibv_poll_cq(hub.cq, 32, wc);

		SVT_CHECK(n >= 0);
		for (int k = 0; k < n; k++) {
			int q = -1;

			SVT_EQ(wc[k].status, IBV_WC_SUCCESS);
			for (int i = 0; i < NT; i++)
				if (hq[i]->qp_num == wc[k].qp_num)
					q = i;
			SVT_CHECK(q >= 0);
			SVT_EQ(wc[k].wr_id, atomic_load(&t[q].done));
			atomic_fetch_add(&t[q].done, 1);
		}
		total += (uint64_t)n;
	}
	for (int i = 0; i < NT; i++) {
		SVT_EQ(pthread_join(th[i], NULL), 0);
		SVT_EQ(ibv_destroy_qp(hq[i]), 0);
		SVT_EQ(ibv_destroy_qp(dq[i]), 0);
	}
	svt_ep_fini(&hub);
	svt_ep_fini(&dst);
	printf("%d threads x %d writes on QPs sharing one CQ: all completions, in order: ok\n",
	       NT, PER_T);
}

int main(void)
{
	pid_t pid;
	uint64_t t0;

	svt_control_fn_get();
	check_wr_api();
	check_threads();
	pid = svt_fork_peer(&P, receiver);
	t0 = svt_now_ns();
	sender();
	SVT_EQ(svt_wait_child(pid), 0);
	printf("%d write-with-imm with credits, in order, data complete: ok (%.2f s)\n", N,
	       (double)(svt_now_ns() - t0) / 1e9);
	return 0;
}
