/* libFuzzer target: nv_wire_hello_decode (the connector's secret). */
#include "config.h"

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[NV_WIRE_WHY_LEN];
	uint8_t out[NV_WIRE_HELLO_SIZE];
	struct nv_hello h;

	why[0] = '\0';
	if (nv_wire_hello_decode(data, size, &h, why, sizeof(why)) != NV_OK) {
		fuzz_check_why(why, sizeof(why));
		return 0;
	}
	FUZZ_ASSERT(size == NV_WIRE_HELLO_SIZE);
	nv_wire_hello_encode(&h, out);
	FUZZ_ASSERT(memcmp(out, data, NV_WIRE_HELLO_SIZE) == 0);
	/* The comparison must be exact: equal to itself, unequal after any flip. */
	FUZZ_ASSERT(nv_wire_secret_equal(h.secret, h.secret));
	h.secret[data[0] % NV_WIRE_SECRET_LEN] ^= 1;
	FUZZ_ASSERT(!nv_wire_secret_equal(h.secret, data));
	return 0;
}
