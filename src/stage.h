/*
 * stage.h - the plugin-owned table of connects in progress (stage.c).
 *
 * NCCL keeps calling connect with the same 128-byte handle buffer until a
 * comm comes back; the state between calls lives here, never in that
 * buffer. The buffer carries only a reference (slot id + generation), so a
 * stale or copied buffer whose connect already finished, failed or was
 * reclaimed resolves to nothing and gets a clear error: a slot's generation
 * changes every time its entry leaves the table.
 *
 * Contract: an entry is either idle (in the table, nobody stepping it) or
 * taken by exactly one caller until it puts it back (nv_stage_untake) or
 * removes it (nv_stage_remove). Reclaim detaches idle entries only. Thread
 * safe; no call blocks beyond the table lock.
 */
#ifndef NV_STAGE_H
#define NV_STAGE_H

#include <stddef.h>
#include <stdint.h>
#include "nv_common.h"

#define NV_STAGE_MAX 65536	/* connects in progress per process */

struct nv_stage_ref {
	uint32_t id;		/* slot */
	uint32_t gen;		/* generation of the slot when the entry was added; never 0 */
};

/* Adds p (owned by `owner`, e.g. its nv_ctx) taken by the caller; NV_ERR_SYSTEM when full. */
nv_status_t nv_stage_add(void *p, const void *owner, struct nv_stage_ref *ref);
/* Takes the entry of ref; NULL with a reason in why when it is gone or taken. */
void *nv_stage_take(struct nv_stage_ref ref, char *why, size_t len);
void nv_stage_untake(struct nv_stage_ref ref);
/* The taker is done with the entry: it leaves the table, the slot's generation moves on. */
void nv_stage_remove(struct nv_stage_ref ref);
/* Detaches every idle entry of owner (NULL: of every owner) and hands each to fn. */
int nv_stage_reclaim(const void *owner, void (*fn)(void *p));

#endif /* NV_STAGE_H */
