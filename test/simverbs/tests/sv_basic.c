/*
 * Two processes over simverbs (IB and RoCE devices): RDMA WRITE, WRITE_WITH_IMM
 * (immediate, byte_len, data visible at the completion), SEND/RECV with
 * multiple SGEs, RDMA READ, inline sends, and completion order per QP.
 * With "bench" as argv[1]: 8-byte write-with-imm ping-pong latency and
 * 4 MiB RDMA write bandwidth next to raw process_vm_writev bandwidth.
 */
#define _GNU_SOURCE
#include <sys/uio.h>

#include "svt.h"

#define BUF (8u << 20)
#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static struct svt_pipe P;

static void setup(struct svt_ep *e, const char *dev, struct svt_info *peer, int child)
{
	struct svt_info me;

	svt_ep_init(e, dev, 4096, 1024, BUF, ACC);
	me = svt_ep_info(e);
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

static void fill(char *b, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (char)(seed * 131 + i * 7);
}

static int check_off(const char *b, size_t n, unsigned int seed, size_t off)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != (char)(seed * 131 + (i + off) * 7))
			return 0;
	return 1;
}

static int check(const char *b, size_t n, unsigned int seed)
{
	return check_off(b, n, seed, 0);
}

/* Child: target of writes; verifies data at each immediate. */
static void child_side(const char *dev)
{
	struct svt_ep e;
	struct svt_info peer;

	setup(&e, dev, &peer, 1);
	for (int i = 0; i < 16; i++)
		SVT_EQ(svt_post_recv(&e, 0, 0, 0, 100 + (uint64_t)i), 0);
	/* 8 write-with-imm of growing sizes, each preceded by a plain write */
	for (unsigned int i = 0; i < 8; i++) {
		struct ibv_wc wc = svt_poll1(e.cq, 20000);
		size_t len = 1000u << i;

		SVT_EQ(wc.status, IBV_WC_SUCCESS);
		SVT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
		SVT_EQ(wc.wr_id, 100 + i);
		SVT_EQ(wc.imm_data, htonl(0xabc000 + i));
		SVT_EQ(wc.byte_len, len);
		SVT_CHECK(wc.wc_flags & IBV_WC_WITH_IMM);
		SVT_EQ(wc.src_qp, peer.qpn);
		SVT_CHECK(check(e.buf + 4096, len, i));
		SVT_CHECK(check(e.buf + (4u << 20), 64, i + 50));
		svt_sync(&P);
	}
	/* SEND into two SGEs */
	{
		struct ibv_sge sg[2] = {
			{ (uintptr_t)e.buf, 100, e.mr->lkey },
			{ (uintptr_t)e.buf + 8192, 5000, e.mr->lkey },
		};
		struct ibv_recv_wr wr = { .wr_id = 7, .sg_list = sg, .num_sge = 2 }, *bad;
		struct ibv_wc wc;

		/* the 8 remaining zero-length receives come first */
		SVT_EQ(ibv_post_recv(e.qp, &wr, &bad), 0);
		svt_sync(&P);
		for (int i = 0; i < 8; i++) {
			wc = svt_poll1(e.cq, 20000);
			SVT_EQ(wc.opcode, IBV_WC_RECV);
			SVT_EQ(wc.status, IBV_WC_SUCCESS);
		}
		wc = svt_poll1(e.cq, 20000);
		SVT_EQ(wc.wr_id, 7);
		SVT_EQ(wc.opcode, IBV_WC_RECV);
		SVT_EQ(wc.byte_len, 3000);
		SVT_CHECK(check(e.buf, 100, 9));
		SVT_CHECK(check_off(e.buf + 8192, 900, 9, 100));
		SVT_CHECK(check(e.buf + 8192 + 900, 2000, 10));
	}
	fill(e.buf + 65536, 65536, 77);
	svt_sync(&P);	/* peer READs it */
	svt_sync(&P);
	svt_ep_fini(&e);
	exit(0);
}

static void parent_side(const char *dev)
{
	struct svt_ep e;
	struct svt_info peer;
	struct ibv_wc wc;

	setup(&e, dev, &peer, 0);
	for (unsigned int i = 0; i < 8; i++) {
		size_t len = 1000u << i;

		fill(e.buf + 4096, len, i);
		fill(e.buf + (4u << 20), 64, i + 50);
		SVT_EQ(svt_post_write(&e, IBV_WR_RDMA_WRITE, (uintptr_t)e.buf + (4u << 20), 64,
				      e.mr->lkey, peer.addr + (4u << 20), peer.rkey, 0, 0, 1), 0);
		SVT_EQ(svt_post_write(&e, IBV_WR_RDMA_WRITE_WITH_IMM, (uintptr_t)e.buf + 4096,
				      (uint32_t)len, e.mr->lkey, peer.addr + 4096, peer.rkey,
				      htonl(0xabc000 + i), IBV_SEND_SIGNALED, 2), 0);
		wc = svt_poll1(e.cq, 20000);
		SVT_EQ(wc.status, IBV_WC_SUCCESS);
		SVT_EQ(wc.wr_id, 2);
		SVT_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
		svt_sync(&P);
	}
	svt_sync(&P);
	/* 8 zero-length sends (inline) then a 3000-byte send from two SGEs */
	for (int i = 0; i < 8; i++)
		SVT_EQ(svt_post_write(&e, IBV_WR_SEND, 0, 0, 0, 0, 0, 0, IBV_SEND_INLINE, 10), 0);
	{
		struct ibv_sge sg[2] = {
			{ (uintptr_t)e.buf, 1000, e.mr->lkey },
			{ (uintptr_t)e.buf + 20000, 2000, e.mr->lkey },
		};
		struct ibv_send_wr wr = { .wr_id = 11, .sg_list = sg, .num_sge = 2,
					  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
		struct ibv_send_wr *bad;

		fill(e.buf, 1000, 9);
		fill(e.buf + 20000, 2000, 10);
		SVT_EQ(ibv_post_send(e.qp, &wr, &bad), 0);
		wc = svt_poll1(e.cq, 20000);
		SVT_EQ(wc.wr_id, 11);
		SVT_EQ(wc.status, IBV_WC_SUCCESS);
		SVT_EQ(wc.opcode, IBV_WC_SEND);
	}
	svt_sync(&P);
	SVT_EQ(svt_post_write(&e, IBV_WR_RDMA_READ, (uintptr_t)e.buf + 131072, 65536, e.mr->lkey,
			      peer.addr + 65536, peer.rkey, 0, IBV_SEND_SIGNALED, 3), 0);
	wc = svt_poll1(e.cq, 20000);
	SVT_EQ(wc.status, IBV_WC_SUCCESS);
	SVT_EQ(wc.opcode, IBV_WC_RDMA_READ);
	SVT_EQ(wc.byte_len, 65536);
	SVT_CHECK(check(e.buf + 131072, 65536, 77));
	svt_sync(&P);
	svt_ep_fini(&e);
}

static double pvw_gbps(pid_t pid, char *src, uint64_t dst, size_t len, int iters)
{
	struct iovec l = { src, len }, r = { (void *)(uintptr_t)dst, len };
	uint64_t t0 = svt_now_ns();

	for (int i = 0; i < iters; i++)
		SVT_EQ(process_vm_writev(pid, &l, 1, &r, 1, 0), (ssize_t)len);
	return (double)len * iters / (double)(svt_now_ns() - t0);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* One ping-pong round trip of 8-byte write-with-imm (parent starts). */
static void pingpong1(struct svt_ep *e, const struct svt_info *peer, int child)
{
	for (int step = 0; step < 2; step++) {
		bool post = child ? step == 1 : step == 0;
		int want = child ? 1 : (step == 0 ? 0 : 2);

		if (post)
			SVT_EQ(svt_post_write(e, IBV_WR_RDMA_WRITE_WITH_IMM, (uintptr_t)e->buf, 8,
					      e->mr->lkey, peer->addr, peer->rkey, 1,
					      IBV_SEND_SIGNALED, 0), 0);
		for (int got = 0; got < want;) {
			struct ibv_wc wc[2];
			int n = ibv_poll_cq(e->cq, want - got, wc);

			SVT_CHECK(n >= 0);
			for (int k = 0; k < n; k++) {
				SVT_EQ(wc[k].status, IBV_WC_SUCCESS);
				if (wc[k].opcode == IBV_WC_RECV_RDMA_WITH_IMM)
					SVT_EQ(svt_post_recv(e, 0, 0, 0, 0), 0);
			}
			got += n;
		}
	}
}

/* Latency: 8-byte write-with-imm ping-pong, 20 batches of 1000: the median
 * single round trip (what perftest calls typical) and batch averages (which
 * include descheduling on a shared host).
 * Bandwidth: 4 MiB RDMA writes and raw process_vm_writev, interleaved. */
static void bench(const char *dev, int child, pid_t other)
{
	enum { BATCHES = 20, PER = 1000, ROUNDS = 10, PER_ROUND = 20 };
	uint64_t lat[BATCHES], t_raw = 0, t_rdma = 0;
	struct svt_ep e;
	struct svt_info peer;

	setup(&e, dev, &peer, child);
	for (int i = 0; i < 256; i++)
		SVT_EQ(svt_post_recv(&e, 0, 0, 0, 0), 0);
	svt_sync(&P);
	static uint64_t one[BATCHES * PER];

	for (int b = 0; b < BATCHES; b++) {
		uint64_t t0 = svt_now_ns();

		for (int i = 0; i < PER; i++) {
			uint64_t t1 = svt_now_ns();

			pingpong1(&e, &peer, child);
			one[b * PER + i] = svt_now_ns() - t1;
		}
		lat[b] = svt_now_ns() - t0;
	}
	svt_sync(&P);
	if (!child) {
		qsort(lat, BATCHES, sizeof(lat[0]), cmp_u64);
		qsort(one, BATCHES * PER, sizeof(one[0]), cmp_u64);
		printf("%s: write_with_imm 8B half round trip: per round trip min %.2f us, "
		       "median %.2f us; per batch of %d: best %.2f us, median %.2f us\n", dev,
		       (double)one[0] / 2 / 1000.0, (double)one[BATCHES * PER / 2] / 2 / 1000.0,
		       PER, (double)lat[0] / PER / 2 / 1000.0,
		       (double)lat[BATCHES / 2] / PER / 2 / 1000.0);
		for (int r = 0; r < ROUNDS; r++) {
			uint64_t t0 = svt_now_ns();

			pvw_gbps(other, e.buf, peer.addr, 4u << 20, PER_ROUND);
			t_raw += svt_now_ns() - t0;
			t0 = svt_now_ns();
			for (int i = 0; i < PER_ROUND; i++) {
				SVT_EQ(svt_post_write(&e, IBV_WR_RDMA_WRITE, (uintptr_t)e.buf,
						      4u << 20, e.mr->lkey, peer.addr, peer.rkey, 0,
						      IBV_SEND_SIGNALED, 0), 0);
				SVT_EQ(svt_poll1(e.cq, 20000).status, IBV_WC_SUCCESS);
			}
			t_rdma += svt_now_ns() - t0;
		}
		printf("%s: 4 MiB rdma_write %.2f GB/s, process_vm_writev %.2f GB/s, ratio %.2f\n",
		       dev, 4194304.0 * ROUNDS * PER_ROUND / (double)t_rdma,
		       4194304.0 * ROUNDS * PER_ROUND / (double)t_raw,
		       (double)t_raw / (double)t_rdma);
	}
	svt_sync(&P);
	while (ibv_poll_cq(e.cq, 1, &(struct ibv_wc){ 0 }) > 0)
		;
	svt_ep_fini(&e);
}

int main(int argc, char **argv)
{
	const char *devs[] = { "simib0", "simroce0" };
	bool do_bench = argc > 1 && !strcmp(argv[1], "bench");

	svt_control_fn_get();
	for (int d = 0; d < 2; d++) {
		pid_t pid;

		svt_pipe_init(&P);
		fflush(stdout);
		pid = fork();
		SVT_CHECK(pid >= 0);
		if (!pid) {
			svt_pipe_side(&P, 1);
			if (do_bench) {
				bench(devs[d], 1, getppid());
				exit(0);
			}
			child_side(devs[d]);
		}
		svt_pipe_side(&P, 0);
		if (do_bench)
			bench(devs[d], 0, pid);
		else
			parent_side(devs[d]);
		SVT_EQ(svt_wait_child(pid), 0);
		close(P.rd);
		close(P.wr);
		if (!do_bench)
			printf("%s: write, write_with_imm, send (2 SGEs), read: ok\n", devs[d]);
	}
	return 0;
}
