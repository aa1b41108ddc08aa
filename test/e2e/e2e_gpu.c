/*
 * e2e_gpu - GPU memory through the plugin: registration of a CUDA device
 * pointer (NCCL_PTR_CUDA), a transfer from host memory into GPU-visible
 * managed memory, and the flush on it. Needs libcuda.so.1 and a GPU (opened
 * at run time, no build dependency); exits 77 (skip) without them, or when
 * the selected device does not offer NCCL_PTR_CUDA.
 *
 * Over simverbs data moves with process_vm_*, which cannot reach device-only
 * memory, so the transfer and flush use managed memory (cuMemAllocManaged);
 * plain device memory is only registered and deregistered.
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
	if (!cu->init || !cu->count || !cu->device || !cu->ctx_create || !cu->ctx_destroy ||
	    !cu->alloc || !cu->alloc_managed || !cu->free || !cu->sync)
		E2E_FAIL("libcuda.so.1 lacks a driver API entry point");
	if (cu->init(0) || cu->count(&n) || n < 1) {
		e2e_note("no usable GPU (cuInit / cuDeviceGetCount): skipping the GPU tests");
		return 77;
	}
	return 0;
}

int main(void)
{
	struct cuda cu;
	struct e2e_net n;
	struct e2e_props p;
	void *ctx = NULL, *sc, *rc, *smh, *rmh, *dmh, *req, *data;
	unsigned long long dptr = 0, mptr = 0;
	static char host[LEN];
	size_t size = LEN;
	int r, dev, cudev, tag = 1, rs[8], isz = LEN;

	alarm(120);
	r = cuda_open(&cu);
	if (r)
		return r;
	if (cu.device(&cudev, 0) || cu.ctx_create(&ctx, 0, cudev))
		E2E_FAIL("cannot create a CUDA context");
	r = e2e_open(&n, 12);
	if (r)
		return r;
	dev = e2e_find_dev(&n, "simroce0");
	dev = dev < 0 ? 0 : dev;
	E2E_OK(e2e_props(&n, dev, &p));
	if (!(p.ptr_support & NCCL_PTR_CUDA)) {
		e2e_note("%s does not offer NCCL_PTR_CUDA (no GPUDirect): skipping", p.name);
		e2e_close(&n);
		return 77;
	}
	e2e_pair(&n, dev, &sc, &rc, T);
	/* device memory: registration only */
	if (cu.alloc(&dptr, LEN))
		E2E_FAIL("cuMemAlloc of %u bytes failed", LEN);
	r = e2e_reg_mr(&n, rc, (void *)(uintptr_t)dptr, LEN, NCCL_PTR_CUDA, &dmh);
	if (r == ncclSuccess)
		E2E_OK(e2e_dereg_mr(&n, rc, dmh));
	else if (!e2e_warned("reg"))
		E2E_FAIL("registering device memory failed (%d) without a message", r);
	/* managed memory: transfer, flush, content */
	if (cu.alloc_managed(&mptr, LEN, 1 /* CU_MEM_ATTACH_GLOBAL */))
		E2E_FAIL("cuMemAllocManaged failed");
	data = (void *)(uintptr_t)mptr;
	memset(data, 0, LEN);
	E2E_OK(e2e_reg_mr(&n, rc, data, LEN, NCCL_PTR_CUDA, &rmh));
	E2E_OK(e2e_reg_mr(&n, sc, host, LEN, NCCL_PTR_HOST, &smh));
	e2e_fill(host, LEN, 42);
	req = e2e_irecv_wait(&n, rc, 1, &data, &size, &tag, &rmh, T);
	E2E_OK(e2e_wait(&n, e2e_isend_wait(&n, sc, host, LEN, tag, smh, T), NULL, T));
	E2E_OK(e2e_wait(&n, req, rs, T));
	E2E_CHECK(rs[0] == (int)LEN);
	req = NULL;
	E2E_OK(e2e_iflush(&n, rc, 1, &data, &isz, &rmh, &req));
	if (req)
		E2E_OK(e2e_wait(&n, req, NULL, T));
	if (cu.sync() || e2e_verify(data, LEN, 42) >= 0)
		E2E_FAIL("GPU-visible buffer content wrong at %ld", e2e_verify(data, LEN, 42));
	E2E_OK(e2e_dereg_mr(&n, rc, rmh));
	E2E_OK(e2e_dereg_mr(&n, sc, smh));
	E2E_OK(e2e_close_send(&n, sc));
	E2E_OK(e2e_close_recv(&n, rc));
	e2e_close(&n);
	cu.free(mptr);
	cu.free(dptr);
	cu.ctx_destroy(ctx);
	e2e_note("GPU: device-memory registration %s, managed transfer + flush ok",
		 r == ncclSuccess ? "ok" : "refused cleanly");
	return 0;
}
