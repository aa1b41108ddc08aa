/*
 * libFuzzer target: nv_cts_slot_check (src/cts.c), the sender's check of the
 * clear-to-send entries a receiver RDMA-writes into its FIFO.
 * Input: 8 bytes slot sequence (little endian), 1 byte receiver device count,
 * then up to NV_CTS_MAX_RECVS 64-byte entries (missing bytes are zero).
 */
#include "config.h"

#include <limits.h>

#include "cts.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct nv_cts_entry e[NV_CTS_MAX_RECVS];
	char why[NV_WIRE_WHY_LEN];
	uint64_t seq = 0;
	int rdevs, rc;
	uint32_t n, r;
	size_t len;

	if (size < 9)
		return 0;
	memcpy(&seq, data, 8);
	rdevs = 1 + data[8] % NV_CTS_MAX_DEVS;
	memset(e, 0, sizeof(e));
	len = size - 9 < sizeof(e) ? size - 9 : sizeof(e);
	memcpy(e, data + 9, len);
	why[0] = '\0';
	rc = nv_cts_slot_check(e, seq, rdevs, why, sizeof(why));
	FUZZ_ASSERT(rc >= -1 && rc <= 1);
	if (rc < 0) {
		fuzz_check_why(why, sizeof(why));
		return 0;
	}
	if (rc == 0) {
		/* not ready: some entry of the slot does not carry seq + 1 yet */
		int missing = e[0].seq != seq + 1;

		for (r = 0; !missing && r < e[0].nreqs && r < NV_CTS_MAX_RECVS; r++)
			missing = e[r].seq != seq + 1;
		FUZZ_ASSERT(missing);
		return 0;
	}
	/* accepted: every field the sender will use is safe to use */
	n = e[0].nreqs;
	FUZZ_ASSERT(n >= 1 && n <= NV_CTS_MAX_RECVS);
	for (r = 0; r < n; r++) {
		FUZZ_ASSERT(e[r].seq == seq + 1 && e[r].nreqs == n);
		FUZZ_ASSERT(e[r].size <= UINT32_MAX); /* sizes are 32-bit unsigned */
		FUZZ_ASSERT(e[r].addr + e[r].size >= e[r].addr);
		if (e[r].size) {
			FUZZ_ASSERT(e[r].addr != 0);
			for (int d = 0; d < rdevs; d++)
				FUZZ_ASSERT(e[r].rkey[d] != 0);
		}
	}
	return 0;
}
