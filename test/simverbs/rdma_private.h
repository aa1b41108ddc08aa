/*
 * rdma-core's prototypes for the libibverbs exports that its installed headers
 * do not declare.  rdma-core declares them in libibverbs/driver.h and
 * libibverbs/marshall.h, which Debian's libibverbs-dev does not ship
 * (ibv_register_driver has been a compat-only symbol since rdma-core 13 and is
 * declared nowhere).  When <infiniband/driver.h> is installed it is used
 * instead, so the declarations can only be rdma-core's own.
 *
 * Contract: sv.h includes this header, so every simverbs definition of one of
 * these functions is compiled against rdma-core's declaration (a different
 * signature is a "conflicting types" error), and sv_protocheck.c, generated
 * from simverbs.map, proves that every exported symbol has such a
 * declaration.  Prototypes only (rdma-core v44, the ABI simverbs replaces).
 */
#ifndef SV_RDMA_PRIVATE_H
#define SV_RDMA_PRIVATE_H

#include <stddef.h>
#include <infiniband/verbs.h>
#include <infiniband/sa.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

#if defined(__has_include)
#if __has_include(<infiniband/driver.h>) && __has_include(<infiniband/marshall.h>)
#define SV_HAVE_RDMA_DRIVER_H 1
#endif
#endif

#ifdef SV_HAVE_RDMA_DRIVER_H
#include <infiniband/driver.h>
#include <infiniband/marshall.h>
#else
/* driver.h */
enum ibv_gid_type_sysfs {
	IBV_GID_TYPE_SYSFS_IB_ROCE_V1,
	IBV_GID_TYPE_SYSFS_ROCE_V2,
};

int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);
const char *ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
		       enum ibv_gid_type_sysfs *type);

/* marshall.h */
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src);
#endif

/* compat-1_0.c (IBVERBS_1.1): a no-op kept for old usnic providers. */
typedef struct ibv_device *(*ibv_driver_init_func_1_1)(const char *uverbs_sys_path,
							int abi_version);
void ibv_register_driver(const char *name, ibv_driver_init_func_1_1 init_func);

/* verbs.h of rdma-core 56+ (IBVERBS_1.16), newer than the v44 headers: the
 * port's speed in units of 100 Mb/s (NCCL 2.30's declaration of it). */
int ibv_query_port_speed(struct ibv_context *context, uint8_t port_num, uint64_t *port_speed);

#endif
