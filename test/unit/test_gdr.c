/*
 * test_gdr - what the suite used to skip: GPUDirect detected (a fake
 * nvidia_peermem marker under NCCL_VERBS_GDR_SYSFS_ROOT, simverbs' dma-buf)
 * and every reported property checked against its own source, through the
 * built plugin over simverbs.
 *   - props: each property getProperties reports equals what the test reads
 *     itself from verbs, sysfs and the marker tree (name, pciPath, guid,
 *     ptrSupport, speed = lane speed x width, port, maxComms, maxRecvs,
 *     maxP2pBytes, regIsGlobal, forceFlush, rail/plane, vProps, ...), with
 *     the peer-memory marker present and absent;
 *   - flush: a receive into NCCL_PTR_CUDA-typed memory and one into a
 *     dma-buf (memfd) registered with regMrDmaBuf arrive intact, and each
 *     iflush returns a real request that completes - a missing flush fails,
 *     it is not skipped; host-typed receives and NCCL_GDR_FLUSH_DISABLE=1
 *     need none (NULL).
 * Each scenario runs in its own process and fabric.
 */
#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nvplugin.h"

static char gdr_root[256], empty_root[256];

static void run(const char *name, void (*fn)(void))
{
	int status = nvt_scenario("nvgdr", name, fn);

	if (status != 0) {
		fprintf(stderr, "scenario %s failed (status 0x%x)\n", name, status);
		nvt_failures++;
	}
}

/* The test's own reading of the IB spec's speed and width encodings, in Mbps. */
static int port_mbps(const struct ibv_port_attr *pa)
{
	int lane = 0, width = 0;

	switch (pa->active_speed) {
	case 1: lane = 2500; break;	/* SDR */
	case 2: lane = 5000; break;	/* DDR */
	case 4: case 8: lane = 10000; break;	/* QDR, FDR10 */
	case 16: lane = 14000; break;	/* FDR */
	case 32: lane = 25000; break;	/* EDR */
	case 64: lane = 50000; break;	/* HDR */
	case 128: lane = 100000; break;	/* NDR */
	}
	switch (pa->active_width) {
	case 1: width = 1; break;
	case 2: width = 4; break;
	case 4: width = 8; break;
	case 8: width = 12; break;
	case 16: width = 2; break;
	}
	return lane * width;
}

/* Compares every property of every device with its source. */
static void check_props(bool peermem)
{
	ncclNet_v12_t *n = load();
	struct ibv_device **list;
	void *ctx = NULL;
	int nd = 0, nib = 0;

	CHECK(n && n->init(&ctx, 1, NULL, NULL, NULL) == ncclSuccess);
	if (!ctx)
		return;
	CHECK(n->devices(&nd) == ncclSuccess && nd >= 2);
	list = ibv_get_device_list(&nib);
	CHECK(list && nib == nd); /* one port each: one plugin device per verbs device */
	for (int i = 0; i < nd && list; i++) {
		ncclNetProperties_v12_t p;
		struct ibv_device *dev = NULL;
		struct ibv_context *c;
		struct ibv_device_attr da;
		struct ibv_port_attr pa;
		struct ibv_pd *pd;
		char path[PATH_MAX + 16], *pci;
		int ptr = NCCL_PTR_HOST, flush, q = 1, comms;
		uint64_t wr, max_bytes;

		CHECK(n->getProperties(i, &p) == ncclSuccess);
		for (int k = 0; k < nib; k++)
			if (!strcmp(ibv_get_device_name(list[k]), p.name))
				dev = list[k];
		CHECK(dev != NULL);
		if (!dev)
			continue;
		c = ibv_open_device(dev);
		CHECK(c && ibv_query_device(c, &da) == 0 && ibv_query_port(c, 1, &pa) == 0);
		snprintf(path, sizeof(path), "%s/device", dev->ibdev_path);
		pci = realpath(path, NULL);
		CHECK(pci && p.pciPath && !strcmp(pci, p.pciPath));
		free(pci);
		CHECK(p.guid == da.sys_image_guid);
		/* GPUDirect: the peer-memory marker, and a dma-buf probe (EBADF = understood) */
		pd = ibv_alloc_pd(c);
		errno = 0;
		CHECK(pd && !ibv_reg_dmabuf_mr(pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE));
		if (errno == EBADF)
			ptr |= NCCL_PTR_DMABUF;
		if (peermem)
			ptr |= NCCL_PTR_CUDA;
		CHECK(p.ptrSupport == ptr);
		CHECK(p.speed == port_mbps(&pa) && p.speed > 0);
		CHECK(p.port == 1);
		/* a receive comm: q data QPs + a flush QP when GPUDirect is on, one CQ */
		flush = (ptr & (NCCL_PTR_CUDA | NCCL_PTR_DMABUF)) != 0;
		comms = da.max_qp / (q + flush) < da.max_cq ? da.max_qp / (q + flush) : da.max_cq;
		CHECK(p.maxComms == comms);
		CHECK(p.maxRecvs == 8); /* NCCL_NET_IB_MAX_RECVS */
		wr = pa.max_msg_sz & ~127u;
		max_bytes = 4 * wr < UINT32_MAX ? 4 * wr : UINT32_MAX;
		CHECK(p.maxP2pBytes == max_bytes);
		CHECK(p.maxCollBytes == 512ull << 20 && p.maxMultiRequestSize == 1);
		CHECK(p.regIsGlobal == 1 && p.forceFlush == 0);
		CHECK(p.netDeviceType == NCCL_NET_DEVICE_HOST && p.railId == -1 && p.planeId == -1);
		CHECK(p.vProps.ndevs == 1 && p.vProps.devs[0] == i);
		if (nvt_failures)
			fprintf(stderr, "%s: ptrSupport %d (want %d), speed %d (want %d), maxComms %d "
				"(want %d), maxP2pBytes %zu (want %llu)\n", p.name, p.ptrSupport, ptr,
				p.speed, port_mbps(&pa), p.maxComms, comms, p.maxP2pBytes,
				(unsigned long long)max_bytes);
		CHECK(ibv_dealloc_pd(pd) == 0 && ibv_close_device(c) == 0);
	}
	if (list)
		ibv_free_device_list(list);
	CHECK(n->finalize(ctx) == ncclSuccess);
}

static void sc_props_gdr(void)
{
	setenv("NCCL_VERBS_GDR_SYSFS_ROOT", gdr_root, 1);
	check_props(true);
}

static void sc_props_no_peermem(void)
{
	setenv("NCCL_VERBS_GDR_SYSFS_ROOT", empty_root, 1);
	check_props(false);
}

/* len bytes into rbuf (registered as rmh), content checked, then iflush on it:
 * returns the flush request's presence (-1 on a failure). */
static int recv_then_flush(ncclNet_v12_t *n, void *sc, void *rc, void *smh, char *sbuf,
			   void *rmh, char *rbuf, size_t len, unsigned seed)
{
	void *sr = NULL, *rr = NULL, *fr = (void *)1, *data = rbuf;
	int tag = 4, sd = 0, rd = 0, fd = 0, ssz, rsz, isz = (int)len;
	size_t cap = len;
	ncclResult_t res = ncclSuccess;

	for (size_t i = 0; i < len; i++)
		sbuf[i] = (char)(i * 7 + seed);
	memset(rbuf, 0, len);
	for (time_t end = time(NULL) + 30; res == ncclSuccess && (!sd || !rd) && time(NULL) < end;) {
		if (!rr)
			res = n->irecv(rc, 1, &data, &cap, &tag, &rmh, NULL, &rr);
		if (!sr && res == ncclSuccess)
			res = n->isend(sc, sbuf, len, tag, smh, NULL, &sr);
		if (sr && !sd && res == ncclSuccess)
			res = n->test(sr, &sd, &ssz);
		if (rr && !rd && res == ncclSuccess)
			res = n->test(rr, &rd, &rsz);
	}
	CHECK(res == ncclSuccess && sd && rd && rsz == (int)len && !memcmp(sbuf, rbuf, len));
	if (res != ncclSuccess || !rd)
		return -1;
	CHECK(n->iflush(rc, 1, &data, &isz, &rmh, &fr) == ncclSuccess);
	if (fr == (void *)1)
		return -1;
	for (time_t end = time(NULL) + 30; fr && !fd && res == ncclSuccess && time(NULL) < end;)
		res = n->test(fr, &fd, NULL);
	CHECK(res == ncclSuccess && (!fr || fd));
	return fr != NULL;
}

static void flush_scenario(bool disabled)
{
	ncclNet_v12_t *n;
	ncclNetProperties_v12_t p;
	const size_t len = 1 << 20;
	char *sbuf = malloc(len), *rbuf = malloc(len), *map;
	void *ctx = NULL, *lc = NULL, *sc = NULL, *rc = NULL, *smh = NULL, *hmh = NULL, *gmh = NULL;
	void *dmh = NULL;
	int d = -1, nd = 0, mfd, want = disabled ? 0 : 1;

	setenv("NCCL_VERBS_GDR_SYSFS_ROOT", gdr_root, 1);
	if (disabled)
		setenv("NCCL_GDR_FLUSH_DISABLE", "1", 1);
	n = load();
	CHECK(n && n->init(&ctx, 1, NULL, NULL, NULL) == ncclSuccess);
	if (!ctx)
		return;
	n->devices(&nd);
	for (int i = 0; i < nd; i++)
		if (n->getProperties(i, &p) == ncclSuccess && !strcmp(p.name, "simib0"))
			d = i;
	CHECK(d >= 0 && n->getProperties(d, &p) == ncclSuccess);
	/* GPUDirect must be detected here: fail, do not skip */
	CHECK((p.ptrSupport & NCCL_PTR_CUDA) && (p.ptrSupport & NCCL_PTR_DMABUF));
	CHECK(nvt_listen_connect(n, ctx, d, &sc, &rc, &lc, 30) == 0);
	if (!sc || !rc)
		return;
	CHECK(n->regMr(sc, sbuf, len, NCCL_PTR_HOST, &smh) == ncclSuccess);
	CHECK(n->regMr(rc, rbuf, len, NCCL_PTR_HOST, &hmh) == ncclSuccess);
	CHECK(recv_then_flush(n, sc, rc, smh, sbuf, hmh, rbuf, len, 1) == 0); /* host: none */
	CHECK(n->deregMr(rc, hmh) == ncclSuccess);
	/* "GPU" memory typed NCCL_PTR_CUDA (host memory: the plugin cannot tell) */
	CHECK(n->regMr(rc, rbuf, len, NCCL_PTR_CUDA, &gmh) == ncclSuccess);
	CHECK(recv_then_flush(n, sc, rc, smh, sbuf, gmh, rbuf, len, 2) == want);
	CHECK(recv_then_flush(n, sc, rc, smh, sbuf, gmh, rbuf, 4096, 3) == want);
	CHECK(n->deregMr(rc, gmh) == ncclSuccess);
	/* a dma-buf (memfd): data lands in the buffer behind the fd */
	mfd = memfd_create("nvgdr", 0);
	CHECK(mfd >= 0 && ftruncate(mfd, (off_t)len) == 0);
	map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	CHECK(map != MAP_FAILED);
	CHECK(n->regMrDmaBuf(rc, map, len, NCCL_PTR_DMABUF, 0, mfd, &dmh) == ncclSuccess);
	CHECK(recv_then_flush(n, sc, rc, smh, sbuf, dmh, map, len, 4) == want);
	CHECK(n->deregMr(rc, dmh) == ncclSuccess);
	munmap(map, len);
	close(mfd);
	CHECK(n->deregMr(sc, smh) == ncclSuccess);
	CHECK(n->closeSend(sc) == ncclSuccess && n->closeRecv(rc) == ncclSuccess);
	CHECK(n->closeListen(lc) == ncclSuccess);
	CHECK(n->finalize(ctx) == ncclSuccess);
	free(sbuf);
	free(rbuf);
}

static void sc_flush(void)
{
	flush_scenario(false);
}

static void sc_flush_disabled(void)
{
	flush_scenario(true);
}

static int mkdirs(const char *path)
{
	char tmp[512];

	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			if (mkdir(tmp, 0755) && errno != EEXIST)
				return -1;
			*p = '/';
		}
	return mkdir(tmp, 0755) && errno != EEXIST ? -1 : 0;
}

int main(void)
{
	char path[512];
	FILE *f;

	plugin_path = getenv("NV_TEST_PLUGIN");
	if (!plugin_path || access(plugin_path, R_OK) != 0) {
		printf("test_gdr: NV_TEST_PLUGIN not set or unreadable: skipped\n");
		return 77;
	}
	snprintf(gdr_root, sizeof(gdr_root), "/tmp/nvgdr-%d/gdr", (int)getpid());
	snprintf(empty_root, sizeof(empty_root), "/tmp/nvgdr-%d/none", (int)getpid());
	snprintf(path, sizeof(path), "%s/sys/module/nvidia_peermem", gdr_root);
	CHECK(mkdirs(path) == 0 && mkdirs(empty_root) == 0);
	snprintf(path, sizeof(path), "%s/sys/module/nvidia_peermem/version", gdr_root);
	f = fopen(path, "w");
	CHECK(f && fputs("1.0\n", f) >= 0 && fclose(f) == 0);
	setenv("SIMVERBS_DEVICES", "simib0:ll=ib;simroce0:ll=eth", 1);
	run("props-gdr", sc_props_gdr);
	run("props-nopeermem", sc_props_no_peermem);
	run("flush", sc_flush);
	run("flush-disabled", sc_flush_disabled);
	unlink(path);
	snprintf(path, sizeof(path), "rm -rf /tmp/nvgdr-%d", (int)getpid());
	CHECK(system(path) == 0);
	return nvt_exit("test_gdr");
}
