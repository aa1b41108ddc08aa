/*
 * RDMA atomics as rxe and mlx5 answer them (IBV_ATOMIC_HCA):
 *  - FETCH_AND_ADD and CMP_AND_SWP return the value found into the local SGE
 *    (host byte order), through ibv_post_send and the ibv_wr_* builder;
 *  - atomic with respect to each other: two processes adding to one word, one
 *    through a QP from another process, one through a QP within the target's
 *    process, lose no add and see every value once;
 *  - ordered after the writes before them on the QP: a responder that sees
 *    the added value sees the data written before it;
 *  - errors: a misaligned target or a responder with max_dest_rd_atomic 0
 *    (also for READ): REM_INV_REQ_ERR; no REMOTE_ATOMIC on the MR or on the
 *    responder QP, a bad rkey: REM_ACCESS_ERR; a local SGE without
 *    LOCAL_WRITE: LOC_PROT_ERR; a length other than 8: EINVAL at post.
 */
#include "svt.h"

#define AT_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
		   IBV_ACCESS_REMOTE_ATOMIC)
#define RACE_N 4096
#define RACE_CHAIN 32

static const char *dev = "simib0";

/* INIT -> RTR -> RTS toward r with the given access and responder resources. */
static void at_connect(struct svt_ep *e, const struct svt_info *r, int access, int dest_rd)
{
	struct ibv_qp_attr a;

	SVT_EQ(svt_to_init(e, access), 0);
	svt_rtr_attr(e, r, &a);
	a.max_dest_rd_atomic = (uint8_t)dest_rd;
	SVT_EQ(ibv_modify_qp(e->qp, &a, SVT_RTR_MASK), 0);
	svt_rts_attr(&a, 14, 7, 7);
	SVT_EQ(ibv_modify_qp(e->qp, &a, SVT_RTS_MASK), 0);
}

static int post_atomic(struct svt_ep *e, enum ibv_wr_opcode op, void *local, uint32_t len,
		       uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t cmp_add, uint64_t swap,
		       uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)local, .length = len, .lkey = lkey };
	struct ibv_send_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.atomic.remote_addr = raddr;
	wr.wr.atomic.rkey = rkey;
	wr.wr.atomic.compare_add = cmp_add;
	wr.wr.atomic.swap = swap;
	return ibv_post_send(e->qp, &wr, &bad);
}

/* a <-> b within this process; b's MR registered with mr_access. */
static void pair(struct svt_ep *a, struct svt_ep *b, int mr_access, int b_qp_access, int b_dest_rd)
{
	struct svt_info ia, ib;

	svt_ep_init(a, dev, 64, 16, 4096, AT_ACCESS);
	svt_ep_init(b, dev, 64, 16, 4096, mr_access);
	ia = svt_ep_info(a);
	ib = svt_ep_info(b);
	at_connect(a, &ib, AT_ACCESS, 1);
	at_connect(b, &ia, b_qp_access, b_dest_rd);
}

static void check_values(void)
{
	struct svt_ep a, b;
	uint64_t *tgt, *ret;
	struct ibv_wc wc;
	struct ibv_qp_ex *x;

	pair(&a, &b, AT_ACCESS, AT_ACCESS, 1);
	tgt = (uint64_t *)b.buf;
	ret = (uint64_t *)a.buf;
	tgt[1] = 0x1122334455667788ull;
	SVT_EQ(post_atomic(&a, IBV_WR_ATOMIC_FETCH_AND_ADD, ret, 8, a.mr->lkey,
			   (uintptr_t)&tgt[1], b.mr->rkey, 0x10, 0, 1), 0);
	wc = svt_poll1(a.cq, 5000);
	SVT_EQ(wc.status, IBV_WC_SUCCESS);
	SVT_EQ(wc.opcode, IBV_WC_FETCH_ADD);
	SVT_EQ(wc.byte_len, 8);
	SVT_CHECK(ret[0] == 0x1122334455667788ull && tgt[1] == 0x1122334455667798ull);
	/* compare fails: nothing swapped, the value returned */
	SVT_EQ(post_atomic(&a, IBV_WR_ATOMIC_CMP_AND_SWP, &ret[1], 8, a.mr->lkey,
			   (uintptr_t)&tgt[1], b.mr->rkey, 5, 99, 2), 0);
	wc = svt_poll1(a.cq, 5000);
	SVT_EQ(wc.status, IBV_WC_SUCCESS);
	SVT_EQ(wc.opcode, IBV_WC_COMP_SWAP);
	SVT_CHECK(ret[1] == 0x1122334455667798ull && tgt[1] == 0x1122334455667798ull);
	/* compare matches: swapped */
	SVT_EQ(post_atomic(&a, IBV_WR_ATOMIC_CMP_AND_SWP, &ret[2], 8, a.mr->lkey,
			   (uintptr_t)&tgt[1], b.mr->rkey, 0x1122334455667798ull, 99, 3), 0);
	wc = svt_poll1(a.cq, 5000);
	SVT_EQ(wc.status, IBV_WC_SUCCESS);
	SVT_CHECK(ret[2] == 0x1122334455667798ull && tgt[1] == 99);
	/* a wrap-around add */
	tgt[2] = UINT64_MAX;
	SVT_EQ(post_atomic(&a, IBV_WR_ATOMIC_FETCH_AND_ADD, &ret[3], 8, a.mr->lkey,
			   (uintptr_t)&tgt[2], b.mr->rkey, 2, 0, 4), 0);
	SVT_EQ(svt_poll1(a.cq, 5000).status, IBV_WC_SUCCESS);
	SVT_CHECK(ret[3] == UINT64_MAX && tgt[2] == 1);
	/* a length other than 8: refused at post */
	SVT_EQ(post_atomic(&a, IBV_WR_ATOMIC_FETCH_AND_ADD, ret, 4, a.mr->lkey,
			   (uintptr_t)&tgt[1], b.mr->rkey, 1, 0, 5), EINVAL);
	SVT_EQ(svt_poll_for(a.cq, &wc, 1, 20), 0);
	svt_ep_fini(&a);
	svt_ep_fini(&b);

	/* the extended API: a QP with the atomic send ops, the wr_* builders */
	{
		struct ibv_qp_init_attr_ex qa;
		struct svt_info ia, ib;
		struct ibv_qp *q;

		svt_ep_init(&a, dev, 64, 16, 4096, AT_ACCESS);
		svt_ep_init(&b, dev, 64, 16, 4096, AT_ACCESS);
		memset(&qa, 0, sizeof(qa));
		qa.send_cq = a.cq;
		qa.recv_cq = a.cq;
		qa.qp_type = IBV_QPT_RC;
		qa.cap.max_send_wr = 8;
		qa.cap.max_recv_wr = 8;
		qa.cap.max_send_sge = 1;
		qa.cap.max_recv_sge = 1;
		qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		qa.pd = a.pd;
		qa.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
				    IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP;
		q = ibv_create_qp_ex(a.ctx, &qa);
		SVT_CHECK(q);
		SVT_EQ(ibv_destroy_qp(a.qp), 0);
		a.qp = q;
		ia = svt_ep_info(&a);
		ib = svt_ep_info(&b);
		at_connect(&a, &ib, AT_ACCESS, 1);
		at_connect(&b, &ia, AT_ACCESS, 1);
		tgt = (uint64_t *)b.buf;
		ret = (uint64_t *)a.buf;
		tgt[0] = 40;
		x = ibv_qp_to_qp_ex(a.qp);
		SVT_CHECK(x);
		ibv_wr_start(x);
		x->wr_id = 10;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_atomic_fetch_add(x, b.mr->rkey, (uintptr_t)tgt, 2);
		ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)&ret[0], 8);
		x->wr_id = 11;
		ibv_wr_atomic_cmp_swp(x, b.mr->rkey, (uintptr_t)tgt, 42, 7);
		ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)&ret[1], 8);
		SVT_EQ(ibv_wr_complete(x), 0);
		SVT_EQ(svt_poll1(a.cq, 5000).wr_id, 10);
		wc = svt_poll1(a.cq, 5000);
		SVT_EQ(wc.wr_id, 11);
		SVT_EQ(wc.status, IBV_WC_SUCCESS);
		SVT_CHECK(ret[0] == 40 && ret[1] == 42 && tgt[0] == 7);
		svt_ep_fini(&a);
		svt_ep_fini(&b);
	}
	printf("%s: fetch-and-add and compare-and-swap values (post_send and wr_*): ok\n", dev);
}

/* One failing case: a fresh pair, one WR, its completion's status. */
static void check_error(const char *what, int mr_access, int qp_access, int dest_rd,
			enum ibv_wr_opcode op, uint64_t off, bool local_ro, enum ibv_wc_status want)
{
	struct svt_ep a, b;
	struct ibv_mr *ro = NULL;
	struct ibv_wc wc;
	uint32_t lkey;
	int rc;

	pair(&a, &b, mr_access, qp_access, dest_rd);
	lkey = a.mr->lkey;
	if (local_ro) {
		ro = ibv_reg_mr(a.pd, a.buf + 2048, 64, 0);	/* local read only */
		SVT_CHECK(ro);
		lkey = ro->lkey;
	}
	if (op == IBV_WR_RDMA_READ)
		rc = svt_post_write(&a, op, (uintptr_t)a.buf + 2048, 8, lkey,
				    (uintptr_t)b.buf + off, b.mr->rkey, 0, IBV_SEND_SIGNALED, 9);
	else
		rc = post_atomic(&a, op, a.buf + 2048, 8, lkey, (uintptr_t)b.buf + off,
				 b.mr->rkey, 1, 0, 9);
	SVT_EQ(rc, 0);
	wc = svt_poll1(a.cq, 5000);
	if (wc.status != want)
		fprintf(stderr, "%s: status %s, expected %s\n", what,
			ibv_wc_status_str(wc.status), ibv_wc_status_str(want));
	SVT_EQ(wc.status, want);
	SVT_EQ(wc.wr_id, 9);
	if (want != IBV_WC_LOC_PROT_ERR)
		SVT_CHECK(*(uint64_t *)(b.buf + (off & ~7ull)) == 0);	/* not changed */
	if (ro)
		SVT_EQ(ibv_dereg_mr(ro), 0);
	svt_ep_fini(&a);
	svt_ep_fini(&b);
	printf("%s: %s: ok\n", what, ibv_wc_status_str(want));
}

static void check_errors(void)
{
	int noat = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

	check_error("misaligned target", AT_ACCESS, AT_ACCESS, 1, IBV_WR_ATOMIC_FETCH_AND_ADD, 4,
		    false, IBV_WC_REM_INV_REQ_ERR);
	check_error("misaligned target (cmp-swap)", AT_ACCESS, AT_ACCESS, 1,
		    IBV_WR_ATOMIC_CMP_AND_SWP, 1, false, IBV_WC_REM_INV_REQ_ERR);
	check_error("no REMOTE_ATOMIC on the MR", noat, AT_ACCESS, 1, IBV_WR_ATOMIC_FETCH_AND_ADD, 0,
		    false, IBV_WC_REM_ACCESS_ERR);
	check_error("no REMOTE_ATOMIC on the responder QP", AT_ACCESS, noat, 1,
		    IBV_WR_ATOMIC_CMP_AND_SWP, 0, false, IBV_WC_REM_ACCESS_ERR);
	check_error("target past the MR", AT_ACCESS, AT_ACCESS, 1, IBV_WR_ATOMIC_FETCH_AND_ADD,
		    4096, false, IBV_WC_REM_ACCESS_ERR);
	check_error("responder max_dest_rd_atomic 0", AT_ACCESS, AT_ACCESS, 0,
		    IBV_WR_ATOMIC_FETCH_AND_ADD, 0, false, IBV_WC_REM_INV_REQ_ERR);
	check_error("responder max_dest_rd_atomic 0, READ", AT_ACCESS, AT_ACCESS, 0,
		    IBV_WR_RDMA_READ, 0, false, IBV_WC_REM_INV_REQ_ERR);
	check_error("local SGE without LOCAL_WRITE", AT_ACCESS, AT_ACCESS, 1,
		    IBV_WR_ATOMIC_FETCH_AND_ADD, 0, true, IBV_WC_LOC_PROT_ERR);
}

/* ---- two processes: the race and the ordering */

static struct svt_pipe pipes[2], *cur;

struct race_info {
	struct svt_info qp;	/* the peer QP to connect to */
	uint64_t word;		/* the target word (parent's memory) */
	uint32_t rkey;
	uint32_t order;		/* also the ordering check */
};

/* RACE_N fetch-adds of 1 onto word, posted in chains of RACE_CHAIN so they
 * run back to back; the values returned strictly increase. */
static void add_burst(struct svt_ep *e, uint64_t word, uint32_t rkey)
{
	struct ibv_send_wr wr[RACE_CHAIN], *bad;
	struct ibv_sge sge[RACE_CHAIN];
	uint64_t *got = (uint64_t *)e->buf, last = 0;
	struct ibv_wc wc[RACE_CHAIN];

	for (int i = 0; i < RACE_N; i += RACE_CHAIN) {
		for (int j = 0; j < RACE_CHAIN; j++) {
			sge[j].addr = (uintptr_t)&got[j];
			sge[j].length = 8;
			sge[j].lkey = e->mr->lkey;
			memset(&wr[j], 0, sizeof(wr[j]));
			wr[j].wr_id = (uint64_t)(i + j);
			wr[j].sg_list = &sge[j];
			wr[j].num_sge = 1;
			wr[j].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
			wr[j].send_flags = IBV_SEND_SIGNALED;
			wr[j].wr.atomic.remote_addr = word;
			wr[j].wr.atomic.rkey = rkey;
			wr[j].wr.atomic.compare_add = 1;
			wr[j].next = j + 1 < RACE_CHAIN ? &wr[j + 1] : NULL;
		}
		SVT_EQ(ibv_post_send(e->qp, wr, &bad), 0);
		SVT_EQ(svt_poll_for(e->cq, wc, RACE_CHAIN, 20000), RACE_CHAIN);
		for (int j = 0; j < RACE_CHAIN; j++) {
			SVT_EQ(wc[j].status, IBV_WC_SUCCESS);
			SVT_CHECK((i == 0 && j == 0) || got[j] > last);
			last = got[j];
		}
	}
}

/* Child: RACE_N fetch-adds of 1 onto the parent's word; the first child then
 * writes 64 KiB and adds 1 << 32 behind it on the same QP. */
static void race_child(void)
{
	struct svt_pipe *pp = cur;
	struct svt_ep c;
	struct svt_info mine;
	struct race_info r;

	svt_ep_init(&c, dev, 256, 64, 1 << 17, AT_ACCESS);
	mine = svt_ep_info(&c);
	svt_send(pp, &mine, sizeof(mine));
	svt_recv(pp, &r, sizeof(r));
	at_connect(&c, &r.qp, AT_ACCESS, 1);
	svt_sync(pp);
	add_burst(&c, r.word, r.rkey);
	svt_sync(pp);	/* done */
	svt_sync(pp);	/* the parent has checked the sum */
	if (r.order) {	/* the data, then the signal, on one QP, unsignalled write */
		memset(c.buf + 4096, 0xa5, 65536);
		SVT_EQ(svt_post_write(&c, IBV_WR_RDMA_WRITE, (uintptr_t)c.buf + 4096, 65536,
				      c.mr->lkey, r.word + 64, r.rkey, 0, 0, 100), 0);
		SVT_EQ(post_atomic(&c, IBV_WR_ATOMIC_FETCH_AND_ADD, c.buf, 8, c.mr->lkey, r.word,
				   r.rkey, 1ull << 32, 0, 101), 0);
		SVT_EQ(svt_poll1(c.cq, 20000).wr_id, 101);
	}
	svt_sync(pp);
	svt_ep_fini(&c);
	exit(0);
}

/* Two child processes add onto one word of ours at once, each through its
 * own QP (each read-modify-write crosses processes: the widest window). */
static void check_race_and_order(void)
{
	struct ibv_qp_init_attr qa;
	struct ibv_qp *qps[2];
	struct svt_ep p;
	volatile uint64_t *word;
	uint64_t t_end;
	pid_t pids[2];

	for (int k = 0; k < 2; k++) {	/* before any verbs object of ours */
		cur = &pipes[k];
		pids[k] = svt_fork_peer(cur, race_child);
	}
	svt_ep_init(&p, dev, 16, 16, 4096 + 65536 + 64, AT_ACCESS);
	word = (volatile uint64_t *)p.buf;
	qps[0] = p.qp;
	for (int k = 0; k < 2; k++) {
		struct svt_info child, mine = svt_ep_info(&p);
		struct race_info r;

		cur = &pipes[k];
		if (k) {
			memset(&qa, 0, sizeof(qa));
			qa.send_cq = p.cq;
			qa.recv_cq = p.cq;
			qa.qp_type = IBV_QPT_RC;
			qa.cap.max_send_wr = 4;
			qa.cap.max_recv_wr = 4;
			qa.cap.max_send_sge = 1;
			qa.cap.max_recv_sge = 1;
			qps[k] = ibv_create_qp(p.pd, &qa);
			SVT_CHECK(qps[k]);
		}
		p.qp = qps[k];
		mine.qpn = qps[k]->qp_num;
		svt_recv(cur, &child, sizeof(child));
		memset(&r, 0, sizeof(r));
		r.qp = mine;
		r.word = (uintptr_t)p.buf;
		r.rkey = p.mr->rkey;
		r.order = k == 0;
		svt_send(cur, &r, sizeof(r));
		at_connect(&p, &child, AT_ACCESS, 1);
	}
	p.qp = qps[0];
	for (int k = 0; k < 2; k++)	/* both connected: go */
		svt_sync(&pipes[k]);
	for (int k = 0; k < 2; k++)	/* both done */
		svt_sync(&pipes[k]);
	if (*word != 2 * RACE_N)
		fprintf(stderr, "after %d + %d concurrent adds the word holds %llu\n", RACE_N,
			RACE_N, (unsigned long long)*word);
	SVT_EQ(*word, 2 * RACE_N);
	printf("%s: %d + %d concurrent fetch-adds from two processes onto one word: none lost: ok\n",
	       dev, RACE_N, RACE_N);
	for (int k = 0; k < 2; k++)
		svt_sync(&pipes[k]);
	/* the first child writes 64 KiB then adds 1 << 32: once the add shows, the data must */
	t_end = svt_now_ns() + 20000000000ull;
	while (!(*word >> 32))
		SVT_CHECK(svt_now_ns() < t_end);
	for (int i = 0; i < 65536; i++)
		SVT_EQ((unsigned char)p.buf[64 + i], 0xa5);
	for (int k = 0; k < 2; k++) {
		svt_sync(&pipes[k]);
		SVT_EQ(svt_wait_child(pids[k]), 0);
	}
	SVT_EQ(ibv_destroy_qp(qps[1]), 0);
	svt_ep_fini(&p);
	printf("%s: the add seen, the 64 KiB written before it on the QP seen: ok\n", dev);
}

int main(void)
{
	const char *devs[] = { "simib0", "simroce0" };

	(void)svt_control_fn_get();
	for (size_t i = 0; i < sizeof(devs) / sizeof(devs[0]); i++) {
		dev = devs[i];
		check_values();
		check_errors();
	}
	dev = "simib0";
	check_race_and_order();
	return 0;
}
