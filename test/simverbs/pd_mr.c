/*
 * Protection domains and memory regions.  Every MR lives in the fabric's MR
 * table (key -> owner pid, PD, access, address range) so initiators in other
 * processes can check rkeys without the owner's help.  Keys: slot << 8 | tag,
 * lkey == rkey.
 */
#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sv.h"

SV_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *ibctx);
struct ibv_pd *ibv_alloc_pd(struct ibv_context *ibctx)
{
	struct sv_pd *pd;
	int rc;

	if (!ibctx) {
		errno = EINVAL;
		return NULL;
	}
	rc = sv_dev_take(sv_ctx(ibctx)->dev, SV_K_PD, sv_ctx(ibctx)->dev->lim.max_pd);
	if (rc) {
		errno = rc;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		sv_dev_give(sv_ctx(ibctx)->dev, SV_K_PD);
		errno = ENOMEM;
		return NULL;
	}
	pd->ibv.context = ibctx;
	pd->id = sv_next_id();
	pd->ibv.handle = pd->id;
	pd->obj.dev = sv_ctx(ibctx)->dev;
	sv_obj_add(&pd->obj, SV_K_PD);
	return &pd->ibv;
}

SV_EXPORT int ibv_dealloc_pd(struct ibv_pd *ibpd);
int ibv_dealloc_pd(struct ibv_pd *ibpd)
{
	struct sv_pd *pd = (struct sv_pd *)ibpd;

	if (!pd)
		return EINVAL;
	if (atomic_load(&pd->children))
		return EBUSY;
	sv_obj_del(&pd->obj);
	free(pd);
	return 0;
}

/* One line of /proc/self/maps: [lo, hi) and whether it is readable/writable. */
static bool sv_maps_line(const char *l, uintptr_t *lo, uintptr_t *hi, bool *r, bool *w)
{
	unsigned long a, b;
	char perms[8];

	if (sscanf(l, "%lx-%lx %7s", &a, &b, perms) != 3)
		return false;
	*lo = a;
	*hi = b;
	*r = perms[0] == 'r';
	*w = perms[1] == 'w';
	return true;
}

/*
 * Pinning (get_user_pages) needs every page of [addr, addr+len) mapped and
 * readable, and writable when the MR may be written (FOLL_WRITE); otherwise
 * the kernel's ib_umem_get fails with EFAULT.  /proc/self/maps lists the
 * mappings in address order; a gap or a mapping without the rights fails.
 */
static int sv_range_accessible(uintptr_t addr, size_t len, bool write)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t cur = addr & ~((uintptr_t)pg - 1), end = addr + len;
	char line[512];
	FILE *f = fopen("/proc/self/maps", "re");
	int rc = EFAULT;

	if (!f)
		return EFAULT;
	while (cur < end && fgets(line, sizeof(line), f)) {
		uintptr_t lo, hi;
		bool r, w;

		if (!strchr(line, '\n') && !feof(f)) { /* a long path: skip the rest */
			int ch;

			while ((ch = fgetc(f)) != EOF && ch != '\n')
				;
		}
		if (!sv_maps_line(line, &lo, &hi, &r, &w) || hi <= cur)
			continue;
		if (lo > cur || !r || (write && !w))
			break;
		cur = hi;
	}
	if (cur >= end)
		rc = 0;
	fclose(f);
	if (rc)
		SV_DBG("reg_mr: %p+%zu is not mapped%s: EFAULT", (void *)addr, len,
		       write ? " writable" : " readable");
	return rc;
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22	/* Linux 5.14 */
#define MADV_POPULATE_WRITE 23
#endif

/* Whether madvise(MADV_POPULATE_READ/WRITE) exists (Linux 5.14), probed once on a page of
 * our own: afterwards EINVAL from it means a mapping that cannot be populated. */
static int sv_populate_ok(void)
{
	static _Atomic int ok = -1;	/* unknown */
	static char probe[1] __attribute__((aligned(64)));
	long pg = sysconf(_SC_PAGESIZE);
	int v = atomic_load(&ok);

	if (v < 0) {
		v = !madvise((void *)((uintptr_t)probe & ~((uintptr_t)pg - 1)), (size_t)pg,
			     MADV_POPULATE_READ);
		atomic_store(&ok, v);
	}
	return v;
}

/*
 * Pinning faults the pages in: the kernel's ib_umem_get pins every page of the range at
 * registration (get_user_pages with FOLL_WRITE when the MR may be written), so a
 * registration pays the page faults and the first transfers into never-touched memory do
 * not.  The same here: MADV_POPULATE_WRITE (or _READ) faults in [addr, addr + len); where
 * the kernel lacks it, each page is touched (a locked add of 0 writes without changing a
 * byte another thread may be writing).  A mapping that cannot be populated (VM_IO,
 * VM_PFNMAP: EINVAL; a file page beyond EOF: EFAULT) fails as get_user_pages does, EFAULT.
 */
static int sv_prefault(uintptr_t addr, size_t len, bool write)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = addr & ~(pg - 1), hi = (addr + len + pg - 1) & ~(pg - 1);
	int rc;

	if (sv_populate_ok()) {
		do
			rc = madvise((void *)lo, hi - lo, write ? MADV_POPULATE_WRITE :
								 MADV_POPULATE_READ);
		while (rc && errno == EINTR);
		if (!rc)
			return 0;
		SV_DBG("reg_mr: %p+%zu cannot be faulted in (madvise: %s): EFAULT", (void *)addr,
		       len, strerror(errno));
		return EFAULT;
	}
	for (uintptr_t p = lo; p < hi; p += pg) {
		if (write)
			__atomic_fetch_add((volatile char *)p, 0, __ATOMIC_RELAXED);
		else
			(void)*(volatile const char *)p;
	}
	return 0;
}

/* Bytes the kernel would pin for [addr, addr+len): whole pages. */
static uint64_t sv_pin_bytes(uintptr_t addr, size_t len)
{
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t start = addr & ~(pg - 1);

	return ((uint64_t)addr + len + pg - 1 - start) & ~(pg - 1);
}

/* CAP_IPC_LOCK in the effective set: the kernel then ignores RLIMIT_MEMLOCK. */
static bool sv_cap_ipc_lock(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d))
		return false;
	return (d[CAP_IPC_LOCK / 32].effective >> (CAP_IPC_LOCK % 32)) & 1;
}

/* As ib_umem_get: a registration fails with ENOMEM once this process's
 * pinned bytes would exceed the soft RLIMIT_MEMLOCK (EPERM when the limit is
 * 0: can_do_mlock), unless the process has
 * CAP_IPC_LOCK (as root usually does).  SIMVERBS_MEMLOCK=0 turns the check
 * off, =1 applies it even with CAP_IPC_LOCK (tests that want the failure as
 * root).  On success the bytes are accounted; ibv_dereg_mr gives them back. */
static int sv_pin(uint64_t bytes)
{
	const char *e = getenv("SIMVERBS_MEMLOCK");
	bool on = e && !strcmp(e, "1") ? true : !(e && !strcmp(e, "0")) && !sv_cap_ipc_lock();
	struct rlimit rl;
	int rc = 0;

	pthread_mutex_lock(&sv_g.lock);
	if (on && bytes && !getrlimit(RLIMIT_MEMLOCK, &rl) && rl.rlim_cur == 0) {
		SV_DBG("reg_mr: RLIMIT_MEMLOCK 0 and no CAP_IPC_LOCK: EPERM");
		rc = EPERM;	/* can_do_mlock() */
	} else if (on && !getrlimit(RLIMIT_MEMLOCK, &rl) &&
	    rl.rlim_cur != RLIM_INFINITY && sv_g.pinned_bytes + bytes > rl.rlim_cur) {
		SV_DBG("reg_mr: %llu bytes pinned + %llu > RLIMIT_MEMLOCK %llu: ENOMEM",
		       (unsigned long long)sv_g.pinned_bytes, (unsigned long long)bytes,
		       (unsigned long long)rl.rlim_cur);
		rc = ENOMEM;
	} else {
		sv_g.pinned_bytes += bytes;
	}
	pthread_mutex_unlock(&sv_g.lock);
	return rc;
}

static void sv_unpin(uint64_t bytes)
{
	pthread_mutex_lock(&sv_g.lock);
	sv_g.pinned_bytes -= bytes < sv_g.pinned_bytes ? bytes : sv_g.pinned_bytes;
	pthread_mutex_unlock(&sv_g.lock);
}

static int sv_mr_slot_alloc(struct sv_mr *mr, uint64_t addr, uint64_t len, uint64_t iova,
			    uint32_t access, const struct sv_gpu_mem *gpu)
{
	struct sv_fabric *f = sv_g.fab;
	int rc = ENOMEM;

	if (sv_lock())
		return EIO;
	for (uint32_t n = 0; n < SV_MAX_MR_SLOTS; n++) {
		uint32_t slot = (f->mr_hint + n) % SV_MAX_MR_SLOTS;
		struct sv_shm_mr *m = &f->mrs[slot];
		uint32_t tag;

		if (!slot || atomic_load(&m->key))
			continue;
		tag = (sv_next_id() & 0xff) | 1;
		m->gpu = gpu ? sv_gpu_slot_alloc(slot << 8 | tag, gpu) : 0;
		if (gpu && !m->gpu)
			break;	/* GPU table full: ENOMEM */
		m->pid = sv_g.pid;
		m->pd_id = mr->pd->id;
		m->access = access;
		m->addr = addr;
		m->length = len;
		m->iova = iova;
		atomic_store(&m->key, slot << 8 | tag);
		f->mr_hint = slot + 1;
		mr->slot = slot;
		mr->gpu_slot = m->gpu;
		mr->ibv.lkey = mr->ibv.rkey = slot << 8 | tag;
		rc = 0;
		break;
	}
	sv_unlock();
	return rc;
}

/* Access bits the 6.1 kernel accepts (IB_ACCESS_SUPPORTED): LOCAL_WRITE .. HUGETLB and the
 * optional range. */
#define SV_ACCESS_SUPPORTED ((((unsigned int)IBV_ACCESS_HUGETLB << 1) - 1) | \
			     (unsigned int)IBV_ACCESS_OPTIONAL_RANGE)

static struct ibv_mr *sv_reg(struct ibv_pd *ibpd, void *addr, size_t len, uint64_t iova,
			     unsigned int access, void *map, size_t map_len)
{
	struct sv_pd *pd = (struct sv_pd *)ibpd;
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	const struct sv_limits *lim;
	struct sv_gpu_mem gmem;
	/* ib_access_writable: the pages are pinned for writing */
	bool writable = access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				  IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND);
	struct sv_mr *mr;
	int rc, gpu;

	if (!pd) {
		errno = EINVAL;
		return NULL;
	}
	lim = &sv_ctx(ibpd->context)->dev->lim;
	/*
	 * As the kernel (6.1, rxe) answers: the iova must have the address's offset in its
	 * page (ib_uverbs_reg_mr); ib_check_mr_access: remote write or atomic need local
	 * write, access bits the kernel does not know are refused, and ON_DEMAND without ODP
	 * support (rxe has none; IBV_ACCESS_OPTIONAL_RANGE bits are accepted and ignored).
	 */
	if ((((uintptr_t)addr ^ iova) & (pg - 1)) || !len || len > lim->max_mr_size ||
	    (access & ~SV_ACCESS_SUPPORTED) || (access & IBV_ACCESS_ON_DEMAND) ||
	    ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	     !(access & IBV_ACCESS_LOCAL_WRITE))) {
		SV_DBG("reg_mr: %p+%zu iova 0x%llx access 0x%x: EINVAL", addr, len,
		       (unsigned long long)iova, access);
		errno = EINVAL;
		return NULL;
	}
	rc = sv_dev_take(sv_ctx(ibpd->context)->dev, SV_K_MR, lim->max_mr);
	if (rc) {
		errno = rc;
		return NULL;
	}
	/* ib_umem_get: a range that wraps, or whose page-aligned end does, is EINVAL */
	if ((uintptr_t)addr + len < (uintptr_t)addr ||
	    (((uintptr_t)addr + len + pg - 1) & ~(pg - 1)) < (uintptr_t)addr + len) {
		rc = EINVAL;
		goto err_give;
	}
	gpu = sv_gpu_classify((uintptr_t)addr, len, &gmem);	/* < 0: -errno */
	rc = gpu < 0 ? -gpu : gpu ? 0 : sv_range_accessible((uintptr_t)addr, len, writable);
	/* host memory is faulted in as pinning does; a dma-buf is not pinned */
	if (!rc && !gpu && !map)
		rc = sv_prefault((uintptr_t)addr, len, writable);
	if (rc)
		goto err_give;
	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		rc = ENOMEM;
		goto err_give;
	}
	mr->pd = pd;
	mr->map = map;
	mr->map_len = map_len;
	/* dma-buf and GPU memory: no host pages pinned */
	mr->pinned = map || gpu ? 0 : sv_pin_bytes((uintptr_t)addr, len);
	rc = sv_pin(mr->pinned);
	if (rc)
		goto err_free;
	rc = sv_mr_slot_alloc(mr, (uintptr_t)addr, len, iova, access, gpu ? &gmem : NULL);
	if (rc)
		goto err_unpin;
	mr->ibv.context = ibpd->context;
	mr->ibv.pd = ibpd;
	mr->ibv.addr = addr;
	mr->ibv.length = len;
	mr->ibv.handle = mr->slot;
	if ((access & IBV_ACCESS_REMOTE_WRITE) && !gpu)
		SV_PEER_WRITABLE(addr, len);
	atomic_fetch_add(&pd->children, 1);
	mr->obj.dev = sv_ctx(ibpd->context)->dev;
	sv_obj_add(&mr->obj, SV_K_MR);
	return &mr->ibv;
err_unpin:
	sv_unpin(mr->pinned);
err_free:
	free(mr);
err_give:
	sv_dev_give(sv_ctx(ibpd->context)->dev, SV_K_MR);
	errno = rc;
	return NULL;
}

#undef ibv_reg_mr
SV_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access);
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return sv_reg(pd, addr, length, (uintptr_t)addr, (unsigned int)access, NULL, 0);
}

#undef ibv_reg_mr_iova
SV_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
					 uint64_t iova, int access);
struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
			       int access)
{
	return sv_reg(pd, addr, length, iova, (unsigned int)access, NULL, 0);
}

SV_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
					  uint64_t iova, unsigned int access);
struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
				unsigned int access)
{
	return sv_reg(pd, addr, length, iova, access, NULL, 0);
}

/* dma-buf MRs: the fd must be mappable (memfd, udmabuf, a CPU-visible
 * dma-buf); simverbs maps [offset, offset+length) and moves data through that
 * mapping, so the bytes are shared with every other mapping of the buffer.
 * A CUDA dma-buf (SIMVERBS_GPUDIRECT=1) registers the GPU memory at iova
 * instead (gpu.c).  SIMVERBS_GPUDIRECT=0: no dma-buf support (EOPNOTSUPP). */
SV_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
					   uint64_t iova, int fd, int access);
struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
				 uint64_t iova, int fd, int access)
{
	long pg = sysconf(_SC_PAGESIZE);
	uint64_t base = offset & ~((uint64_t)pg - 1);
	size_t map_len = length + (size_t)(offset - base);
	struct ibv_mr *mr;
	void *map;
	int gpu;

	if (sv_gpu_mode() == 0) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (fd < 0) {
		errno = EBADF;
		return NULL;
	}
	if (!pd || !length) {
		errno = EINVAL;
		return NULL;
	}
	gpu = sv_gpu_dmabuf(fd, offset, length, iova);
	if (gpu < 0) {
		errno = -gpu;
		return NULL;
	}
	if (gpu) {
		mr = sv_reg(pd, (void *)(uintptr_t)iova, length, iova, (unsigned int)access,
			    NULL, 0);
		if (mr)
			((struct sv_mr *)mr)->dmabuf = true;
		return mr;
	}
	map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)base);
	if (map == MAP_FAILED)
		return NULL;
	mr = sv_reg(pd, (char *)map + (offset - base), length, iova, (unsigned int)access, map,
		    map_len);
	if (!mr) {
		int e = errno;

		munmap(map, map_len);
		errno = e;
	} else {
		((struct sv_mr *)mr)->dmabuf = true;
	}
	return mr;
}

SV_EXPORT int ibv_dereg_mr(struct ibv_mr *ibmr);
int ibv_dereg_mr(struct ibv_mr *ibmr)
{
	struct sv_mr *mr = (struct sv_mr *)ibmr;
	struct sv_shm_mr *m;

	if (!mr)
		return EINVAL;
	m = &sv_g.fab->mrs[mr->slot];
	if (atomic_load(&m->key) != ibmr->lkey)
		return EINVAL;
	if (sv_lock())
		return EIO;
	atomic_store(&m->key, 0);
	sv_gpu_slot_free(mr->gpu_slot);
	sv_unlock();
	if (mr->map)
		munmap(mr->map, mr->map_len);
	sv_unpin(mr->pinned);
	atomic_fetch_sub(&mr->pd->children, 1);
	sv_obj_del(&mr->obj);
	free(mr);
	return 0;
}

SV_EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr,
			   size_t length, int access);
int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length,
		 int access)
{
	/* libibverbs' own checks of the arguments (IBV_REREG_MR_ERR_INPUT, EINVAL) ... */
	(void)pd;
	if (!mr || ((struct sv_mr *)mr)->dmabuf || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) ||
	    ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!length || !addr)) ||
	    (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS))) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	/* ... then the provider's answer: rxe (rdma-core 44, Linux 6.1) has no rereg_mr */
	errno = EOPNOTSUPP;
	return IBV_REREG_MR_ERR_CMD;
}

struct sv_shm_mr *sv_mr_lookup(uint32_t key)
{
	uint32_t slot = key >> 8;

	if (!slot || slot >= SV_MAX_MR_SLOTS)
		return NULL;
	return &sv_g.fab->mrs[slot];
}

/*
 * The four checks of an MR access (rxe's lookup_mr): key matches a live MR of
 * the expected owner and PD, the access rights include `need`, and
 * [addr, addr+len) lies inside the region (overflow-safe).  Returns 0 (with
 * the owner's virtual address in *va), EACCES for key/PD/rights, ERANGE.
 */
int sv_mr_check(const struct sv_shm_mr *m, uint32_t key, int32_t pid, uint32_t pd_id,
		uint64_t addr, uint64_t len, uint32_t need, uint64_t *va)
{
	if (!m || atomic_load_explicit(&m->key, memory_order_acquire) != key || m->pid != pid ||
	    m->pd_id != pd_id)
		return EACCES;
	if ((m->access & need) != need)
		return EACCES;
	if (addr < m->iova || len > m->length || addr - m->iova > m->length - len)
		return ERANGE;
	*va = m->addr + (addr - m->iova);
	return 0;
}
