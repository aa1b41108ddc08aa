/*
 * wire.h - everything that crosses the network outside RDMA: the listen
 * handle (shipped by NCCL's bootstrap) and the out-of-band handshake
 * messages (shipped over our TCP socket).
 *
 * Contract:
 *  - On the wire every field is fixed-width and in network byte order; the
 *    packed nv_wire_* structs in wire.c carry static_asserts on their sizes.
 *  - Callers only see the host-form structs below. Encoders never fail;
 *    decoders trust nothing: each returns NV_OK or NV_ERR_REMOTE with a
 *    one-line reason in *why (never the peer's text, only ours).
 *  - Protocol version NV_WIRE_VERSION is bumped whenever a layout changes;
 *    peers outside NV_WIRE_VERSION_MIN..NV_WIRE_VERSION are refused with a
 *    message naming both. Version 4 (eager ring) is spoken by the listener
 *    only, in its META reply, to a connector that announced it (see
 *    nv_meta.eager_capable); everything else stays version 3, so a v3 peer
 *    and a v4 peer still connect (eager off).
 *  - Pure functions: no verbs, no sockets, no logging (the fuzzers call them).
 */
#ifndef NV_WIRE_H
#define NV_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include "nv_common.h"

#define NV_WIRE_MAGIC 0x4e564d31u /* "NVM1" */
#define NV_WIRE_VERSION 4 /* 2: keyed path probe, connector confirms the proof; 3: listener GIDs;
			   * 4: the receiver's META carries its eager ring (nv_meta_eager) */
#define NV_WIRE_VERSION_MIN 3	/* oldest version we still speak (no eager) */
#define NV_WIRE_VERSION_BASE 3	/* handle, hello, status, the sender's META */
#define NV_WIRE_SECRET_LEN 32
#define NV_WIRE_HANDLE_SIZE 96 /* <= NCCL_NET_HANDLE_MAXSIZE (128) */
#define NV_WIRE_HANDLE_GIDS 2  /* listener's RoCE GIDs (NCCL_IB_SUBNET_AWARE_ROUTING) */
#define NV_WIRE_MAX_DEVS 8     /* devices of one (virtual) NIC */
#define NV_WIRE_MAX_QPS 128    /* NCCL_IB_MAX_QPS */
#define NV_WIRE_DEVNAME_LEN 32
#define NV_WIRE_WHY_LEN 256

/* Link layers: numerically equal to IBV_LINK_LAYER_*. */
#define NV_WIRE_LL_IB 1
#define NV_WIRE_LL_ETH 2

/* The listener's address and secret, as published through NCCL. */
struct nv_handle {
	int family;		/* AF_INET or AF_INET6 */
	uint8_t addr[16];	/* IPv4 in the first 4 bytes */
	uint16_t port;		/* host order */
	uint32_t scope_id;	/* IPv6 link-local scope, else 0 */
	uint8_t ndevs;		/* devices of the listener's (virtual) NIC, 1..NV_WIRE_MAX_DEVS */
	uint8_t secret[NV_WIRE_SECRET_LEN];
	/* the listener's RoCE GIDs (all zero: none, or subnet-aware routing off) */
	uint8_t gids[NV_WIRE_HANDLE_GIDS][16];
};

enum nv_msg_type {
	NV_MSG_HELLO = 1,	/* connector -> listener: secret */
	NV_MSG_META = 2,	/* both ways: connection metadata */
	NV_MSG_STATUS = 3,	/* both ways: "ready" / "path proven" / failure code */
};

/* Every handshake message starts with this header (16 bytes on the wire). */
struct nv_msg_hdr {
	uint16_t type;		/* enum nv_msg_type */
	uint16_t version;	/* NV_WIRE_VERSION_MIN..NV_WIRE_VERSION (decode: the peer's) */
	uint32_t len;		/* payload bytes that follow; fixed per type and version */
};
#define NV_WIRE_HDR_SIZE 16
#define NV_WIRE_HELLO_SIZE 48
#define NV_WIRE_STATUS_SIZE 8

struct nv_hello {
	uint8_t secret[NV_WIRE_SECRET_LEN];
	uint64_t conn_id;	/* connector's random per-connection nonce (also names it in logs) */
};

/* Status codes carried by NV_MSG_STATUS. Texts come from our own table. */
enum nv_wire_status {
	NV_WST_OK = 0,
	NV_WST_BAD_META = 1,		/* the peer's metadata failed validation */
	NV_WST_LINK_MISMATCH = 2,	/* IB on one side, RoCE on the other */
	NV_WST_QP_FAILED = 3,		/* QP creation or RTR/RTS failed */
	NV_WST_PROBE_FAILED = 4,	/* the path-proving RDMA write failed */
	NV_WST_RESOURCES = 5,		/* out of memory / verbs resources */
	NV_WST_BAD_SECRET = 6,		/* the connector's secret did not match */
	NV_WST_TIMEOUT = 7,		/* the peer gave up waiting for us */
	NV_WST_PROBE_LOST = 8,		/* our path probe completed but never reached the peer */
	NV_WST_BUSY = 9,		/* listener: too many connections without a hello yet */
	NV_WST_BACKLOG = 10,		/* listener: too many authenticated ones wait for accept */
	NV_WST_MAX_ = 11,
};
const char *nv_wire_status_str(uint32_t code);

struct nv_meta_dev {
	uint16_t lid;
	uint8_t port;
	uint8_t mtu;		/* enum ibv_mtu, 1 (256) .. 5 (4096) */
	uint8_t link_layer;	/* NV_WIRE_LL_* */
	uint8_t gid_index;
	uint8_t gid[16];
	uint32_t rkey;		/* rkey of the sender's FIFO / receiver's records on this dev */
	char name[NV_WIRE_DEVNAME_LEN]; /* NUL-terminated, printable */
};

struct nv_meta_qp {
	uint32_t qpn;		/* 24 bits, non-zero */
	uint8_t dev;		/* index into nv_meta.dev[] */
	uint8_t ece_valid;
	uint32_t ece_vendor_id;
	uint32_t ece_options;
	uint32_t ece_comp_mask;
};

/*
 * Version 4 only, receiver -> sender: where the sender may RDMA-write eager
 * messages (the ring, one rkey: eager comms have one device and one QP).
 * Entry geometry is fixed by max: NV_EAGER_ENTRY(max) bytes per entry,
 * NV_EAGER_SLOTS entries; the decoder checks both.
 */
#define NV_EAGER_SLOTS 32		/* ring entries == NV_FIFO_SLOTS */
#define NV_EAGER_LIMIT 65536		/* largest NCCL_VERBS_EAGER_MAX */
#define NV_EAGER_TRAILER 16		/* struct nv_eager_trailer */
#define NV_EAGER_ENTRY(max) ((((uint32_t)(max) + NV_EAGER_TRAILER) + 63u) & ~63u)
struct nv_meta_eager {
	uint64_t ring_addr;	/* 64-byte aligned */
	uint32_t ring_rkey;
	uint32_t max;		/* the receiver's NCCL_VERBS_EAGER_MAX, 1..NV_EAGER_LIMIT */
	uint32_t entry;		/* == NV_EAGER_ENTRY(max) */
	uint16_t slots;		/* == NV_EAGER_SLOTS */
};
#define NV_WIRE_META_EAGER_SIZE 32

#define NV_META_ROLE_SEND 1
#define NV_META_ROLE_RECV 2

struct nv_meta {
	uint8_t role;		/* NV_META_ROLE_* */
	uint8_t ndevs;		/* 1 .. NV_WIRE_MAX_DEVS */
	uint16_t nqps;		/* 1 .. NV_WIRE_MAX_QPS */
	uint8_t sl;		/* 0 .. 15 */
	uint8_t tc;
	uint8_t little_endian;	/* RDMA-shared control structs are host order */
	uint8_t split;		/* sender's NCCL_IB_SPLIT_DATA_ON_QPS; the receiver follows */
	uint64_t addr;		/* sender: CTS FIFO; receiver: records region */
	uint32_t region_len;	/* bytes at addr the peer may write */
	uint64_t probe_addr;	/* word the peer's path probe writes (same MR) */
	struct nv_meta_dev dev[NV_WIRE_MAX_DEVS];
	struct nv_meta_qp qp[NV_WIRE_MAX_QPS];
	/* Not fields of the version-3 layout: */
	uint16_t version;	/* encode: layout to write (3, or 4 with eager); decode: the peer's */
	struct nv_meta_eager eager; /* version 4 (receiver role) only, else all zero */
};
#define NV_WIRE_META_SIZE (32 + NV_WIRE_MAX_DEVS * 64 + NV_WIRE_MAX_QPS * 20)	/* version 3 */
#define NV_WIRE_META_SIZE_V4 (NV_WIRE_META_SIZE + NV_WIRE_META_EAGER_SIZE)
/*
 * A sender that can take eager messages announces it in its (version 3)
 * META: its writable region (addr, region_len) ends with the 8-byte eager
 * credit word (struct nv_send_ctrl.eager_grant) and, when it also takes
 * grants from clear-to-send entries (cts.h), one more word: one or two words
 * longer than a v3 sender's, which v3 listeners accept as they accept any
 * region. The listener that sees either and has eager on answers with
 * version 4.
 */

void nv_wire_handle_encode(const struct nv_handle *h, void *buf /* NV_WIRE_HANDLE_SIZE */);
nv_status_t nv_wire_handle_decode(const void *buf, size_t len, struct nv_handle *h,
				  char *why, size_t why_len);

void nv_wire_hdr_encode(const struct nv_msg_hdr *m, void *buf /* NV_WIRE_HDR_SIZE */);
/* Validates magic, version, type and the exact payload length of the type. */
nv_status_t nv_wire_hdr_decode(const void *buf, size_t len, struct nv_msg_hdr *m,
			       char *why, size_t why_len);
/* Payload size of a valid message type (version 3), 0 for an unknown one. */
uint32_t nv_wire_payload_size(uint16_t type);
/* The same in a given version (META is longer in version 4). */
uint32_t nv_wire_payload_size_v(uint16_t type, uint16_t version);

void nv_wire_hello_encode(const struct nv_hello *h, void *buf /* NV_WIRE_HELLO_SIZE */);
nv_status_t nv_wire_hello_decode(const void *buf, size_t len, struct nv_hello *h,
				 char *why, size_t why_len);

void nv_wire_status_encode(uint32_t code, void *buf /* NV_WIRE_STATUS_SIZE */);
nv_status_t nv_wire_status_decode(const void *buf, size_t len, uint32_t *code,
				  char *why, size_t why_len);

/* Writes nv_wire_payload_size(NV_MSG_META, m->version) bytes. */
void nv_wire_meta_encode(const struct nv_meta *m, void *buf /* NV_WIRE_META_SIZE_V4 */);
/* len selects the layout: NV_WIRE_META_SIZE (v3) or _V4 (v4, receiver role only). */
nv_status_t nv_wire_meta_decode(const void *buf, size_t len, struct nv_meta *m,
				char *why, size_t why_len);

/*
 * The word a side's connect-time path probe writes into its peer's probe
 * word: keyed by the listener's secret and the connector's nonce (hello
 * conn_id), so only the peer that took part in this handshake can produce
 * it; role is the writer's NV_META_ROLE_*. Never 0 (probe words start 0).
 * A mixing function, not a MAC: it tells our peer's write from any other
 * write that reaches the word (a QP of another fabric with the same QPN).
 */
uint64_t nv_wire_probe_value(const uint8_t *secret, uint64_t conn_id, int role);

/* Constant-time comparison of two secrets. */
int nv_wire_secret_equal(const uint8_t *a, const uint8_t *b);

/*
 * NCCL_IB_EVENT_BASED_LB_REMOTE: the receiver's port speeds, which it
 * RDMA-writes into its sender's control region (struct nv_send_ctrl.lb_in,
 * announced by the sender's region_len, comm.h) once at the start and after
 * each IBV_EVENT_DEVICE_SPEED_CHANGE on its devices. Big-endian, 48 bytes:
 * magic u32 "NVLB", version u16 (1), ndevs u16 (the receiver's devices,
 * 1..NV_WIRE_MAX_DEVS), mbps u32 x NV_WIRE_MAX_DEVS (speed of each receiver
 * device in Mb/s, 0 unknown: the reader ignores it, a dead port is
 * failover's), count u64 (1, 2, ...: the writes so far). count is the last
 * field and the ready flag (an RDMA write lands in address order): the
 * reader takes a buffer whose count reads the same before and after its copy.
 */
#define NV_WIRE_LB_MAGIC 0x4e564c42u	/* "NVLB" */
#define NV_WIRE_LB_VERSION 1
#define NV_WIRE_LB_SIZE 48
#define NV_WIRE_LB_COUNT_OFF 40	/* the count's offset, 8-byte aligned */
#define NV_WIRE_LB_MAX_MBPS 100000000u	/* 100 Tb/s: a larger speed is corrupt */
struct nv_lb_speeds {
	uint16_t ndevs;
	uint32_t mbps[NV_WIRE_MAX_DEVS];
	uint64_t count;
};
void nv_wire_lb_encode(const struct nv_lb_speeds *v, void *buf /* NV_WIRE_LB_SIZE */);
/* 0 valid (rdevs: the devices the writer has), -1 with the reason in why. */
int nv_wire_lb_decode(const void *buf, int rdevs, struct nv_lb_speeds *v, char *why,
		      size_t why_len);

#endif /* NV_WIRE_H */
