/*
 * test_large - messages beyond 2 GiB through the built plugin over simverbs
 * (`make check-large`; not in `make check`: it needs ~6.5 GiB of memory and
 * about a minute). For InfiniBand (simib0) and RoCE (simroce0), with 1 QP
 * and with 4 QPs splitting each message: 2^31 - 1, 2^31, 2^31 + 4096 and
 * 3 GiB bytes, plus 3 GiB truncated into a 2^31 + 4096 receive. Every byte
 * is checked, and so is the page after the received end (untouched). test()
 * reports sizes as int in every ABI version, so it must say the exact size
 * up to INT_MAX and INT_MAX above it. maxP2pBytes must cover 3 GiB.
 * Each configuration runs in its own process and fabric.
 */
#include "config.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nvplugin.h"

#define GiB (1ull << 30)
#define CAP (3 * GiB + 4096)	/* receive buffer; the last page is a canary */

static uint64_t word(uint64_t i, uint64_t seed)
{
	return (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
}

/* One message of len bytes into a cap-byte receive; every byte checked. */
static void one(ncclNet_v12_t *n, void *sc, void *rc, uint64_t *sb, void *smh, uint64_t *rb,
		void *rmh, size_t len, size_t cap, uint64_t seed)
{
	void *sr = NULL, *rr = NULL, *data = rb;
	int tag = 1, sd = 0, rd = 0, ssz = -1, rsz = -1;
	size_t got = len < cap ? len : cap, bad = 0, first = SIZE_MAX;
	int want = got > INT_MAX ? INT_MAX : (int)got;
	ncclResult_t res = ncclSuccess;
	const unsigned char *rbytes = (const unsigned char *)rb, *sbytes = (const unsigned char *)sb;
	time_t t0 = time(NULL);

	memset(rb, 0xee, got + 4096);
	for (time_t end = time(NULL) + 300; res == ncclSuccess && (!sd || !rd) && time(NULL) < end;) {
		if (!rr)
			res = n->irecv(rc, 1, &data, &cap, &tag, &rmh, NULL, &rr);
		if (!sr && res == ncclSuccess)
			res = n->isend(sc, sb, len, 1, smh, NULL, &sr);
		if (sr && !sd && res == ncclSuccess)
			res = n->test(sr, &sd, &ssz);
		if (rr && !rd && res == ncclSuccess)
			res = n->test(rr, &rd, &rsz);
	}
	CHECK(res == ncclSuccess && sd && rd);
	CHECK(ssz == want && rsz == want);
	for (size_t w = 0; w < got / 8; w++)
		if (rb[w] != word(w, seed) && bad++ == 0)
			first = w * 8;
	for (size_t i = got / 8 * 8; i < got; i++)
		if (rbytes[i] != sbytes[i] && bad++ == 0)
			first = i;
	for (size_t i = got; i < got + 4096; i++)
		if (rbytes[i] != 0xee && bad++ == 0)
			first = i;
	CHECK(bad == 0);
	printf("  %zu bytes into %zu: sent %d, received %d (want %d), %zu bytes wrong%s (%ld s)\n",
	       len, cap, ssz, rsz, want, bad, bad ? " FAIL" : "", (long)(time(NULL) - t0));
	if (bad)
		printf("  first wrong byte at offset %zu\n", first);
	fflush(stdout);
}

static void config(const char *dev, int qps)
{
	static const size_t lens[] = { (1ull << 31) - 1, 1ull << 31, (1ull << 31) + 4096, 3 * GiB };
	ncclNet_v12_t *n;
	ncclNetProperties_v12_t p;
	void *h, *ctx = NULL, *lc = NULL, *sc = NULL, *rc = NULL, *smh = NULL, *rmh = NULL;
	uint64_t *sb, *rb, seed = (uint64_t)qps << 32 | (uint64_t)dev[3];
	int d = -1, nd = 0;

	if (qps > 1) {
		char v[12];

		snprintf(v, sizeof(v), "%d", qps);
		setenv("NCCL_IB_QPS_PER_CONNECTION", v, 1);
		setenv("NCCL_IB_SPLIT_DATA_ON_QPS", "1", 1);
	}
	h = dlopen(plugin_path, RTLD_NOW | RTLD_LOCAL);
	n = h ? dlsym(h, "ncclNetPlugin_v12") : NULL;
	CHECK(n && n->init(&ctx, 1, NULL, NULL, NULL) == ncclSuccess);
	if (!ctx)
		return;
	n->devices(&nd);
	for (int i = 0; i < nd; i++)
		if (n->getProperties(i, &p) == ncclSuccess && !strcmp(p.name, dev))
			d = i;
	CHECK(d >= 0 && n->getProperties(d, &p) == ncclSuccess);
	CHECK(p.maxP2pBytes >= 3 * GiB);
	printf("%s, %d QP(s): maxP2pBytes %zu\n", dev, qps, p.maxP2pBytes);
	sb = mmap(NULL, 3 * GiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	rb = mmap(NULL, CAP, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(sb != MAP_FAILED && rb != MAP_FAILED);
	if (sb == MAP_FAILED || rb == MAP_FAILED)
		return;
	for (size_t w = 0; w < 3 * GiB / 8; w++)
		sb[w] = word(w, seed);
	CHECK(nvt_listen_connect(n, ctx, d, &sc, &rc, &lc, 60) == 0);
	CHECK(n->regMr(sc, sb, 3 * GiB, NCCL_PTR_HOST, &smh) == ncclSuccess);
	CHECK(n->regMr(rc, rb, CAP, NCCL_PTR_HOST, &rmh) == ncclSuccess);
	if (sc && rc && smh && rmh) {
		for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
			one(n, sc, rc, sb, smh, rb, rmh, lens[i], CAP - 4096, seed);
		one(n, sc, rc, sb, smh, rb, rmh, 3 * GiB, (1ull << 31) + 4096, seed); /* truncated */
	}
	if (smh)
		CHECK(n->deregMr(sc, smh) == ncclSuccess);
	if (rmh)
		CHECK(n->deregMr(rc, rmh) == ncclSuccess);
	if (sc)
		CHECK(n->closeSend(sc) == ncclSuccess);
	if (rc)
		CHECK(n->closeRecv(rc) == ncclSuccess);
	if (lc)
		CHECK(n->closeListen(lc) == ncclSuccess);
	CHECK(n->finalize(ctx) == ncclSuccess);
	munmap(sb, 3 * GiB);
	munmap(rb, CAP);
}

/* The configuration the next run()'s child tests. */
static const char *run_dev;
static int run_qps;

static void run_config(void)
{
	config(run_dev, run_qps);
}

static void run(const char *dev, int qps)
{
	char tag[64];
	int status;

	snprintf(tag, sizeof(tag), "%s-%d", dev, qps);
	run_dev = dev;
	run_qps = qps;
	status = nvt_scenario("nvlarge", tag, run_config);
	if (status != 0) {
		fprintf(stderr, "%s with %d QP(s) failed (status 0x%x)\n", dev, qps, status);
		nvt_failures++;
	}
}

static unsigned long long mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[128];
	unsigned long long kb = 0;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb * 1024;
}

int main(void)
{
	plugin_path = getenv("NV_TEST_PLUGIN");
	if (!plugin_path || access(plugin_path, R_OK) != 0) {
		printf("test_large: NV_TEST_PLUGIN not set or unreadable: skipped\n");
		return 77;
	}
	if (mem_available() < 7 * GiB) {
		printf("test_large: %llu MiB available, needs 7 GiB: skipped\n",
		       mem_available() >> 20);
		return 77;
	}
	run("simib0", 1);
	run("simib0", 4);
	run("simroce0", 1);
	run("simroce0", 4);
	return nvt_exit("test_large");
}
