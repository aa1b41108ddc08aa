/*
 * wire.c - encoders and validating decoders for the handle and the
 * handshake messages (see wire.h for the contract).
 *
 * The nv_wire_* structs below ARE the wire layout: packed, fixed-width,
 * big-endian, reserved bytes zero. Host structs never touch a buffer
 * directly; everything goes through memcpy into/out of these.
 */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <endian.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "wire.h"

struct nv_wire_handle {
	uint32_t magic;
	uint16_t version;
	uint8_t family;		/* 4 or 6 */
	uint8_t ndevs;		/* listener's devices */
	uint16_t port;
	uint16_t rsvd1;
	uint32_t scope_id;
	uint8_t addr[16];
	uint8_t secret[NV_WIRE_SECRET_LEN];
	uint8_t gids[NV_WIRE_HANDLE_GIDS][16];
} __attribute__((packed));
_Static_assert(sizeof(struct nv_wire_handle) == NV_WIRE_HANDLE_SIZE, "handle layout");
_Static_assert(NV_WIRE_HANDLE_SIZE <= 128, "handle must fit NCCL_NET_HANDLE_MAXSIZE");

struct nv_wire_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t len;
	uint32_t rsvd;
} __attribute__((packed));
_Static_assert(sizeof(struct nv_wire_hdr) == NV_WIRE_HDR_SIZE, "header layout");

struct nv_wire_hello {
	uint8_t secret[NV_WIRE_SECRET_LEN];
	uint64_t conn_id;
	uint64_t rsvd;
} __attribute__((packed));
_Static_assert(sizeof(struct nv_wire_hello) == NV_WIRE_HELLO_SIZE, "hello layout");

struct nv_wire_status_msg {
	uint32_t code;
	uint32_t rsvd;
} __attribute__((packed));
_Static_assert(sizeof(struct nv_wire_status_msg) == NV_WIRE_STATUS_SIZE, "status layout");

struct nv_wire_meta_dev {
	uint16_t lid;
	uint8_t port;
	uint8_t mtu;
	uint8_t link_layer;
	uint8_t gid_index;
	uint16_t rsvd0;
	uint8_t gid[16];
	uint32_t rkey;
	uint32_t rsvd1;
	char name[NV_WIRE_DEVNAME_LEN];
} __attribute__((packed));
_Static_assert(sizeof(struct nv_wire_meta_dev) == 64, "meta dev layout");

struct nv_wire_meta_qp {
	uint32_t qpn;
	uint8_t dev;
	uint8_t ece_valid;
	uint16_t rsvd;
	uint32_t ece_vendor_id;
	uint32_t ece_options;
	uint32_t ece_comp_mask;
} __attribute__((packed));
_Static_assert(sizeof(struct nv_wire_meta_qp) == 20, "meta qp layout");

struct nv_wire_meta {
	uint8_t role;
	uint8_t ndevs;
	uint16_t nqps;
	uint8_t sl;
	uint8_t tc;
	uint8_t little_endian;
	uint8_t split;
	uint64_t addr;
	uint32_t region_len;
	uint32_t rsvd1;
	uint64_t probe_addr;
	struct nv_wire_meta_dev dev[NV_WIRE_MAX_DEVS];
	struct nv_wire_meta_qp qp[NV_WIRE_MAX_QPS];
} __attribute__((packed));
_Static_assert(sizeof(struct nv_wire_meta) == NV_WIRE_META_SIZE, "meta layout");

/* Version 4: follows the version-3 META of a receiver (nv_meta_eager). */
struct nv_wire_meta_eager {
	uint64_t ring_addr;
	uint32_t ring_rkey;
	uint32_t max;
	uint32_t entry;
	uint16_t slots;
	uint16_t rsvd0;
	uint64_t rsvd1;
} __attribute__((packed));
_Static_assert(sizeof(struct nv_wire_meta_eager) == NV_WIRE_META_EAGER_SIZE, "eager layout");
_Static_assert(NV_WIRE_META_SIZE_V4 == NV_WIRE_META_SIZE + NV_WIRE_META_EAGER_SIZE, "v4 meta");

static const char *const nv_wire_status_names[NV_WST_MAX_] = {
	[NV_WST_OK] = "ok",
	[NV_WST_BAD_META] = "our connection metadata failed its validation",
	[NV_WST_LINK_MISMATCH] = "link layers differ (InfiniBand vs RoCE); "
				 "restrict NCCL_IB_HCA to one link type",
	[NV_WST_QP_FAILED] = "its QP bring-up (INIT/RTR/RTS) failed",
	[NV_WST_PROBE_FAILED] = "its path-proving RDMA write to us failed",
	[NV_WST_RESOURCES] = "it ran out of memory or verbs resources",
	[NV_WST_BAD_SECRET] = "we did not present the secret of its handle (stale, foreign or "
			      "corrupted handle)",
	[NV_WST_TIMEOUT] = "it gave up waiting for us (NCCL_VERBS_CONNECT_TIMEOUT_MS)",
	[NV_WST_PROBE_LOST] = "our path-proving RDMA write completed but never reached it",
	[NV_WST_BUSY] = "it has too many connections that have not sent their hello "
			"(NCCL_VERBS_LISTEN_PENDING on the listener; a flood of silent connections?)",
	[NV_WST_BACKLOG] = "its backlog of authenticated connections waiting for accept is full "
			   "(NCCL_VERBS_LISTEN_BACKLOG on the listener; is it calling accept?)",
};

const char *nv_wire_status_str(uint32_t code)
{
	if (code >= NV_WST_MAX_)
		return "unknown failure code";
	return nv_wire_status_names[code];
}

static nv_status_t nv_wire_reject(char *why, size_t why_len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static nv_status_t nv_wire_reject(char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;

	if (why && why_len) {
		va_start(ap, fmt);
		vsnprintf(why, why_len, fmt, ap);
		va_end(ap);
	}
	return NV_ERR_REMOTE;
}

static int nv_wire_all_zero(const void *p, size_t n)
{
	const uint8_t *b = p;
	size_t i;

	for (i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

static uint64_t nv_wire_mix(uint64_t x)
{
	/* splitmix64's finalizer */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

uint64_t nv_wire_probe_value(const uint8_t *secret, uint64_t conn_id, int role)
{
	uint64_t h = 0x6e7670726f626532ull ^ (uint64_t)(unsigned)role, w;
	int i;

	for (i = 0; i < NV_WIRE_SECRET_LEN; i += 8) {
		memcpy(&w, secret + i, sizeof(w));
		h = nv_wire_mix(h ^ w);
	}
	h = nv_wire_mix(h ^ conn_id);
	h = nv_wire_mix(h ^ (uint64_t)(unsigned)role << 32);
	return h ? h : 1;
}

int nv_wire_secret_equal(const uint8_t *a, const uint8_t *b)
{
	uint8_t diff = 0;
	int i;

	for (i = 0; i < NV_WIRE_SECRET_LEN; i++)
		diff |= (uint8_t)(a[i] ^ b[i]);
	return diff == 0;
}

void nv_wire_handle_encode(const struct nv_handle *h, void *buf)
{
	struct nv_wire_handle w;

	memset(&w, 0, sizeof(w));
	w.magic = htobe32(NV_WIRE_MAGIC);
	w.version = htobe16(NV_WIRE_VERSION_BASE);
	w.family = h->family == AF_INET6 ? 6 : 4;
	w.ndevs = h->ndevs;
	w.port = htobe16(h->port);
	w.scope_id = htobe32(h->scope_id);
	memcpy(w.addr, h->addr, sizeof(w.addr));
	memcpy(w.secret, h->secret, sizeof(w.secret));
	memcpy(w.gids, h->gids, sizeof(w.gids));
	memcpy(buf, &w, sizeof(w));
}

nv_status_t nv_wire_handle_decode(const void *buf, size_t len, struct nv_handle *h, char *why,
				  size_t why_len)
{
	struct nv_wire_handle w;

	if (!buf || len < sizeof(w))
		return nv_wire_reject(why, why_len, "handle truncated (%zu of %zu bytes)", len,
				      sizeof(w));
	memcpy(&w, buf, sizeof(w));
	if (be32toh(w.magic) != NV_WIRE_MAGIC)
		return nv_wire_reject(why, why_len,
				      "handle magic 0x%08x is not ours (0x%08x): not a Verbs "
				      "plugin handle", be32toh(w.magic), NV_WIRE_MAGIC);
	if (be16toh(w.version) != NV_WIRE_VERSION_BASE)
		return nv_wire_reject(why, why_len,
				      "handle protocol version %u, ours is %u: mixed plugin versions",
				      be16toh(w.version), NV_WIRE_VERSION_BASE);
	if ((w.family != 4 && w.family != 6) || w.rsvd1)
		return nv_wire_reject(why, why_len, "handle address family %u invalid", w.family);
	if (w.ndevs < 1 || w.ndevs > NV_WIRE_MAX_DEVS)
		return nv_wire_reject(why, why_len, "handle device count %u out of 1..%d", w.ndevs,
				      NV_WIRE_MAX_DEVS);
	if (w.port == 0)
		return nv_wire_reject(why, why_len, "handle port is 0");
	if (w.family == 4 && !nv_wire_all_zero(w.addr + 4, 12))
		return nv_wire_reject(why, why_len, "handle IPv4 address has trailing bytes");
	memset(h, 0, sizeof(*h));
	h->family = w.family == 6 ? AF_INET6 : AF_INET;
	h->port = be16toh(w.port);
	h->scope_id = be32toh(w.scope_id);
	h->ndevs = w.ndevs;
	memcpy(h->addr, w.addr, sizeof(h->addr));
	memcpy(h->secret, w.secret, sizeof(h->secret));
	memcpy(h->gids, w.gids, sizeof(h->gids));
	return NV_OK;
}

uint32_t nv_wire_payload_size_v(uint16_t type, uint16_t version)
{
	if (type == NV_MSG_META && version >= 4)
		return NV_WIRE_META_SIZE_V4;
	return nv_wire_payload_size(type);
}

uint32_t nv_wire_payload_size(uint16_t type)
{
	switch (type) {
	case NV_MSG_HELLO:
		return NV_WIRE_HELLO_SIZE;
	case NV_MSG_META:
		return NV_WIRE_META_SIZE;
	case NV_MSG_STATUS:
		return NV_WIRE_STATUS_SIZE;
	default:
		return 0;
	}
}

void nv_wire_hdr_encode(const struct nv_msg_hdr *m, void *buf)
{
	struct nv_wire_hdr w;

	memset(&w, 0, sizeof(w));
	w.magic = htobe32(NV_WIRE_MAGIC);
	/* version 0 (callers that leave it unset): the base version */
	w.version = htobe16(m->version ? m->version : NV_WIRE_VERSION_BASE);
	w.type = htobe16(m->type);
	w.len = htobe32(m->len);
	memcpy(buf, &w, sizeof(w));
}

nv_status_t nv_wire_hdr_decode(const void *buf, size_t len, struct nv_msg_hdr *m, char *why,
			       size_t why_len)
{
	struct nv_wire_hdr w;
	uint32_t want;

	if (!buf || len < sizeof(w))
		return nv_wire_reject(why, why_len, "message header truncated (%zu of %zu bytes)",
				      len, sizeof(w));
	memcpy(&w, buf, sizeof(w));
	if (be32toh(w.magic) != NV_WIRE_MAGIC)
		return nv_wire_reject(why, why_len,
				      "bad magic 0x%08x (garbage or not a Verbs plugin peer)",
				      be32toh(w.magic));
	if (be16toh(w.version) < NV_WIRE_VERSION_MIN || be16toh(w.version) > NV_WIRE_VERSION)
		return nv_wire_reject(why, why_len, "peer speaks protocol version %u, ours is %u "
				      "(we also speak %u..%u)", be16toh(w.version), NV_WIRE_VERSION,
				      NV_WIRE_VERSION_MIN, NV_WIRE_VERSION);
	want = nv_wire_payload_size_v(be16toh(w.type), be16toh(w.version));
	if (!want)
		return nv_wire_reject(why, why_len, "unknown message type %u", be16toh(w.type));
	if (be32toh(w.len) != want)
		return nv_wire_reject(why, why_len, "message type %u has length %u, expected %u",
				      be16toh(w.type), be32toh(w.len), want);
	if (w.rsvd)
		return nv_wire_reject(why, why_len, "reserved header bytes are not zero");
	m->type = be16toh(w.type);
	m->version = be16toh(w.version);
	m->len = want;
	return NV_OK;
}

void nv_wire_hello_encode(const struct nv_hello *h, void *buf)
{
	struct nv_wire_hello w;

	memset(&w, 0, sizeof(w));
	memcpy(w.secret, h->secret, sizeof(w.secret));
	w.conn_id = htobe64(h->conn_id);
	memcpy(buf, &w, sizeof(w));
}

nv_status_t nv_wire_hello_decode(const void *buf, size_t len, struct nv_hello *h, char *why,
				 size_t why_len)
{
	struct nv_wire_hello w;

	if (!buf || len != sizeof(w))
		return nv_wire_reject(why, why_len, "hello has %zu bytes, expected %zu", len,
				      sizeof(w));
	memcpy(&w, buf, sizeof(w));
	if (w.rsvd)
		return nv_wire_reject(why, why_len, "reserved hello bytes are not zero");
	memcpy(h->secret, w.secret, sizeof(h->secret));
	h->conn_id = be64toh(w.conn_id);
	return NV_OK;
}

void nv_wire_status_encode(uint32_t code, void *buf)
{
	struct nv_wire_status_msg w = { .code = htobe32(code), .rsvd = 0 };

	memcpy(buf, &w, sizeof(w));
}

nv_status_t nv_wire_status_decode(const void *buf, size_t len, uint32_t *code, char *why,
				  size_t why_len)
{
	struct nv_wire_status_msg w;

	if (!buf || len != sizeof(w))
		return nv_wire_reject(why, why_len, "status has %zu bytes, expected %zu", len,
				      sizeof(w));
	memcpy(&w, buf, sizeof(w));
	if (be32toh(w.code) >= NV_WST_MAX_ || w.rsvd)
		return nv_wire_reject(why, why_len, "status code %u unknown", be32toh(w.code));
	*code = be32toh(w.code);
	return NV_OK;
}

static void nv_wire_meta_dev_encode(const struct nv_meta_dev *d, struct nv_wire_meta_dev *w)
{
	w->lid = htobe16(d->lid);
	w->port = d->port;
	w->mtu = d->mtu;
	w->link_layer = d->link_layer;
	w->gid_index = d->gid_index;
	memcpy(w->gid, d->gid, sizeof(w->gid));
	w->rkey = htobe32(d->rkey);
	memcpy(w->name, d->name, sizeof(w->name));
	w->name[sizeof(w->name) - 1] = '\0';
}

void nv_wire_meta_encode(const struct nv_meta *m, void *buf)
{
	struct nv_wire_meta *w = buf; /* packed: alignment 1 */
	int i;

	memset(w, 0, sizeof(*w));
	w->role = m->role;
	w->ndevs = m->ndevs;
	w->nqps = htobe16(m->nqps);
	w->sl = m->sl;
	w->tc = m->tc;
	w->little_endian = m->little_endian;
	w->split = m->split;
	w->addr = htobe64(m->addr);
	w->region_len = htobe32(m->region_len);
	w->probe_addr = htobe64(m->probe_addr);
	for (i = 0; i < m->ndevs && i < NV_WIRE_MAX_DEVS; i++)
		nv_wire_meta_dev_encode(&m->dev[i], &w->dev[i]);
	for (i = 0; i < m->nqps && i < NV_WIRE_MAX_QPS; i++) {
		w->qp[i].qpn = htobe32(m->qp[i].qpn);
		w->qp[i].dev = m->qp[i].dev;
		w->qp[i].ece_valid = m->qp[i].ece_valid;
		w->qp[i].ece_vendor_id = htobe32(m->qp[i].ece_vendor_id);
		w->qp[i].ece_options = htobe32(m->qp[i].ece_options);
		w->qp[i].ece_comp_mask = htobe32(m->qp[i].ece_comp_mask);
	}
	if (m->version >= 4) {
		struct nv_wire_meta_eager *x = (struct nv_wire_meta_eager *)(w + 1);

		memset(x, 0, sizeof(*x));
		x->ring_addr = htobe64(m->eager.ring_addr);
		x->ring_rkey = htobe32(m->eager.ring_rkey);
		x->max = htobe32(m->eager.max);
		x->entry = htobe32(m->eager.entry);
		x->slots = htobe16(m->eager.slots);
	}
}

/* The version-4 extension: a receiver's eager ring, checked against its fixed geometry. */
static nv_status_t nv_wire_meta_eager_decode(const struct nv_wire_meta_eager *x,
					     struct nv_meta *m, char *why, size_t why_len)
{
	struct nv_meta_eager *e = &m->eager;

	if (m->role != NV_META_ROLE_RECV || m->ndevs != 1 || m->nqps != 1)
		return nv_wire_reject(why, why_len, "eager ring offered by a %s with %u device(s) "
				      "and %u QP(s) (only a one-device one-QP receiver may)",
				      m->role == NV_META_ROLE_RECV ? "receiver" : "sender",
				      m->ndevs, m->nqps);
	if (x->rsvd0 || x->rsvd1)
		return nv_wire_reject(why, why_len, "eager reserved bytes are not zero");
	e->ring_addr = be64toh(x->ring_addr);
	e->ring_rkey = be32toh(x->ring_rkey);
	e->max = be32toh(x->max);
	e->entry = be32toh(x->entry);
	e->slots = be16toh(x->slots);
	if (e->max < 1 || e->max > NV_EAGER_LIMIT || e->entry != NV_EAGER_ENTRY(e->max) ||
	    e->slots != NV_EAGER_SLOTS)
		return nv_wire_reject(why, why_len, "eager ring of %u entries of %u bytes for "
				      "messages of %u bytes: not the fixed geometry (%d entries of "
				      "NV_EAGER_ENTRY(max), max 1..%d)", e->slots, e->entry, e->max,
				      NV_EAGER_SLOTS, NV_EAGER_LIMIT);
	if (!e->ring_addr || (e->ring_addr & 63) || !e->ring_rkey ||
	    e->ring_addr + (uint64_t)e->slots * e->entry < e->ring_addr)
		return nv_wire_reject(why, why_len, "eager ring 0x%llx (rkey 0x%x) invalid",
				      (unsigned long long)e->ring_addr, e->ring_rkey);
	return NV_OK;
}

static nv_status_t nv_wire_meta_dev_decode(const struct nv_wire_meta_dev *w, int i,
					   struct nv_meta_dev *d, char *why, size_t why_len)
{
	size_t n = strnlen(w->name, sizeof(w->name));
	size_t k;

	if (n == 0 || n == sizeof(w->name))
		return nv_wire_reject(why, why_len, "device %d name empty or unterminated", i);
	for (k = 0; k < n; k++)
		if (!isgraph((unsigned char)w->name[k]))
			return nv_wire_reject(why, why_len, "device %d name not printable", i);
	if (!nv_wire_all_zero(w->name + n, sizeof(w->name) - n) || w->rsvd0 || w->rsvd1)
		return nv_wire_reject(why, why_len, "device %d reserved bytes not zero", i);
	if (w->port == 0 || w->mtu < 1 || w->mtu > 5)
		return nv_wire_reject(why, why_len, "device %d port %u / MTU code %u out of range",
				      i, w->port, w->mtu);
	if (w->link_layer != NV_WIRE_LL_IB && w->link_layer != NV_WIRE_LL_ETH)
		return nv_wire_reject(why, why_len, "device %d link layer %u unknown", i,
				      w->link_layer);
	if (w->link_layer == NV_WIRE_LL_IB &&
	    (be16toh(w->lid) == 0 || be16toh(w->lid) >= 0xc000))
		return nv_wire_reject(why, why_len, "device %d LID 0x%x is not a unicast LID", i,
				      be16toh(w->lid));
	if (w->link_layer == NV_WIRE_LL_ETH && nv_wire_all_zero(w->gid, sizeof(w->gid)))
		return nv_wire_reject(why, why_len, "device %d RoCE GID is all zero", i);
	if (w->rkey == 0)
		return nv_wire_reject(why, why_len, "device %d rkey is 0", i);
	d->lid = be16toh(w->lid);
	d->port = w->port;
	d->mtu = w->mtu;
	d->link_layer = w->link_layer;
	d->gid_index = w->gid_index;
	memcpy(d->gid, w->gid, sizeof(d->gid));
	d->rkey = be32toh(w->rkey);
	memcpy(d->name, w->name, sizeof(d->name));
	return NV_OK;
}

static nv_status_t nv_wire_meta_qps_decode(const struct nv_wire_meta *w, struct nv_meta *m,
					   char *why, size_t why_len)
{
	int i;

	for (i = 0; i < NV_WIRE_MAX_QPS; i++) {
		const struct nv_wire_meta_qp *q = &w->qp[i];

		if (i >= m->nqps) {
			if (!nv_wire_all_zero(q, sizeof(*q)))
				return nv_wire_reject(why, why_len, "unused QP slot %d not zero", i);
			continue;
		}
		if (be32toh(q->qpn) == 0 || be32toh(q->qpn) > 0xffffff)
			return nv_wire_reject(why, why_len, "QP %d number 0x%x out of range", i,
					      be32toh(q->qpn));
		if (q->dev >= m->ndevs || q->ece_valid > 1 || q->rsvd)
			return nv_wire_reject(why, why_len, "QP %d device %u (of %u) or flags invalid",
					      i, q->dev, m->ndevs);
		m->qp[i].qpn = be32toh(q->qpn);
		m->qp[i].dev = q->dev;
		m->qp[i].ece_valid = q->ece_valid;
		m->qp[i].ece_vendor_id = be32toh(q->ece_vendor_id);
		m->qp[i].ece_options = be32toh(q->ece_options);
		m->qp[i].ece_comp_mask = be32toh(q->ece_comp_mask);
	}
	return NV_OK;
}

static nv_status_t nv_wire_meta_head_decode(const struct nv_wire_meta *w, struct nv_meta *m,
					    char *why, size_t why_len)
{
	uint64_t end;

	if (w->role != NV_META_ROLE_SEND && w->role != NV_META_ROLE_RECV)
		return nv_wire_reject(why, why_len, "role %u unknown", w->role);
	if (w->ndevs < 1 || w->ndevs > NV_WIRE_MAX_DEVS)
		return nv_wire_reject(why, why_len, "device count %u out of 1..%d", w->ndevs,
				      NV_WIRE_MAX_DEVS);
	if (be16toh(w->nqps) < 1 || be16toh(w->nqps) > NV_WIRE_MAX_QPS)
		return nv_wire_reject(why, why_len, "QP count %u out of 1..%d", be16toh(w->nqps),
				      NV_WIRE_MAX_QPS);
	if (w->sl > 15)
		return nv_wire_reject(why, why_len, "service level %u out of 0..15", w->sl);
	if (w->little_endian > 1 || w->split > 1 || w->rsvd1)
		return nv_wire_reject(why, why_len, "flag or reserved bytes invalid");
	if (w->little_endian != (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__))
		return nv_wire_reject(why, why_len, "peer has the other byte order; unsupported");
	m->role = w->role;
	m->ndevs = w->ndevs;
	m->nqps = be16toh(w->nqps);
	m->sl = w->sl;
	m->tc = w->tc;
	m->little_endian = w->little_endian;
	m->split = w->split;
	m->addr = be64toh(w->addr);
	m->region_len = be32toh(w->region_len);
	m->probe_addr = be64toh(w->probe_addr);
	end = m->addr + m->region_len;
	if (m->addr == 0 || m->region_len < 8 || end < m->addr)
		return nv_wire_reject(why, why_len, "control region 0x%llx+%u invalid",
				      (unsigned long long)m->addr, m->region_len);
	if (m->probe_addr < m->addr || m->probe_addr > end - 8 || (m->probe_addr & 7))
		return nv_wire_reject(why, why_len, "probe word 0x%llx outside its region",
				      (unsigned long long)m->probe_addr);
	return NV_OK;
}

nv_status_t nv_wire_meta_decode(const void *buf, size_t len, struct nv_meta *m, char *why,
				size_t why_len)
{
	/* Packed: alignment 1, so reading the caller's buffer in place is fine. */
	const struct nv_wire_meta *pw = buf;
	nv_status_t st;
	int i;

	if (!buf || (len != sizeof(*pw) && len != NV_WIRE_META_SIZE_V4))
		return nv_wire_reject(why, why_len, "metadata has %zu bytes, expected %zu or %d",
				      len, sizeof(*pw), NV_WIRE_META_SIZE_V4);
	memset(m, 0, sizeof(*m));
	m->version = len == NV_WIRE_META_SIZE_V4 ? 4 : 3;
	st = nv_wire_meta_head_decode(pw, m, why, why_len);
	if (st != NV_OK)
		return st;
	for (i = 0; i < NV_WIRE_MAX_DEVS; i++) {
		if (i >= m->ndevs) {
			if (!nv_wire_all_zero(&pw->dev[i], sizeof(pw->dev[i])))
				return nv_wire_reject(why, why_len, "unused device slot %d not zero",
						      i);
			continue;
		}
		st = nv_wire_meta_dev_decode(&pw->dev[i], i, &m->dev[i], why, why_len);
		if (st != NV_OK)
			return st;
		if (m->dev[i].link_layer != m->dev[0].link_layer)
			return nv_wire_reject(why, why_len, "devices mix link layers");
	}
	st = nv_wire_meta_qps_decode(pw, m, why, why_len);
	if (st != NV_OK || m->version < 4)
		return st;
	return nv_wire_meta_eager_decode((const struct nv_wire_meta_eager *)(pw + 1), m, why,
					 why_len);
}

/* ---- the receiver's speeds (NCCL_IB_EVENT_BASED_LB_REMOTE) -------------------- */

struct nv_wire_lb {
	uint32_t magic;
	uint16_t version;
	uint16_t ndevs;
	uint32_t mbps[NV_WIRE_MAX_DEVS];
	uint64_t count;
} __attribute__((packed));
_Static_assert(sizeof(struct nv_wire_lb) == NV_WIRE_LB_SIZE, "speed buffer layout");
_Static_assert(offsetof(struct nv_wire_lb, count) == NV_WIRE_LB_COUNT_OFF &&
		       NV_WIRE_LB_COUNT_OFF % 8 == 0, "the count is last and 8-byte aligned");

void nv_wire_lb_encode(const struct nv_lb_speeds *v, void *buf)
{
	struct nv_wire_lb w;
	int d;

	memset(&w, 0, sizeof(w));
	w.magic = htobe32(NV_WIRE_LB_MAGIC);
	w.version = htobe16(NV_WIRE_LB_VERSION);
	w.ndevs = htobe16(v->ndevs);
	for (d = 0; d < NV_WIRE_MAX_DEVS; d++)
		w.mbps[d] = htobe32(d < v->ndevs ? v->mbps[d] : 0);
	w.count = htobe64(v->count);
	memcpy(buf, &w, sizeof(w));
}

int nv_wire_lb_decode(const void *buf, int rdevs, struct nv_lb_speeds *v, char *why,
		      size_t why_len)
{
	struct nv_wire_lb w;
	int d;

	memcpy(&w, buf, sizeof(w));
	if (be32toh(w.magic) != NV_WIRE_LB_MAGIC || be16toh(w.version) != NV_WIRE_LB_VERSION) {
		snprintf(why, why_len, "a speed buffer with magic 0x%08x version %u (want 0x%08x "
			 "version %u)", be32toh(w.magic), be16toh(w.version), NV_WIRE_LB_MAGIC,
			 NV_WIRE_LB_VERSION);
		return -1;
	}
	if (be16toh(w.ndevs) != rdevs) {
		snprintf(why, why_len, "speeds of %u devices (it has %d)", be16toh(w.ndevs), rdevs);
		return -1;
	}
	memset(v, 0, sizeof(*v));
	v->ndevs = (uint16_t)rdevs;
	for (d = 0; d < NV_WIRE_MAX_DEVS; d++) {
		uint32_t m = be32toh(w.mbps[d]);

		if (m > NV_WIRE_LB_MAX_MBPS || (d >= rdevs && m)) {
			snprintf(why, why_len, "a speed of %u Mb/s for its device %d", m, d);
			return -1;
		}
		v->mbps[d] = m;
	}
	v->count = be64toh(w.count);
	return 0;
}
