/*
 * sv_gpu: simverbs' GPU memory path (gpu.c) against fakecuda, a stand-in
 * libcuda.so.1 whose device memory the CPU cannot touch (see fakecuda.c).
 * The test loads fakecuda by path, as a CUDA program has libcuda loaded, and
 * simverbs finds it with the same dlopen("libcuda.so.1", RTLD_NOLOAD) it uses
 * with the real driver.  Checked:
 *  - SIMVERBS_GPUDIRECT unset / 0 / 1: registration of a device pointer
 *    (EFAULT / EFAULT / ok), the dma-buf probe with fd -1 (EBADF / EOPNOTSUPP /
 *    EBADF), the peer-memory marker in the fake sysfs tree (mode 1);
 *  - between two processes: RDMA WRITE host->GPU, GPU->GPU, RDMA READ
 *    GPU->GPU, GPU->host and host->GPU (bounce through host memory), a SEND
 *    gathering host and GPU SGEs into a GPU receive, a loopback RDMA READ of
 *    GPU memory in one process (what the plugin's flush does), and a write
 *    into a CUDA dma-buf registration; every byte is compared;
 *  - the exporter's allocation is opened once by the initiator however many
 *    operations target it (fakecuda refuses a second open in a process);
 *  - the initiator's copies work with no context current in its thread;
 *  - a VMM (cuMem) allocation and a range beyond the allocation are refused.
 */
#include "config.h"

#include <cuda.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "svt.h"

#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define SZ (1u << 20)
#define Q (SZ / 4)

struct fakecuda_stats {
	int ipc_opens, ipc_closes, copies, syncs, no_ctx;
};

static struct {
	__typeof__(&cuInit) init;
	__typeof__(&cuDevicePrimaryCtxRetain) retain;
	__typeof__(&cuCtxSetCurrent) set;
	__typeof__(&cuMemAlloc) alloc;
	__typeof__(&cuMemFree) free;
	__typeof__(&cuMemcpyHtoD) htod;
	__typeof__(&cuMemcpyDtoH) dtoh;
	__typeof__(&cuMemGetHandleForAddressRange) dmabuf;
	CUresult (*alloc_vmm)(CUdeviceptr *, size_t);
	void (*stats)(struct fakecuda_stats *);
	CUcontext ctx;
} cu;

static struct svt_pipe P;

static void *sym(void *dl, const char *n)
{
	void *p = dlsym(dl, n);

	if (!p) {
		fprintf(stderr, "fakecuda lacks %s\n", n);
		exit(1);
	}
	return p;
}

static void load_fakecuda(void)
{
	const char *top = getenv("NV_TOP_BUILDDIR");
	char path[1024];
	void *dl;

	snprintf(path, sizeof(path), "%s/test/simverbs/tests/fakecuda/.libs/libcuda.so.1",
		 top ? top : ".");
	dl = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	if (!dl) {
		fprintf(stderr, "cannot load fakecuda %s: %s\n", path, dlerror());
		exit(1);
	}
	cu.init = (__typeof__(cu.init))sym(dl, "cuInit");
	cu.retain = (__typeof__(cu.retain))sym(dl, "cuDevicePrimaryCtxRetain");
	cu.set = (__typeof__(cu.set))sym(dl, "cuCtxSetCurrent");
	cu.alloc = (__typeof__(cu.alloc))sym(dl, "cuMemAlloc_v2");
	cu.free = (__typeof__(cu.free))sym(dl, "cuMemFree_v2");
	cu.htod = (__typeof__(cu.htod))sym(dl, "cuMemcpyHtoD_v2");
	cu.dtoh = (__typeof__(cu.dtoh))sym(dl, "cuMemcpyDtoH_v2");
	cu.dmabuf = (__typeof__(cu.dmabuf))sym(dl, "cuMemGetHandleForAddressRange");
	cu.alloc_vmm = (__typeof__(cu.alloc_vmm))sym(dl, "fakecuda_alloc_vmm");
	cu.stats = (__typeof__(cu.stats))sym(dl, "fakecuda_stats");
	SVT_EQ(cu.init(0), CUDA_SUCCESS);
	SVT_EQ(cu.retain(&cu.ctx, 0), CUDA_SUCCESS);
	SVT_EQ(cu.set(cu.ctx), CUDA_SUCCESS);
}

static uint8_t pat(uint32_t seed, size_t i)
{
	return (uint8_t)(seed * 131u + i * 7u + (i >> 9));
}

static void fill(uint8_t *b, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = pat(seed, i);
}

/* Device bytes [d, d+n) equal pat(seed) (or host copy at h). */
static void check_dev(CUdeviceptr d, size_t n, uint32_t seed, const char *what)
{
	uint8_t *h = malloc(n);

	SVT_CHECK(h);
	SVT_EQ(cu.dtoh(h, d, n), CUDA_SUCCESS);
	for (size_t i = 0; i < n; i++)
		if (h[i] != pat(seed, i)) {
			fprintf(stderr, "%s: byte %zu is 0x%02x, expected 0x%02x\n", what, i, h[i],
				pat(seed, i));
			exit(1);
		}
	free(h);
}

static void check_host(const uint8_t *h, size_t n, uint32_t seed, const char *what)
{
	for (size_t i = 0; i < n; i++)
		if (h[i] != pat(seed, i)) {
			fprintf(stderr, "%s: byte %zu is 0x%02x, expected 0x%02x\n", what, i, h[i],
				pat(seed, i));
			exit(1);
		}
}

static int probe_dmabuf(struct ibv_pd *pd)
{
	errno = 0;
	SVT_CHECK(!ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0));
	return errno;
}

/* The three SIMVERBS_GPUDIRECT settings, in one process. */
static void modes(void)
{
	struct svt_ep e;
	CUdeviceptr d;
	char path[512];
	struct ibv_mr *mr;
	const char *(*sysfs_path)(void);

	unsetenv("SIMVERBS_GPUDIRECT");
	svt_ep_init(&e, "simib0", 4, 4, 0, 0);	/* lists devices: sysfs tree refreshed */
	/* rdma-core's const char *ibv_get_sysfs_path(void): the fake tree's root */
	sysfs_path = (const char *(*)(void))(uintptr_t)dlsym(RTLD_DEFAULT, "ibv_get_sysfs_path");
	SVT_CHECK(sysfs_path && sysfs_path());
	snprintf(path, sizeof(path), "%s/module/nvidia_peermem/version", sysfs_path());
	SVT_CHECK(access(path, F_OK) != 0);
	SVT_EQ(cu.alloc(&d, SZ), CUDA_SUCCESS);
	errno = 0;
	SVT_CHECK(!ibv_reg_mr(e.pd, (void *)(uintptr_t)d, SZ, ACC));
	SVT_EQ(errno, EFAULT);
	SVT_EQ(probe_dmabuf(e.pd), EBADF);
	setenv("SIMVERBS_GPUDIRECT", "0", 1);
	errno = 0;
	SVT_CHECK(!ibv_reg_mr(e.pd, (void *)(uintptr_t)d, SZ, ACC));
	SVT_EQ(errno, EFAULT);
	SVT_EQ(probe_dmabuf(e.pd), EOPNOTSUPP);
	setenv("SIMVERBS_GPUDIRECT", "1", 1);
	SVT_EQ(probe_dmabuf(e.pd), EBADF);
	mr = ibv_reg_mr(e.pd, (void *)(uintptr_t)d, SZ, ACC);
	SVT_CHECK(mr);
	SVT_EQ(ibv_dereg_mr(mr), 0);
	/* beyond the allocation: EFAULT; a VMM allocation: EOPNOTSUPP */
	errno = 0;
	SVT_CHECK(!ibv_reg_mr(e.pd, (void *)(uintptr_t)(d + 4096), SZ, ACC));
	SVT_EQ(errno, EFAULT);
	SVT_EQ(cu.free(d), CUDA_SUCCESS);
	SVT_EQ(cu.alloc_vmm(&d, SZ), CUDA_SUCCESS);
	errno = 0;
	SVT_CHECK(!ibv_reg_mr(e.pd, (void *)(uintptr_t)d, SZ, ACC));
	SVT_EQ(errno, EOPNOTSUPP);
	SVT_EQ(cu.free(d), CUDA_SUCCESS);
	ibv_free_device_list(ibv_get_device_list(NULL));
	SVT_EQ(access(path, R_OK), 0);	/* mode 1: peer-memory marker present */
	svt_ep_fini(&e);
}

/* What the target (child) publishes. */
struct target {
	struct svt_info info;
	uint64_t gaddr, haddr, daddr;	/* GPU MR, host MR, dma-buf MR */
	uint32_t grkey, hrkey, drkey;
};

static void target(void)
{
	struct svt_ep e;
	struct svt_info peer;
	struct target t;
	CUdeviceptr g, g2;
	struct ibv_mr *gmr, *hmr, *dmr;
	uint8_t *host = aligned_alloc(4096, SZ);
	struct ibv_wc wc;
	int fd;

	SVT_CHECK(host);
	memset(host, 0, SZ);
	svt_ep_init(&e, "simib0", 16, 16, 0, 0);
	SVT_EQ(cu.alloc(&g, SZ), CUDA_SUCCESS);
	SVT_EQ(cu.alloc(&g2, SZ), CUDA_SUCCESS);
	gmr = ibv_reg_mr(e.pd, (void *)(uintptr_t)g, SZ, ACC);
	SVT_CHECK(gmr);
	hmr = ibv_reg_mr(e.pd, host, SZ, ACC);
	SVT_CHECK(hmr);
	/* a dma-buf of the whole allocation, registered from offset 4096 */
	SVT_EQ(cu.dmabuf(&fd, g2, SZ, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0), CUDA_SUCCESS);
	dmr = ibv_reg_dmabuf_mr(e.pd, 4096, Q, g2 + 4096, fd, ACC);
	SVT_CHECK(dmr);
	errno = 0;
	SVT_CHECK(!ibv_reg_dmabuf_mr(e.pd, SZ - 4096, 2 * 4096, g2 + SZ - 4096, fd, ACC));
	SVT_EQ(errno, EINVAL);	/* beyond the dma-buf */
	fill(host, SZ, 9);
	memset(&t, 0, sizeof(t));
	t.info = svt_ep_info(&e);
	t.gaddr = g;
	t.grkey = gmr->rkey;
	t.haddr = (uintptr_t)host;
	t.hrkey = hmr->rkey;
	t.daddr = g2 + 4096;
	t.drkey = dmr->rkey;
	svt_send(&P, &t, sizeof(t));
	svt_recv(&P, &peer, sizeof(peer));
	svt_connect(&e, &peer, 14, 7);
	/* receive for the SEND: GPU bytes [3Q, 4Q) */
	SVT_EQ(svt_post_recv(&e, g + 3 * Q, Q, gmr->lkey, 77), 0);
	svt_sync(&P);
	wc = svt_poll1(e.cq, 60000);	/* the SEND */
	SVT_EQ(wc.status, IBV_WC_SUCCESS);
	SVT_EQ(wc.wr_id, 77);
	SVT_EQ(wc.byte_len, Q);
	svt_sync(&P);			/* initiator done */
	check_dev(g, Q, 1, "host -> remote GPU write");
	check_dev(g + Q, Q, 2, "GPU -> remote GPU write");
	check_dev(g + 3 * Q, Q, 4, "host+GPU SGEs -> GPU receive");
	check_dev(g2 + 4096, Q, 5, "write into a dma-buf MR");
	check_host(host + Q, Q, 2, "GPU -> remote host write");
	svt_sync(&P);
	SVT_EQ(ibv_dereg_mr(dmr), 0);
	SVT_EQ(ibv_dereg_mr(gmr), 0);
	SVT_EQ(ibv_dereg_mr(hmr), 0);
	close(fd);
	svt_ep_fini(&e);
	SVT_EQ(cu.free(g), CUDA_SUCCESS);
	SVT_EQ(cu.free(g2), CUDA_SUCCESS);
	free(host);
	exit(0);
}

static void post_ok(struct svt_ep *e, enum ibv_wr_opcode op, uint64_t la, uint32_t len,
		    uint32_t lkey, uint64_t ra, uint32_t rkey)
{
	SVT_EQ(svt_post_write(e, op, la, len, lkey, ra, rkey, 0, IBV_SEND_SIGNALED, op), 0);
	SVT_EQ(svt_poll1(e->cq, 60000).status, IBV_WC_SUCCESS);
}

/* One process, two QPs connected to each other: RDMA READ of GPU memory into
 * host memory, as the plugin's GPU flush does. */
static void loopback(void)
{
	struct svt_ep a, b;
	struct svt_info ia, ib;
	CUdeviceptr g;
	uint8_t *h;
	struct ibv_mr *gmr;

	svt_ep_init(&a, "simib0", 16, 16, Q, ACC);
	svt_ep_init(&b, "simib0", 16, 16, 0, 0);
	SVT_EQ(cu.alloc(&g, Q), CUDA_SUCCESS);
	h = malloc(Q);
	SVT_CHECK(h);
	fill(h, Q, 6);
	SVT_EQ(cu.htod(g, h, Q), CUDA_SUCCESS);
	gmr = ibv_reg_mr(b.pd, (void *)(uintptr_t)g, Q, ACC);
	SVT_CHECK(gmr);
	ia = svt_ep_info(&a);
	ib = svt_ep_info(&b);
	svt_connect(&a, &ib, 14, 7);
	svt_connect(&b, &ia, 14, 7);
	post_ok(&a, IBV_WR_RDMA_READ, (uintptr_t)a.buf, Q, a.mr->lkey, g, gmr->rkey);
	check_host((uint8_t *)a.buf, Q, 6, "loopback RDMA READ of GPU memory");
	SVT_EQ(ibv_dereg_mr(gmr), 0);
	svt_ep_fini(&b);
	svt_ep_fini(&a);
	SVT_EQ(cu.free(g), CUDA_SUCCESS);
	free(h);
}

/* The initiator's operations on the target's memory (no context current). */
static void transfers(struct svt_ep *e, CUdeviceptr g, struct ibv_mr *gmr, uint8_t *h,
		      const struct target *t)
{
	struct ibv_sge sge[2];
	struct ibv_send_wr wr, *bad;

	fill((uint8_t *)e->buf, Q, 1);
	post_ok(e, IBV_WR_RDMA_WRITE, (uintptr_t)e->buf, Q, e->mr->lkey, t->gaddr, t->grkey);
	post_ok(e, IBV_WR_RDMA_WRITE, g, Q, gmr->lkey, t->gaddr + Q, t->grkey);
	/* READ remote GPU [Q, 2Q) (pattern 2) into our GPU [2Q, 3Q) */
	post_ok(e, IBV_WR_RDMA_READ, g + 2 * Q, Q, gmr->lkey, t->gaddr + Q, t->grkey);
	/* GPU -> remote host [Q, 2Q); remote host [2Q, 3Q) (pattern 9) -> our GPU [3Q, 4Q) */
	post_ok(e, IBV_WR_RDMA_WRITE, g, Q, gmr->lkey, t->haddr + Q, t->hrkey);
	post_ok(e, IBV_WR_RDMA_READ, g + 3 * Q, Q, gmr->lkey, t->haddr + 2 * Q, t->hrkey);
	/* dma-buf MR */
	fill((uint8_t *)e->buf + Q, Q, 5);
	post_ok(e, IBV_WR_RDMA_WRITE, (uintptr_t)e->buf + Q, Q, e->mr->lkey, t->daddr, t->drkey);
	/* SEND: host half then GPU half, pattern 4 across both */
	SVT_EQ(cu.set(cu.ctx), CUDA_SUCCESS);
	fill(h, Q, 4);
	memcpy((uint8_t *)e->buf + 2 * Q, h, Q / 2);
	SVT_EQ(cu.htod(g + Q, h + Q / 2, Q / 2), CUDA_SUCCESS);
	SVT_EQ(cu.set(NULL), CUDA_SUCCESS);
	sge[0] = (struct ibv_sge){ (uintptr_t)e->buf + 2 * Q, Q / 2, e->mr->lkey };
	sge[1] = (struct ibv_sge){ g + Q, Q / 2, gmr->lkey };
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 9;
	wr.sg_list = sge;
	wr.num_sge = 2;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	SVT_EQ(ibv_post_send(e->qp, &wr, &bad), 0);
	SVT_EQ(svt_poll1(e->cq, 60000).status, IBV_WC_SUCCESS);
}

int main(void)
{
	struct svt_ep e;
	struct target t;
	struct svt_info me;
	struct fakecuda_stats st;
	CUdeviceptr g;
	struct ibv_mr *gmr;
	uint8_t *h;
	pid_t pid;

	alarm(120);
	svt_control_fn_get();
	load_fakecuda();
	modes();
	loopback();
	pid = svt_fork_peer(&P, target);
	svt_ep_init(&e, "simib0", 16, 16, SZ, ACC);	/* e.buf: host memory */
	SVT_EQ(cu.alloc(&g, SZ), CUDA_SUCCESS);
	h = malloc(SZ);
	SVT_CHECK(h);
	fill(h, SZ, 2);
	SVT_EQ(cu.htod(g, h, SZ), CUDA_SUCCESS);	/* GPU [0, SZ) = pattern 2 */
	gmr = ibv_reg_mr(e.pd, (void *)(uintptr_t)g, SZ, ACC);
	SVT_CHECK(gmr);
	svt_recv(&P, &t, sizeof(t));
	me = svt_ep_info(&e);
	svt_send(&P, &me, sizeof(me));
	svt_connect(&e, &t.info, 14, 7);
	svt_sync(&P);
	SVT_EQ(cu.set(NULL), CUDA_SUCCESS);	/* simverbs must bring its own context */

	transfers(&e, g, gmr, h, &t);
	svt_sync(&P);
	svt_sync(&P);			/* target checked its memory */

	SVT_EQ(cu.set(cu.ctx), CUDA_SUCCESS);
	fill(h, SZ, 2);
	check_dev(g + 2 * Q, Q, 2, "remote GPU -> GPU read");
	check_dev(g + 3 * Q, Q, 9, "remote host -> GPU read");
	cu.stats(&st);
	/* two remote allocations (g: five operations, g2: one), each opened once */
	SVT_EQ(st.ipc_opens, 2);
	SVT_EQ(ibv_dereg_mr(gmr), 0);
	svt_ep_fini(&e);
	SVT_EQ(cu.free(g), CUDA_SUCCESS);
	free(h);
	SVT_EQ(svt_wait_child(pid), 0);
	printf("sv_gpu: GPUDirect modes, IPC transfers, bounce, dma-buf, loopback: ok "
	       "(%d IPC open, %d copies)\n", st.ipc_opens, st.copies);
	return 0;
}
