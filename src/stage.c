/*
 * stage.c - the table of connects in progress (see stage.h).
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "stage.h"

struct nv_stage_slot {
	uint32_t gen;		/* current generation (starts at 1) */
	int taken;
	const void *owner;
	void *p;		/* NULL: free */
};

static pthread_mutex_t nv_stage_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nv_stage_slot *nv_stage_tab;	/* locked */
static uint32_t nv_stage_cap;			/* locked */

/* Caller holds the lock. */
static int nv_stage_grow(void)
{
	uint32_t cap = nv_stage_cap ? nv_stage_cap * 2 : 64, i;
	struct nv_stage_slot *t;

	if (nv_stage_cap >= NV_STAGE_MAX)
		return -1;
	if (cap > NV_STAGE_MAX)
		cap = NV_STAGE_MAX;
	t = realloc(nv_stage_tab, cap * sizeof(*t));
	if (!t)
		return -1;
	for (i = nv_stage_cap; i < cap; i++)
		t[i] = (struct nv_stage_slot){ .gen = 1 };
	nv_stage_tab = t;
	nv_stage_cap = cap;
	return 0;
}

nv_status_t nv_stage_add(void *p, const void *owner, struct nv_stage_ref *ref)
{
	uint32_t i;

	pthread_mutex_lock(&nv_stage_lock);
	for (i = 0; i < nv_stage_cap && nv_stage_tab[i].p; i++)
		;
	if (i == nv_stage_cap && nv_stage_grow() < 0) {
		pthread_mutex_unlock(&nv_stage_lock);
		NV_WARN("connect: %u connects are already in progress in this process (or out of "
			"memory); finish or close some first", nv_stage_cap);
		return NV_ERR_SYSTEM;
	}
	nv_stage_tab[i].p = p;
	nv_stage_tab[i].owner = owner;
	nv_stage_tab[i].taken = 1;
	ref->id = i;
	ref->gen = nv_stage_tab[i].gen;
	pthread_mutex_unlock(&nv_stage_lock);
	return NV_OK;
}

void *nv_stage_take(struct nv_stage_ref ref, char *why, size_t len)
{
	struct nv_stage_slot *s;
	void *p = NULL;

	pthread_mutex_lock(&nv_stage_lock);
	s = ref.id < nv_stage_cap ? &nv_stage_tab[ref.id] : NULL;
	if (!s || !s->p || s->gen != ref.gen)
		snprintf(why, len, "its connect (slot %u, generation %u) already finished, failed or "
			 "was reclaimed at finalize: this buffer is a stale copy of the handle; "
			 "connect with a fresh copy of the listener's handle", ref.id, ref.gen);
	else if (s->taken)
		snprintf(why, len, "its connect (slot %u) is being stepped by another call right now: "
			 "two copies of one handle are in use at once", ref.id);
	else {
		s->taken = 1;
		p = s->p;
	}
	pthread_mutex_unlock(&nv_stage_lock);
	return p;
}

void nv_stage_untake(struct nv_stage_ref ref)
{
	pthread_mutex_lock(&nv_stage_lock);
	if (ref.id < nv_stage_cap && nv_stage_tab[ref.id].gen == ref.gen)
		nv_stage_tab[ref.id].taken = 0;
	pthread_mutex_unlock(&nv_stage_lock);
}

void nv_stage_remove(struct nv_stage_ref ref)
{
	struct nv_stage_slot *s;

	pthread_mutex_lock(&nv_stage_lock);
	s = ref.id < nv_stage_cap ? &nv_stage_tab[ref.id] : NULL;
	if (s && s->gen == ref.gen) {
		s->p = NULL;
		s->owner = NULL;
		s->taken = 0;
		s->gen = s->gen == UINT32_MAX ? 1 : s->gen + 1;
	}
	pthread_mutex_unlock(&nv_stage_lock);
}

int nv_stage_reclaim(const void *owner, void (*fn)(void *p))
{
	void *batch[64];
	int n, total = 0;
	uint32_t i;

	do { /* detach under the lock, tear down outside it */
		n = 0;
		pthread_mutex_lock(&nv_stage_lock);
		for (i = 0; i < nv_stage_cap && n < 64; i++) {
			struct nv_stage_slot *s = &nv_stage_tab[i];

			if (!s->p || s->taken || (owner && s->owner != owner))
				continue;
			batch[n++] = s->p;
			s->p = NULL;
			s->owner = NULL;
			s->gen = s->gen == UINT32_MAX ? 1 : s->gen + 1;
		}
		pthread_mutex_unlock(&nv_stage_lock);
		for (i = 0; i < (uint32_t)n; i++)
			fn(batch[i]);
		total += n;
	} while (n == 64);
	return total;
}
