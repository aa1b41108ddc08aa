/*
 * mr.h - memory registration through a refcounted, page-rounded cache per HCA.
 *
 * Contract:
 *  - nv_mr_acquire() returns an ibv_mr whose [addr, addr+length) covers the
 *    request (page-rounded). The same MR is shared by every acquire that it
 *    fully contains with the same kind and use; each acquire takes one
 *    reference, nv_mr_release() drops it and deregisters at zero. Removal keeps
 *    the cache sorted, so lookups after removals stay correct.
 *  - NV_MR_DATA registrations get IBV_ACCESS_RELAXED_ORDERING when the HCA
 *    allows it (NCCL_IB_PCI_RELAXED_ORDERING); NV_MR_CTRL never does (control
 *    buffers written by the peer must stay strongly ordered).
 *  - NV_MEM_CUDA registers the device pointer with plain ibv_reg_mr (needs a
 *    peer-memory module); NV_MEM_DMABUF uses ibv_reg_dmabuf_mr with the fd,
 *    which is only used during the call (NCCL closes it afterwards).
 *  - Thread-safe (one mutex per cache); not for the data path.
 *  - ENOMEM failures name the size and the RLIMIT_MEMLOCK value.
 */
#ifndef NV_MR_H
#define NV_MR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>
#include "nv_common.h"
#include "os.h"

struct nv_hca;

enum nv_mem_kind {
	NV_MEM_HOST = 0x1,   /* == NCCL_PTR_HOST */
	NV_MEM_CUDA = 0x2,   /* == NCCL_PTR_CUDA */
	NV_MEM_DMABUF = 0x4, /* == NCCL_PTR_DMABUF */
};

enum nv_mr_use {
	NV_MR_DATA, /* user/NCCL data buffers: relaxed ordering allowed */
	NV_MR_CTRL, /* FIFOs, completion records, flush words: strictly ordered */
};

/* Access flags every MR gets: LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ. */
#define NV_MR_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

nv_status_t nv_mr_acquire(struct nv_hca *hca, void *addr, size_t len, enum nv_mem_kind kind,
			  uint64_t dmabuf_offset, int dmabuf_fd, enum nv_mr_use use,
			  struct ibv_mr **mr);
nv_status_t nv_mr_release(struct nv_hca *hca, struct ibv_mr *mr);

/* Per-HCA cache lifetime (device.c). destroy warns about and frees leftovers. */
nv_status_t nv_mr_hca_init(struct nv_hca *hca);
void nv_mr_hca_fini(struct nv_hca *hca);

/* "host", "GPU" or "GPU (dma-buf)" for an enum nv_mem_kind, for messages. */
const char *nv_mem_kind_str(int kind);

/* ---- the cache itself, independent of verbs (unit-tested with fake ops) ---- */
struct nv_mr_cache;

struct nv_mr_cache_ops {
	/* Register [base, base+len) (page-aligned) for `key`; `req` is passed through. */
	nv_status_t (*reg)(void *arg, uintptr_t base, size_t len, unsigned key, const void *req,
			   void **obj);
	void (*dereg)(void *arg, void *obj);
};

/* page_size 0: the system page size. */
struct nv_mr_cache *nv_mr_cache_create(const struct nv_mr_cache_ops *ops, void *arg,
				       size_t page_size);
void nv_mr_cache_destroy(struct nv_mr_cache *c);
/* key separates registrations that must not be shared (kind, use); with
 * NV_MR_CACHE_EXACT in key the range is used as given, not page-rounded. */
#define NV_MR_CACHE_EXACT (1U << 31)
nv_status_t nv_mr_cache_get(struct nv_mr_cache *c, uintptr_t addr, size_t len, unsigned key,
			    const void *req, void **obj);
/* NV_ERR_INTERNAL (logged) if obj is not in the cache. */
nv_status_t nv_mr_cache_put(struct nv_mr_cache *c, void *obj);
size_t nv_mr_cache_entries(struct nv_mr_cache *c);

#endif /* NV_MR_H */
