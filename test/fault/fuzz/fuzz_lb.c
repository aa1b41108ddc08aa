/*
 * libFuzzer target: nv_wire_lb_decode (the receiver's port speeds that it RDMA-writes
 * into the sender's region, NCCL_IB_EVENT_BASED_LB_REMOTE). Input: one byte that
 * gives the writer's device count (1..8), then the 48-byte buffer.
 */
#include "config.h"

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[160];
	uint8_t out[NV_WIRE_LB_SIZE];
	struct nv_lb_speeds v;
	int rdevs, d;

	if (size != 1 + NV_WIRE_LB_SIZE)
		return 0;
	rdevs = 1 + data[0] % NV_WIRE_MAX_DEVS;
	why[0] = '\0';
	if (nv_wire_lb_decode(data + 1, rdevs, &v, why, sizeof(why))) {
		fuzz_check_why(why, sizeof(why));
		return 0;
	}
	FUZZ_ASSERT(v.ndevs == rdevs);
	for (d = 0; d < NV_WIRE_MAX_DEVS; d++)
		FUZZ_ASSERT(v.mbps[d] <= NV_WIRE_LB_MAX_MBPS && (d < rdevs || v.mbps[d] == 0));
	nv_wire_lb_encode(&v, out); /* what decodes is exactly what an encoder writes */
	FUZZ_ASSERT(memcmp(out, data + 1, NV_WIRE_LB_SIZE) == 0);
	return 0;
}
