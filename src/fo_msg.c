/*
 * fo_msg.c - encoders and decoders of the failover round's messages
 * (fo_msg.h). Fixed-width fields in network byte order; the CTS entries a
 * STATE carries are copied as they are (host order, like the FIFO).
 */
#include "config.h"

#include <arpa/inet.h>
#include <endian.h>
#include <stdio.h>
#include <string.h>

#include "fo_msg.h"

static void nv_put32(uint8_t *p, uint32_t v)
{
	v = htonl(v);
	memcpy(p, &v, 4);
}

static void nv_put64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, 8);
}

static uint32_t nv_get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return ntohl(v);
}

static uint64_t nv_get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return be64toh(v);
}

void nv_fo_hdr_encode(const struct nv_fo_hdr *h, uint8_t *b)
{
	memset(b, 0, NV_FO_HDR_SIZE);
	nv_put32(b, NV_FO_MAGIC);
	b[4] = (uint8_t)(h->type >> 8);
	b[5] = (uint8_t)h->type;
	b[6] = (uint8_t)(h->suspect >> 8);
	b[7] = (uint8_t)h->suspect;
	nv_put32(b + 8, h->epoch);
	nv_put32(b + 12, h->dead);
	nv_put64(b + 16, h->head);
	nv_put32(b + 24, h->nrec);
	nv_put32(b + 28, h->len);
}

int nv_fo_hdr_decode(const uint8_t *b, struct nv_fo_hdr *h, char *why, size_t len)
{
	if (nv_get32(b) != NV_FO_MAGIC) {
		snprintf(why, len, "not a failover message (magic 0x%08x)", nv_get32(b));
		return -1;
	}
	h->type = (uint16_t)(b[4] << 8 | b[5]);
	h->suspect = (uint16_t)(b[6] << 8 | b[7]);
	h->epoch = nv_get32(b + 8);
	h->dead = nv_get32(b + 12);
	h->head = nv_get64(b + 16);
	h->nrec = nv_get32(b + 24);
	h->len = nv_get32(b + 28);
	if (h->type != NV_FO_MSG_STATE && h->type != NV_FO_MSG_READY) {
		snprintf(why, len, "unknown failover message type %u", h->type);
		return -1;
	}
	if (h->nrec > NV_FO_MAX_RECS || h->len > NV_FO_PAYLOAD_MAX ||
	    (h->type == NV_FO_MSG_READY && (h->nrec || h->len || h->suspect)) ||
	    h->len < h->nrec * (uint32_t)(NV_FO_REC_HDR + sizeof(struct nv_cts_entry))) {
		snprintf(why, len, "failover message with %u records in %u bytes", h->nrec, h->len);
		return -1;
	}
	return 0;
}

void nv_fo_rec_encode(uint8_t *buf, uint32_t *off, uint64_t seq, uint32_t nreqs,
		      const struct nv_cts_entry *e)
{
	uint8_t *p = buf + *off;

	nv_put64(p, seq);
	nv_put32(p + 8, nreqs);
	nv_put32(p + 12, 0);
	memcpy(p + NV_FO_REC_HDR, e, nreqs * sizeof(*e));
	*off += NV_FO_REC_HDR + nreqs * (uint32_t)sizeof(*e);
}

int nv_fo_rec_decode(const uint8_t *p, uint32_t len, uint32_t *off, uint64_t *seq,
		     uint32_t *nreqs, struct nv_cts_entry *e, char *why, size_t why_len)
{
	uint32_t n;

	if (*off == len)
		return 0;
	if (*off > len || len - *off < NV_FO_REC_HDR) {
		snprintf(why, why_len, "truncated failover record at byte %u of %u", *off, len);
		return -1;
	}
	*seq = nv_get64(p + *off);
	n = nv_get32(p + *off + 8);
	if (n < 1 || n > NV_CTS_MAX_RECVS || nv_get32(p + *off + 12) ||
	    len - *off - NV_FO_REC_HDR < n * sizeof(*e)) {
		snprintf(why, why_len, "failover record of %u entries at byte %u of %u", n, *off,
			 len);
		return -1;
	}
	memcpy(e, p + *off + NV_FO_REC_HDR, n * sizeof(*e));
	*nreqs = n;
	*off += NV_FO_REC_HDR + n * (uint32_t)sizeof(*e);
	return 1;
}

int nv_fo_payload_check(const uint8_t *p, const struct nv_fo_hdr *h, char *why, size_t why_len)
{
	struct nv_cts_entry e[NV_CTS_MAX_RECVS];
	uint32_t off = 0, n, k = 0;
	uint64_t seq;
	int r;

	while ((r = nv_fo_rec_decode(p, h->len, &off, &seq, &n, e, why, why_len)) > 0)
		k++;
	if (r < 0)
		return -1;
	if (k != h->nrec) {
		snprintf(why, why_len, "failover message with %u records in its header and %u in its "
			 "payload", h->nrec, k);
		return -1;
	}
	return 0;
}
