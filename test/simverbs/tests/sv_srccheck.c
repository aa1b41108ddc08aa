/*
 * SIMVERBS_CHECK_SOURCES=1 (one process, a loopback QP pair, 20 ms of
 * latency so every WR stays queued after ibv_post_send): a source rewritten
 * between the post and the execution of a non-inline RDMA WRITE,
 * WRITE_WITH_IMM or SEND (copied snapshot: small WRs; hashed: large ones)
 * completes with GENERAL_ERR and names the QP, wr_id and modified range on
 * stderr; unmodified sources, several SGEs and a modified inline source (a
 * copy at post) complete successfully with their data in place; with the knob
 * off (a child that never set it) the same rewrite goes unnoticed and the new
 * bytes are sent, which is why the knob exists.
 */
#include <fcntl.h>

#include "svt.h"

#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define LAT "latency 20000000"
#define BIG 65536

struct pair {
	struct svt_ep a, b;
	struct svt_info ai, bi;
};

static void pair_up(struct pair *p)
{
	svt_ep_init(&p->a, "simib0", 64, 16, 1 << 20, ACC);
	svt_ep_init(&p->b, "simib0", 64, 16, 1 << 20, ACC);
	p->ai = svt_ep_info(&p->a);
	p->bi = svt_ep_info(&p->b);
	svt_connect(&p->a, &p->bi, 14, 7);
	svt_connect(&p->b, &p->ai, 14, 7);
}

static void pair_down(struct pair *p)
{
	struct ibv_wc wc[16];

	while (ibv_poll_cq(p->a.cq, 16, wc) > 0 || ibv_poll_cq(p->b.cq, 16, wc) > 0)
		;
	svt_ep_fini(&p->a);
	svt_ep_fini(&p->b);
}

/* Posts op of len bytes from a.buf (to b.buf + 4096), modifies [mod, mod + 4) of the source when
 * mod >= 0, and returns the status of its completion. */
static enum ibv_wc_status post_modify(struct pair *p, enum ibv_wr_opcode op, uint32_t len,
				      int flags, long mod, uint64_t wr_id)
{
	struct ibv_wc wc;

	for (uint32_t i = 0; i < len; i++)
		p->a.buf[i] = (char)(i * 7 + 1);
	memset(p->b.buf + 4096, 0, len);
	if (op != IBV_WR_RDMA_WRITE)
		SVT_EQ(svt_post_recv(&p->b, (uintptr_t)p->b.buf + 4096, BIG, p->b.mr->lkey, 5), 0);
	SVT_EQ(svt_post_write(&p->a, op, (uintptr_t)p->a.buf, len, p->a.mr->lkey,
			      p->bi.addr + 4096, p->bi.rkey, 3, flags | IBV_SEND_SIGNALED, wr_id), 0);
	if (mod >= 0)
		memset(p->a.buf + mod, 0x5a, 4);
	wc = svt_poll1(p->a.cq, 5000);
	SVT_EQ(wc.wr_id, wr_id);
	return wc.status;
}

/* stderr into a file while fn runs; returns what was written (static buffer). */
static const char *capture_stderr(void (*fn)(struct pair *), struct pair *p)
{
	static char out[4096];
	char path[] = "/tmp/sv_srccheck.XXXXXX";
	int fd = mkstemp(path), saved = dup(2);
	ssize_t n;

	SVT_CHECK(fd >= 0 && saved >= 0);
	unlink(path);
	fflush(stderr);
	SVT_CHECK(dup2(fd, 2) == 2);
	fn(p);
	fflush(stderr);
	SVT_CHECK(dup2(saved, 2) == 2);
	close(saved);
	n = pread(fd, out, sizeof(out) - 1, 0);
	close(fd);
	out[n > 0 ? n : 0] = 0;
	fputs(out, stderr); /* still shown in the log */
	return out;
}

static void small_write_modified(struct pair *p)
{
	SVT_EQ(post_modify(p, IBV_WR_RDMA_WRITE, 64, 0, 10, 0x1234), IBV_WC_GENERAL_ERR);
}

/* a modified source: the completion fails and the message names QP, wr_id and bytes */
static void check_modified(void)
{
	static const struct {
		enum ibv_wr_opcode op;
		uint32_t len;
		long mod;
	} cases[] = {
		{ IBV_WR_RDMA_WRITE_WITH_IMM, 512, 500 },	/* copied, last bytes */
		{ IBV_WR_SEND, 200, 0 },			/* copied, first bytes */
		{ IBV_WR_RDMA_WRITE, BIG, BIG / 2 },		/* hashed */
		{ IBV_WR_SEND_WITH_IMM, BIG, 3 },
	};
	struct pair p;
	char want[128];
	const char *msg;

	pair_up(&p);
	msg = capture_stderr(small_write_modified, &p);
	snprintf(want, sizeof(want), "QP 0x%x: the source of WR 0 (wr_id 0x1234, RDMA_WRITE, 64 "
		 "bytes) was modified", p.a.qp->qp_num);
	SVT_CHECK(strstr(msg, want));
	snprintf(want, sizeof(want), "bytes [%p, %p)", (void *)(p.a.buf + 10), (void *)(p.a.buf + 14));
	SVT_CHECK(strstr(msg, want));
	SVT_EQ(p.a.qp->state, IBV_QPS_ERR);
	pair_down(&p);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pair_up(&p);
		SVT_EQ(post_modify(&p, cases[i].op, cases[i].len, 0, cases[i].mod, 40 + i),
		       IBV_WC_GENERAL_ERR);
		pair_down(&p);
	}
	printf("modified sources (copied and hashed; WRITE, WRITE_WITH_IMM, SEND, SEND_WITH_IMM): "
	       "GENERAL_ERR with QP, wr_id and range: ok\n");
}

/* unmodified sources, two SGEs, and an inline source rewritten after its post: all succeed */
static void check_unmodified(void)
{
	static const enum ibv_wr_opcode ops[] = { IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM,
						  IBV_WR_SEND, IBV_WR_SEND_WITH_IMM };
	struct ibv_sge sge[2];
	struct ibv_send_wr wr, *bad;
	struct pair p;

	pair_up(&p);
	for (size_t i = 0; i < 4; i++) {
		for (uint32_t len = 64; len <= BIG; len *= 1024) {
			SVT_EQ(post_modify(&p, ops[i], len, 0, -1, i), IBV_WC_SUCCESS);
			SVT_CHECK(!memcmp(p.a.buf, p.b.buf + 4096, len));
			if (ops[i] != IBV_WR_RDMA_WRITE)
				SVT_EQ(svt_poll1(p.b.cq, 5000).status, IBV_WC_SUCCESS);
		}
	}
	/* inline: copied at post, so a later rewrite is legal */
	SVT_EQ(post_modify(&p, IBV_WR_RDMA_WRITE, 48, IBV_SEND_INLINE, 0, 9), IBV_WC_SUCCESS);
	SVT_EQ((unsigned char)p.b.buf[4096], 1);
	/* two scatter entries, the second one rewritten after the completion only */
	memset(&wr, 0, sizeof(wr));
	sge[0] = (struct ibv_sge){ (uintptr_t)p.a.buf, 100, p.a.mr->lkey };
	sge[1] = (struct ibv_sge){ (uintptr_t)p.a.buf + 8192, 3000, p.a.mr->lkey };
	wr.wr_id = 10;
	wr.sg_list = sge;
	wr.num_sge = 2;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = p.bi.addr;
	wr.wr.rdma.rkey = p.bi.rkey;
	SVT_EQ(ibv_post_send(p.a.qp, &wr, &bad), 0);
	SVT_EQ(svt_poll1(p.a.cq, 5000).status, IBV_WC_SUCCESS);
	memset(p.a.buf + 8192, 1, 3000);
	/* modified in the second entry: found there */
	SVT_EQ(ibv_post_send(p.a.qp, &wr, &bad), 0);
	p.a.buf[8192 + 2999] = 7;
	SVT_EQ(svt_poll1(p.a.cq, 5000).status, IBV_WC_GENERAL_ERR);
	pair_down(&p);
	printf("unmodified sources (64 B and 64 KiB, each opcode), inline, two SGEs: ok\n");
}

/* knob off (this child never set it): the rewrite is not seen, the new bytes are sent */
static int knob_off(void)
{
	struct pair p;

	unsetenv("SIMVERBS_CHECK_SOURCES");
	svt_control_fn_get();
	SVT_EQ(svt_control(LAT), 0);
	pair_up(&p);
	SVT_EQ(post_modify(&p, IBV_WR_RDMA_WRITE, 64, 0, 10, 1), IBV_WC_SUCCESS);
	SVT_EQ((unsigned char)p.b.buf[4096 + 10], 0x5a);
	pair_down(&p);
	printf("knob off: a rewritten source is sent as it is at execution: ok\n");
	return 0;
}

int main(void)
{
	pid_t pid;

	fflush(stdout);
	pid = fork(); /* before this process attaches: the child reads its own environment */
	SVT_CHECK(pid >= 0);
	if (!pid)
		exit(knob_off());
	SVT_EQ(svt_wait_child(pid), 0);
	setenv("SIMVERBS_CHECK_SOURCES", "1", 1);
	svt_control_fn_get();
	SVT_EQ(svt_control(LAT), 0);
	check_modified();
	check_unmodified();
	SVT_EQ(svt_control("latency 0"), 0);
	return 0;
}
