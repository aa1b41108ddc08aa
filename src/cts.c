/*
 * cts.c - validators for data the peer RDMA-writes into our memory (see cts.h).
 */
#include "config.h"

#include <limits.h>
#include <stdio.h>

#include "cts.h"

int nv_cts_slot_check(const struct nv_cts_entry *e, uint64_t seq, int rdevs, char *why,
		      size_t why_len)
{
	int v = nv_cts_slot_ready(e, seq, rdevs);
	uint32_t n = e[0].nreqs, r;

	if (v >= 0)
		return v;
	if (n < 1 || n > NV_CTS_MAX_RECVS) {
		snprintf(why, why_len, "a clear-to-send with %u grouped receives (max %d)", n,
			 NV_CTS_MAX_RECVS);
		return -1;
	}
	/* the peer may still be writing: name the first bad entry, else the last */
	for (r = 0; r + 1 < n && !nv_cts_entry_bad(&e[r], n, rdevs); r++)
		;
	snprintf(why, why_len, "incorrect receive info in slot %llu entry %u: size %llu addr 0x%llx "
		 "rkey 0x%x nreqs %u", (unsigned long long)seq, r, (unsigned long long)e[r].size,
		 (unsigned long long)e[r].addr, e[r].rkey[0], e[r].nreqs);
	return -1;
}

int nv_records_check(const uint32_t *rec, const uint32_t *capacity, int n, char *why,
		     size_t why_len)
{
	int i;

	for (i = 0; i < n; i++) {
		if (rec[i] > capacity[i]) {
			snprintf(why, why_len, "%u bytes reported for grouped receive %d of capacity %u",
				 rec[i], i, capacity[i]);
			return -1;
		}
	}
	return 0;
}

int nv_eager_trailer_why(const struct nv_eager_trailer *t, uint64_t seq, uint32_t max, char *why,
			 size_t why_len)
{
	snprintf(why, why_len, "an eager message of %u bytes (tag %u) as message %llu, above the "
		 "eager limit of %u bytes", t->size, t->tag, (unsigned long long)seq, max);
	return -1;
}
