/*
 * nvplugin.h - what the unit tests that drive the built plugin
 * ($NV_TEST_PLUGIN) over simverbs share: loading its v12 table, running a
 * scenario in its own process and fabric, finding a device by name, and
 * connecting one send/receive comm pair.
 */
#ifndef NV_PLUGIN_TEST_H
#define NV_PLUGIN_TEST_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl/net.h"
#include "nvtest.h"

/* The plugin under test; main() sets it from $NV_TEST_PLUGIN. */
static const char *plugin_path;

static inline ncclNet_v12_t *load(void)
{
	void *h = dlopen(plugin_path, RTLD_NOW | RTLD_LOCAL);

	return h ? dlsym(h, "ncclNetPlugin_v12") : NULL;
}

/*
 * Runs fn in a child process on its own simverbs fabric, named
 * "<$SIMVERBS_FABRIC or dflt>-<tag>", counting only the child's failures.
 * Returns the child's wait status: 0 when every check passed.
 */
static inline int nvt_scenario(const char *dflt, const char *tag, void (*fn)(void))
{
	pid_t pid;
	int status = 0;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		char fab[128];

		snprintf(fab, sizeof(fab), "%s-%s", getenv("SIMVERBS_FABRIC") ?
			 getenv("SIMVERBS_FABRIC") : dflt, tag);
		setenv("SIMVERBS_FABRIC", fab, 1);
		nvt_failures = 0;
		fn();
		exit(nvt_failures ? 1 : 0); /* exit(): simverbs' leak report runs */
	}
	waitpid(pid, &status, 0);
	return status;
}

/* The first device whose getProperties name is `name`, or -1. */
static inline int find(ncclNet_v12_t *n, const char *name)
{
	ncclNetProperties_v12_t p;
	int nd = 0;

	n->devices(&nd);
	for (int i = 0; i < nd; i++)
		if (n->getProperties(i, &p) == ncclSuccess && !strcmp(p.name, name))
			return i;
	return -1;
}

/*
 * Connects one pair within secs seconds: send comm on device sd to handle,
 * receive comm accepted on listener lc. 0 when both exist.
 */
static inline int nvt_connect(ncclNet_v12_t *n, void *ctx, int sd, void *handle, void *lc,
			      void **sc, void **rc, int secs)
{
	*sc = *rc = NULL;
	for (time_t end = time(NULL) + secs; (!*sc || !*rc) && time(NULL) < end;) {
		if (!*sc && n->connect(ctx, sd, handle, sc, NULL) != ncclSuccess)
			return -1;
		if (!*rc && n->accept(lc, rc, NULL) != ncclSuccess)
			return -1;
	}
	return *sc && *rc ? 0 : -1;
}

/* Listens on device d (*lc) and connects a pair through it, as nvt_connect. */
static inline int nvt_listen_connect(ncclNet_v12_t *n, void *ctx, int d, void **sc, void **rc,
				     void **lc, int secs)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];

	*sc = *rc = NULL;
	if (n->listen(ctx, d, handle, lc) != ncclSuccess)
		return -1;
	return nvt_connect(n, ctx, d, handle, *lc, sc, rc, secs);
}

#endif /* NV_PLUGIN_TEST_H */
