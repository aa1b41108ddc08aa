/*
 * fault_sqroom - the send paths' room checks count every work request they
 * post. simib0 allows 18 WRs per QP (max_qp_wr: the plugin's minimum) and
 * writes of at most 4 KiB (max_msg_sz); adaptive routing from 1 KiB on. The
 * receiver posts a round's receives first; the sender then posts the round
 * without testing a request, so its completions are polled only when a room
 * check asks for it, and each round is laid out so that the send queue
 * is as full as the room checks let it get (one QP: max_qp_wr - 1, 17
 * one-WR messages of 64 bytes; two QPs: 16) just before a message of
 * several WRs:
 *   2 KiB     one write carries it: WRITE + 0-byte WRITE_WITH_IMM (2 WRs)
 *   12 KiB    3 WRITEs of 4 KiB + WRITE_WITH_IMM (4 WRs)
 *   16 KiB    4 WRITEs + WRITE_WITH_IMM (5 WRs)
 *   grouped   a grouped receive of 4 (64 B, 2 KiB, 4 KiB, 6 KiB): 5 WRITEs + imm
 * once on one QP and once with two QPs and the data split over both
 * (NCCL_IB_QPS_PER_CONNECTION=2, NCCL_IB_SPLIT_DATA_ON_QPS=1). A post that
 * does not fit fails in simverbs (ENOMEM, as hardware) and fails the comm;
 * so no call may fail, and every message must arrive whole.
 */
#include "config.h"

#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "cts.h"
#include "fh.h"

#define BOUND (20.0 * fh_scale())
#define MAXWR 18	 /* simib0's max_qp_wr, the plugin's minimum */
#define CAP (16u * 1024) /* each receive */
#define TAG 3

struct msg {
	int n;		 /* receives in its group (1: a plain message) */
	size_t size[4];	 /* per receive */
};

static char *sbuf, *rbuf;
/* one-WR messages before the multi-WR one: as many as the room checks let go
 * without polling (one QP: max_qp_wr - 1; two: one less, the split path's
 * check asks for room one message sooner) */
static int fill;

/* Message m of a round: fill x 64 B, then the multi-WR one. */
static struct msg round_msg(const struct msg *big, int m)
{
	struct msg x = { 1, { 64 } };

	return m == fill ? *big : x;
}

static uint64_t seed_of(int round, int m, int r)
{
	return (uint64_t)round * 1000 + (uint64_t)m * 10 + (uint64_t)r;
}

/* One round: receives first, then every send untested, then everything checked. */
static void one_round(struct fh *f, void *s, void *r, void *smh, void *rmh, const struct msg *big,
		      int round, const char *what)
{
	int N = fill + 1; /* receives: the receive queue holds max_qp_wr RECVs */
	void *rreq[MAXWR], *sreq[MAXWR][4];
	double end = fh_now() + BOUND;
	int m, k, sz[8];

	for (m = 0; m < N; m++) {
		struct msg x = round_msg(big, m);
		void *data[4];
		size_t cap[4];
		int tags[4];
		void *mhs[4] = { rmh, rmh, rmh, rmh };

		for (k = 0; k < x.n; k++) {
			data[k] = rbuf + ((size_t)m * 4 + (size_t)k) * CAP;
			cap[k] = CAP;
			tags[k] = TAG + k;
			memset(data[k], 0xee, CAP);
		}
		rreq[m] = NULL;
		while (!rreq[m]) {
			FH_CHECK(fh_now() < end, "%s round %d: receive %d not posted", what, round, m);
			FH_OK(f->net->irecv(r, x.n, data, cap, tags, mhs, NULL, &rreq[m]));
		}
	}
	/* every clear-to-send landed before the first send (no idle poll in between); the
	 * messages before the last are single, so slot m has sequence head + m */
	for (m = 0; m < N; m++) {
		struct nv_send_comm *sc = s;
		const struct nv_cts_entry *e =
			((struct nv_send_ctrl *)sc->base.ctrl)->fifo[(sc->head + (uint64_t)m) %
								       NV_FIFO_SLOTS];

		while (__atomic_load_n(&e[0].seq, __ATOMIC_ACQUIRE) != sc->head + (uint64_t)m + 1) {
			FH_CHECK(fh_now() < end, "%s round %d: CTS %d did not land", what, round, m);
			usleep(100);
		}
	}
	for (m = 0; m < N; m++) {
		struct msg x = round_msg(big, m);

		for (k = 0; m == fill && k < ((struct nv_comm *)s)->nqps; k++) /* the premise */
			FH_CHECK(((struct nv_comm *)s)->qps[k].outstanding == fill,
				 "%s round %d: QP %d holds %d WRs before the multi-WR message, want "
				 "%d", what, round, k, ((struct nv_comm *)s)->qps[k].outstanding, fill);
		for (k = 0; k < x.n; k++) {
			char *data = sbuf + ((size_t)m * 4 + (size_t)k) * CAP;
			ncclResult_t rc;

			fh_fill(data, x.size[k], seed_of(round, m, k));
			sreq[m][k] = NULL;
			while (!sreq[m][k]) {
				FH_CHECK(fh_now() < end, "%s round %d: send %d.%d did not go", what,
					 round, m, k);
				rc = f->net->isend(s, data, x.size[k], TAG + k, smh, NULL, &sreq[m][k]);
				if (rc != ncclSuccess) {
					fh_warn_dump();
					FH_FAIL("%s round %d: isend of message %d.%d (%zu bytes, after "
						"%d one-WR messages) failed: %d", what, round, m, k,
						x.size[k], fill, (int)rc);
				}
			}
		}
	}
	for (m = 0; m < N; m++) {
		struct msg x = round_msg(big, m);
		ncclResult_t res;

		for (k = 0; k < x.n; k++)
			FH_CHECK(fh_wait(f, sreq[m][k], NULL, &res, BOUND) == 0 && res == ncclSuccess,
				 "%s round %d: send %d.%d failed (%d)", what, round, m, k, (int)res);
		FH_CHECK(fh_wait(f, rreq[m], sz, &res, BOUND) == 0 && res == ncclSuccess,
			 "%s round %d: receive %d failed (%d)", what, round, m, (int)res);
		for (k = 0; k < x.n; k++) {
			const char *b = rbuf + ((size_t)m * 4 + (size_t)k) * CAP;

			FH_CHECK((size_t)sz[k] == x.size[k], "%s round %d: message %d.%d: %d bytes, "
				 "sent %zu", what, round, m, k, sz[k], x.size[k]);
			FH_CHECK(fh_check_pattern(b, x.size[k], seed_of(round, m, k)) == 0 &&
					 (x.size[k] == CAP || (unsigned char)b[x.size[k]] == 0xee),
				 "%s round %d: message %d.%d (%zu bytes) corrupt", what, round, m, k,
				 x.size[k]);
		}
	}
}

static void run(const char *qps, int nfill, const char *what)
{
	static const struct msg bigs[] = {
		{ 1, { 2048 } },  { 1, { 12288 } }, { 1, { 16384 } },
		{ 4, { 64, 2048, 4096, 6144 } },
	};
	struct fh f;
	void *s, *r, *smh, *rmh;
	int dev, i, rc;
	double t0 = fh_now();

	fill = nfill;
	setenv("NCCL_IB_QPS_PER_CONNECTION", qps, 1);
	setenv("NCCL_IB_SPLIT_DATA_ON_QPS", "1", 1);
	rc = fh_open(&f);
	if (rc)
		exit(rc);
	dev = fh_dev_by_name(&f, "simib0");
	FH_CHECK(dev >= 0, "simverbs did not give simib0");
	fh_pair(&f, dev, &s, &r, 20);
	FH_CHECK(((struct nv_comm *)s)->qps[0].max_wr == MAXWR,
		 "the send queue holds %d WRs, want %d", ((struct nv_comm *)s)->qps[0].max_wr,
		 MAXWR);
	FH_CHECK(((struct nv_send_comm *)s)->wr_bytes == 4096, "writes of %u bytes, want 4096",
		 ((struct nv_send_comm *)s)->wr_bytes);
	smh = fh_reg(&f, s, sbuf, (size_t)MAXWR * 4 * CAP);
	rmh = fh_reg(&f, r, rbuf, (size_t)MAXWR * 4 * CAP);
	for (i = 0; i < 3 * (int)(sizeof(bigs) / sizeof(bigs[0])); i++)
		one_round(&f, s, r, smh, rmh, &bigs[i % 4], i, what);
	FH_CHECK(fh_warn_count() == 0, "%s: %d WARN(s)", what, fh_warn_count());
	FH_OK(f.net->deregMr(s, smh));
	FH_OK(f.net->deregMr(r, rmh));
	FH_OK(f.net->closeSend(s));
	FH_OK(f.net->closeRecv(r));
	fh_close(&f);
	fh_log("%s: %d rounds of %d one-WR messages then 2, 4, 5 or 6 WRs: no post failed, every "
	       "byte right (%.2f s)", what, i, fill, fh_now() - t0);
}

int main(void)
{
	fh_watchdog(120);
	setenv("SIMVERBS_DEVICES", "simib0:ll=ib,max_qp_wr=18,max_msg_sz=4096", 1);
	setenv("NCCL_IB_ADAPTIVE_ROUTING", "1", 1);
	setenv("NCCL_IB_AR_THRESHOLD", "1024", 1);
	unsetenv("NCCL_IB_HCA");
	sbuf = aligned_alloc(4096, (size_t)MAXWR * 4 * CAP);
	rbuf = aligned_alloc(4096, (size_t)MAXWR * 4 * CAP);
	FH_CHECK(sbuf && rbuf, "out of memory");
	run("1", MAXWR - 1, "one QP");
	run("2", MAXWR - 2, "two QPs, data split");
	free(sbuf);
	free(rbuf);
	fh_log("fault_sqroom: ok");
	return 0;
}
