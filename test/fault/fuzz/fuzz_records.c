/*
 * libFuzzer target: nv_records_check (src/cts.c), the receiver's check of the
 * grouped-receive sizes a sender RDMA-writes into its records.
 * Input: 1 byte n, then n uint32 sizes reported and n uint32 capacities posted.
 */
#include "config.h"

#include "cts.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t rec[NV_CTS_MAX_RECVS] = { 0 };
	uint32_t cap[NV_CTS_MAX_RECVS] = { 0 };
	char why[NV_WIRE_WHY_LEN];
	int n, i, rc, bad = 0;

	if (size < 1)
		return 0;
	n = data[0] % (NV_CTS_MAX_RECVS + 1);
	for (i = 0; i < n; i++) {
		size_t o = 1 + (size_t)i * 8;

		if (o + 4 <= size)
			memcpy(&rec[i], data + o, 4);
		if (o + 8 <= size)
			memcpy(&cap[i], data + o + 4, 4);
		bad |= rec[i] > cap[i];
	}
	why[0] = '\0';
	rc = nv_records_check(rec, cap, n, why, sizeof(why));
	FUZZ_ASSERT(rc == 0 || rc == -1);
	FUZZ_ASSERT((rc == -1) == bad);
	if (rc < 0)
		fuzz_check_why(why, sizeof(why));
	return 0;
}
