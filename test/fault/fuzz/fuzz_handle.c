/* libFuzzer target: nv_wire_handle_decode (the handle NCCL ships between ranks). */
#include "config.h"

#include <sys/socket.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[NV_WIRE_WHY_LEN];
	uint8_t out[NV_WIRE_HANDLE_SIZE];
	struct nv_handle h;

	why[0] = '\0';
	if (nv_wire_handle_decode(data, size, &h, why, sizeof(why)) != NV_OK) {
		fuzz_check_why(why, sizeof(why));
		return 0;
	}
	FUZZ_ASSERT(size >= NV_WIRE_HANDLE_SIZE);
	FUZZ_ASSERT(h.family == AF_INET || h.family == AF_INET6);
	FUZZ_ASSERT(h.port != 0);
	FUZZ_ASSERT(h.ndevs >= 1 && h.ndevs <= NV_WIRE_MAX_DEVS);
	nv_wire_handle_encode(&h, out);
	FUZZ_ASSERT(memcmp(out, data, NV_WIRE_HANDLE_SIZE) == 0);
	return 0;
}
