/*
 * libFuzzer target: the messages of a failover round (src/fo_msg.c), as
 * failover.c reads them from the handshake socket: nv_fo_hdr_decode on the
 * 32-byte header, then, once hdr.len payload bytes are in, nv_fo_rec_decode
 * record after record, and the clear-to-send entries of each record checked
 * with nv_cts_slot_check (src/cts.c) before the sender copies them into its
 * FIFO; and nv_fo_payload_check, which failover.c runs on every whole message
 * (the header's record count). The same messages carry a link hold's rounds
 * (NCCL_VERBS_LINK_HOLD_MS).
 * Input: 1 byte the receiver's device count (1 + value % 8), then the message.
 * Accepted headers and records must re-encode to exactly their bytes.
 */
#include "config.h"

#include "cts.h"
#include "fo_msg.h"
#include "fuzz_common.h"

static void check_slot(const struct nv_cts_entry *e, uint64_t seq, uint32_t n, int rdevs)
{
	char why[NV_WIRE_WHY_LEN];
	int rc;

	why[0] = '\0';
	rc = nv_cts_slot_check(e, seq, rdevs, why, sizeof(why));
	FUZZ_ASSERT(rc >= -1 && rc <= 1);
	if (rc < 0)
		fuzz_check_why(why, sizeof(why));
	if (rc != 1)
		return;
	FUZZ_ASSERT(e[0].nreqs >= 1 && e[0].nreqs <= NV_CTS_MAX_RECVS);
	for (uint32_t r = 0; r < e[0].nreqs && r < n; r++) {
		FUZZ_ASSERT(e[r].seq == seq + 1 && e[r].size <= UINT32_MAX);
		FUZZ_ASSERT(e[r].addr + e[r].size >= e[r].addr);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t out[NV_FO_HDR_SIZE + NV_FO_PAYLOAD_MAX];
	static struct nv_cts_entry e[NV_CTS_MAX_RECVS];
	char why[NV_WIRE_WHY_LEN];
	const uint8_t *msg = data + 1, *p;
	struct nv_fo_hdr h;
	uint32_t off = 0, prev, n, len, out_off;
	uint64_t seq;
	int rdevs, k, rc;
	uint32_t nrec = 0;

	if (size < 1 + NV_FO_HDR_SIZE)
		return 0;
	rdevs = 1 + data[0] % NV_CTS_MAX_DEVS;
	why[0] = '\0';
	if (nv_fo_hdr_decode(msg, &h, why, sizeof(why))) {
		fuzz_check_why(why, sizeof(why));
		return 0;
	}
	FUZZ_ASSERT(h.type == NV_FO_MSG_STATE || h.type == NV_FO_MSG_READY);
	FUZZ_ASSERT(h.nrec <= NV_FO_MAX_RECS && h.len <= NV_FO_PAYLOAD_MAX);
	FUZZ_ASSERT(h.type == NV_FO_MSG_STATE || (!h.nrec && !h.len && !h.suspect));
	nv_fo_hdr_encode(&h, out);
	FUZZ_ASSERT(memcmp(out, msg, NV_FO_HDR_SIZE) == 0);
	/* the reader takes exactly h.len payload bytes, whatever arrived */
	if (size - 1 - NV_FO_HDR_SIZE < h.len)
		return 0;
	p = msg + NV_FO_HDR_SIZE;
	len = h.len;
	out_off = 0;
	for (;;) {
		prev = off;
		why[0] = '\0';
		k = nv_fo_rec_decode(p, len, &off, &seq, &n, e, why, sizeof(why));
		FUZZ_ASSERT(k >= -1 && k <= 1);
		if (k <= 0)
			break;
		nrec++;
		FUZZ_ASSERT(n >= 1 && n <= NV_CTS_MAX_RECVS);
		FUZZ_ASSERT(off == prev + NV_FO_REC_HDR + n * sizeof(struct nv_cts_entry));
		FUZZ_ASSERT(off <= len);
		nv_fo_rec_encode(out, &out_off, seq, n, e);
		FUZZ_ASSERT(out_off == off && memcmp(out + prev, p + prev, off - prev) == 0);
		check_slot(e, seq, n, rdevs);
	}
	if (k == 0)
		FUZZ_ASSERT(off == len); /* every payload byte was in a record */
	else
		fuzz_check_why(why, sizeof(why));
	/* the whole message: valid records, as many as the header says */
	why[0] = '\0';
	rc = nv_fo_payload_check(p, &h, why, sizeof(why));
	FUZZ_ASSERT(rc == 0 || rc == -1);
	FUZZ_ASSERT((rc == 0) == (k == 0 && nrec == h.nrec));
	if (rc < 0)
		fuzz_check_why(why, sizeof(why));
	return 0;
}
