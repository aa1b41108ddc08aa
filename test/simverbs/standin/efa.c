/*
 * Stand-in for rdma-core's libefa.so.1 (AWS EFA direct verbs).
 *
 * Debian's perftest programs bind efadv_* symbols at load time (immediate binding), so a library
 * of this name must export them under EFA_1.1 (see efa.map). simverbs devices are not EFA
 * devices: queries fail with EOPNOTSUPP, as the real library answers for a non-EFA device, and
 * constructors return NULL with errno = EOPNOTSUPP. Depends on nothing from libibverbs.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/efadv.h>

#define SV_EXPORT __attribute__((visibility("default")))

SV_EXPORT int efadv_query_device(struct ibv_context *ibvctx, struct efadv_device_attr *attr,
				 uint32_t inlen)
{
	(void)ibvctx;
	(void)attr;
	(void)inlen;
	return EOPNOTSUPP;
}

SV_EXPORT struct ibv_qp *efadv_create_qp_ex(struct ibv_context *ibvctx,
					    struct ibv_qp_init_attr_ex *attr_ex,
					    struct efadv_qp_init_attr *efa_attr, uint32_t inlen)
{
	(void)ibvctx;
	(void)attr_ex;
	(void)efa_attr;
	(void)inlen;
	errno = EOPNOTSUPP;
	return NULL;
}

SV_EXPORT struct ibv_qp *efadv_create_driver_qp(struct ibv_pd *ibvpd,
						struct ibv_qp_init_attr *attr,
						uint32_t driver_qp_type)
{
	(void)ibvpd;
	(void)attr;
	(void)driver_qp_type;
	errno = EOPNOTSUPP;
	return NULL;
}

SV_EXPORT int efadv_query_ah(struct ibv_ah *ibvah, struct efadv_ah_attr *attr, uint32_t inlen)
{
	(void)ibvah;
	(void)attr;
	(void)inlen;
	return EOPNOTSUPP;
}
