/*
 * handshake.h - helpers (handshake.c) shared by the connect (connect.c) and accept
 * (accept.c) state machines: buffered message I/O over the non-blocking
 * socket, deadlines, and the checks every received message goes through.
 *
 * Contract: helpers never block and never log; they explain failures in
 * hs->why, and the state machine that owns hs logs once, naming the peer
 * and the state.
 */
#ifndef NV_HANDSHAKE_H
#define NV_HANDSHAKE_H

#include <stdint.h>
#include "comm.h"
#include "wire.h"

#define NV_HELLO_MSG_SIZE (NV_WIRE_HDR_SIZE + NV_WIRE_HELLO_SIZE)
#define NV_META_MSG_SIZE (NV_WIRE_HDR_SIZE + NV_WIRE_META_SIZE_V4) /* the longest META */
#define NV_STATUS_MSG_SIZE (NV_WIRE_HDR_SIZE + NV_WIRE_STATUS_SIZE)

/* Progress of one side of a handshake. */
struct nv_hs {
	int state;
	uint64_t deadline_ns;
	uint8_t out[NV_HELLO_MSG_SIZE + NV_META_MSG_SIZE];
	size_t out_len, out_off;
	uint8_t in[NV_META_MSG_SIZE];
	size_t in_off;
	struct nv_msg_hdr hdr;
	int have_hdr;
	uint32_t local_code;	/* NV_WST_* of our own failure, NV_WST_OK if the peer's */
	uint32_t peer_code;	/* NV_WST_* failure the peer sent us, NV_WST_OK if none */
	int sock_err;		/* the socket failed (reset, closed, error): not a bad message */
	nv_status_t local_st;	/* status of the local step that failed, NV_OK if none */
	char why[NV_WIRE_WHY_LEN];
};

/* Step results of the state machines. */
#define NV_STEP_WAIT 0		/* nothing more to do now; call again later */
#define NV_STEP_NEXT 1		/* moved to another state; step again */
#define NV_STEP_FAIL (-1)	/* failed; reason in hs->why or the comm */

/* Chosen handshake interface (once per process); status of that choice. */
nv_status_t nv_if_get(struct nv_sock_addr *addr);
uint64_t nv_process_token_get(void);
uint64_t nv_deadline(void);
nv_status_t nv_random(void *buf, size_t len);

/* A local step failed and said why in a WARN before: text (a constant) into
 * hs->why. Out of line, so the text stays whole in the binary: inlined, GCC
 * stores a short constant as 8-byte immediates, and lintian's spelling check
 * read the piece "see abov" of "(see above)" as a misspelt word. */
void nv_hs_set_why(struct nv_hs *hs, const char *text);

/* Encodes header + payload of `type` into buf; returns the bytes written. */
size_t nv_hs_put(uint8_t *buf, uint16_t type, const void *payload_src);
void nv_hs_queue_status(struct nv_hs *hs, uint32_t code);
void nv_hs_send_failure(int fd, uint32_t code);
int nv_hs_recv(struct nv_hs *hs, int fd, uint16_t want);
int nv_hs_status(struct nv_hs *hs);
int nv_hs_meta(struct nv_hs *hs, struct nv_comm *c, int role, uint32_t *code);
int nv_hs_expired(struct nv_hs *hs, const char *waiting_for);
/*
 * The second half of the path check, after the peer said its probe writes
 * completed: NV_STEP_NEXT once its keyed value (c->probe_want) is in our
 * probe word, NV_STEP_WAIT until then, NV_STEP_FAIL (logged with both NICs
 * and GIDs, c->error set) after half the connect timeout: a completed RC
 * write has landed before its ack, so the value is normally there at once,
 * and the peer, waiting a whole timeout for our verdict, still hears it.
 * The caller sets hs->deadline_ns = nv_probe_deadline() on entering.
 */
uint64_t nv_probe_deadline(void);
int nv_hs_peer_probe(struct nv_hs *hs, struct nv_comm *c);
/* After a STATUS the peer failed with: the detailed message for PROBE_LOST. */
void nv_hs_peer_failed(struct nv_hs *hs, struct nv_comm *c);
int nv_hs_flush_out(struct nv_hs *hs, int fd);
int nv_comm_data_qps(const struct nv_comm *c, int split);
/* Gives back every connect of ctx (NULL: of all) that its caller abandoned
 * mid-handshake (part of nv_net_reclaim, accept.c). Returns how many. */
int nv_connect_reclaim(const struct nv_ctx *ctx);
/* nv_status_t for a failed handshake: local resources, configuration or the peer. */
nv_status_t nv_hs_status_of(const struct nv_hs *hs);

#endif /* NV_HANDSHAKE_H */
