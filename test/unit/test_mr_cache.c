/*
 * test_mr_cache - the registration cache over fake register/deregister ops:
 * page rounding, sharing by containment, keys kept apart, refcounts,
 * overlapping registrations, removal in every position (lookups stay correct
 * afterwards), unknown/double release, exact (dma-buf) ranges, growth,
 * ranges that wrap (EINVAL, never a cached hit).
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nvtest.h"
#include "mr.h"

#define PAGE 4096u

struct fake_mr {
	uintptr_t base;
	size_t len;
	unsigned key;
	int live;
};

static struct fake_mr fakes[4096];
static int nfake, nlive, fail_next;

static nv_status_t fake_reg(void *arg, uintptr_t base, size_t len, unsigned key, const void *req,
			    void **obj)
{
	(void)arg;
	(void)req;
	if (fail_next) {
		fail_next = 0;
		return NV_ERR_SYSTEM;
	}
	if (nfake >= (int)NV_ARRAY_SIZE(fakes))
		return NV_ERR_SYSTEM;
	fakes[nfake] = (struct fake_mr){ base, len, key, 1 };
	*obj = &fakes[nfake++];
	nlive++;
	return NV_OK;
}

static void fake_dereg(void *arg, void *obj)
{
	struct fake_mr *m = obj;

	(void)arg;
	CHECK(m->live == 1); /* never deregistered twice */
	m->live = 0;
	nlive--;
}

static const struct nv_mr_cache_ops ops = { fake_reg, fake_dereg };

static struct fake_mr *get(struct nv_mr_cache *c, uintptr_t addr, size_t len, unsigned key)
{
	void *obj = NULL;

	if (nv_mr_cache_get(c, addr, len, key, NULL, &obj) != NV_OK)
		return NULL;
	return obj;
}

static void test_rounding_and_sharing(void)
{
	struct nv_mr_cache *c = nv_mr_cache_create(&ops, NULL, PAGE);
	struct fake_mr *a, *b, *d, *e;

	a = get(c, 0x10010, 100, 1);
	CHECK(a && a->base == 0x10000 && a->len == PAGE);
	b = get(c, 0x10800, 0x100, 1); /* contained: shared */
	CHECK(b == a && nlive == 1);
	d = get(c, 0x10800, 0x1000, 1); /* crosses the page end: new */
	CHECK(d && d != a && d->base == 0x10000 && d->len == 2 * PAGE && nlive == 2);
	e = get(c, 0x10800, 0x100, 2); /* other key: never shared */
	CHECK(e && e != a && e != d && e->key == 2);
	CHECK(get(c, 0x20000, 0, 1)->len == PAGE); /* zero length still registers a page */
	CHECK(nv_mr_cache_entries(c) == 4);
	/* a: 2 refs */
	CHECK(nv_mr_cache_put(c, a) == NV_OK && a->live == 1);
	CHECK(nv_mr_cache_put(c, a) == NV_OK && a->live == 0);
	nvt_log_clear();
	CHECK(nv_mr_cache_put(c, a) == NV_ERR_INTERNAL); /* double release detected */
	CHECK(strstr(nvt_warns, "unknown registration") != NULL);
	/* after removing a, lookups of its range hit d (which contains it) */
	CHECK(get(c, 0x10010, 100, 1) == d);
	nv_mr_cache_put(c, d);
	nv_mr_cache_put(c, d);
	nv_mr_cache_put(c, e);
	CHECK(nv_mr_cache_entries(c) == 1);
	nvt_log_clear();
	nv_mr_cache_destroy(c); /* the 0x20000 page is still referenced: warned and freed */
	CHECK(nvt_nwarn == 1 && nlive == 0);
}

static void test_exact(void)
{
	struct nv_mr_cache *c = nv_mr_cache_create(&ops, NULL, PAGE);
	struct fake_mr *a = get(c, 0x30010, 100, 4 | NV_MR_CACHE_EXACT);

	CHECK(a && a->base == 0x30010 && a->len == 100);
	CHECK(get(c, 0x30020, 10, 4 | NV_MR_CACHE_EXACT) == a);
	CHECK(get(c, 0x30000, 10, 4 | NV_MR_CACHE_EXACT) != a);
	nv_mr_cache_destroy(c);
	CHECK(nlive == 0);
}

static void test_failure(void)
{
	struct nv_mr_cache *c = nv_mr_cache_create(&ops, NULL, PAGE);
	void *obj = (void *)0x1;

	fail_next = 1;
	CHECK(nv_mr_cache_get(c, 0x40000, 10, 1, NULL, &obj) == NV_ERR_SYSTEM);
	CHECK(obj == (void *)0x1 && nv_mr_cache_entries(c) == 0);
	CHECK(nv_mr_cache_get(c, UINTPTR_MAX - 10, 100, 1, NULL, &obj) == NV_ERR_INVALID);
	nv_mr_cache_destroy(c);
}

/* A range that wraps, even by less than a page, or whose page-rounded end
 * wraps, is refused with a WARN naming it, never answered with an unrelated
 * cached registration (the rounded length used to come out 0 and match). */
static void test_wrap(void)
{
	struct nv_mr_cache *c = nv_mr_cache_create(&ops, NULL, PAGE);
	struct fake_mr *a = get(c, 0x50000, PAGE, 1);
	void *obj = NULL;
	int live = nlive;

	CHECK(a != NULL);
	nvt_log_clear();
	CHECK(nv_mr_cache_get(c, 0x50000, SIZE_MAX - 100, 1, NULL, &obj) == NV_ERR_INVALID);
	CHECK(obj == NULL && strstr(nvt_warns, "0x50000+18446744073709551515"));
	CHECK(nv_mr_cache_get(c, 0x50010, SIZE_MAX - 0x10, 1, NULL, &obj) == NV_ERR_INVALID);
	CHECK(nv_mr_cache_get(c, 0x50000, SIZE_MAX, 1 | NV_MR_CACHE_EXACT, NULL, &obj) ==
	      NV_ERR_INVALID);
	CHECK(obj == NULL);
	/* the end itself fits, its page-rounded end wraps */
	CHECK(nv_mr_cache_get(c, UINTPTR_MAX - 100, 50, 1, NULL, &obj) == NV_ERR_INVALID);
	CHECK(obj == NULL && nlive == live && nv_mr_cache_entries(c) == 1);
	/* exact ranges right up to the top of the address space still work */
	CHECK(nv_mr_cache_get(c, UINTPTR_MAX - 100, 50, 1 | NV_MR_CACHE_EXACT, NULL, &obj) == NV_OK);
	CHECK(nv_mr_cache_put(c, obj) == NV_OK && nv_mr_cache_put(c, a) == NV_OK);
	nv_mr_cache_destroy(c);
	CHECK(nlive == 0);
}

/* Model check: random overlapping registrations and releases against a
 * brute-force reference. Every hit must contain the request; a miss only
 * happens when no live entry of the key contains it. */
static void test_random_model(void)
{
	struct nv_mr_cache *c = nv_mr_cache_create(&ops, NULL, PAGE);
	struct fake_mr *held[600];
	int nheld = 0;
	unsigned seed = 12345;

	for (int step = 0; step < 3000; step++) {
		seed = seed * 1103515245u + 12345u;
		if (nheld < 600 && ((seed >> 8) % 3 != 0 || nheld == 0)) {
			uintptr_t addr = 0x100000 + ((seed >> 4) % 64) * 0x800;
			size_t len = 1 + ((seed >> 12) % 5) * 0x900;
			unsigned key = 1 + (seed >> 20) % 2;
			int before = nlive, contained = 0;
			struct fake_mr *m;

			for (int i = 0; i < nfake; i++)
				contained += fakes[i].live && fakes[i].key == key &&
					     fakes[i].base <= addr &&
					     fakes[i].base + fakes[i].len >= addr + len;
			m = get(c, addr, len, key);
			CHECK(m && m->live && m->key == key && m->base <= addr &&
			      m->base + m->len >= addr + len);
			CHECK(contained ? nlive == before : nlive == before + 1);
			held[nheld++] = m;
		} else {
			int i = (int)((seed >> 5) % (unsigned)nheld);

			CHECK(nv_mr_cache_put(c, held[i]) == NV_OK);
			held[i] = held[--nheld];
		}
	}
	while (nheld)
		CHECK(nv_mr_cache_put(c, held[--nheld]) == NV_OK);
	CHECK(nv_mr_cache_entries(c) == 0 && nlive == 0);
	nv_mr_cache_destroy(c);
}

int main(void)
{
	nvt_log_capture();
	test_rounding_and_sharing();
	test_exact();
	test_failure();
	test_wrap();
	nfake = 0;
	test_random_model();
	return nvt_exit("test_mr_cache");
}
