/*
 * fakecuda: a stand-in libcuda.so.1 for testing simverbs' GPU memory code
 * on machines without a GPU (sv_gpu).  It implements the few driver entry
 * points simverbs and the test use, over host memory, and is as strict as
 * the driver where simverbs could go wrong:
 *  - "device memory" is a memfd mapped twice: a PROT_NONE reservation whose
 *    address is the device pointer (any CPU access or process_vm_* on it
 *    fails, as on a real GPU pointer) and a hidden read/write mapping that
 *    only the copy functions use;
 *  - copies, stream creation and IPC need a current context;
 *  - cuMemcpyAsync only queues: the bytes move at cuStreamSynchronize, so a
 *    missing synchronisation reads stale data;
 *  - an IPC handle can be opened once per process (CUDA_ERROR_ALREADY_MAPPED
 *    after), not in the exporting process, and only while the exporter runs;
 *  - managed memory (cuMemAllocManaged) is plain shared memory, CPU-addressable;
 *  - fakecuda_alloc_vmm() makes an allocation that, like a cuMem (VMM) one,
 *    is not legacy-IPC capable.
 * fakecuda_stats() reports counters (IPC opens/closes, copies) to the test.
 * Linked under the soname libcuda.so.1, so a test that dlopens it by path
 * makes simverbs' dlopen("libcuda.so.1", RTLD_NOLOAD) find it.
 */
#include "config.h"

#include <cuda.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FC_EXPORT __attribute__((visibility("default")))
#define FC_MAX_ALLOC 64
#define FC_MAX_OPS 256
#define FC_MAGIC 0x46414b45u

struct fc_alloc {
	char *dptr;		/* PROT_NONE reservation = the device address */
	char *hidden;		/* read/write view of the same pages */
	size_t size;
	int fd;			/* memfd; IPC handles name it */
	int opened;		/* mapped from another process's handle */
	int vmm;		/* not legacy-IPC capable */
	int managed;		/* cuMemAllocManaged: CPU-addressable, dptr == hidden */
	unsigned char handle[CU_IPC_HANDLE_SIZE];
};

struct fc_handle {
	uint32_t magic;
	int32_t pid;
	int32_t fd;
	uint32_t pad;
	uint64_t size;
};

struct fc_op {
	char *dst;
	const char *src;
	size_t n;
};

struct fakecuda_stats {
	int ipc_opens, ipc_closes, copies, syncs, no_ctx;
};

static pthread_mutex_t fc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fc_alloc fc_allocs[FC_MAX_ALLOC];
static struct fc_op fc_ops[FC_MAX_OPS];
static int fc_nops;
static int fc_inited;
static struct fakecuda_stats fc_stats;
static int fc_ctx_obj;	/* the one (primary) context */
static __thread CUcontext fc_stack[8];
static __thread int fc_depth;

FC_EXPORT void fakecuda_stats(struct fakecuda_stats *s);
void fakecuda_stats(struct fakecuda_stats *s)
{
	pthread_mutex_lock(&fc_lock);
	*s = fc_stats;
	pthread_mutex_unlock(&fc_lock);
}

static void fc_flush_ops(void)
{
	for (int i = 0; i < fc_nops; i++)
		memmove(fc_ops[i].dst, fc_ops[i].src, fc_ops[i].n);
	fc_nops = 0;
}

static CUresult fc_need_ctx(void)
{
	if (!fc_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (fc_depth > 0 && fc_stack[fc_depth - 1])
		return CUDA_SUCCESS;
	fc_stats.no_ctx++;
	return CUDA_ERROR_INVALID_CONTEXT;
}

/* The allocation holding [p, p+n) (n may be 0: p itself), or NULL. */
static struct fc_alloc *fc_find(const void *p, size_t n)
{
	const char *c = p;

	for (int i = 0; i < FC_MAX_ALLOC; i++) {
		struct fc_alloc *a = &fc_allocs[i];

		if (a->dptr && c >= a->dptr && c < a->dptr + a->size &&
		    n <= (size_t)(a->dptr + a->size - c))
			return a;
	}
	return NULL;
}

static struct fc_alloc *fc_slot(void)
{
	for (int i = 0; i < FC_MAX_ALLOC; i++)
		if (!fc_allocs[i].dptr)
			return &fc_allocs[i];
	return NULL;
}

/* Maps fd twice into a; 0 or -1. */
static int fc_map(struct fc_alloc *a, int fd, size_t size)
{
	a->hidden = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (a->hidden == MAP_FAILED)
		return -1;
	a->dptr = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (a->dptr == MAP_FAILED) {
		munmap(a->hidden, size);
		a->dptr = NULL;
		return -1;
	}
	a->size = size;
	a->fd = fd;
	return 0;
}

FC_EXPORT CUresult cuInit(unsigned int flags);
CUresult cuInit(unsigned int flags)
{
	(void)flags;
	fc_inited = 1;
	return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char **str)
{
	static char buf[32];

	snprintf(buf, sizeof(buf), "FAKE_CUDA_ERROR_%d", (int)error);
	*str = buf;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
	*count = 1;
	return fc_inited ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	if (!fc_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (ordinal != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*device = 0;
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	if (!fc_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*pctx = (CUcontext)(void *)&fc_ctx_obj;
	return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	*pctx = fc_depth > 0 ? fc_stack[fc_depth - 1] : NULL;
	return fc_inited ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
	if (!fc_depth)
		fc_depth = 1;
	fc_stack[fc_depth - 1] = ctx;
	if (!ctx)
		fc_depth = 0;
	return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext ctx)
{
	if (!ctx || fc_depth >= 8)
		return CUDA_ERROR_INVALID_VALUE;
	fc_stack[fc_depth++] = ctx;
	return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext *pctx)
{
	if (!fc_depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	*pctx = fc_stack[--fc_depth];
	return CUDA_SUCCESS;
}

static CUresult fc_alloc(CUdeviceptr *dptr, size_t size, int vmm)
{
	struct fc_alloc *a;
	CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
	int fd;

	pthread_mutex_lock(&fc_lock);
	if (fc_need_ctx() != CUDA_SUCCESS) {
		r = CUDA_ERROR_INVALID_CONTEXT;
		goto out;
	}
	size = (size + 4095) & ~(size_t)4095;
	a = fc_slot();
	if (!a || !size)
		goto out;
	fd = memfd_create("fakecuda", 0);
	if (fd < 0 || ftruncate(fd, (off_t)size) || fc_map(a, fd, size)) {
		if (fd >= 0)
			close(fd);
		goto out;
	}
	a->vmm = vmm;
	a->opened = 0;
	*dptr = (CUdeviceptr)(uintptr_t)a->dptr;
	r = CUDA_SUCCESS;
out:
	pthread_mutex_unlock(&fc_lock);
	return r;
}

CUresult cuMemAlloc(CUdeviceptr *dptr, size_t size)
{
	return fc_alloc(dptr, size, 0);
}

FC_EXPORT CUresult fakecuda_alloc_vmm(CUdeviceptr *dptr, size_t size);
CUresult fakecuda_alloc_vmm(CUdeviceptr *dptr, size_t size)
{
	return fc_alloc(dptr, size, 1);
}

static void fc_unmap(struct fc_alloc *a)
{
	munmap(a->dptr, a->size);
	if (!a->managed) {
		munmap(a->hidden, a->size);
		close(a->fd);
	}
	memset(a, 0, sizeof(*a));
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned int flags)
{
	struct fc_alloc *a;
	CUresult r = CUDA_ERROR_OUT_OF_MEMORY;

	(void)flags;
	pthread_mutex_lock(&fc_lock);
	if (fc_need_ctx() != CUDA_SUCCESS) {
		r = CUDA_ERROR_INVALID_CONTEXT;
		goto out;
	}
	size = (size + 4095) & ~(size_t)4095;
	a = fc_slot();
	if (!a || !size)
		goto out;
	a->dptr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (a->dptr == MAP_FAILED) {
		a->dptr = NULL;
		goto out;
	}
	a->hidden = a->dptr;
	a->size = size;
	a->fd = -1;
	a->managed = 1;
	*dptr = (CUdeviceptr)(uintptr_t)a->dptr;
	r = CUDA_SUCCESS;
out:
	pthread_mutex_unlock(&fc_lock);
	return r;
}

/* The pre-CUDA-13 context calls e2e_gpu uses (cuda.h 13 maps cuCtxCreate to _v4). */
FC_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	CUresult r = cuDevicePrimaryCtxRetain(pctx, dev);

	(void)flags;
	return r == CUDA_SUCCESS ? cuCtxPushCurrent(*pctx) : r;
}

FC_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx);
CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	CUcontext c;

	if (fc_depth > 0 && fc_stack[fc_depth - 1] == ctx)
		cuCtxPopCurrent(&c);
	return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void)
{
	CUresult r;

	pthread_mutex_lock(&fc_lock);
	r = fc_need_ctx();
	if (r == CUDA_SUCCESS)
		fc_flush_ops();
	pthread_mutex_unlock(&fc_lock);
	return r;
}

CUresult cuMemFree(CUdeviceptr dptr)
{
	struct fc_alloc *a;
	CUresult r = CUDA_ERROR_INVALID_VALUE;

	pthread_mutex_lock(&fc_lock);
	a = fc_find((void *)(uintptr_t)dptr, 0);
	if (a && !a->opened && a->dptr == (char *)(uintptr_t)dptr) {
		fc_unmap(a);
		r = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&fc_lock);
	return r;
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
	struct fc_alloc *a;
	CUresult r = CUDA_SUCCESS;

	if (!fc_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&fc_lock);
	a = fc_find((void *)(uintptr_t)ptr, 0);
	if (!a)
		r = CUDA_ERROR_INVALID_VALUE;	/* memory CUDA does not know */
	else if (attribute == CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
		*(unsigned int *)data = CU_MEMORYTYPE_DEVICE;
	else if (attribute == CU_POINTER_ATTRIBUTE_IS_MANAGED)
		*(unsigned int *)data = (unsigned int)a->managed;
	else if (attribute == CU_POINTER_ATTRIBUTE_CONTEXT)
		*(CUcontext *)data = (CUcontext)(void *)&fc_ctx_obj;
	else if (attribute == CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE)
		*(unsigned int *)data = !a->vmm;
	else
		r = CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_unlock(&fc_lock);
	return r;
}

CUresult cuMemGetAddressRange(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	struct fc_alloc *a;

	pthread_mutex_lock(&fc_lock);
	a = fc_find((void *)(uintptr_t)dptr, 0);
	if (a) {
		*pbase = (CUdeviceptr)(uintptr_t)a->dptr;
		*psize = a->size;
	}
	pthread_mutex_unlock(&fc_lock);
	return a ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr dptr)
{
	struct fc_handle fh = { FC_MAGIC, 0, 0, 0, 0 };
	struct fc_alloc *a;
	CUresult r;

	pthread_mutex_lock(&fc_lock);
	r = fc_need_ctx();
	a = fc_find((void *)(uintptr_t)dptr, 0);
	if (r == CUDA_SUCCESS && (!a || a->opened || a->vmm || a->managed ||
				     a->dptr != (char *)(uintptr_t)dptr))
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS) {
		fh.pid = (int32_t)getpid();
		fh.fd = a->fd;
		fh.size = a->size;
		memset(h, 0, sizeof(*h));
		memcpy(h, &fh, sizeof(fh));
	}
	pthread_mutex_unlock(&fc_lock);
	return r;
}

CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle h, unsigned int flags)
{
	struct fc_handle fh;
	struct fc_alloc *a = NULL;
	char path[64];
	CUresult r;
	int fd = -1;

	(void)flags;
	memcpy(&fh, &h, sizeof(fh));
	pthread_mutex_lock(&fc_lock);
	r = fc_need_ctx();
	if (r == CUDA_SUCCESS && (fh.magic != FC_MAGIC || fh.pid == (int32_t)getpid()))
		r = CUDA_ERROR_INVALID_CONTEXT;	/* as the driver: not in the exporter */
	for (int i = 0; r == CUDA_SUCCESS && i < FC_MAX_ALLOC; i++)
		if (fc_allocs[i].dptr && fc_allocs[i].opened &&
		    !memcmp(fc_allocs[i].handle, &h, sizeof(h)))
			r = CUDA_ERROR_ALREADY_MAPPED;
	if (r == CUDA_SUCCESS) {
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)fh.pid, (int)fh.fd);
		fd = open(path, O_RDWR | O_CLOEXEC);
		a = fc_slot();
		if (fd < 0 || !a || fc_map(a, fd, fh.size)) {
			if (fd >= 0)
				close(fd);
			r = CUDA_ERROR_INVALID_HANDLE;
		}
	}
	if (r == CUDA_SUCCESS) {
		a->opened = 1;
		memcpy(a->handle, &h, sizeof(h));
		*pdptr = (CUdeviceptr)(uintptr_t)a->dptr;
		fc_stats.ipc_opens++;
	}
	pthread_mutex_unlock(&fc_lock);
	return r;
}

CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
	struct fc_alloc *a;
	CUresult r = CUDA_ERROR_INVALID_VALUE;

	pthread_mutex_lock(&fc_lock);
	a = fc_find((void *)(uintptr_t)dptr, 0);
	if (fc_need_ctx() == CUDA_SUCCESS && a && a->opened &&
	    a->dptr == (char *)(uintptr_t)dptr) {
		fc_unmap(a);
		fc_stats.ipc_closes++;
		r = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&fc_lock);
	return r;
}

CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr, size_t size,
				       CUmemRangeHandleType type, unsigned long long flags)
{
	struct fc_alloc *a;
	int fd;

	(void)flags;
	if (type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD || (dptr | size) & 4095)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fc_lock);
	a = fc_find((void *)(uintptr_t)dptr, size);
	pthread_mutex_unlock(&fc_lock);
	if (!a)
		return CUDA_ERROR_INVALID_VALUE;
	/* a dma-buf is no CPU view of the memory: an empty file of that size */
	fd = memfd_create("fakecuda-dmabuf", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)size)) {
		if (fd >= 0)
			close(fd);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*(int *)handle = fd;
	return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *s, unsigned int flags)
{
	static int stream_obj;
	CUresult r;

	(void)flags;
	pthread_mutex_lock(&fc_lock);
	r = fc_need_ctx();
	pthread_mutex_unlock(&fc_lock);
	if (r == CUDA_SUCCESS)
		*s = (CUstream)(void *)&stream_obj;
	return r;
}

/* Host address of a device or host pointer for n bytes; NULL if invalid. */
static char *fc_host(CUdeviceptr p, size_t n)
{
	struct fc_alloc *a = fc_find((void *)(uintptr_t)p, n);
	char *c = (char *)(uintptr_t)p;

	if (a)
		return a->hidden + (c - a->dptr);
	return fc_find(c, 0) ? NULL : c;	/* straddling a device range: invalid */
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
	CUresult r;
	char *d, *c;

	pthread_mutex_lock(&fc_lock);
	r = fc_need_ctx();
	d = fc_host(dst, n);
	c = fc_host(src, n);
	if (r == CUDA_SUCCESS && (!s || !d || !c))
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS) {
		if (fc_nops == FC_MAX_OPS)
			fc_flush_ops();
		fc_ops[fc_nops++] = (struct fc_op){ d, c, n };
		fc_stats.copies++;
	}
	pthread_mutex_unlock(&fc_lock);
	return r;
}

CUresult cuStreamSynchronize(CUstream s)
{
	CUresult r;

	pthread_mutex_lock(&fc_lock);
	r = fc_need_ctx();
	if (r == CUDA_SUCCESS && !s)
		r = CUDA_ERROR_INVALID_HANDLE;
	if (r == CUDA_SUCCESS) {
		fc_flush_ops();
		fc_stats.syncs++;
	}
	pthread_mutex_unlock(&fc_lock);
	return r;
}

/* Synchronous copies for the test program. */
CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n)
{
	CUresult r;
	char *d;

	pthread_mutex_lock(&fc_lock);
	r = fc_need_ctx();
	d = fc_host(dst, n);
	if (r == CUDA_SUCCESS && (!d || !fc_find((void *)(uintptr_t)dst, n)))
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS)
		memcpy(d, src, n);
	pthread_mutex_unlock(&fc_lock);
	return r;
}

CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n)
{
	CUresult r;
	char *c;

	pthread_mutex_lock(&fc_lock);
	r = fc_need_ctx();
	c = fc_host(src, n);
	if (r == CUDA_SUCCESS && (!c || !fc_find((void *)(uintptr_t)src, n)))
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS)
		memcpy(dst, c, n);
	pthread_mutex_unlock(&fc_lock);
	return r;
}
