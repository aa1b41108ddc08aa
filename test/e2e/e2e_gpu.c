/*
 * e2e_gpu - GPU memory through the plugin, as NCCL uses it with GPUDirect:
 * regMr of a CUDA device pointer (NCCL_PTR_CUDA), a receive into it, the
 * flush (iflush, an RDMA READ of the GPU buffer) and the content read back
 * with cuMemcpyDtoH; a send from device memory; regMrDmaBuf of a CUDA dma-buf
 * (cuMemGetHandleForAddressRange) with a receive and flush; a receive into
 * managed memory.  Needs libcuda.so.1 and a GPU (opened at run time, no build
 * dependency); exits 77 (skip) without them, or when the selected device does
 * not offer NCCL_PTR_CUDA (no GPUDirect).
 *
 * Over simverbs, GPU memory moves only with SIMVERBS_GPUDIRECT=1 (CUDA IPC
 * and the driver's copies); without it device memory is refused at
 * registration and only that (a clean refusal with a message) is checked.
 * make check runs it over fakecuda, a stand-in libcuda (e2e_gpu_fake.sh);
 * scripts/gpu-check.sh on a real GPU.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e.h"

#define T 30.0
#define LEN (4u << 20)

/* The few CUDA driver API entry points we need (stable C ABI). */
typedef int (*cu_init_t)(unsigned int);
typedef int (*cu_device_get_count_t)(int *);
typedef int (*cu_device_get_t)(int *, int);
typedef int (*cu_ctx_create_t)(void **, unsigned int, int);
typedef int (*cu_ctx_destroy_t)(void *);
typedef int (*cu_mem_alloc_t)(unsigned long long *, size_t);
typedef int (*cu_mem_alloc_managed_t)(unsigned long long *, size_t, unsigned int);
typedef int (*cu_mem_free_t)(unsigned long long);
typedef int (*cu_ctx_synchronize_t)(void);
typedef int (*cu_memcpy_htod_t)(unsigned long long, const void *, size_t);
typedef int (*cu_memcpy_dtoh_t)(void *, unsigned long long, size_t);
typedef int (*cu_dmabuf_t)(void *, unsigned long long, size_t, int, unsigned long long);

struct cuda {
	void *dl;
	cu_init_t init;
	cu_device_get_count_t count;
	cu_device_get_t device;
	cu_ctx_create_t ctx_create;
	cu_ctx_destroy_t ctx_destroy;
	cu_mem_alloc_t alloc;
	cu_mem_alloc_managed_t alloc_managed;
	cu_mem_free_t free;
	cu_ctx_synchronize_t sync;
	cu_memcpy_htod_t htod;
	cu_memcpy_dtoh_t dtoh;
	cu_dmabuf_t dmabuf;	/* optional (CUDA >= 11.7) */
};

static int cuda_open(struct cuda *cu)
{
	int n = 0;

	cu->dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!cu->dl) {
		e2e_note("libcuda.so.1 not found (%s): skipping the GPU tests", dlerror());
		return 77;
	}
	cu->init = (cu_init_t)dlsym(cu->dl, "cuInit");
	cu->count = (cu_device_get_count_t)dlsym(cu->dl, "cuDeviceGetCount");
	cu->device = (cu_device_get_t)dlsym(cu->dl, "cuDeviceGet");
	cu->ctx_create = (cu_ctx_create_t)dlsym(cu->dl, "cuCtxCreate_v2");
	cu->ctx_destroy = (cu_ctx_destroy_t)dlsym(cu->dl, "cuCtxDestroy_v2");
	cu->alloc = (cu_mem_alloc_t)dlsym(cu->dl, "cuMemAlloc_v2");
	cu->alloc_managed = (cu_mem_alloc_managed_t)dlsym(cu->dl, "cuMemAllocManaged");
	cu->free = (cu_mem_free_t)dlsym(cu->dl, "cuMemFree_v2");
	cu->sync = (cu_ctx_synchronize_t)dlsym(cu->dl, "cuCtxSynchronize");
	cu->htod = (cu_memcpy_htod_t)dlsym(cu->dl, "cuMemcpyHtoD_v2");
	cu->dtoh = (cu_memcpy_dtoh_t)dlsym(cu->dl, "cuMemcpyDtoH_v2");
	cu->dmabuf = (cu_dmabuf_t)dlsym(cu->dl, "cuMemGetHandleForAddressRange");
	if (!cu->init || !cu->count || !cu->device || !cu->ctx_create || !cu->ctx_destroy ||
	    !cu->alloc || !cu->alloc_managed || !cu->free || !cu->sync || !cu->htod || !cu->dtoh)
		E2E_FAIL("libcuda.so.1 lacks a driver API entry point");
	if (cu->init(0) || cu->count(&n) || n < 1) {
		e2e_note("no usable GPU (cuInit / cuDeviceGetCount): skipping the GPU tests");
		return 77;
	}
	return 0;
}

static struct cuda cu;
static struct e2e_net n;
static void *sc, *rc;
static char host[LEN], back[LEN];

/* host (pattern id) -> GPU buffer data (registered as rmh), then the flush NCCL would issue. */
static void recv_flushed(void *data, void *rmh, void *smh, uint32_t id)
{
	size_t size = LEN;
	int tag = (int)id, rs[8], isz = LEN;
	void *req;

	e2e_fill(host, LEN, id);
	req = e2e_irecv_wait(&n, rc, 1, &data, &size, &tag, &rmh, T);
	E2E_OK(e2e_wait(&n, e2e_isend_wait(&n, sc, host, LEN, tag, smh, T), NULL, T));
	E2E_OK(e2e_wait(&n, req, rs, T));
	E2E_CHECK(rs[0] == (int)LEN);
	req = NULL;
	E2E_OK(e2e_iflush(&n, rc, 1, &data, &isz, &rmh, &req));
	if (req)
		E2E_OK(e2e_wait(&n, req, NULL, T));
}

/* host -> GPU buffer data (registered as rmh), flush, read back, compare. */
static void recv_into_gpu(void *data, void *rmh, void *smh, uint32_t id, const char *what)
{
	recv_flushed(data, rmh, smh, id);
	memset(back, 0, LEN);
	if (cu.dtoh(back, (unsigned long long)(uintptr_t)data, LEN))
		E2E_FAIL("%s: cuMemcpyDtoH failed", what);
	if (e2e_verify(back, LEN, id) >= 0)
		E2E_FAIL("%s: content wrong at byte %ld", what, e2e_verify(back, LEN, id));
}

/* GPU buffer (registered on the send side as smh) -> host receive, compare. */
static void send_from_gpu(void *data, void *smh, void *hrmh, uint32_t id)
{
	size_t size = LEN;
	int tag = (int)id, rs[8];
	void *req, *dst = back;

	e2e_fill(host, LEN, id);
	if (cu.htod((unsigned long long)(uintptr_t)data, host, LEN))
		E2E_FAIL("cuMemcpyHtoD failed");
	memset(back, 0, LEN);
	req = e2e_irecv_wait(&n, rc, 1, &dst, &size, &tag, &hrmh, T);
	E2E_OK(e2e_wait(&n, e2e_isend_wait(&n, sc, data, LEN, tag, smh, T), NULL, T));
	E2E_OK(e2e_wait(&n, req, rs, T));
	E2E_CHECK(rs[0] == (int)LEN);
	if (e2e_verify(back, LEN, id) >= 0)
		E2E_FAIL("send from GPU memory: content wrong at byte %ld", e2e_verify(back, LEN, id));
}

/* Device memory: registration (required with SIMVERBS_GPUDIRECT=1), then
 * receive + flush into it and send from it.  Returns "what was done". */
static const char *device_memory(void *smh)
{
	const char *g = getenv("SIMVERBS_GPUDIRECT");
	unsigned long long dptr = 0;
	void *dmh, *sdmh, *hrmh;
	int r;

	if (cu.alloc(&dptr, LEN))
		E2E_FAIL("cuMemAlloc of %u bytes failed", LEN);
	r = e2e_reg_mr(&n, rc, (void *)(uintptr_t)dptr, LEN, NCCL_PTR_CUDA, &dmh);
	if (r != ncclSuccess) {
		if (g && !strcmp(g, "1"))
			E2E_FAIL("registering device memory failed (%d) with SIMVERBS_GPUDIRECT=1", r);
		if (!e2e_warned("reg"))
			E2E_FAIL("registering device memory failed (%d) without a message", r);
		cu.free(dptr);
		return "device-memory registration refused cleanly";
	}
	recv_into_gpu((void *)(uintptr_t)dptr, dmh, smh, 7, "receive into device memory");
	E2E_OK(e2e_reg_mr(&n, sc, (void *)(uintptr_t)dptr, LEN, NCCL_PTR_CUDA, &sdmh));
	E2E_OK(e2e_reg_mr(&n, rc, back, LEN, NCCL_PTR_HOST, &hrmh));
	send_from_gpu((void *)(uintptr_t)dptr, sdmh, hrmh, 8);
	E2E_OK(e2e_dereg_mr(&n, rc, hrmh));
	E2E_OK(e2e_dereg_mr(&n, sc, sdmh));
	E2E_OK(e2e_dereg_mr(&n, rc, dmh));
	cu.free(dptr);
	return "device memory: receive + flush + send ok";
}

/* regMrDmaBuf of a CUDA dma-buf of device memory, receive + flush into it. */
static const char *dmabuf_memory(const struct e2e_props *p, void *smh)
{
	const ncclNet_v12_t *t = n.tbl;
	unsigned long long dptr = 0;
	void *mh;
	int fd = -1, r;

	if (!(p->ptr_support & NCCL_PTR_DMABUF) || !cu.dmabuf)
		return "no dma-buf";
	if (cu.alloc(&dptr, LEN))
		E2E_FAIL("cuMemAlloc of %u bytes failed", LEN);
	if (cu.dmabuf(&fd, dptr, LEN, 1 /* CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD */, 0)) {
		cu.free(dptr);
		return "cuMemGetHandleForAddressRange refused (no dma-buf from this driver)";
	}
	r = t->regMrDmaBuf(rc, (void *)(uintptr_t)dptr, LEN, NCCL_PTR_CUDA, 0, fd, &mh);
	if (r != ncclSuccess)
		E2E_FAIL("regMrDmaBuf of a CUDA dma-buf failed (%d) on a device offering "
			 "NCCL_PTR_DMABUF", r);
	recv_into_gpu((void *)(uintptr_t)dptr, mh, smh, 9, "receive into a dma-buf registration");
	E2E_OK(e2e_dereg_mr(&n, rc, mh));
	close(fd);
	cu.free(dptr);
	return "dma-buf: receive + flush ok";
}

int main(void)
{
	struct e2e_props p;
	void *ctx = NULL, *smh, *rmh, *data;
	unsigned long long mptr = 0;
	const char *dev_what, *dmabuf_what;
	int r, dev, cudev;

	alarm(120);
	r = cuda_open(&cu);
	if (r)
		return r;
	if (cu.device(&cudev, 0) || cu.ctx_create(&ctx, 0, cudev))
		E2E_FAIL("cannot create a CUDA context");
	r = e2e_open(&n, 12);
	if (r)
		return r;
	dev = e2e_find_dev(&n, e2e_dev("simroce0"));
	dev = dev < 0 ? 0 : dev;
	E2E_OK(e2e_props(&n, dev, &p));
	if (!(p.ptr_support & NCCL_PTR_CUDA)) {
		e2e_note("%s does not offer NCCL_PTR_CUDA (no GPUDirect): skipping", p.name);
		e2e_close(&n);
		return 77;
	}
	e2e_pair(&n, dev, &sc, &rc, T);
	E2E_OK(e2e_reg_mr(&n, sc, host, LEN, NCCL_PTR_HOST, &smh));
	dev_what = device_memory(smh);
	dmabuf_what = dmabuf_memory(&p, smh);
	/* managed memory: transfer, flush, content read by the CPU */
	if (cu.alloc_managed(&mptr, LEN, 1 /* CU_MEM_ATTACH_GLOBAL */))
		E2E_FAIL("cuMemAllocManaged failed");
	data = (void *)(uintptr_t)mptr;
	memset(data, 0, LEN);
	E2E_OK(e2e_reg_mr(&n, rc, data, LEN, NCCL_PTR_CUDA, &rmh));
	recv_flushed(data, rmh, smh, 42);
	if (cu.sync() || e2e_verify(data, LEN, 42) >= 0)
		E2E_FAIL("GPU-visible buffer content wrong at %ld", e2e_verify(data, LEN, 42));
	E2E_OK(e2e_dereg_mr(&n, rc, rmh));
	E2E_OK(e2e_dereg_mr(&n, sc, smh));
	E2E_OK(e2e_close_send(&n, sc));
	E2E_OK(e2e_close_recv(&n, rc));
	e2e_close(&n);
	cu.free(mptr);
	cu.ctx_destroy(ctx);
	e2e_note("GPU on %s: %s; %s; managed transfer + flush ok", p.name, dev_what, dmabuf_what);
	return 0;
}
