/*
 * rma.h - one-sided operations for NCCL's RMA plugin tables (rma_plugin.c):
 * a layer of its own above the devices, socket and verbs seam layers, beside
 * the two-sided comm layer (it shares nothing with it but the devices).
 *
 * Objects and ownership:
 *  - nv_rma_listen: a TCP listener on the handshake interface (its address is
 *    the 128-byte handle NCCL exchanges).
 *  - nv_rma_coll (connect): nranks ranks joined in a ring of TCP connections
 *    (to rank+1, from rank-1) for the collective exchanges (allgather): QP
 *    numbers at createContext, window addresses and keys at regMrSym. Holds a
 *    reference on the device's PD; its windows and contexts must be gone
 *    before closeColl (EBUSY-like refusal otherwise).
 *  - nv_rma_ctx (createContext): per context index one CQ and one RC QP per
 *    rank (rank itself included, a QP connected to itself), a request pool
 *    and an 8-byte-per-slot scratch MR for atomic results and flush reads.
 *  - nv_rma_win (regMrSym): one MR on this rank, every rank's base and rkey.
 *
 * Ordering: a put's data and its signal go on one QP, data first, so a peer
 * that sees the signal sees the data (RC executes a QP's requests in order;
 * the atomic follows the writes). Signals are RDMA fetch-and-adds (INC: +1,
 * ADD: +signalValue). A device without atomics is refused at createContext.
 *
 * Errors: every bound (context, rank, offsets and sizes against both windows,
 * signal alignment) is checked before posting, with a WARN naming it, and
 * returns NV_ERR_INVALID. A failed completion makes its context's error
 * sticky (queryLastError), names the peer rank and the status, and fails its
 * request and every later call on that context. A ring neighbour that closed
 * its socket (killed) is reported the same way by rmaProgress/queryLastError.
 *
 * Threads: one thread per context at a time (NCCL's proxy); no locks.
 */
#ifndef NV_RMA_H
#define NV_RMA_H

#include <stdbool.h>
#include <stdint.h>
#include <infiniband/verbs.h>
#include "nv_common.h"
#include "sock.h"

struct nv_ctx;
struct nv_dev;
struct nv_hca;

#define NV_RMA_MAX_CONTEXTS 32
#define NV_RMA_MAX_RANKS 4096
#define NV_RMA_POOL 1024        /* requests per context */
#define NV_RMA_QP_DEPTH 128     /* send WRs per QP */
#define NV_RMA_HANDLE_MAGIC 0x4e56524du /* "NVRM" */

struct nv_rma_listen {
	int fd;
	int dev;
	struct nv_sock_addr addr;
};

struct nv_rma_coll {
	int nranks, rank;
	int vdev;
	struct nv_dev *dev;             /* the first device of vdev */
	struct nv_hca *hca;
	struct ibv_pd *pd;              /* a reference on hca's PD */
	bool atomics;                   /* the HCA has RDMA atomics */
	int next_fd, prev_fd;           /* ring sockets (-1 when nranks == 1) */
	int nwins, nctxs;               /* children: closeColl refuses while any */
	uint64_t next_alive_check;      /* ns */
};

struct nv_rma_req {
	struct nv_rma_ctx *ctx;
	uint32_t qp_rank;               /* the QP it went on */
	uint16_t nwr;                   /* WRs posted (one signalled: the last) */
	uint8_t in_use, done;
	nv_status_t status;
};

/* One context index: a QP per rank, one CQ. */
struct nv_rma_cx {
	struct ibv_cq *cq;
	struct ibv_qp **qps;            /* [nranks] */
	uint32_t *outstanding;          /* [nranks] WRs posted, not yet completed */
	uint32_t next_slot;             /* where the pool scan starts */
	nv_status_t err;                /* sticky */
	char why[256];
};

struct nv_rma_ctx {
	struct nv_rma_coll *coll;
	int ncx;
	int traffic_class;
	struct nv_rma_cx *cx;           /* [ncx] */
	struct nv_rma_req *pool;        /* [ncx * NV_RMA_POOL] */
	uint64_t *scratch;              /* [ncx * NV_RMA_POOL] atomic results / flush landing */
	struct ibv_mr *scratch_mr;
};

struct nv_rma_win {
	struct nv_rma_coll *coll;
	struct ibv_mr *mr;
	uint64_t *base;                 /* [nranks] */
	uint64_t *size;                 /* [nranks] */
	uint32_t *rkey;                 /* [nranks] */
};

/* rma_coll.c */
nv_status_t nv_rma_listen(int vdev, void *handle, struct nv_rma_listen **out);
nv_status_t nv_rma_close_listen(struct nv_rma_listen *l);
nv_status_t nv_rma_connect(void *handles[], int nranks, int rank, struct nv_rma_listen *l,
			   struct nv_rma_coll **out);
nv_status_t nv_rma_close_coll(struct nv_rma_coll *c);
/* every rank's len bytes of `mine` into all[rank * len] (collective, blocking) */
nv_status_t nv_rma_allgather(struct nv_rma_coll *c, const void *mine, void *all, size_t len);
/* -1 when both ring neighbours are alive (checked at most every 100 ms), else the rank gone */
int nv_rma_ring_dead(struct nv_rma_coll *c);
nv_status_t nv_rma_reg(struct nv_rma_coll *c, void *data, size_t size, int type, uint64_t offset,
		       int fd, struct nv_rma_win **out);
nv_status_t nv_rma_dereg(struct nv_rma_coll *c, struct nv_rma_win *w);

/* rma_ctx.c */
nv_status_t nv_rma_create_ctx(struct nv_rma_coll *c, int ncx, int traffic_class,
			      struct nv_rma_ctx **out);
nv_status_t nv_rma_destroy_ctx(struct nv_rma_ctx *x);

/* rma_ops.c; *req NULL with NV_OK: the queue is full, call again */
nv_status_t nv_rma_put(struct nv_rma_ctx *x, int cxi, uint64_t src_off, struct nv_rma_win *src,
		       size_t size, uint64_t dst_off, struct nv_rma_win *dst, uint32_t rank,
		       uint64_t sig_off, struct nv_rma_win *sig, uint64_t sig_value, uint32_t sig_op,
		       void **req);
nv_status_t nv_rma_get(struct nv_rma_ctx *x, int cxi, uint64_t remote_off, struct nv_rma_win *remote,
		       size_t size, uint64_t local_off, struct nv_rma_win *local, uint32_t rank,
		       void **req);
nv_status_t nv_rma_flush(struct nv_rma_ctx *x, int cxi, struct nv_rma_win *w, uint32_t rank,
			 void **req);
nv_status_t nv_rma_test(void *req, int *done);
nv_status_t nv_rma_progress(struct nv_rma_ctx *x);
bool nv_rma_has_error(struct nv_rma_ctx *x);

#endif /* NV_RMA_H */
