/*
 * mr.c - the registration cache (contract in mr.h).
 *
 * The cache is an array sorted by (key, base, len). A request hits when one
 * entry of the same key fully contains its page-rounded range. Removal shifts
 * the tail down (memmove), so the order that lookups depend on always holds.
 * Entries are few (buffers are registered once and reused), so the linear
 * parts (containment scan, find-by-object on release) are not on any hot path.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "mr.h"
#include "census.h"
#include "device.h"
#include "ibv.h"

struct nv_mr_entry {
	unsigned key;
	uintptr_t base;
	size_t len;
	int refs;
	void *obj;
};

struct nv_mr_cache {
	pthread_mutex_t lock;
	const struct nv_mr_cache_ops *ops;
	void *arg;
	size_t page;
	size_t n, cap;
	struct nv_mr_entry *e;
};

struct nv_mr_cache *nv_mr_cache_create(const struct nv_mr_cache_ops *ops, void *arg,
				       size_t page_size)
{
	struct nv_mr_cache *c = calloc(1, sizeof(*c));
	long ps = sysconf(_SC_PAGESIZE);

	if (!c)
		return NULL;
	c->ops = ops;
	c->arg = arg;
	c->page = page_size ? page_size : (ps > 0 ? (size_t)ps : 4096);
	pthread_mutex_init(&c->lock, NULL);
	return c;
}

void nv_mr_cache_destroy(struct nv_mr_cache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++) {
		NV_WARN("registration %#" PRIxPTR "+%zu still referenced %d time(s) at teardown "
			"(deregMr missing); deregistering it", c->e[i].base, c->e[i].len, c->e[i].refs);
		c->ops->dereg(c->arg, c->e[i].obj);
	}
	pthread_mutex_destroy(&c->lock);
	free(c->e);
	free(c);
}

size_t nv_mr_cache_entries(struct nv_mr_cache *c)
{
	size_t n;

	pthread_mutex_lock(&c->lock);
	n = c->n;
	pthread_mutex_unlock(&c->lock);
	return n;
}

static int nv_mr_cmp(unsigned k1, uintptr_t b1, size_t l1, const struct nv_mr_entry *e)
{
	if (k1 != e->key)
		return k1 < e->key ? -1 : 1;
	if (b1 != e->base)
		return b1 < e->base ? -1 : 1;
	if (l1 != e->len)
		return l1 < e->len ? -1 : 1;
	return 0;
}

/* First index whose entry is >= (key, base, len). */
static size_t nv_mr_lower_bound(const struct nv_mr_cache *c, unsigned key, uintptr_t base,
				size_t len)
{
	size_t lo = 0, hi = c->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (nv_mr_cmp(key, base, len, &c->e[mid]) > 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* An entry of `key` containing [base, base+len): only entries with a start
 * <= base can, and they sit just below the insertion point. */
static struct nv_mr_entry *nv_mr_find(struct nv_mr_cache *c, unsigned key, uintptr_t base,
				      size_t len)
{
	size_t i = nv_mr_lower_bound(c, key, base, SIZE_MAX);

	while (i-- > 0) {
		struct nv_mr_entry *e = &c->e[i];

		if (e->key != key)
			break;
		if (e->base <= base && e->base + e->len >= base + len)
			return e;
	}
	return NULL;
}

static nv_status_t nv_mr_insert(struct nv_mr_cache *c, const struct nv_mr_entry *ne)
{
	size_t pos;

	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 32;
		struct nv_mr_entry *e = realloc(c->e, cap * sizeof(*e));

		if (!e) {
			NV_WARN("out of memory growing the registration cache to %zu entries", cap);
			return NV_ERR_SYSTEM;
		}
		c->e = e;
		c->cap = cap;
	}
	pos = nv_mr_lower_bound(c, ne->key, ne->base, ne->len);
	memmove(&c->e[pos + 1], &c->e[pos], (c->n - pos) * sizeof(*c->e));
	c->e[pos] = *ne;
	c->n++;
	return NV_OK;
}

nv_status_t nv_mr_cache_get(struct nv_mr_cache *c, uintptr_t addr, size_t len, unsigned key,
			    const void *req, void **obj)
{
	uintptr_t page = (key & NV_MR_CACHE_EXACT) ? 1 : (uintptr_t)c->page;
	uintptr_t base = addr & ~(page - 1), last = addr + (len ? len : 1);
	uintptr_t end = NV_ALIGN_UP(last, page);
	struct nv_mr_entry *e, ne = { .key = key, .base = base, .len = end - base, .refs = 1 };
	nv_status_t st;

	/* The cached entry must cover [addr, addr+len) exactly: a range that
	 * wraps, or whose page-rounded end does, has no such entry (its rounded
	 * length would come out short and match an unrelated registration). */
	if ((len ? len : 1) > UINTPTR_MAX - addr || end < last) {
		NV_WARN("registration %#" PRIxPTR "+%zu wraps around the end of the address space "
			"(EINVAL)", addr, len);
		return NV_ERR_INVALID;
	}
	pthread_mutex_lock(&c->lock);
	e = nv_mr_find(c, key, base, ne.len);
	if (e) {
		e->refs++;
		*obj = e->obj;
		pthread_mutex_unlock(&c->lock);
		return NV_OK;
	}
	st = c->ops->reg(c->arg, base, ne.len, key, req, &ne.obj);
	if (st == NV_OK) {
		st = nv_mr_insert(c, &ne);
		if (st != NV_OK)
			c->ops->dereg(c->arg, ne.obj);
		else
			*obj = ne.obj;
	}
	pthread_mutex_unlock(&c->lock);
	return st;
}

nv_status_t nv_mr_cache_put(struct nv_mr_cache *c, void *obj)
{
	void *victim = NULL;
	size_t i;

	pthread_mutex_lock(&c->lock);
	for (i = 0; i < c->n && c->e[i].obj != obj; i++)
		;
	if (i == c->n) {
		pthread_mutex_unlock(&c->lock);
		NV_WARN("deregMr of unknown registration %p (double deregistration?)", obj);
		return NV_ERR_INTERNAL;
	}
	if (--c->e[i].refs == 0) {
		victim = c->e[i].obj;
		memmove(&c->e[i], &c->e[i + 1], (c->n - i - 1) * sizeof(*c->e));
		c->n--;
	}
	pthread_mutex_unlock(&c->lock);
	if (victim)
		c->ops->dereg(c->arg, victim);
	return NV_OK;
}

/* ---- the verbs backend ------------------------------------------------------ */

struct nv_mr_req {
	void *addr;
	size_t len;
	enum nv_mem_kind kind;
	enum nv_mr_use use;
	uint64_t offset;
	int fd;
};

#define NV_MR_KEY(kind, use) ((unsigned)(kind) | ((unsigned)(use) << 8))

static const char *nv_mr_what(const struct nv_mr_req *r)
{
	if (r->kind == NV_MEM_DMABUF)
		return "GPU dma-buf data";
	if (r->kind == NV_MEM_CUDA)
		return r->use == NV_MR_CTRL ? "GPU control buffer" : "GPU data";
	return r->use == NV_MR_CTRL ? "host control buffer" : "host data";
}

static nv_status_t nv_mr_reg_ibv(void *arg, uintptr_t base, size_t len, unsigned key,
				 const void *req_, void **obj)
{
	struct nv_hca *hca = arg;
	const struct nv_mr_req *r = req_;
	int access = NV_MR_ACCESS;
	struct ibv_mr *mr = NULL;
	struct ibv_pd *pd;
	nv_status_t st;

	(void)key;
	st = nv_hca_pd_get(hca, &pd);
	if (st != NV_OK)
		return st;
#if HAVE_DECL_IBV_ACCESS_RELAXED_ORDERING
	if (r->use == NV_MR_DATA && hca->relaxed_ordering)
		access |= IBV_ACCESS_RELAXED_ORDERING;
#endif
	if (r->kind == NV_MEM_DMABUF)
		st = nv_ibv_reg_dmabuf_mr(pd, r->offset, len, base, r->fd, access, nv_mr_what(r),
					  &mr);
	else if (access != NV_MR_ACCESS)
		st = nv_ibv_reg_mr_iova2(pd, (void *)base, len, base, access, nv_mr_what(r), &mr);
	else
		st = nv_ibv_reg_mr(pd, (void *)base, len, access, nv_mr_what(r), &mr);
	if (st != NV_OK) {
		nv_census_explain(hca, NV_CEN_MR, errno);
		nv_hca_pd_put(hca);
		return st;
	}
	nv_census_add(NV_CEN_MR, 1);
	nv_census_add(NV_CEN_MR_BYTES, (long)len);
	NV_TRACE(NV_SUB_REG, "%s: registered %s %#" PRIxPTR "+%zu lkey 0x%x rkey 0x%x", hca->name,
		 nv_mr_what(r), base, len, mr->lkey, mr->rkey);
	*obj = mr;
	return NV_OK;
}

static void nv_mr_dereg_ibv(void *arg, void *obj)
{
	struct nv_hca *hca = arg;
	long len = (long)((struct ibv_mr *)obj)->length;

	if (nv_ibv_dereg_mr(obj) == NV_OK) {
		nv_census_add(NV_CEN_MR, -1);
		nv_census_add(NV_CEN_MR_BYTES, -len);
		nv_hca_pd_put(hca);
	}
}

static const struct nv_mr_cache_ops nv_mr_ibv_ops = {
	.reg = nv_mr_reg_ibv,
	.dereg = nv_mr_dereg_ibv,
};

nv_status_t nv_mr_hca_init(struct nv_hca *hca)
{
	hca->mr_cache = nv_mr_cache_create(&nv_mr_ibv_ops, hca, 0);
	if (!hca->mr_cache) {
		NV_WARN("%s: out of memory creating the registration cache", hca->name);
		return NV_ERR_SYSTEM;
	}
	return NV_OK;
}

void nv_mr_hca_fini(struct nv_hca *hca)
{
	nv_mr_cache_destroy(hca->mr_cache);
	hca->mr_cache = NULL;
}

nv_status_t nv_mr_acquire(struct nv_hca *hca, void *addr, size_t len, enum nv_mem_kind kind,
			  uint64_t dmabuf_offset, int dmabuf_fd, enum nv_mr_use use,
			  struct ibv_mr **mr)
{
	struct nv_mr_req r = { addr, len, kind, use, dmabuf_offset, dmabuf_fd };
	void *obj;
	nv_status_t st;

	if (kind != NV_MEM_HOST && kind != NV_MEM_CUDA && kind != NV_MEM_DMABUF) {
		NV_WARN("regMr on %s: unknown memory type %d", hca->name, (int)kind);
		return NV_ERR_INVALID;
	}
	if (!addr && len) {
		NV_WARN("regMr on %s: NULL address for %zu bytes", hca->name, len);
		return NV_ERR_INVALID;
	}
	/* dma-buf ranges are not page-rounded: the dma-buf may end at the
	 * buffer's end. The cache still shares them by containment. */
	st = nv_mr_cache_get(hca->mr_cache, (uintptr_t)addr, len,
			     NV_MR_KEY(kind, use) | (kind == NV_MEM_DMABUF ? NV_MR_CACHE_EXACT : 0),
			     &r, &obj);
	if (st == NV_OK)
		*mr = obj;
	return st;
}

nv_status_t nv_mr_release(struct nv_hca *hca, struct ibv_mr *mr)
{
	if (!mr)
		return NV_OK;
	return nv_mr_cache_put(hca->mr_cache, mr);
}

const char *nv_mem_kind_str(int kind)
{
	switch (kind) {
	case NV_MEM_CUDA:
		return "GPU";
	case NV_MEM_DMABUF:
		return "GPU (dma-buf)";
	default:
		return "host";
	}
}
