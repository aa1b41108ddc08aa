/* libFuzzer target: nv_wire_hdr_decode (every handshake message starts with it). */
#include "config.h"

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[NV_WIRE_WHY_LEN];
	uint8_t out[NV_WIRE_HDR_SIZE];
	struct nv_msg_hdr m;

	why[0] = '\0';
	if (nv_wire_hdr_decode(data, size, &m, why, sizeof(why)) != NV_OK) {
		fuzz_check_why(why, sizeof(why));
		return 0;
	}
	FUZZ_ASSERT(m.type == NV_MSG_HELLO || m.type == NV_MSG_META || m.type == NV_MSG_STATUS);
	FUZZ_ASSERT(m.version >= NV_WIRE_VERSION_MIN && m.version <= NV_WIRE_VERSION);
	FUZZ_ASSERT(m.len == nv_wire_payload_size_v(m.type, m.version) && m.len > 0);
	nv_wire_hdr_encode(&m, out);
	FUZZ_ASSERT(memcmp(out, data, NV_WIRE_HDR_SIZE) == 0);
	return 0;
}
