/*
 * rma_loader - NCCL finds our RMA tables the way its loader looks for them
 * (NCCL 2.30.7: src/plugin/plugin_open.cc, src/plugin/rma.cc,
 * src/plugin/rma/rma_v14.cc, rma_v13.cc; 2.31 puts v15 in front):
 *  1. the net plugin by name: NCCL_NET_PLUGIN=verbs opens "verbs" (no such
 *     file), then "libnccl-net-verbs.so", dlopen(RTLD_NOW | RTLD_LOCAL) on the
 *     library search path;
 *  2. the GIN loader looked into the net library too (gin_v14.cc, gin_v13.cc):
 *     it must find no ncclGinPlugin_v14 / _v13 there, or NCCL would take us
 *     for a GIN plugin with device handles;
 *  3. NCCL_RMA_PLUGIN unset: "libnccl-rma.so" (not ours), then the net
 *     library opened again by its name, dlsym of ncclRmaPlugin_v14 then _v13
 *     (2.30; _v13 also under the name ncclGinPlugin_v13), _v15 first (2.31):
 *     2.30 must get v14, 2.31 v15, both named "Verbs";
 *  4. what ncclRmaPluginInit does: init(&ctx, commHash, logger), devices()
 *     more than 0; NCCL's v13 adapter: getProperties(0) says GIN_PROXY;
 *  5. NCCL_RMA_PLUGIN=libnccl-net-verbs.so: the same library by that name.
 * The library directory (NV_TEST_PLUGIN's) goes on LD_LIBRARY_PATH before
 * the program runs itself again, as a job's environment would. 77 when not
 * on simverbs.
 */
#include "config.h"

#include <dlfcn.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl/rma.h"

static int bad;

#define CHECK(cond, ...) do { \
	if (!(cond)) { \
		printf("FAIL: " __VA_ARGS__); \
		putchar('\n'); \
		bad = 1; \
	} \
} while (0)

static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		   const char *fmt, ...)
{
	(void)level; (void)flags; (void)file; (void)line; (void)fmt;
}

/* plugin_open.cc's openPluginLib for a name without '/' nor "lib" prefix */
static void *open_plugin(const char *prefix, const char *name)
{
	char n[256];
	void *h = name && *name ? dlopen(name, RTLD_NOW | RTLD_LOCAL) : NULL;

	if (h || !name || !*name || strchr(name, '/') ||
	    (!strncmp(name, "lib", 3) && strlen(name) > 3 && !strcmp(name + strlen(name) - 3, ".so")))
		return h;
	snprintf(n, sizeof(n), "%s-%s.so", prefix, name);
	return dlopen(n, RTLD_NOW | RTLD_LOCAL);
}

/* rma.cc's version loop over the library's handle */
static void *find_rma(void *lib, const int *versions, int n, int *got)
{
	for (int i = 0; i < n; i++) {
		char sym[32];
		void *t;

		snprintf(sym, sizeof(sym), "ncclRmaPlugin_v%d", versions[i]);
		t = dlsym(lib, sym);
		if (!t && versions[i] == 13)
			t = dlsym(lib, "ncclGinPlugin_v13");
		if (t) {
			*got = versions[i];
			return t;
		}
	}
	*got = 0;
	return NULL;
}

/* ncclRmaPluginInit: init, then devices > 0; v13 also GIN_PROXY */
static void init_like_nccl(void *t, int v, const char *who)
{
	/* the calls sit at the same offsets in v13 .. v15 (nccl/rma.h checks it) */
	ncclRma_v14_t *r = t;
	ncclNetProperties_v12_t p;
	void *ctx = NULL;
	int n = 0;

	CHECK(r->name && !strcmp(r->name, "Verbs"), "%s: table named %s", who,
	      r->name ? r->name : "(null)");
	CHECK(r->init(&ctx, 0x1234abcdull, logger) == ncclSuccess, "%s: init failed", who);
	CHECK(r->devices(&n) == ncclSuccess && n > 0, "%s: devices() gave %d", who, n);
	if (v == 13) {
		CHECK(r->getProperties(0, &p) == ncclSuccess &&
		      p.netDeviceType == NCCL_NET_DEVICE_GIN_PROXY,
		      "%s: getProperties(0) not GIN_PROXY", who);
	}
	CHECK(r->finalize(ctx) == ncclSuccess, "%s: finalize failed", who);
	printf("%s: ncclRmaPlugin_v%d \"%s\", init, %d device(s)%s: ok\n", who, v, r->name, n,
	       v == 13 ? ", GIN_PROXY" : "");
}

static int rerun_with_libdir(char **argv)
{
	const char *plugin = getenv("NV_TEST_PLUGIN"), *old = getenv("LD_LIBRARY_PATH");
	char dir[4096], *path;

	if (!plugin) {
		printf("NV_TEST_PLUGIN unset (make check sets it)\n");
		return 1;
	}
	snprintf(dir, sizeof(dir), "%s", plugin);
	if (asprintf(&path, "%s%s%s", dirname(dir), old ? ":" : "", old ? old : "") < 0)
		return 1;
	setenv("LD_LIBRARY_PATH", path, 1);
	setenv("RMA_LOADER_RERUN", "1", 1);
	execv("/proc/self/exe", argv);
	perror("execv");
	return 1;
}

int main(int argc, char **argv)
{
	static const int v230[] = { 14, 13 }, v231[] = { 15, 14, 13 };
	void *net, *lib, *t;
	int got;

	(void)argc;
	if (!getenv("SIMVERBS_FABRIC")) {
		printf("not on simverbs (SIMVERBS_FABRIC unset): skip\n");
		return 77;
	}
	if (!getenv("RMA_LOADER_RERUN"))
		return rerun_with_libdir(argv);
	net = open_plugin("libnccl-net", "verbs");
	if (!net) {
		printf("FAIL: NCCL_NET_PLUGIN=verbs: %s\n", dlerror());
		return 1;
	}
	printf("NCCL_NET_PLUGIN=verbs: libnccl-net-verbs.so opened: ok\n");
	CHECK(!dlsym(net, "ncclGinPlugin_v14") && !dlsym(net, "ncclGinPlugin_v13"),
	      "the net library exports a GIN table: NCCL's GIN loader would take it");
	lib = open_plugin("libnccl-rma", "libnccl-rma.so");
	if (lib) {
		printf("a libnccl-rma.so is on the library path: NCCL would use it first; "
		       "checking ours all the same\n");
		dlclose(lib);
	}
	lib = dlopen("libnccl-net-verbs.so", RTLD_NOW | RTLD_LOCAL); /* ncclGetNetPluginLib */
	CHECK(lib == net, "the net library opened again is another handle");
	t = find_rma(lib, v230, 2, &got);
	CHECK(got == 14, "NCCL 2.30 found ncclRmaPlugin_v%d, not v14", got);
	if (t)
		init_like_nccl(t, got, "NCCL 2.30 (v14, v13)");
	t = find_rma(lib, v231, 3, &got);
	CHECK(got == 15, "NCCL 2.31 found ncclRmaPlugin_v%d, not v15", got);
	if (t)
		init_like_nccl(t, got, "NCCL 2.31 (v15, v14, v13)");
	t = find_rma(lib, v230 + 1, 1, &got);
	CHECK(got == 13, "a v13-only NCCL found nothing");
	if (t)
		init_like_nccl(t, got, "v13 (what NCCL 2.30 takes from a v13-only plugin)");
	dlclose(lib);
	lib = open_plugin("libnccl-rma", "libnccl-net-verbs.so");
	CHECK(lib == net, "NCCL_RMA_PLUGIN=libnccl-net-verbs.so did not open the plugin");
	if (lib) {
		t = find_rma(lib, v230, 2, &got);
		CHECK(got == 14, "NCCL_RMA_PLUGIN=libnccl-net-verbs.so: v%d", got);
		printf("NCCL_RMA_PLUGIN=libnccl-net-verbs.so: ncclRmaPlugin_v%d: ok\n", got);
		dlclose(lib);
	}
	dlclose(net);
	return bad;
}
