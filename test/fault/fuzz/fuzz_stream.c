/*
 * libFuzzer target: a handshake byte stream as the listener and connector
 * read it: header, then the payload its type announces, repeatedly.
 */
#include "config.h"

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct nv_meta meta;
	char why[NV_WIRE_WHY_LEN];
	struct nv_msg_hdr hdr;
	struct nv_hello hello;
	uint32_t code;
	size_t off = 0;

	while (size - off >= NV_WIRE_HDR_SIZE) {
		if (nv_wire_hdr_decode(data + off, NV_WIRE_HDR_SIZE, &hdr, why, sizeof(why)) != NV_OK)
			return 0;
		off += NV_WIRE_HDR_SIZE;
		/* A reader takes exactly hdr.len bytes, whatever arrived. */
		FUZZ_ASSERT(hdr.len <= NV_WIRE_META_SIZE_V4);
		if (size - off < hdr.len)
			return 0;
		switch (hdr.type) {
		case NV_MSG_HELLO:
			(void)nv_wire_hello_decode(data + off, hdr.len, &hello, why, sizeof(why));
			break;
		case NV_MSG_META:
			(void)nv_wire_meta_decode(data + off, hdr.len, &meta, why, sizeof(why));
			break;
		case NV_MSG_STATUS:
			if (nv_wire_status_decode(data + off, hdr.len, &code, why, sizeof(why)) == NV_OK)
				FUZZ_ASSERT(strlen(nv_wire_status_str(code)) > 0);
			break;
		default:
			FUZZ_ASSERT(0);
		}
		off += hdr.len;
	}
	return 0;
}
