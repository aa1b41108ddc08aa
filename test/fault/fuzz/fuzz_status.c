/* libFuzzer target: nv_wire_status_decode (a peer's success / failure code). */
#include "config.h"

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[NV_WIRE_WHY_LEN];
	uint8_t out[NV_WIRE_STATUS_SIZE];
	uint32_t code = 0;

	why[0] = '\0';
	if (nv_wire_status_decode(data, size, &code, why, sizeof(why)) != NV_OK) {
		fuzz_check_why(why, sizeof(why));
		return 0;
	}
	FUZZ_ASSERT(code < NV_WST_MAX_);
	FUZZ_ASSERT(nv_wire_status_str(code) != NULL);
	nv_wire_status_encode(code, out);
	FUZZ_ASSERT(memcmp(out, data, NV_WIRE_STATUS_SIZE) == 0);
	return 0;
}
