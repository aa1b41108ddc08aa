/*
 * ibv.h - the verbs seam. Every verbs call the plugin makes goes through a
 * function here (never a direct ibv_* call elsewhere).
 *
 * Contract:
 *  - Control-path wrappers (ibv.c) return nv_status_t and, on failure, log one
 *    NV_WARN naming the verb, the device (and port / QPN where there is one)
 *    and the errno text taken from the RIGHT source: the return value of int
 *    verbs, errno for pointer verbs (NULL result). errno is left set to the
 *    failing code so callers can add a hint (e.g. ENOMEM on reg_mr).
 *  - Verbs whose failure is expected in normal operation (capability probes)
 *    have *_probe variants that return the errno value and log at INFO only.
 *  - Data-path wrappers (post_send, post_recv, poll_cq) are static inline,
 *    allocation- and lock-free, and log only on error.
 *  - Optional verbs missing from the rdma-core we were built against, or from
 *    the one loaded at run time, report EOPNOTSUPP.
 */
#ifndef NV_IBV_H
#define NV_IBV_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>
#include "config.h"
#include "nv_common.h"

/* libibverbs is bound at run time (ibv_load.c): the first that opens of `lib`
 * (NCCL_IBVERBS_LIB, from the caller; skipped when NULL or empty),
 * libibverbs.so and libibverbs.so.1, as NCCL. Idempotent
 * and thread-safe (the first library loaded stays); logs one WARN when no
 * usable library is found and one INFO per missing optional verb. Must have
 * succeeded before nv_ibv_get_device_list(); every other wrapper may assume
 * it did (no device, context or object can exist otherwise). */
nv_status_t nv_ibv_load(const char *lib);
bool nv_ibv_loaded(void);
/* Lines for nccl-net-verbs-info: each optional verb the loaded library lacks
 * and what that costs, or that none is missing. */
void nv_ibv_describe(FILE *out);

/* Device list and context */
nv_status_t nv_ibv_get_device_list(struct ibv_device ***list, int *n);
void nv_ibv_free_device_list(struct ibv_device **list);
const char *nv_ibv_device_name(struct ibv_device *dev); /* never NULL */
nv_status_t nv_ibv_open_device(struct ibv_device *dev, struct ibv_context **ctx);
nv_status_t nv_ibv_close_device(struct ibv_context *ctx);
nv_status_t nv_ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr);
nv_status_t nv_ibv_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
/* Port speed from ibv_query_port_speed (IBVERBS_1.16) in Mb/s: 0 or errno;
 * EOPNOTSUPP when the verb is absent. No WARN. */
int nv_ibv_query_port_speed_probe(struct ibv_context *ctx, uint8_t port, uint64_t *mbps);
/* GID entry with its type. Returns 0 or the errno value (no WARN: unreadable
 * entries are normal in containers); EOPNOTSUPP when the verb is unavailable. */
int nv_ibv_query_gid_ex_probe(struct ibv_context *ctx, uint8_t port, int index,
			      struct ibv_gid_entry *entry);
/* Legacy GID read without logging; 0 or the errno value. */
int nv_ibv_query_gid_probe(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
nv_status_t nv_ibv_query_pkey(struct ibv_context *ctx, uint8_t port, int index, uint16_t *pkey);

/* Protection domain */
nv_status_t nv_ibv_alloc_pd(struct ibv_context *ctx, struct ibv_pd **pd);
nv_status_t nv_ibv_dealloc_pd(struct ibv_pd *pd);

/* Memory regions. `what` names the buffer in messages ("host data", "CTS FIFO"). */
nv_status_t nv_ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access,
			  const char *what, struct ibv_mr **mr);
nv_status_t nv_ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
				int access, const char *what, struct ibv_mr **mr);
nv_status_t nv_ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t len, uint64_t iova,
				 int fd, int access, const char *what, struct ibv_mr **mr);
/* The dma-buf capability probe: registers fd -1, returns the errno seen
 * (EBADF: supported; EOPNOTSUPP/EPROTONOSUPPORT: not). Never logs WARN. */
int nv_ibv_reg_dmabuf_mr_probe(struct ibv_pd *pd);
nv_status_t nv_ibv_dereg_mr(struct ibv_mr *mr);
bool nv_ibv_have_iova2(void); /* ibv_reg_mr_iova2 usable (relaxed ordering) */

/* Completion queues and queue pairs */
nv_status_t nv_ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
			     struct ibv_cq **cq);
nv_status_t nv_ibv_destroy_cq(struct ibv_cq *cq);
nv_status_t nv_ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init, struct ibv_qp **qp);
/* Retries ETIMEDOUT (any error when `all`) up to `cnt` times, sleeping
 * sleep_ms x attempt between tries (INFO each); WARNs only on final failure.
 * Set once at init from NCCL_IB_MQP_RETRY_ALL/_CNT/_SLEEP_MSEC. */
nv_status_t nv_ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
void nv_ibv_set_mqp_retry(bool all, int cnt, int sleep_ms);
nv_status_t nv_ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
			    struct ibv_qp_init_attr *init);
nv_status_t nv_ibv_destroy_qp(struct ibv_qp *qp);

/* ECE: 0 or errno; EOPNOTSUPP means "not supported here" and is not logged. */
int nv_ibv_query_ece(struct ibv_qp *qp, uint32_t *vendor_id, uint32_t *options, uint32_t *comp_mask);
int nv_ibv_set_ece(struct ibv_qp *qp, uint32_t vendor_id, uint32_t options, uint32_t comp_mask);

/* Async events (device.c's event thread). get returns 0 or errno (EAGAIN when
 * the fd is non-blocking and nothing is pending). */
int nv_ibv_get_async_event(struct ibv_context *ctx, struct ibv_async_event *ev);
void nv_ibv_ack_async_event(struct ibv_async_event *ev);

/* Text helpers */
const char *nv_ibv_wc_status_str(enum ibv_wc_status st);
const char *nv_ibv_event_str(enum ibv_event_type ev);
const char *nv_ibv_port_state_str(enum ibv_port_state st);
const char *nv_ibv_qp_state_str(enum ibv_qp_state st);
/* Formats a GID as an IPv6 address into buf (>= 46 bytes); returns buf. */
char *nv_ibv_gid_str(const union ibv_gid *gid, char *buf, size_t len);
/* Logs a data-path failure; out of line so the inlines stay small. */
void nv_ibv_log_datapath_error(const char *verb, struct ibv_context *ctx, uint32_t qpn, int err);

/* ---- data path ---------------------------------------------------------- */

/* Returns NV_OK or NV_ERR_SYSTEM (logged); *bad as from ibv_post_send. */
static inline nv_status_t nv_ibv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
					   struct ibv_send_wr **bad)
{
	int ret = ibv_post_send(qp, wr, bad);

	if (nv_likely(ret == 0))
		return NV_OK;
	nv_ibv_log_datapath_error("ibv_post_send", qp->context, qp->qp_num, ret);
	errno = ret;
	return NV_ERR_SYSTEM;
}

static inline nv_status_t nv_ibv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
					   struct ibv_recv_wr **bad)
{
	int ret = ibv_post_recv(qp, wr, bad);

	if (nv_likely(ret == 0))
		return NV_OK;
	nv_ibv_log_datapath_error("ibv_post_recv", qp->context, qp->qp_num, ret);
	errno = ret;
	return NV_ERR_SYSTEM;
}

/* Returns NV_OK with *n completions (0..max) or NV_ERR_SYSTEM (logged). */
static inline nv_status_t nv_ibv_poll_cq(struct ibv_cq *cq, int max, struct ibv_wc *wc, int *n)
{
	int ret = ibv_poll_cq(cq, max, wc);

	if (nv_likely(ret >= 0)) {
		*n = ret;
		return NV_OK;
	}
	*n = 0;
	nv_ibv_log_datapath_error("ibv_poll_cq", cq->context, 0, ret);
	return NV_ERR_SYSTEM;
}

#endif /* NV_IBV_H */
