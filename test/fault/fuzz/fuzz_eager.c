/*
 * libFuzzer target: nv_eager_trailer_check (src/cts.h, reason text from
 * src/cts.c), the receiver's check of the trailer a sender RDMA-writes at
 * the end of each eager ring entry (its size, tag and sequence + 1).
 * Input: 8 bytes the expected sequence, 4 bytes the negotiated eager limit
 * (taken as 1 + value % NV_EAGER_LIMIT, as the handshake allows), then the
 * 16-byte trailer (missing bytes are zero).
 */
#include "config.h"

#include "cts.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nv_eager_trailer t;
	char why[NV_WIRE_WHY_LEN];
	uint64_t seq = 0;
	uint32_t max = 0;
	int rc;

	if (size < 12)
		return 0;
	memcpy(&seq, data, 8);
	memcpy(&max, data + 8, 4);
	max = 1 + max % NV_EAGER_LIMIT;
	memset(&t, 0, sizeof(t));
	memcpy(&t, data + 12, size - 12 < sizeof(t) ? size - 12 : sizeof(t));
	why[0] = '\0';
	rc = nv_eager_trailer_check(&t, seq, max, why, sizeof(why));
	FUZZ_ASSERT(rc >= -1 && rc <= 1);
	/* the data path asks without a reason: the same verdict */
	FUZZ_ASSERT(nv_eager_trailer_check(&t, seq, max, NULL, 0) == rc);
	if (rc == 0) {
		/* not arrived: the flag is an older sequence's (or none) */
		FUZZ_ASSERT(t.seq != seq + 1);
		return 0;
	}
	FUZZ_ASSERT(t.seq == seq + 1);
	if (rc < 0) {
		FUZZ_ASSERT(t.size > max);
		fuzz_check_why(why, sizeof(why));
		return 0;
	}
	/* accepted: the data the receiver copies out lies inside the entry, before the trailer */
	FUZZ_ASSERT(t.size <= max);
	FUZZ_ASSERT((uint64_t)t.size + NV_EAGER_TRAILER <= NV_EAGER_ENTRY(max));
	return 0;
}
