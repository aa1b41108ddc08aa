/*
 * test_fo_msg - the failover round's messages (src/fo_msg.c): encode/decode
 * round trips, and every bound of the decoders with hostile bytes patched
 * into a valid encoding (magic, type, record count, payload length, a
 * READY with a payload, a record's entry count, padding and length).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "fo_msg.h"

#include "nvtest.h"

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static int hdr_rejects(const struct nv_fo_hdr *h, int off, uint32_t v, const char *reason)
{
	uint8_t b[NV_FO_HDR_SIZE];
	struct nv_fo_hdr out;
	char why[128] = "";

	nv_fo_hdr_encode(h, b);
	if (off >= 0)
		put32(b + off, v);
	if (nv_fo_hdr_decode(b, &out, why, sizeof(why)) == 0)
		return reason == NULL;
	return reason && strstr(why, reason) != NULL;
}

int main(void)
{
	struct nv_fo_hdr h = { .type = NV_FO_MSG_STATE, .suspect = 0x5, .epoch = 3, .dead = 0x2,
			       .head = 1ull << 40,
			       .nrec = 2, .len = 2 * (NV_FO_REC_HDR + 64) + 64 };
	struct nv_fo_hdr r = { .type = NV_FO_MSG_READY, .epoch = 4 };
	static uint8_t pay[NV_FO_PAYLOAD_MAX];
	struct nv_cts_entry e[NV_CTS_MAX_RECVS], got[NV_CTS_MAX_RECVS];
	uint8_t b[NV_FO_HDR_SIZE];
	struct nv_fo_hdr out;
	uint32_t off = 0, n, len;
	uint64_t seq;
	char why[128];
	int i;

	/* header round trip */
	nv_fo_hdr_encode(&h, b);
	CHECK(nv_fo_hdr_decode(b, &out, why, sizeof(why)) == 0);
	CHECK(out.type == h.type && out.suspect == 5 && out.epoch == 3 && out.dead == 2 &&
	      out.head == h.head &&
	      out.nrec == 2 && out.len == h.len);
	CHECK(hdr_rejects(&r, -1, 0, NULL));
	/* bounds */
	CHECK(hdr_rejects(&h, 0, 0x4e56464e, "not a failover message"));
	CHECK(hdr_rejects(&h, 4, 3u << 16, "unknown failover message type 3"));
	CHECK(hdr_rejects(&h, 4, 0, "unknown failover message type 0"));
	h.len = NV_FO_PAYLOAD_MAX;
	CHECK(hdr_rejects(&h, 24, NV_FO_MAX_RECS, NULL));
	CHECK(hdr_rejects(&h, 24, NV_FO_MAX_RECS + 1, "records"));
	h.len = 2 * (NV_FO_REC_HDR + 64) + 64;
	CHECK(hdr_rejects(&h, 28, NV_FO_PAYLOAD_MAX, NULL));
	CHECK(hdr_rejects(&h, 28, NV_FO_PAYLOAD_MAX + 1, "records"));
	CHECK(hdr_rejects(&h, 28, 2 * (NV_FO_REC_HDR + 64) - 1, "records")); /* < nrec records */
	CHECK(hdr_rejects(&r, 28, 1, "records"));			     /* READY + payload */
	CHECK(hdr_rejects(&r, 24, 1, "records"));
	CHECK(hdr_rejects(&r, 4, (NV_FO_MSG_READY << 16) | 1, "records")); /* READY + suspects */
	/* records: round trip of 1 and 8 entries */
	for (i = 0; i < NV_CTS_MAX_RECVS; i++) {
		memset(&e[i], 0, sizeof(e[i]));
		e[i].addr = 0x1000u * (uint64_t)(i + 1);
		e[i].size = 100u + (uint64_t)i;
		e[i].nreqs = NV_CTS_MAX_RECVS;
		e[i].seq = 78;
	}
	nv_fo_rec_encode(pay, &off, 77, NV_CTS_MAX_RECVS, e);
	nv_fo_rec_encode(pay, &off, 79, 1, e);
	len = off;
	CHECK(len == 2 * NV_FO_REC_HDR + (NV_CTS_MAX_RECVS + 1) * 64);
	off = 0;
	CHECK(nv_fo_rec_decode(pay, len, &off, &seq, &n, got, why, sizeof(why)) == 1 && seq == 77 &&
	      n == NV_CTS_MAX_RECVS && !memcmp(got, e, sizeof(e)));
	CHECK(nv_fo_rec_decode(pay, len, &off, &seq, &n, got, why, sizeof(why)) == 1 && seq == 79 &&
	      n == 1 && got[0].addr == 0x1000);
	CHECK(nv_fo_rec_decode(pay, len, &off, &seq, &n, got, why, sizeof(why)) == 0);
	/* the whole payload: as many records as the header says, nothing after them */
	memset(&h, 0, sizeof(h));
	h.type = NV_FO_MSG_STATE;
	h.len = len;
	h.nrec = 2;
	CHECK(nv_fo_payload_check(pay, &h, why, sizeof(why)) == 0);
	h.nrec = 1; /* a header that lists fewer receives than the payload carries */
	CHECK(nv_fo_payload_check(pay, &h, why, sizeof(why)) == -1 && strstr(why, "1 records in "
	      "its header and 2 in its payload"));
	h.nrec = 0;
	CHECK(nv_fo_payload_check(pay, &h, why, sizeof(why)) == -1);
	h.nrec = 3;
	CHECK(nv_fo_payload_check(pay, &h, why, sizeof(why)) == -1);
	h.nrec = 2;
	h.len = len - 1; /* the last record cut short */
	CHECK(nv_fo_payload_check(pay, &h, why, sizeof(why)) == -1 && strstr(why, "entries"));
	/* hostile records */
	off = 0;
	CHECK(nv_fo_rec_decode(pay, len - 1, &off, &seq, &n, got, why, sizeof(why)) == 1);
	CHECK(nv_fo_rec_decode(pay, len - 1, &off, &seq, &n, got, why, sizeof(why)) == -1 &&
	      strstr(why, "entries"));			/* its entry is cut short */
	off = 0;
	CHECK(nv_fo_rec_decode(pay, 10, &off, &seq, &n, got, why, sizeof(why)) == -1 &&
	      strstr(why, "truncated"));
	put32(pay + 8, NV_CTS_MAX_RECVS + 1);
	off = 0;
	CHECK(nv_fo_rec_decode(pay, len, &off, &seq, &n, got, why, sizeof(why)) == -1);
	put32(pay + 8, 0);
	off = 0;
	CHECK(nv_fo_rec_decode(pay, len, &off, &seq, &n, got, why, sizeof(why)) == -1);
	put32(pay + 8, 1);
	put32(pay + 12, 1); /* padding must be 0 */
	off = 0;
	CHECK(nv_fo_rec_decode(pay, len, &off, &seq, &n, got, why, sizeof(why)) == -1);
	off = len + 1;
	CHECK(nv_fo_rec_decode(pay, len, &off, &seq, &n, got, why, sizeof(why)) == -1);
	printf("test_fo_msg: %s\n", nvt_failures ? "FAIL" : "ok");
	return nvt_failures ? 1 : 0;
}
