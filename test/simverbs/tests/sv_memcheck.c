/*
 * valgrind memcheck and peer writes: bytes that another process writes with
 * process_vm_writev (an RDMA WRITE into a remotely writable MR, a SEND into
 * a posted receive buffer) are invisible to memcheck in the target, so
 * simverbs declares those ranges defined, as a NIC's DMA would make them.
 * The program re-runs itself under valgrind (exit 77 when valgrind or its
 * header is absent) and reads memcheck's definedness bits of never-locally-
 * written buffers after the peer wrote them; a buffer nobody wrote must still
 * read as undefined (proves the check can see the difference).
 */
#include "svt.h"

#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define HAVE_MEMCHECK 1
#endif
#endif

#ifdef HAVE_MEMCHECK

#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)
#define WLEN 65536u
#define SLEN 4096u

static struct svt_pipe P;

/* 1 when every byte of [p, p+len) is defined for memcheck, 0 when some byte
 * is not, -1 when memcheck cannot tell. */
static int all_defined(const void *p, size_t len)
{
	unsigned char *vbits = malloc(len);
	int rc;

	SVT_CHECK(vbits);
	memset(vbits, 0, len);
	if (VALGRIND_GET_VBITS(p, vbits, len) != 1) {
		free(vbits);
		return -1;
	}
	rc = 1;
	for (size_t i = 0; i < len; i++)
		if (vbits[i])
			rc = 0;
	free(vbits);
	return rc;
}

struct target {
	struct svt_info info;
	uint64_t send_addr;
	uint32_t send_rkey;
};

static void writer(void)
{
	struct svt_ep e;
	struct svt_info me;
	struct target t;
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;

	svt_ep_init(&e, "simib0", 16, 8, WLEN, ACC);
	memset(e.buf, 0x5a, WLEN);
	me = svt_ep_info(&e);
	svt_send(&P, &me, sizeof(me));
	svt_recv(&P, &t, sizeof(t));
	svt_connect(&e, &t.info, 14, 7);
	svt_sync(&P);
	SVT_EQ(svt_post_write(&e, IBV_WR_RDMA_WRITE_WITH_IMM, (uintptr_t)e.buf, WLEN, e.mr->lkey,
			      t.info.addr, t.info.rkey, 1, IBV_SEND_SIGNALED, 1), 0);
	SVT_EQ(svt_poll1(e.cq, 60000).status, IBV_WC_SUCCESS);
	sge = (struct ibv_sge){ .addr = (uintptr_t)e.buf, .length = SLEN, .lkey = e.mr->lkey };
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 2;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	SVT_EQ(ibv_post_send(e.qp, &wr, &bad), 0);
	SVT_EQ(svt_poll1(e.cq, 60000).status, IBV_WC_SUCCESS);
	svt_sync(&P);
	svt_ep_fini(&e);
	exit(0);
}

static int run(void)
{
	struct svt_ep e;
	struct svt_info peer;
	struct target t;
	struct ibv_mr *smr;
	char *sbuf, *untouched;
	pid_t pid;
	int ok = 1;

	pid = svt_fork_peer(&P, writer);
	/* buffers that this process never writes */
	svt_ep_init(&e, "simib0", 16, 8, 0, ACC);
	e.buf = malloc(WLEN);
	sbuf = malloc(SLEN);
	untouched = malloc(SLEN);
	SVT_CHECK(e.buf && sbuf && untouched);
	e.len = WLEN;
	e.mr = ibv_reg_mr(e.pd, e.buf, WLEN, ACC);
	smr = ibv_reg_mr(e.pd, sbuf, SLEN, IBV_ACCESS_LOCAL_WRITE);
	SVT_CHECK(e.mr && smr);
	if (all_defined(untouched, SLEN) != 0) {
		fprintf(stderr, "memcheck does not report a fresh malloc as undefined: skip\n");
		exit(77);
	}
	memset(&t, 0, sizeof(t));
	t.info = svt_ep_info(&e);
	svt_recv(&P, &peer, sizeof(peer));
	svt_send(&P, &t, sizeof(t));
	svt_connect(&e, &peer, 14, 7);
	SVT_EQ(svt_post_recv(&e, 0, 0, 0, 10), 0);
	SVT_EQ(svt_post_recv(&e, (uintptr_t)sbuf, SLEN, smr->lkey, 11), 0);
	svt_sync(&P);
	SVT_EQ(svt_poll1(e.cq, 60000).opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	SVT_EQ(svt_poll1(e.cq, 60000).opcode, IBV_WC_RECV);
	svt_sync(&P);
	SVT_EQ(svt_wait_child(pid), 0);
	if (all_defined(e.buf, WLEN) != 1) {
		fprintf(stderr, "RDMA WRITE target (remotely writable MR) reads as undefined\n");
		ok = 0;
	}
	if (all_defined(sbuf, SLEN) != 1) {
		fprintf(stderr, "SEND target (posted receive buffer) reads as undefined\n");
		ok = 0;
	}
	if (ok && ((unsigned char)e.buf[WLEN - 1] != 0x5a || (unsigned char)sbuf[0] != 0x5a)) {
		fprintf(stderr, "peer data missing\n");
		ok = 0;
	}
	if (all_defined(untouched, SLEN) != 0) {
		fprintf(stderr, "a buffer nobody wrote reads as defined\n");
		ok = 0;
	}
	SVT_EQ(ibv_dereg_mr(smr), 0);
	svt_ep_fini(&e);
	free(sbuf);
	free(untouched);
	close(P.rd);
	close(P.wr);
	if (ok)
		printf("peer-written RDMA WRITE and SEND targets are defined for memcheck: ok\n");
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	char self[4096];
	ssize_t n;

	(void)argc;
	if (RUNNING_ON_VALGRIND) {
		svt_control_fn_get();
		return run();
	}
	/* not attached to the fabric before the exec (same pid afterwards) */
	if (!dlsym(RTLD_DEFAULT, "simverbs_control")) {
		fprintf(stderr, "not running on simverbs (LD_LIBRARY_PATH?): skip\n");
		return 77;
	}
	if (system("valgrind --version >/dev/null 2>&1") != 0) {
		fprintf(stderr, "valgrind not installed: skip\n");
		return 77;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	SVT_CHECK(n > 0);
	self[n] = 0;
	fflush(NULL);
	execlp("valgrind", "valgrind", "-q", self, (char *)NULL);
	perror(argv[0]);
	return 1;
}

#else

int main(void)
{
	fprintf(stderr, "built without <valgrind/memcheck.h>: skip\n");
	return 77;
}

#endif
