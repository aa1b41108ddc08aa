/*
 * standin-check: the stand-in libmlx5.so.1 / libefa.so.1 in the build tree export every symbol
 * Debian's perftest binds, under the symbol version it binds (dlvsym), and each reports "no
 * vendor capability": probes false / EOPNOTSUPP, constructors NULL with errno EOPNOTSUPP,
 * destructors EINVAL. The libraries are opened by path from NV_TOP_BUILDDIR, so the system's
 * real providers can never satisfy the check by accident.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/efadv.h>
#include <infiniband/mlx5dv.h>

static int failures;

#define CHECK(cond, ...)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                 \
			fprintf(stderr, __VA_ARGS__);                                      \
			fputc('\n', stderr);                                               \
			failures++;                                                        \
		}                                                                          \
	} while (0)

static void *open_lib(const char *name)
{
	const char *top = getenv("NV_TOP_BUILDDIR");
	char path[4096];
	void *h;

	snprintf(path, sizeof(path), "%s/test/simverbs/.libs/%s", top ? top : ".", name);
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	CHECK(h, "dlopen(%s): %s", path, dlerror());
	return h;
}

/* Looks up sym@version; a missing one is a failure (perftest would not start). */
static void *need(void *h, const char *sym, const char *ver)
{
	void *p = h ? dlvsym(h, sym, ver) : NULL;

	CHECK(p, "%s@%s not exported", sym, ver);
	return p;
}

static void check_mlx5(void *h)
{
	__typeof__(mlx5dv_is_supported) *is_sup = need(h, "mlx5dv_is_supported", "MLX5_1.8");
	__typeof__(mlx5dv_query_device) *query = need(h, "mlx5dv_query_device", "MLX5_1.0");
	__typeof__(mlx5dv_open_device) *open_dev = need(h, "mlx5dv_open_device", "MLX5_1.7");
	__typeof__(mlx5dv_create_qp) *create_qp = need(h, "mlx5dv_create_qp", "MLX5_1.3");
	__typeof__(mlx5dv_devx_general_cmd) *devx = need(h, "mlx5dv_devx_general_cmd", "MLX5_1.7");
	__typeof__(mlx5dv_qp_ex_from_ibv_qp_ex) *qpx = need(h, "mlx5dv_qp_ex_from_ibv_qp_ex",
							    "MLX5_1.10");
	__typeof__(mlx5dv_create_mkey) *mkey = need(h, "mlx5dv_create_mkey", "MLX5_1.10");
	__typeof__(mlx5dv_destroy_mkey) *dmkey = need(h, "mlx5dv_destroy_mkey", "MLX5_1.10");
	__typeof__(mlx5dv_dek_create) *dek = need(h, "mlx5dv_dek_create", "MLX5_1.21");
	__typeof__(mlx5dv_dek_destroy) *ddek = need(h, "mlx5dv_dek_destroy", "MLX5_1.21");
	__typeof__(mlx5dv_crypto_login) *login = need(h, "mlx5dv_crypto_login", "MLX5_1.21");
	struct mlx5dv_context dv;
	char buf[16];

	if (failures)
		return;
	CHECK(!is_sup(NULL), "mlx5dv_is_supported must be false");
	CHECK(query(NULL, &dv) == EOPNOTSUPP, "mlx5dv_query_device must return EOPNOTSUPP");
	CHECK(devx(NULL, buf, sizeof(buf), buf, sizeof(buf)) == EOPNOTSUPP, "devx_general_cmd");
	CHECK(login(NULL, NULL) == EOPNOTSUPP, "mlx5dv_crypto_login");
	errno = 0;
	CHECK(!open_dev(NULL, NULL) && errno == EOPNOTSUPP, "mlx5dv_open_device: NULL+EOPNOTSUPP");
	errno = 0;
	CHECK(!create_qp(NULL, NULL, NULL) && errno == EOPNOTSUPP, "mlx5dv_create_qp");
	errno = 0;
	CHECK(!qpx(NULL) && errno == EOPNOTSUPP, "mlx5dv_qp_ex_from_ibv_qp_ex");
	errno = 0;
	CHECK(!mkey(NULL) && errno == EOPNOTSUPP, "mlx5dv_create_mkey");
	errno = 0;
	CHECK(!dek(NULL, NULL) && errno == EOPNOTSUPP, "mlx5dv_dek_create");
	CHECK(dmkey((struct mlx5dv_mkey *)buf) == EINVAL, "mlx5dv_destroy_mkey must reject");
	CHECK(ddek((struct mlx5dv_dek *)buf) == EINVAL, "mlx5dv_dek_destroy must reject");
}

static void check_efa(void *h)
{
	__typeof__(efadv_query_device) *query = need(h, "efadv_query_device", "EFA_1.1");
	__typeof__(efadv_create_qp_ex) *create = need(h, "efadv_create_qp_ex", "EFA_1.1");
	struct efadv_device_attr attr;

	if (failures)
		return;
	CHECK(query(NULL, &attr, sizeof(attr)) == EOPNOTSUPP, "efadv_query_device");
	errno = 0;
	CHECK(!create(NULL, NULL, NULL, 0) && errno == EOPNOTSUPP, "efadv_create_qp_ex");
}

int main(void)
{
	void *mlx5 = open_lib("libmlx5.so.1");
	void *efa = open_lib("libefa.so.1");

	check_mlx5(mlx5);
	check_efa(efa);
	/* A symbol under a version node the stand-in does not define must not resolve. */
	if (mlx5)
		CHECK(!dlvsym(mlx5, "mlx5dv_create_qp", "MLX5_9.99"), "bogus version resolved");
	if (mlx5)
		dlclose(mlx5);
	if (efa)
		dlclose(efa);
	printf("standin-check: %s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
