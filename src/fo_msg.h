/*
 * fo_msg.h - the messages of a failover round (failover.c), sent over the
 * comm's handshake socket. Pure encoders and decoders: no verbs, no
 * sockets, no logging (unit-tested and fuzzable); decoders trust nothing.
 */
#ifndef NV_FO_MSG_H
#define NV_FO_MSG_H

#include <stddef.h>
#include <stdint.h>
#include "cts.h"

#define NV_FO_MAGIC 0x4e56464fu	/* "NVFO" */
#define NV_FO_MSG_STATE 1	/* after the local drain: dead devices, head, open receives */
#define NV_FO_MSG_READY 2	/* QPs back at RTS, receives posted */
#define NV_FO_HDR_SIZE 32
#define NV_FO_REC_HDR 16
#define NV_FO_MAX_RECS 32	/* == NV_FIFO_SLOTS: one record per open receive */
#define NV_FO_REC_MAX (NV_FO_REC_HDR + NV_CTS_MAX_RECVS * (int)sizeof(struct nv_cts_entry))
#define NV_FO_PAYLOAD_MAX (NV_FO_MAX_RECS * NV_FO_REC_MAX)

/*
 * Header, network byte order: magic u32, type u16, suspect u16 (STATE: the
 * writer's devices with only errors the reader's own round may have caused,
 * see failover.c), epoch u32, dead u32 (the writer's failed local devices, a
 * mask), head u64 (the writer's
 * next sequence), nrec u32, len u32 (payload bytes). A STATE from the
 * receiver carries nrec records: seq u64, nreqs u32, 0 u32, then nreqs CTS
 * entries exactly as the receiver's shadow holds them (host order, like the
 * RDMA-written FIFO: both sides' byte order was checked at connect).
 */
struct nv_fo_hdr {
	uint16_t type;
	uint16_t suspect;
	uint32_t epoch;
	uint32_t dead;
	uint64_t head;
	uint32_t nrec;
	uint32_t len;
};
void nv_fo_hdr_encode(const struct nv_fo_hdr *h, uint8_t *buf /* NV_FO_HDR_SIZE */);
/* 0 valid (type known, sizes within bounds), -1 with the reason in why. */
int nv_fo_hdr_decode(const uint8_t *buf, struct nv_fo_hdr *h, char *why, size_t why_len);
/* Appends one record at buf + *off (room: NV_FO_REC_MAX). */
void nv_fo_rec_encode(uint8_t *buf, uint32_t *off, uint64_t seq, uint32_t nreqs,
		      const struct nv_cts_entry *e);
/*
 * The record at p + *off of a payload of len bytes: 1 one decoded (entries
 * copied to e[], *off advanced), 0 none left, -1 malformed (reason in why).
 */
int nv_fo_rec_decode(const uint8_t *p, uint32_t len, uint32_t *off, uint64_t *seq,
		     uint32_t *nreqs, struct nv_cts_entry *e /* [NV_CTS_MAX_RECVS] */, char *why,
		     size_t why_len);

/*
 * The whole payload of a message whose header h decoded: every record valid,
 * as many as h->nrec says, and nothing after the last one. 0 valid, -1 with
 * the reason in why.
 */
int nv_fo_payload_check(const uint8_t *p, const struct nv_fo_hdr *h, char *why, size_t why_len);

#endif /* NV_FO_MSG_H */
