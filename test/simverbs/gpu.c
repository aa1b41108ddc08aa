/*
 * GPU memory on simverbs (see gpu.h for SIMVERBS_GPUDIRECT).
 *
 * Registration: a pointer that the CUDA driver reports as device memory
 * (cuPointerGetAttribute, only once the process has libcuda.so.1 loaded) is
 * GPU memory; its allocation is exported once per registration with
 * cuIpcGetMemHandle and the handle is published in the fabric's GPU table,
 * named by the MR's entry.  Managed and host-registered memory are CPU
 * addressable and stay on the host path.
 *
 * Data: the initiator executes every WQE (engine.c).  A remote GPU range is
 * opened once per (owner, allocation) with cuIpcOpenMemHandle and cached;
 * then every chunk is either a plain memcpy (host <-> host in this process),
 * a cuMemcpyAsync on simverbs' own non-blocking stream (at least one side GPU,
 * both addressable here; unified addressing picks the direction), or a bounce
 * through a host buffer (our GPU <-> another process's host memory, with
 * process_vm_*).  The stream is synchronised before the WQE completes, so a
 * completion still implies the bytes landed.  CUDA calls run with simverbs'
 * context pushed (the caller's current one at first use, else device 0's
 * primary context), whatever the calling thread has current.
 *
 * Only legacy CUDA IPC is implemented: cuMem (VMM) allocations, which it
 * cannot export, are refused at registration with a message (run NCCL with
 * NCCL_CUMEM_ENABLE=0).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sv.h"

int sv_gpu_mode(void)
{
	const char *e = getenv("SIMVERBS_GPUDIRECT");

	if (!e || !*e)
		return -1;
	return !strcmp(e, "1") ? 1 : 0;
}

static const char sv_peermem_marker[] = "module/nvidia_peermem/version";

void sv_gpu_sysfs(const char *root)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", root, sv_peermem_marker);
	if (sv_gpu_mode() != 1) {
		unlink(path);
		return;
	}
	if (access(path, F_OK) == 0)
		return;
	snprintf(path, sizeof(path), "%s/module", root);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/module/nvidia_peermem", root);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%s", root, sv_peermem_marker);
	{
		char tmp[560];
		FILE *f;

		snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
		f = fopen(tmp, "w");
		if (!f)
			return;
		fputs("simverbs\n", f);
		if (fclose(f) || rename(tmp, path))
			unlink(tmp);
	}
}

uint32_t sv_gpu_slot_alloc(uint32_t mr_key, const struct sv_gpu_mem *g)
{
	struct sv_fabric *f = sv_g.fab;

	for (uint32_t s = 1; s < SV_MAX_GPU_MRS; s++) {
		struct sv_shm_gpu *e = &f->gpus[s];
		uint32_t k = e->mr_key;

		/* free, or left behind by an MR that no longer exists */
		if (k && atomic_load(&f->mrs[(k >> 8) % SV_MAX_MR_SLOTS].key) == k &&
		    f->mrs[(k >> 8) % SV_MAX_MR_SLOTS].gpu == s)
			continue;
		e->pid = sv_g.pid;
		e->mem = *g;
		e->mr_key = mr_key;
		return s;
	}
	return 0;
}

void sv_gpu_slot_free(uint32_t slot)
{
	if (slot && slot < SV_MAX_GPU_MRS)
		sv_g.fab->gpus[slot].mr_key = 0;
}

#ifdef HAVE_CUDA_H
#include <cuda.h>
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>

/* The driver entry points simverbs uses, typed from cuda.h. */
struct sv_cuda {
	__typeof__(&cuGetErrorName) err_name;
	__typeof__(&cuPointerGetAttribute) ptr_attr;
	__typeof__(&cuMemGetAddressRange) addr_range;
	__typeof__(&cuIpcGetMemHandle) ipc_get;
	__typeof__(&cuIpcOpenMemHandle) ipc_open;
	__typeof__(&cuIpcCloseMemHandle) ipc_close;
	__typeof__(&cuCtxGetCurrent) ctx_get;
	__typeof__(&cuCtxPushCurrent) ctx_push;
	__typeof__(&cuCtxPopCurrent) ctx_pop;
	__typeof__(&cuDeviceGet) dev_get;
	__typeof__(&cuDevicePrimaryCtxRetain) primary_retain;
	__typeof__(&cuStreamCreate) stream_create;
	__typeof__(&cuStreamSynchronize) stream_sync;
	__typeof__(&cuMemcpyAsync) copy;
};

#define SV_IPC_CACHE 256
#define SV_BOUNCE (4u << 20)

struct sv_ipc_ent {
	int32_t pid;			/* 0 = free */
	uint32_t refs;			/* transfers using dptr right now */
	uint64_t used;			/* LRU tick */
	CUdeviceptr dptr;		/* the allocation's base in this process */
	unsigned char h[SV_IPC_HANDLE_BYTES];
};

static struct {
	pthread_mutex_t lock;		/* everything below */
	void *dl;
	unsigned long long adds_seen;	/* objects loaded when libcuda was last looked for */
	bool loaded;			/* cu is complete */
	struct sv_cuda cu;
	CUcontext ctx;
	CUstream stream;
	uint64_t tick;
	struct sv_ipc_ent ipc[SV_IPC_CACHE];
	pthread_mutex_t bounce_lock;
	char *bounce;
} sv_gpu = { PTHREAD_MUTEX_INITIALIZER, .bounce_lock = PTHREAD_MUTEX_INITIALIZER };

static const char *sv_cu_err(CUresult r)
{
	const char *s = NULL;

	if (sv_gpu.cu.err_name)
		sv_gpu.cu.err_name(r, &s);
	return s ? s : "CUDA error";
}

/* dl_iterate_phdr callback: the count of objects ever loaded, then stop. */
static int sv_dl_adds(struct dl_phdr_info *info, size_t size, void *arg)
{
	*(unsigned long long *)arg = size >= offsetof(struct dl_phdr_info, dlpi_adds) +
					       sizeof(info->dlpi_adds) ? info->dlpi_adds : ~0ull;
	return 1;
}

/* libcuda if this process has it loaded and it has every entry point. */
static const struct sv_cuda *sv_cuda(void)
{
	static const struct { const char *name; size_t off; } syms[] = {
#define SV_SYM(f, n) { n, offsetof(struct sv_cuda, f) }
		SV_SYM(err_name, "cuGetErrorName"),
		SV_SYM(ptr_attr, "cuPointerGetAttribute"),
		SV_SYM(addr_range, "cuMemGetAddressRange_v2"),
		SV_SYM(ipc_get, "cuIpcGetMemHandle"),
		SV_SYM(ipc_open, "cuIpcOpenMemHandle_v2"),
		SV_SYM(ipc_close, "cuIpcCloseMemHandle"),
		SV_SYM(ctx_get, "cuCtxGetCurrent"),
		SV_SYM(ctx_push, "cuCtxPushCurrent_v2"),
		SV_SYM(ctx_pop, "cuCtxPopCurrent_v2"),
		SV_SYM(dev_get, "cuDeviceGet"),
		SV_SYM(primary_retain, "cuDevicePrimaryCtxRetain"),
		SV_SYM(stream_create, "cuStreamCreate"),
		SV_SYM(stream_sync, "cuStreamSynchronize"),
		SV_SYM(copy, "cuMemcpyAsync"),
#undef SV_SYM
	};
	const struct sv_cuda *r = NULL;
	unsigned long long adds = 0;

	pthread_mutex_lock(&sv_gpu.lock);
	/* dlopen(RTLD_NOLOAD) searches the library path on every call (about a
	 * third of a registration's time): look again only after an object was
	 * loaded into the process since the last miss */
	if (!sv_gpu.dl)
		dl_iterate_phdr(sv_dl_adds, &adds);
	if (!sv_gpu.dl && (adds != sv_gpu.adds_seen || adds == ~0ull)) {	/* ~0: not known */
		sv_gpu.adds_seen = adds;
		sv_gpu.dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
		if (sv_gpu.dl) {
			sv_gpu.loaded = true;
			for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
				void *p = dlsym(sv_gpu.dl, syms[i].name);

				memcpy((char *)&sv_gpu.cu + syms[i].off, &p, sizeof(p));
				if (!p) {
					sv_log("libcuda.so.1 lacks %s: GPU memory not supported",
					       syms[i].name);
					sv_gpu.loaded = false;
				}
			}
		}
	}
	if (sv_gpu.loaded)
		r = &sv_gpu.cu;
	pthread_mutex_unlock(&sv_gpu.lock);
	return r;
}

/* Pushes simverbs' context (chosen once); creates its stream.  0 or errno. */
static int sv_cu_enter(const struct sv_cuda *cu)
{
	CUresult r = CUDA_SUCCESS;

	pthread_mutex_lock(&sv_gpu.lock);
	if (!sv_gpu.ctx) {
		CUdevice d;

		r = cu->ctx_get(&sv_gpu.ctx);
		if (r == CUDA_SUCCESS && !sv_gpu.ctx) {
			r = cu->dev_get(&d, 0);
			if (r == CUDA_SUCCESS)
				r = cu->primary_retain(&sv_gpu.ctx, d);
		}
	}
	if (r == CUDA_SUCCESS)
		r = cu->ctx_push(sv_gpu.ctx);
	if (r == CUDA_SUCCESS && !sv_gpu.stream) {
		r = cu->stream_create(&sv_gpu.stream, CU_STREAM_NON_BLOCKING);
		if (r != CUDA_SUCCESS) {
			CUcontext c;

			cu->ctx_pop(&c);
		}
	}
	pthread_mutex_unlock(&sv_gpu.lock);
	if (r != CUDA_SUCCESS) {
		sv_log("GPU memory: no CUDA context for simverbs' copies: %s", sv_cu_err(r));
		return EFAULT;
	}
	return 0;
}

static void sv_cu_leave(const struct sv_cuda *cu)
{
	CUcontext c;

	cu->ctx_pop(&c);
}

/* true: addr is device memory of a CUDA allocation that the CPU cannot
 * address (managed memory and CPU-mapped allocations stay on the host path:
 * process_vm_* reaches them). */
static bool sv_cu_is_device(const struct sv_cuda *cu, uint64_t addr)
{
	unsigned int mt = 0, managed = 0;
	char byte;
	struct iovec l = { &byte, 1 }, r = { (void *)(uintptr_t)addr, 1 };

	if (cu->ptr_attr(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)addr) !=
	    CUDA_SUCCESS || mt != CU_MEMORYTYPE_DEVICE)
		return false;
	if (cu->ptr_attr(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, (CUdeviceptr)addr) ==
	    CUDA_SUCCESS && managed)
		return false;
	if (process_vm_readv(sv_g.pid, &l, 1, &r, 1, 0) == 1) {
		SV_DBG("reg_mr: %#llx: CUDA device memory the CPU can read: host path",
		       (unsigned long long)addr);
		return false;
	}
	return true;
}

/* Allocation range and IPC export of a device pointer already classified. */
static int sv_cu_export(const struct sv_cuda *cu, uint64_t addr, uint64_t len,
			struct sv_gpu_mem *g)
{
	CUdeviceptr base = 0;
	CUipcMemHandle h;
	unsigned int ipc_ok = 0;
	size_t size = 0;
	CUresult r;
	int rc;

	rc = sv_cu_enter(cu);
	if (rc)
		return -rc;
	rc = 0;
	r = cu->addr_range(&base, &size, (CUdeviceptr)addr);
	if (r != CUDA_SUCCESS || addr + len < addr || addr + len > base + size) {
		SV_DBG("reg_mr: GPU range %#llx+%llu is not inside one CUDA allocation: EFAULT",
		       (unsigned long long)addr, (unsigned long long)len);
		rc = -EFAULT;
		goto leave;
	}
	/* a driver without the attribute: cuIpcGetMemHandle below decides */
	if (cu->ptr_attr(&ipc_ok, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
			 (CUdeviceptr)addr) == CUDA_SUCCESS && !ipc_ok) {
		sv_log("reg_mr: GPU memory at %#llx is a cuMem (VMM) allocation; simverbs moves "
		       "GPU memory between processes with legacy CUDA IPC only (for NCCL: "
		       "NCCL_CUMEM_ENABLE=0)", (unsigned long long)addr);
		rc = -EOPNOTSUPP;
		goto leave;
	}
	r = cu->ipc_get(&h, base);
	if (r != CUDA_SUCCESS) {
		sv_log("reg_mr: cuIpcGetMemHandle(%#llx): %s", (unsigned long long)base,
		       sv_cu_err(r));
		rc = -EFAULT;
		goto leave;
	}
	g->alloc_base = base;
	g->alloc_size = size;
	memcpy(g->ipc, &h, sizeof(g->ipc));
leave:
	sv_cu_leave(cu);
	return rc;
}

int sv_gpu_classify(uint64_t addr, uint64_t len, struct sv_gpu_mem *g)
{
	const struct sv_cuda *cu = sv_cuda();

	if (!cu || !sv_cu_is_device(cu, addr))
		return 0;
	if (sv_gpu_mode() != 1) {
		SV_DBG("reg_mr: %#llx is GPU memory and the NIC has no peer-memory support "
		       "(SIMVERBS_GPUDIRECT=1 gives it): EFAULT", (unsigned long long)addr);
		return -EFAULT;
	}
	return sv_cu_export(cu, addr, len, g) ? : 1;
}

int sv_gpu_dmabuf(int fd, uint64_t offset, uint64_t len, uint64_t iova)
{
	const struct sv_cuda *cu = sv_cuda();
	off_t end;

	if (!cu || !sv_cu_is_device(cu, iova))
		return 0;
	if (sv_gpu_mode() != 1) {
		SV_DBG("reg_dmabuf_mr: GPU dma-buf and SIMVERBS_GPUDIRECT is not 1: EOPNOTSUPP");
		return -EOPNOTSUPP;
	}
	end = lseek(fd, 0, SEEK_END);
	if (end < 0)
		return -errno;
	if (offset + len < offset || offset + len > (uint64_t)end) {
		SV_DBG("reg_dmabuf_mr: offset %llu + length %llu beyond the dma-buf (%lld bytes)",
		       (unsigned long long)offset, (unsigned long long)len, (long long)end);
		return -EINVAL;
	}
	return 1;
}

/* Base of pid's allocation in this process, opened once and cached; the
 * entry is held (refs) until sv_ipc_put.  NULL: cannot be opened. */
static struct sv_ipc_ent *sv_ipc_get(const struct sv_cuda *cu, int32_t pid,
				     const unsigned char *h)
{
	struct sv_ipc_ent *e, *victim = NULL;
	CUipcMemHandle ch;
	CUresult r;

	pthread_mutex_lock(&sv_gpu.lock);
	for (int i = 0; i < SV_IPC_CACHE; i++) {
		e = &sv_gpu.ipc[i];
		if (e->pid == pid && !memcmp(e->h, h, sizeof(e->h))) {
			e->refs++;
			e->used = ++sv_gpu.tick;
			pthread_mutex_unlock(&sv_gpu.lock);
			return e;
		}
		if (!e->refs && (!victim || !e->pid || (victim->pid && e->used < victim->used)))
			victim = e;
	}
	e = victim;
	if (e && e->pid) {
		cu->ipc_close(e->dptr);
		e->pid = 0;
	}
	if (e) {
		memcpy(&ch, h, sizeof(ch));
		r = cu->ipc_open(&e->dptr, ch, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
		if (r == CUDA_SUCCESS) {
			e->pid = pid;
			memcpy(e->h, h, sizeof(e->h));
			e->refs = 1;
			e->used = ++sv_gpu.tick;
		} else {
			sv_log("cuIpcOpenMemHandle of process %d's GPU memory: %s", (int)pid,
			       sv_cu_err(r));
			e = NULL;
		}
	}
	pthread_mutex_unlock(&sv_gpu.lock);
	return e;
}

static void sv_ipc_put(struct sv_ipc_ent *e)
{
	pthread_mutex_lock(&sv_gpu.lock);
	e->refs--;
	pthread_mutex_unlock(&sv_gpu.lock);
}

/* Where a chunk's bytes are, seen from this process. */
enum sv_where { SV_HERE_HOST, SV_HERE_GPU, SV_THERE_HOST };

/* One copy of c bytes; dst/src addressable here unless SV_THERE_HOST. */
static int sv_gpu_chunk(const struct sv_cuda *cu, int32_t pid, bool write, char *lp,
			enum sv_where lw, char *rp, enum sv_where rw, size_t c, bool *sync)
{
	char *dst = write ? rp : lp, *src = write ? lp : rp;
	int rc = 0;

	if (rw != SV_THERE_HOST) {
		if (lw == SV_HERE_HOST && rw == SV_HERE_HOST) {
			memcpy(dst, src, c);
			return 0;
		}
		*sync = true;
		return cu->copy((CUdeviceptr)dst, (CUdeviceptr)src, c, sv_gpu.stream) ==
		       CUDA_SUCCESS ? 0 : EFAULT;
	}
	if (lw == SV_HERE_HOST) {
		struct iovec a = { lp, c }, b = { rp, c };

		return sv_vm_copy(pid, write, &a, 1, &b, 1);
	}
	/* our GPU <-> pid's host memory: bounce, in order */
	pthread_mutex_lock(&sv_gpu.bounce_lock);
	if (!sv_gpu.bounce)
		sv_gpu.bounce = malloc(SV_BOUNCE);
	if (!sv_gpu.bounce)
		rc = ENOMEM;
	for (size_t done = 0; !rc && done < c;) {
		size_t n = c - done < SV_BOUNCE ? c - done : SV_BOUNCE;
		struct iovec a = { sv_gpu.bounce, n }, b = { rp + done, n };

		if (!write)
			rc = sv_vm_copy(pid, false, &a, 1, &b, 1);
		if (!rc)
			rc = cu->copy((CUdeviceptr)(write ? sv_gpu.bounce : lp + done),
				      (CUdeviceptr)(write ? lp + done : sv_gpu.bounce), n,
				      sv_gpu.stream) != CUDA_SUCCESS ||
			     cu->stream_sync(sv_gpu.stream) != CUDA_SUCCESS ? EFAULT : 0;
		if (!rc && write)
			rc = sv_vm_copy(pid, true, &a, 1, &b, 1);
		done += n;
	}
	pthread_mutex_unlock(&sv_gpu.bounce_lock);
	return rc;
}

/* Remote iovecs made addressable: GPU ones through their IPC mapping. */
static int sv_gpu_resolve(const struct sv_cuda *cu, int32_t pid, struct sv_iovs *r,
			  enum sv_where *rw, struct sv_ipc_ent **held)
{
	for (int i = 0; i < r->n; i++)
		held[i] = NULL;
	for (int i = 0; i < r->n; i++) {
		const struct sv_shm_gpu *g;

		if (!r->gpu[i]) {
			rw[i] = pid == sv_g.pid ? SV_HERE_HOST : SV_THERE_HOST;
			continue;
		}
		rw[i] = SV_HERE_GPU;
		if (pid == sv_g.pid)
			continue;
		g = &sv_g.fab->gpus[r->gpu[i] % SV_MAX_GPU_MRS];
		if (g->pid != pid)
			return EFAULT;
		held[i] = sv_ipc_get(cu, pid, g->mem.ipc);
		if (!held[i])
			return EFAULT;
		r->v[i].iov_base = (char *)(uintptr_t)held[i]->dptr +
				   ((uintptr_t)r->v[i].iov_base - g->mem.alloc_base);
	}
	return 0;
}

int sv_gpu_xfer(int32_t pid, bool write, struct sv_iovs *l, struct sv_iovs *r)
{
	const struct sv_cuda *cu = sv_cuda();
	struct sv_ipc_ent *held[SV_MAX_IOV];
	enum sv_where rw[SV_MAX_IOV];
	int li = 0, ri = 0, rc;
	size_t lo = 0, ro = 0;
	bool sync = false;

	if (!cu)
		return EFAULT;
	rc = sv_cu_enter(cu);
	if (rc)
		return rc;
	rc = sv_gpu_resolve(cu, pid, r, rw, held);
	while (!rc && li < l->n && ri < r->n) {
		size_t la = l->v[li].iov_len - lo, ra = r->v[ri].iov_len - ro;
		size_t c = la < ra ? la : ra;

		rc = sv_gpu_chunk(cu, pid, write, (char *)l->v[li].iov_base + lo,
				  l->gpu[li] ? SV_HERE_GPU : SV_HERE_HOST,
				  (char *)r->v[ri].iov_base + ro, rw[ri], c, &sync);
		lo += c;
		ro += c;
		if (lo == l->v[li].iov_len) {
			li++;
			lo = 0;
		}
		if (ro == r->v[ri].iov_len) {
			ri++;
			ro = 0;
		}
	}
	if (sync && cu->stream_sync(sv_gpu.stream) != CUDA_SUCCESS && !rc)
		rc = EFAULT;
	for (int i = 0; i < r->n; i++)
		if (held[i])
			sv_ipc_put(held[i]);
	sv_cu_leave(cu);
	return rc;
}

#else /* no cuda.h at build time: GPU memory is unknown to simverbs */

int sv_gpu_classify(uint64_t addr, uint64_t len, struct sv_gpu_mem *g)
{
	(void)addr; (void)len; (void)g;
	return 0;
}

int sv_gpu_dmabuf(int fd, uint64_t offset, uint64_t len, uint64_t iova)
{
	(void)fd; (void)offset; (void)len; (void)iova;
	return 0;
}

int sv_gpu_xfer(int32_t pid, bool write, struct sv_iovs *l, struct sv_iovs *r)
{
	(void)pid; (void)write; (void)l; (void)r;
	return EFAULT;
}

#endif
