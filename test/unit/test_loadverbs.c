/*
 * test_loadverbs - the plugin binds libibverbs at run time (src/ibv_load.c).
 * Not linked with libibverbs itself; dlopens $NV_TEST_PLUGIN and inits its v8
 * table with a recording logger.
 *
 *   test_loadverbs absent    init must fail with exactly one WARN saying the
 *                            library cannot be loaded (run with NCCL_IBVERBS_LIB
 *                            naming a missing library, or with none loadable)
 *   test_loadverbs fallback  NCCL_IBVERBS_LIB names a missing library: as NCCL,
 *                            the default names are tried (init works); one WARN
 *                            names the library, dlerror() and the one loaded
 *   test_loadverbs old       over simverbs built as an old rdma-core (IBVERBS
 *                            1.0/1.1 only): init works, no WARN, and one INFO
 *                            per missing optional verb says what is lost
 *   test_loadverbs speed N   init works; device 0's speed is N Mb/s (from
 *                            ibv_query_port_speed when simverbs exports it)
 */
#include "config.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>

#include "nccl/net.h"
#include "nvtest.h"

static char infos[16384];

/* nvt_logger's hook: keeps INFOs too, drops the host's RLIMIT_MEMLOCK WARN (not ours). */
static bool log_hook(ncclDebugLogLevel level, const char *msg)
{
	if (level == NCCL_LOG_INFO)
		nvt_append(infos, sizeof(infos), msg);
	return level == NCCL_LOG_WARN && strstr(msg, "RLIMIT_MEMLOCK");
}

static bool info_has(const char *a, const char *b)
{
	for (const char *l = infos; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *e = strchr(l, '\n');
		char line[1024];

		snprintf(line, sizeof(line), "%.*s", e ? (int)(e - l) : (int)strlen(l), l);
		if (strstr(line, a) && (!b || strstr(line, b)))
			return true;
	}
	fprintf(stderr, "no INFO line with '%s' '%s' in:\n%s", a, b ? b : "", infos);
	return false;
}

int main(int argc, char **argv)
{
	const char *path = getenv("NV_TEST_PLUGIN");
	const char *mode = argc > 1 ? argv[1] : "";
	ncclNet_v8_t *net;
	ncclResult_t rc;
	void *h;
	int n = 0;

	if (!path) {
		printf("test_loadverbs: NV_TEST_PLUGIN unset: skipped\n");
		return 77;
	}
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) { /* the point of the exercise: this must work without libibverbs */
		fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
		return 1;
	}
	net = dlsym(h, "ncclNetPlugin_v8");
	CHECK(net != NULL);
	if (!net)
		return nvt_exit("test_loadverbs");
	nvt_log_hook = log_hook;
	rc = net->init(nvt_logger);
	if (!strcmp(mode, "absent")) {
		CHECK(rc != ncclSuccess);
		CHECK(nvt_nwarn == 1);
		CHECK(strstr(nvt_warns, "cannot load") != NULL);
		CHECK(strstr(nvt_warns, "the verbs transport is disabled") != NULL);
		if (nvt_nwarn != 1 || !strstr(nvt_warns, "cannot load"))
			fprintf(stderr, "WARNs:\n%s", nvt_warns);
		return nvt_exit("test_loadverbs");
	}
	CHECK(rc == ncclSuccess);
	if (rc != ncclSuccess) {
		fprintf(stderr, "init failed; WARNs:\n%s", nvt_warns);
		return nvt_exit("test_loadverbs");
	}
	CHECK(net->devices(&n) == ncclSuccess && n > 0);
	if (!strcmp(mode, "old")) {
		CHECK(nvt_nwarn == 0);
		CHECK(info_has("ibv_reg_mr_iova2@IBVERBS_1.8", "relaxed ordering"));
		CHECK(info_has("ibv_query_ece@IBVERBS_1.10", "Enhanced Connection Establishment"));
		CHECK(info_has("_ibv_query_gid_ex@IBVERBS_1.11", "GID types unknown"));
		CHECK(info_has("ibv_reg_dmabuf_mr@IBVERBS_1.12", "dma-buf"));
		CHECK(info_has("ibv_query_port_speed@IBVERBS_1.16", "active_speed"));
	} else if (!strcmp(mode, "fallback")) {
		/* one WARN: the library asked for, why it did not open, the one loaded instead */
		CHECK(nvt_nwarn == 1);
		CHECK(strstr(nvt_warns, "cannot load NCCL_IBVERBS_LIB=libibverbs-absent.so.1") != NULL);
		CHECK(strstr(nvt_warns, "libibverbs-absent.so.1: cannot open shared object file") !=
		      NULL); /* dlerror() */
		CHECK(strstr(nvt_warns, "loaded libibverbs.so instead") != NULL);
		if (nvt_nwarn != 1 || !strstr(nvt_warns, "loaded libibverbs.so instead"))
			fprintf(stderr, "WARNs:\n%s", nvt_warns);
		CHECK(info_has("cannot load libibverbs-absent.so.1 (NCCL_IBVERBS_LIB)", NULL));
		CHECK(info_has("loaded libibverbs.so", NULL));
	} else if (!strcmp(mode, "speed") && argc > 2) {
		ncclNetProperties_v8_t p;

		CHECK(net->getProperties(0, &p) == ncclSuccess);
		CHECK(p.speed == atoi(argv[2]));
		if (p.speed != atoi(argv[2]))
			fprintf(stderr, "device 0 speed %d, expected %s\n", p.speed, argv[2]);
	}
	return nvt_exit("test_loadverbs");
}
