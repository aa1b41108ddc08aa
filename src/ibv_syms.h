/*
 * ibv_syms.h - libibverbs' entry points, bound at run time (ibv_load.c).
 * Private to the verbs seam: only ibv.c and ibv_load.c include it.
 *
 * Contract:
 *  - After nv_ibv_load() returned NV_OK, every required member is non-NULL
 *    and stays valid for the life of the process (the library is never
 *    closed once loaded: contexts and event threads may outlive a finalize).
 *  - Optional members are NULL when the loaded rdma-core lacks the symbol
 *    version; each wrapper then reports EOPNOTSUPP (or falls back, as noted).
 *  - Everything else in verbs.h that the plugin uses is a static inline that
 *    dispatches through the context's ops (post_send, post_recv, poll_cq,
 *    query_port's extended op) and needs no symbol.
 */
#ifndef NV_IBV_SYMS_H
#define NV_IBV_SYMS_H

#include <stdint.h>
#include <infiniband/verbs.h>
#include "config.h"

struct nv_ibv_syms {
	/* IBVERBS_1.1: required */
	struct ibv_device **(*get_device_list)(int *num);
	void (*free_device_list)(struct ibv_device **list);
	const char *(*get_device_name)(struct ibv_device *dev);
	struct ibv_context *(*open_device)(struct ibv_device *dev);
	int (*close_device)(struct ibv_context *ctx);
	int (*get_async_event)(struct ibv_context *ctx, struct ibv_async_event *ev);
	void (*ack_async_event)(struct ibv_async_event *ev);
	int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
	/* the compat entry point; ibv.c prefers the context's extended op */
	int (*query_port)(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *a);
	int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
	int (*query_pkey)(struct ibv_context *ctx, uint8_t port, int index, __be16 *pkey);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
	int (*dealloc_pd)(struct ibv_pd *pd);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access);
	int (*dereg_mr)(struct ibv_mr *mr);
	struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe, void *cq_ctx,
				    struct ibv_comp_channel *ch, int vector);
	int (*destroy_cq)(struct ibv_cq *cq);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *init);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
	int (*query_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
			struct ibv_qp_init_attr *init);
	int (*destroy_qp)(struct ibv_qp *qp);
	const char *(*event_type_str)(enum ibv_event_type ev);
	const char *(*wc_status_str)(enum ibv_wc_status st);
	const char *(*port_state_str)(enum ibv_port_state st);
	/* optional, by the version that introduced them */
	struct ibv_mr *(*reg_mr_iova2)(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
				       unsigned int access);		/* IBVERBS_1.8 */
#if HAVE_DECL_IBV_QUERY_ECE
	int (*query_ece)(struct ibv_qp *qp, struct ibv_ece *ece);	/* IBVERBS_1.10 */
	int (*set_ece)(struct ibv_qp *qp, struct ibv_ece *ece);		/* IBVERBS_1.10 */
#endif
#if HAVE_DECL_IBV_QUERY_GID_EX
	int (*query_gid_ex)(struct ibv_context *ctx, uint32_t port, uint32_t index,
			    struct ibv_gid_entry *e, uint32_t flags, size_t esz); /* 1.11 */
#endif
	struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t off, size_t len, uint64_t iova,
					int fd, int access);		/* IBVERBS_1.12 */
	/* speed in units of 100 Mb/s (NCCL's reading of it) */
	int (*query_port_speed)(struct ibv_context *ctx, uint8_t port, uint64_t *speed); /* 1.16 */
};

extern struct nv_ibv_syms nv_ibv_sym;

#endif /* NV_IBV_SYMS_H */
