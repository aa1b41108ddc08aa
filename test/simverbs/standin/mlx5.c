/*
 * Stand-in for rdma-core's libmlx5.so.1 (the mlx5 "direct verbs" library).
 *
 * Debian's perftest programs are linked against libmlx5.so.1 with immediate binding, so they
 * only start if a library of that name exports the mlx5dv_* symbols they reference, under the
 * symbol versions they reference (see mlx5.map). simverbs devices are not mlx5 devices: every
 * function here reports "no vendor capability" and never touches the verbs objects passed in,
 * so this library depends on nothing from libibverbs.
 *
 * Contract: probes answer "not supported" (false / EOPNOTSUPP), constructors return NULL with
 * errno = EOPNOTSUPP, destructors reject any object (none can exist) with EINVAL.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <infiniband/mlx5dv.h>

#define SV_EXPORT __attribute__((visibility("default")))

SV_EXPORT bool mlx5dv_is_supported(struct ibv_device *device)
{
	(void)device;
	return false;
}

SV_EXPORT int mlx5dv_query_device(struct ibv_context *ctx_in, struct mlx5dv_context *attrs_out)
{
	(void)ctx_in;
	(void)attrs_out;
	return EOPNOTSUPP;
}

SV_EXPORT struct ibv_context *mlx5dv_open_device(struct ibv_device *device,
						 struct mlx5dv_context_attr *attr)
{
	(void)device;
	(void)attr;
	errno = EOPNOTSUPP;
	return NULL;
}

SV_EXPORT struct ibv_qp *mlx5dv_create_qp(struct ibv_context *context,
					  struct ibv_qp_init_attr_ex *qp_attr,
					  struct mlx5dv_qp_init_attr *mlx5_qp_attr)
{
	(void)context;
	(void)qp_attr;
	(void)mlx5_qp_attr;
	errno = EOPNOTSUPP;
	return NULL;
}

/* No QP can come from mlx5dv_create_qp, so no ibv_qp_ex has an mlx5 extension. */
SV_EXPORT struct mlx5dv_qp_ex *mlx5dv_qp_ex_from_ibv_qp_ex(struct ibv_qp_ex *qp)
{
	(void)qp;
	errno = EOPNOTSUPP;
	return NULL;
}

SV_EXPORT int mlx5dv_devx_general_cmd(struct ibv_context *context, const void *in, size_t inlen,
				      void *out, size_t outlen)
{
	(void)context;
	(void)in;
	(void)inlen;
	(void)out;
	(void)outlen;
	return EOPNOTSUPP;
}

SV_EXPORT struct mlx5dv_mkey *mlx5dv_create_mkey(struct mlx5dv_mkey_init_attr *mkey_init_attr)
{
	(void)mkey_init_attr;
	errno = EOPNOTSUPP;
	return NULL;
}

SV_EXPORT int mlx5dv_destroy_mkey(struct mlx5dv_mkey *mkey)
{
	(void)mkey;
	return EINVAL;
}

SV_EXPORT int mlx5dv_crypto_login(struct ibv_context *context,
				  struct mlx5dv_crypto_login_attr *login_attr)
{
	(void)context;
	(void)login_attr;
	return EOPNOTSUPP;
}

SV_EXPORT int mlx5dv_crypto_logout(struct ibv_context *context)
{
	(void)context;
	return EOPNOTSUPP;
}

SV_EXPORT struct mlx5dv_dek *mlx5dv_dek_create(struct ibv_context *context,
					       struct mlx5dv_dek_init_attr *init_attr)
{
	(void)context;
	(void)init_attr;
	errno = EOPNOTSUPP;
	return NULL;
}

SV_EXPORT int mlx5dv_dek_destroy(struct mlx5dv_dek *dek)
{
	(void)dek;
	return EINVAL;
}
