/*
 * Helpers shared by the simverbs tests: a verbs "endpoint" (context, PD, CQ,
 * QP, one registered buffer), connection info exchanged over a pipe pair
 * between forked processes, and checks that report file:line.
 */
#ifndef SVT_H
#define SVT_H

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SVT_CHECK(c) do { \
	if (!(c)) { \
		fprintf(stderr, "%s:%d: check failed: %s (errno %d %s)\n", __FILE__, __LINE__, \
			#c, errno, strerror(errno)); \
		exit(1); \
	} } while (0)
#define SVT_EQ(a, b) do { \
	long long _a = (long long)(a), _b = (long long)(b); \
	if (_a != _b) { \
		fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n", __FILE__, __LINE__, \
			#a, _a, #b, _b); \
		exit(1); \
	} } while (0)

struct svt_info {
	uint32_t qpn;
	uint16_t lid;
	uint16_t pad;
	uint32_t rkey;
	uint32_t pad2;
	uint64_t addr;
	union ibv_gid gid;
};

struct svt_ep {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;
	size_t len;
	int port;
	int gid_index;
	struct ibv_port_attr pattr;
};

struct svt_pipe {
	int to_child[2], to_parent[2];
	int rd, wr;
};

typedef int (*svt_control_fn)(const char *);

/* Tests run only on simverbs (not on a real libibverbs). */
static inline svt_control_fn svt_control_fn_get(void)
{
	svt_control_fn f = (svt_control_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "simverbs_control");

	if (!f) {
		struct ibv_device **l = ibv_get_device_list(NULL);

		ibv_free_device_list(l);
		f = (svt_control_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "simverbs_control");
	}
	if (!f) {
		fprintf(stderr, "not running on simverbs (LD_LIBRARY_PATH?): skip\n");
		exit(77);
	}
	return f;
}

static inline int svt_control(const char *cmd)
{
	return svt_control_fn_get()(cmd);
}

static inline uint64_t svt_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline struct ibv_context *svt_open(const char *name)
{
	int n;
	struct ibv_device **l = ibv_get_device_list(&n);
	struct ibv_context *c = NULL;

	SVT_CHECK(l);
	for (int i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(l[i]), name))
			c = ibv_open_device(l[i]);
	ibv_free_device_list(l);
	SVT_CHECK(c);
	return c;
}

/* Opens dev, allocates PD, CQ(cqe), QP(wr) and registers len bytes. */
static inline void svt_ep_init(struct svt_ep *e, const char *dev, int cqe, int wr, size_t len,
			       int access)
{
	struct ibv_qp_init_attr qa;

	memset(e, 0, sizeof(*e));
	e->ctx = svt_open(dev);
	e->port = 1;
	SVT_EQ(ibv_query_port(e->ctx, 1, &e->pattr), 0);
	e->gid_index = e->pattr.link_layer == IBV_LINK_LAYER_ETHERNET ? 3 : 0;
	e->pd = ibv_alloc_pd(e->ctx);
	SVT_CHECK(e->pd);
	e->cq = ibv_create_cq(e->ctx, cqe, NULL, NULL, 0);
	SVT_CHECK(e->cq);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = e->cq;
	qa.recv_cq = e->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = (uint32_t)wr;
	qa.cap.max_recv_wr = (uint32_t)wr;
	qa.cap.max_send_sge = 4;
	qa.cap.max_recv_sge = 4;
	qa.cap.max_inline_data = 64;
	e->qp = ibv_create_qp(e->pd, &qa);
	SVT_CHECK(e->qp);
	e->len = len;
	if (len) {
		e->buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
		SVT_CHECK(e->buf);
		memset(e->buf, 0, len);
		e->mr = ibv_reg_mr(e->pd, e->buf, len, access);
		SVT_CHECK(e->mr);
	}
}

static inline void svt_ep_fini(struct svt_ep *e)
{
	if (e->qp)
		SVT_EQ(ibv_destroy_qp(e->qp), 0);
	if (e->mr)
		SVT_EQ(ibv_dereg_mr(e->mr), 0);
	if (e->cq)
		SVT_EQ(ibv_destroy_cq(e->cq), 0);
	if (e->pd)
		SVT_EQ(ibv_dealloc_pd(e->pd), 0);
	if (e->ctx)
		SVT_EQ(ibv_close_device(e->ctx), 0);
	free(e->buf);
	memset(e, 0, sizeof(*e));
}

static inline struct svt_info svt_ep_info(const struct svt_ep *e)
{
	struct svt_info i;

	memset(&i, 0, sizeof(i));
	i.qpn = e->qp->qp_num;
	i.lid = e->pattr.lid;
	i.rkey = e->mr ? e->mr->rkey : 0;
	i.addr = (uintptr_t)e->buf;
	SVT_EQ(ibv_query_gid(e->ctx, 1, e->gid_index, &i.gid), 0);
	return i;
}

static inline int svt_to_init(struct svt_ep *e, int access)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = (uint8_t)e->port;
	a.qp_access_flags = (unsigned int)access;
	return ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			     IBV_QP_ACCESS_FLAGS);
}

static inline void svt_rtr_attr(const struct svt_ep *e, const struct svt_info *r,
				struct ibv_qp_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTR;
	a->path_mtu = e->pattr.active_mtu;	/* RoCE: follows the netdev MTU */
	a->dest_qp_num = r->qpn;
	a->max_dest_rd_atomic = 1;
	a->min_rnr_timer = 1;
	a->ah_attr.dlid = r->lid;
	a->ah_attr.port_num = (uint8_t)e->port;
	if (e->pattr.link_layer == IBV_LINK_LAYER_ETHERNET) {
		a->ah_attr.is_global = 1;
		a->ah_attr.grh.dgid = r->gid;
		a->ah_attr.grh.sgid_index = (uint8_t)e->gid_index;
		a->ah_attr.grh.hop_limit = 1;
	}
}

#define SVT_RTR_MASK (IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | \
		      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
#define SVT_RTS_MASK (IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | \
		      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)

static inline void svt_rts_attr(struct ibv_qp_attr *a, int timeout, int retry, int rnr)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTS;
	a->timeout = (uint8_t)timeout;
	a->retry_cnt = (uint8_t)retry;
	a->rnr_retry = (uint8_t)rnr;
	a->max_rd_atomic = 1;
}

/* INIT -> RTR -> RTS toward r. */
static inline void svt_connect(struct svt_ep *e, const struct svt_info *r, int timeout, int rnr)
{
	struct ibv_qp_attr a;
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

	SVT_EQ(svt_to_init(e, access), 0);
	svt_rtr_attr(e, r, &a);
	SVT_EQ(ibv_modify_qp(e->qp, &a, SVT_RTR_MASK), 0);
	svt_rts_attr(&a, timeout, 7, rnr);
	SVT_EQ(ibv_modify_qp(e->qp, &a, SVT_RTS_MASK), 0);
}

static inline void svt_pipe_init(struct svt_pipe *p)
{
	SVT_EQ(pipe(p->to_child), 0);
	SVT_EQ(pipe(p->to_parent), 0);
}

/* After fork: child = 1 in the child. */
static inline void svt_pipe_side(struct svt_pipe *p, int child)
{
	p->rd = child ? p->to_child[0] : p->to_parent[0];
	p->wr = child ? p->to_parent[1] : p->to_child[1];
	close(child ? p->to_child[1] : p->to_parent[1]);
	close(child ? p->to_parent[0] : p->to_child[0]);
}

/* Forks the peer process joined by p: the child runs fn, which never returns; the parent gets
 * the child's pid. */
static inline pid_t svt_fork_peer(struct svt_pipe *p, void (*fn)(void))
{
	pid_t pid;

	svt_pipe_init(p);
	fflush(stdout);
	pid = fork();
	SVT_CHECK(pid >= 0);
	if (!pid) {
		svt_pipe_side(p, 1);
		fn();
		exit(0);
	}
	svt_pipe_side(p, 0);
	return pid;
}

static inline void svt_send(struct svt_pipe *p, const void *b, size_t n)
{
	SVT_EQ(write(p->wr, b, n), (ssize_t)n);
}

static inline void svt_recv(struct svt_pipe *p, void *b, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(p->rd, (char *)b + got, n - got);

		SVT_CHECK(r > 0);
		got += (size_t)r;
	}
}

static inline void svt_sync(struct svt_pipe *p)
{
	char c = 's';

	svt_send(p, &c, 1);
	svt_recv(p, &c, 1);
}

/* Polls until one completion arrives or timeout_ms passes (then exit 1). */
static inline struct ibv_wc svt_poll1(struct ibv_cq *cq, int timeout_ms)
{
	struct ibv_wc wc;
	uint64_t end = svt_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	int n;

	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0) {
		if (svt_now_ns() > end) {
			fprintf(stderr, "timeout waiting for a completion\n");
			exit(1);
		}
	}
	SVT_EQ(n, 1);
	return wc;
}

/* Polls for up to ms; returns how many completions arrived (<= max). */
static inline int svt_poll_for(struct ibv_cq *cq, struct ibv_wc *wc, int max, int ms)
{
	uint64_t end = svt_now_ns() + (uint64_t)ms * 1000000ull;
	int got = 0;

	while (got < max && svt_now_ns() < end) {
		int n = ibv_poll_cq(cq, max - got, wc + got);

		SVT_CHECK(n >= 0);
		got += n;
	}
	return got;
}

static inline int svt_post_write(struct svt_ep *e, enum ibv_wr_opcode op, uint64_t laddr,
				 uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey,
				 uint32_t imm, int flags, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = laddr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = len ? 1 : 0;
	wr.opcode = op;
	wr.send_flags = (unsigned int)flags;
	wr.imm_data = imm;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(e->qp, &wr, &bad);
}

static inline int svt_post_recv(struct svt_ep *e, uint64_t addr, uint32_t len, uint32_t lkey,
				uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = len ? 1 : 0;
	return ibv_post_recv(e->qp, &wr, &bad);
}

static inline int svt_wait_child(pid_t pid)
{
	int st = 0;

	SVT_EQ(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#endif
