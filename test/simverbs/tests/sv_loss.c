/*
 * Packet loss and RC recovery (loss.c) and the port counters (counters.c):
 *  - loss 0: every packet counted in port_xmit_packets / port_rcv_packets,
 *    no error counter moves;
 *  - loss 0.5%: RDMA writes, sends and reads of 64 KiB all complete with every
 *    byte right; the responder counted out-of-sequence packets, the requester
 *    NAKs or ACK timeouts, and more packets left than the messages need; the
 *    run took at least its ACK timeouts' time;
 *  - loss 1: RETRY_EXC_ERR after (retry_cnt + 1) timeouts, counted;
 *  - loss 50% with retry_cnt 0: a 64-packet write runs out of retries.
 * The counters are read from the device's sysfs files (mlx5 names).
 */
#include <sys/stat.h>

#include "svt.h"

#define MSG (64 * 1024)
#define NMSG 120
#define TIMEOUT_EXP 12		/* 4.096 us * 2^12 = 16.8 ms, x timeout-scale 0.01 */
#define T_NS (4096ull * (1ull << TIMEOUT_EXP) / 100)

static char hw[512], pc[512];

static uint64_t cnt(const char *dir, const char *name)
{
	char path[700], buf[64] = "";
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "missing counter file %s\n", path);
		exit(1);
	}
	SVT_CHECK(fgets(buf, sizeof(buf), f));
	fclose(f);
	return strtoull(buf, NULL, 10);
}

/* This process's counts into the files now (else within 20 ms of activity). */
static void flush(void)
{
	SVT_EQ(svt_control("flush-counters"), 0);
}

static struct ibv_wc wait_wc(struct ibv_cq *cq, uint64_t wr_id)
{
	uint64_t end = svt_now_ns() + 60000000000ull;
	struct ibv_wc wc;

	for (;;) {
		int n = ibv_poll_cq(cq, 1, &wc);

		SVT_CHECK(n >= 0);
		if (n && wc.wr_id == wr_id)
			return wc;
		SVT_CHECK(!n || wc.status == IBV_WC_SUCCESS);
		SVT_CHECK(svt_now_ns() < end);
	}
}

static void post(struct svt_ep *a, struct svt_ep *b, enum ibv_wr_opcode op, size_t off,
		 uint64_t id)
{
	struct ibv_sge sge = { (uintptr_t)a->buf + off, MSG, a->mr->lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)b->buf + off;
	wr.wr.rdma.rkey = b->mr->rkey;
	SVT_EQ(ibv_post_send(a->qp, &wr, &bad), 0);
}

static void post_recv(struct svt_ep *b, size_t off, uint64_t id)
{
	struct ibv_sge sge = { (uintptr_t)b->buf + off, MSG, b->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;

	SVT_EQ(ibv_post_recv(b->qp, &wr, &bad), 0);
}

static void pair(struct svt_ep *a, struct svt_ep *b, int retry)
{
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct svt_info ia, ib;
	struct ibv_qp_attr at;

	svt_ep_init(a, "simroce0", 256, 64, 2 * MSG, access);
	svt_ep_init(b, "simroce0", 256, 64, 2 * MSG, access);
	ia = svt_ep_info(a);
	ib = svt_ep_info(b);
	svt_connect(b, &ia, TIMEOUT_EXP, 7);
	SVT_EQ(svt_to_init(a, access), 0);
	svt_rtr_attr(a, &ib, &at);
	SVT_EQ(ibv_modify_qp(a->qp, &at, SVT_RTR_MASK), 0);
	svt_rts_attr(&at, TIMEOUT_EXP, retry, 7);
	SVT_EQ(ibv_modify_qp(a->qp, &at, SVT_RTS_MASK), 0);
	snprintf(hw, sizeof(hw), "%s/ports/1/hw_counters", a->ctx->device->ibdev_path);
	snprintf(pc, sizeof(pc), "%s/ports/1/counters", a->ctx->device->ibdev_path);
}

/* n messages a -> b of each kind (write, send, read: the data flows back),
 * every byte checked. */
static void traffic(struct svt_ep *a, struct svt_ep *b, int n, unsigned int seed)
{
	for (int i = 0; i < n; i++) {
		enum ibv_wr_opcode op = i % 3 == 0 ? IBV_WR_RDMA_WRITE
				       : i % 3 == 1 ? IBV_WR_SEND : IBV_WR_RDMA_READ;
		char *src = op == IBV_WR_RDMA_READ ? b->buf + MSG : a->buf;
		char *dst = op == IBV_WR_RDMA_READ ? a->buf + MSG : b->buf;
		struct ibv_wc wc;

		for (int k = 0; k < MSG; k++)
			src[k] = (char)rand_r(&seed);
		memset(dst, 0, MSG);
		if (op == IBV_WR_SEND)
			post_recv(b, 0, 1000 + (uint64_t)i);
		post(a, b, op, op == IBV_WR_RDMA_READ ? MSG : 0, (uint64_t)i + 1);
		wc = wait_wc(a->cq, (uint64_t)i + 1);
		if (wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "message %d (opcode %d): %s\n", i, op,
				ibv_wc_status_str(wc.status));
			exit(1);
		}
		if (op == IBV_WR_SEND)
			SVT_EQ(wait_wc(b->cq, 1000 + (uint64_t)i).status, IBV_WC_SUCCESS);
		SVT_EQ(memcmp(src, dst, MSG), 0);
	}
}

struct snap {
	uint64_t xmit, rcv, oos, nak, tmo, dup, inak, exc;
};

static struct snap snap(void)
{
	struct snap s = {
		cnt(pc, "port_xmit_packets"), cnt(pc, "port_rcv_packets"),
		cnt(hw, "out_of_sequence"), cnt(hw, "packet_seq_err"),
		cnt(hw, "local_ack_timeout_err"), cnt(hw, "duplicate_request"),
		cnt(hw, "implied_nak_seq_err"), cnt(hw, "req_transport_retries_exceeded"),
	};

	return s;
}

int main(void)
{
	struct svt_ep a, b;
	struct snap s0, s1, s2;
	uint64_t t0, el;
	struct ibv_wc wc;
	struct stat st;

	setenv("SIMVERBS_DEVICES", "simroce0:ll=eth,vendor=mellanox", 1);
	SVT_EQ(svt_control("timeout-scale 0.01"), 0);
	pair(&a, &b, 7);
	SVT_EQ(stat(hw, &st), 0);	/* the files exist before any traffic */
	SVT_CHECK(stat(pc, &st) == 0 && cnt(hw, "out_of_sequence") == 0);
	SVT_CHECK(cnt(pc, "port_xmit_data") == 0);

	/* loss 0: every packet counted, no error */
	s0 = snap();
	traffic(&a, &b, 30, 1);
	/* 30 messages of 16 packets (MTU 4096 by default; >= 64 at MTU 1024)
	 * leave and arrive on this port (loopback) */
	flush();
	s1 = snap();
	SVT_CHECK(s1.xmit - s0.xmit >= 30 * 16 + 30 && s1.xmit - s0.xmit == s1.rcv - s0.rcv);
	SVT_EQ(s1.oos + s1.nak + s1.tmo + s1.dup + s1.inak + s1.exc, 0);
	SVT_CHECK(cnt(pc, "port_xmit_data") * 4 >= 30ull * MSG);
	printf("loss 0: %llu packets, no error counter: ok\n",
	       (unsigned long long)(s1.xmit - s0.xmit));

	/* loss 0.5%: go-back-N recovers every message; its cost is counted */
	SVT_EQ(svt_control("loss 0.005"), 0);
	t0 = svt_now_ns();
	traffic(&a, &b, NMSG, 2);
	el = svt_now_ns() - t0;
	SVT_EQ(svt_control("loss 0"), 0);
	flush();
	s2 = snap();
	printf("loss 0.005: %d messages of %d KiB in %.1f ms: packets sent %llu received %llu, "
	       "out_of_sequence %llu packet_seq_err %llu local_ack_timeout_err %llu "
	       "duplicate_request %llu implied_nak_seq_err %llu\n", NMSG, MSG / 1024, el / 1e6,
	       (unsigned long long)(s2.xmit - s1.xmit), (unsigned long long)(s2.rcv - s1.rcv),
	       (unsigned long long)(s2.oos - s1.oos), (unsigned long long)(s2.nak - s1.nak),
	       (unsigned long long)(s2.tmo - s1.tmo), (unsigned long long)(s2.dup - s1.dup),
	       (unsigned long long)(s2.inak - s1.inak));
	SVT_CHECK(s2.oos > s1.oos);
	SVT_CHECK(s2.nak + s2.inak > s1.nak + s1.inak);
	SVT_CHECK(s2.xmit > s2.rcv);	/* lost packets left and never arrived */
	SVT_CHECK(s2.rcv - s1.rcv >= (uint64_t)NMSG * 16);
	SVT_EQ(s2.exc, s1.exc);
	SVT_CHECK(el >= (s2.tmo - s1.tmo) * T_NS);
	printf("loss 0.005: every byte delivered, retransmissions counted: ok\n");

	/* loss 1: nothing arrives; RETRY_EXC_ERR after retry_cnt + 1 timeouts */
	SVT_EQ(svt_control("loss 1 simroce0"), 0);
	t0 = svt_now_ns();
	post(&a, &b, IBV_WR_RDMA_WRITE, 0, 77);
	wc = wait_wc(a.cq, 77);
	el = svt_now_ns() - t0;
	SVT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR);
	SVT_CHECK(el >= 8 * T_NS);
	flush();
	SVT_EQ(cnt(hw, "req_transport_retries_exceeded"), s2.exc + 1);
	SVT_EQ(cnt(hw, "local_ack_timeout_err") - s2.tmo, 8);
	printf("loss 1: RETRY_EXC_ERR after 8 ACK timeouts (%.1f ms): ok\n", el / 1e6);
	svt_ep_fini(&a);
	svt_ep_fini(&b);

	/* loss 50%, retry_cnt 0: the first NAK or timeout ends a 64-packet write */
	SVT_EQ(svt_control("loss 0.5 simroce0"), 0);
	pair(&a, &b, 0);
	post(&a, &b, IBV_WR_RDMA_WRITE, 0, 78);
	SVT_EQ(wait_wc(a.cq, 78).status, IBV_WC_RETRY_EXC_ERR);
	SVT_EQ(svt_control("loss 0 simroce0"), 0);
	svt_ep_fini(&a);
	svt_ep_fini(&b);
	printf("retry_cnt 0 at loss 0.5: RETRY_EXC_ERR: ok\n");
	return 0;
}
