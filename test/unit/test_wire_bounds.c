/*
 * test_wire_bounds - every validated field of every wire message (src/wire.c:
 * handle, header, hello, status, metadata) at and beyond its bounds, with
 * hostile values patched into the BYTES of a valid encoding.
 *
 * Each row names a message, a byte offset and width (big-endian, as on the
 * wire), a value, and either "accepted" or the substring of the one reason
 * that must reject it. A value beyond a bound is chosen so that only the
 * check of that field can catch it, and the reason is pinned: removing any
 * one range check of wire.c makes its row fail (either the decode succeeds
 * or another check's reason appears). The accepted rows pin the bound
 * itself (an off-by-one in a check fails them).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "wire.h"

#include "nvtest.h"

enum msg { HANDLE, HDR, HELLO, STATUS, META_IB, META_FULL, META_ROCE };

#define DEV(i) (32 + 64 * (i))			/* meta device i */
#define QP(i) (32 + 64 * NV_WIRE_MAX_DEVS + 20 * (i))	/* meta QP i */
#define OK NULL

struct row {
	enum msg msg;
	unsigned off, width;
	uint64_t value;
	const char *reject;	/* OK: must decode; else a substring of the reason */
};

static const char *const msg_names[] = { "handle", "header", "hello", "status", "meta(IB, 2 devs, "
					 "4 QPs)", "meta(8 devs, 128 QPs)", "meta(RoCE)" };

static char why_storage[NV_WIRE_WHY_LEN];

static char *why_buf(void)
{
	return why_storage;
}

#define BE_LITTLE (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__)
#define ADDR 0x7f0000001000ull

static const struct row rows[] = {
	/* ---- handle: magic 0, version 4, family 6, ndevs 7, port 8, rsvd 10, scope 12, addr 16 */
	{ HANDLE, 0, 4, 0x4e564d32, "magic" },
	{ HANDLE, 4, 2, NV_WIRE_VERSION_BASE + 1, "protocol version" },
	{ HANDLE, 4, 2, NV_WIRE_VERSION_BASE - 1, "protocol version" },
	{ HANDLE, 6, 1, 6, OK },
	{ HANDLE, 6, 1, 5, "address family" },
	{ HANDLE, 6, 1, 0, "address family" },
	{ HANDLE, 10, 2, 1, "address family" },	/* reserved bytes */
	{ HANDLE, 7, 1, 1, OK },
	{ HANDLE, 7, 1, NV_WIRE_MAX_DEVS, OK },
	{ HANDLE, 7, 1, 0, "device count" },
	{ HANDLE, 7, 1, NV_WIRE_MAX_DEVS + 1, "device count" },
	{ HANDLE, 7, 1, 255, "device count" },
	{ HANDLE, 8, 2, 1, OK },
	{ HANDLE, 8, 2, 65535, OK },
	{ HANDLE, 8, 2, 0, "port is 0" },
	{ HANDLE, 20, 1, 1, "trailing bytes" },	/* IPv4: bytes 4..15 of addr must be 0 */
	{ HANDLE, 31, 1, 1, "trailing bytes" },
	/* ---- header: magic 0, version 4, type 6, len 8, rsvd 12 ------------------------- */
	{ HDR, 0, 4, 0, "magic" },
	{ HDR, 4, 2, NV_WIRE_VERSION + 1, "protocol version" },
	{ HDR, 4, 2, NV_WIRE_VERSION_MIN - 1, "protocol version" },
	{ HDR, 4, 2, 4, "length" },	/* a version-4 META is NV_WIRE_META_SIZE_V4 long */
	{ HDR, 6, 2, NV_MSG_HELLO, "length" },	/* a META's length with another type */
	{ HDR, 6, 2, 0, "unknown message type" },
	{ HDR, 6, 2, NV_MSG_STATUS + 1, "unknown message type" },
	{ HDR, 6, 2, 0xffff, "unknown message type" },
	{ HDR, 8, 4, NV_WIRE_META_SIZE - 1, "length" },
	{ HDR, 8, 4, NV_WIRE_META_SIZE + 1, "length" },
	{ HDR, 8, 4, 0xffffffff, "length" },
	{ HDR, 12, 4, 1, "reserved header" },
	/* ---- hello: secret 0, conn_id 32, rsvd 40 ------------------------------------- */
	{ HELLO, 32, 8, UINT64_MAX, OK },
	{ HELLO, 40, 8, 1, "reserved hello" },
	{ HELLO, 47, 1, 0x80, "reserved hello" },
	/* ---- status: code 0, rsvd 4 ---------------------------------------------------- */
	{ STATUS, 0, 4, NV_WST_MAX_ - 1, OK },
	{ STATUS, 0, 4, NV_WST_MAX_, "unknown" },
	{ STATUS, 0, 4, 0xffffffff, "unknown" },
	{ STATUS, 4, 4, 1, "unknown" },
	/* ---- metadata head: role 0, ndevs 1, nqps 2, sl 4, tc 5, le 6, split 7, addr 8,
	 *      region_len 16, rsvd 20, probe_addr 24 ------------------------------------ */
	{ META_IB, 0, 1, NV_META_ROLE_RECV, OK },
	{ META_IB, 0, 1, 0, "role" },
	{ META_IB, 0, 1, 3, "role" },
	{ META_FULL, 1, 1, NV_WIRE_MAX_DEVS + 1, "device count" },
	{ META_IB, 1, 1, 0, "device count" },
	{ META_IB, 1, 1, 1, "unused device slot 1" },	/* device 1 is filled */
	{ META_FULL, 2, 2, NV_WIRE_MAX_QPS + 1, "QP count" },
	{ META_IB, 2, 2, 0, "QP count" },
	{ META_IB, 4, 1, 15, OK },
	{ META_IB, 4, 1, 16, "service level" },
	{ META_IB, 4, 1, 255, "service level" },
	{ META_IB, 5, 1, 255, OK },
	{ META_IB, 6, 1, !BE_LITTLE, "byte order" },
	{ META_IB, 6, 1, 2, "flag or reserved" },
	{ META_IB, 7, 1, 0, OK },
	{ META_IB, 7, 1, 2, "flag or reserved" },
	{ META_IB, 20, 4, 1, "flag or reserved" },
	{ META_IB, 8, 8, 0, "control region" },
	{ META_IB, 16, 4, 8, "probe word" },	/* region too short for the probe word */
	{ META_IB, 16, 4, 7, "control region" },
	{ META_IB, 16, 4, 0, "control region" },
	{ META_IB, 8, 8, UINT64_MAX - 4096, "control region" },	/* end wraps */
	{ META_IB, 24, 8, ADDR, OK },				/* first word of the region */
	{ META_IB, 24, 8, ADDR - 8, "probe word" },
	{ META_IB, 24, 8, ADDR + 65536 - 8, OK },		/* last word */
	{ META_IB, 24, 8, ADDR + 65536, "probe word" },
	{ META_IB, 24, 8, ADDR + 4, "probe word" },		/* unaligned */
	/* ---- metadata device 0 (IB): lid 0, port 2, mtu 3, ll 4, gid_index 5, rsvd0 6,
	 *      gid 8, rkey 24, rsvd1 28, name 32 ---------------------------------------- */
	{ META_IB, DEV(0) + 0, 2, 1, OK },
	{ META_IB, DEV(0) + 0, 2, 0xbfff, OK },
	{ META_IB, DEV(0) + 0, 2, 0, "unicast LID" },
	{ META_IB, DEV(0) + 0, 2, 0xc000, "unicast LID" },
	{ META_IB, DEV(0) + 0, 2, 0xffff, "unicast LID" },
	{ META_IB, DEV(0) + 2, 1, 255, OK },
	{ META_IB, DEV(0) + 2, 1, 0, "MTU code" },
	{ META_IB, DEV(0) + 3, 1, 1, OK },
	{ META_IB, DEV(0) + 3, 1, 0, "MTU code" },
	{ META_IB, DEV(0) + 3, 1, 6, "MTU code" },
	{ META_IB, DEV(0) + 4, 1, 0, "link layer" },
	{ META_IB, DEV(0) + 4, 1, 3, "link layer" },
	{ META_IB, DEV(1) + 4, 1, NV_WIRE_LL_ETH, "mix link layers" },
	{ META_IB, DEV(0) + 6, 2, 1, "reserved bytes" },
	{ META_IB, DEV(0) + 28, 4, 1, "reserved bytes" },
	{ META_IB, DEV(0) + 24, 4, 1, OK },
	{ META_IB, DEV(0) + 24, 4, 0, "rkey is 0" },
	{ META_IB, DEV(0) + 32, 1, 0, "name empty" },
	{ META_IB, DEV(0) + 32 + 31, 1, 'x', "reserved bytes" },	/* after the NUL */
	{ META_IB, DEV(0) + 33, 1, ' ', "not printable" },
	{ META_IB, DEV(0) + 33, 1, 0x7f, "not printable" },
	{ META_IB, DEV(0) + 40, 1, 'x', "reserved bytes" },	/* garbage after the NUL */
	{ META_ROCE, DEV(0) + 0, 2, 0, OK },		/* RoCE: LID not used */
	{ META_ROCE, DEV(0) + 8, 8, 0, OK },		/* GID half zero: fine */
	/* (the all-zero RoCE GID row is built in test_roce_gid) */
	{ META_IB, DEV(2) + 10, 1, 1, "unused device slot" },
	{ META_IB, DEV(NV_WIRE_MAX_DEVS - 1) + 63, 1, 1, "unused device slot" },
	/* ---- metadata QPs: qpn 0, dev 4, ece_valid 5, rsvd 6, ece 8.. -------------------- */
	{ META_IB, QP(0) + 0, 4, 1, OK },
	{ META_IB, QP(0) + 0, 4, 0xffffff, OK },
	{ META_IB, QP(0) + 0, 4, 0, "number" },
	{ META_IB, QP(0) + 0, 4, 0x1000000, "number" },
	{ META_IB, QP(0) + 4, 1, 1, OK },
	{ META_IB, QP(0) + 4, 1, 2, "device 2 (of 2)" },
	{ META_IB, QP(0) + 4, 1, 255, "device 255" },
	{ META_IB, QP(0) + 5, 1, 0, OK },
	{ META_IB, QP(0) + 5, 1, 2, "flags invalid" },
	{ META_IB, QP(0) + 6, 2, 1, "flags invalid" },
	{ META_IB, QP(0) + 8, 4, 0xffffffff, OK },	/* ECE words: any value */
	{ META_IB, QP(4) + 0, 1, 1, "unused QP slot" },
	{ META_IB, QP(NV_WIRE_MAX_QPS - 1) + 19, 1, 1, "unused QP slot" },
	{ META_FULL, QP(NV_WIRE_MAX_QPS - 1) + 4, 1, NV_WIRE_MAX_DEVS - 1, OK },
	{ META_FULL, QP(NV_WIRE_MAX_QPS - 1) + 4, 1, NV_WIRE_MAX_DEVS, "device 8 (of 8)" },
};

static void fill_meta(struct nv_meta *m, int ndevs, int nqps, int ll)
{
	int i;

	memset(m, 0, sizeof(*m));
	m->role = NV_META_ROLE_SEND;
	m->ndevs = (uint8_t)ndevs;
	m->nqps = (uint16_t)nqps;
	m->little_endian = BE_LITTLE;
	m->addr = ADDR;
	m->region_len = 65536;
	m->probe_addr = ADDR + 128;
	for (i = 0; i < ndevs; i++) {
		m->dev[i].lid = (uint16_t)(1 + i);
		m->dev[i].port = 1;
		m->dev[i].mtu = 5;
		m->dev[i].link_layer = (uint8_t)ll;
		m->dev[i].gid[0] = 0xfe;
		m->dev[i].gid[15] = 1;
		m->dev[i].rkey = 0x100 + (uint32_t)i;
		snprintf(m->dev[i].name, sizeof(m->dev[i].name), "mlx5_%d", i);
	}
	for (i = 0; i < nqps; i++) {
		m->qp[i].qpn = 0x1000 + (uint32_t)i;
		m->qp[i].dev = (uint8_t)(i % ndevs);
	}
}

static size_t build(enum msg msg, uint8_t *buf)
{
	struct nv_handle h;
	struct nv_msg_hdr hd = { .type = NV_MSG_META, .len = NV_WIRE_META_SIZE };
	struct nv_hello he = { .conn_id = 1 };
	static struct nv_meta m;

	switch (msg) {
	case HANDLE:
		memset(&h, 0, sizeof(h));
		h.family = AF_INET;
		h.addr[0] = 127;
		h.addr[3] = 1;
		h.port = 4242;
		h.ndevs = 2;
		nv_wire_handle_encode(&h, buf);
		return NV_WIRE_HANDLE_SIZE;
	case HDR:
		nv_wire_hdr_encode(&hd, buf);
		return NV_WIRE_HDR_SIZE;
	case HELLO:
		nv_wire_hello_encode(&he, buf);
		return NV_WIRE_HELLO_SIZE;
	case STATUS:
		nv_wire_status_encode(NV_WST_OK, buf);
		return NV_WIRE_STATUS_SIZE;
	case META_IB:
		fill_meta(&m, 2, 4, NV_WIRE_LL_IB);
		break;
	case META_FULL:
		fill_meta(&m, NV_WIRE_MAX_DEVS, NV_WIRE_MAX_QPS, NV_WIRE_LL_IB);
		break;
	case META_ROCE:
		fill_meta(&m, 1, 1, NV_WIRE_LL_ETH);
		break;
	}
	nv_wire_meta_encode(&m, buf);
	return NV_WIRE_META_SIZE;
}

static nv_status_t decode(enum msg msg, const uint8_t *buf, size_t len)
{
	struct nv_handle h;
	struct nv_msg_hdr hd;
	struct nv_hello he;
	static struct nv_meta m;
	uint32_t code;

	switch (msg) {
	case HANDLE:
		return nv_wire_handle_decode(buf, len, &h, why_buf(), NV_WIRE_WHY_LEN);
	case HDR:
		return nv_wire_hdr_decode(buf, len, &hd, why_buf(), NV_WIRE_WHY_LEN);
	case HELLO:
		return nv_wire_hello_decode(buf, len, &he, why_buf(), NV_WIRE_WHY_LEN);
	case STATUS:
		return nv_wire_status_decode(buf, len, &code, why_buf(), NV_WIRE_WHY_LEN);
	default:
		return nv_wire_meta_decode(buf, len, &m, why_buf(), NV_WIRE_WHY_LEN);
	}
}

static void put_be(uint8_t *p, unsigned width, uint64_t v)
{
	unsigned i;

	for (i = 0; i < width; i++)
		p[i] = (uint8_t)(v >> (8 * (width - 1 - i)));
}

static int run_row(const struct row *r)
{
	static uint8_t buf[NV_WIRE_META_SIZE];
	size_t len = build(r->msg, buf);
	nv_status_t st;

	why_buf()[0] = '\0';
	put_be(buf + r->off, r->width, r->value);
	st = decode(r->msg, buf, len);
	if (!r->reject && st == NV_OK)
		return 0;
	if (r->reject && st == NV_ERR_REMOTE && strstr(why_buf(), r->reject))
		return 0;
	fprintf(stderr, "%s: byte %u (%u wide) = 0x%llx: expected %s%s, got %s \"%s\"\n",
		msg_names[r->msg], r->off, r->width, (unsigned long long)r->value,
		r->reject ? "rejection for " : "acceptance", r->reject ? r->reject : "",
		st == NV_OK ? "accepted" : "rejected", why_buf());
	return 1;
}

/* Rows that need more than one patched field. */
static void test_special(void)
{
	static uint8_t buf[NV_WIRE_META_SIZE];
	size_t len;
	int i;

	/* RoCE GID all zero: only the GID check rejects it */
	len = build(META_ROCE, buf);
	memset(buf + DEV(0) + 8, 0, 16);
	CHECK(decode(META_ROCE, buf, len) == NV_ERR_REMOTE && strstr(why_buf(), "GID is all zero"));
	/* a name filling all 32 bytes: no terminator */
	len = build(META_IB, buf);
	memset(buf + DEV(0) + 32, 'x', NV_WIRE_DEVNAME_LEN);
	CHECK(decode(META_IB, buf, len) == NV_ERR_REMOTE && strstr(why_buf(), "unterminated"));
	memset(buf + DEV(0) + 32 + NV_WIRE_DEVNAME_LEN - 1, 0, 1); /* 31 characters: fine */
	CHECK(decode(META_IB, buf, len) == NV_OK);
	/* IB: a zero GID is fine (LID-routed) */
	len = build(META_IB, buf);
	memset(buf + DEV(0) + 8, 0, 16);
	CHECK(decode(META_IB, buf, len) == NV_OK);
	/* 8 devices and 128 QPs, every slot used: at the bounds, accepted */
	len = build(META_FULL, buf);
	CHECK(decode(META_FULL, buf, len) == NV_OK);
	/* one device, one QP: the smallest */
	len = build(META_ROCE, buf);
	CHECK(decode(META_ROCE, buf, len) == NV_OK);
	/* exact lengths: every decoder refuses one byte less and one more */
	for (i = HANDLE; i <= META_IB; i++) {
		len = build((enum msg)i, buf);
		CHECK(decode((enum msg)i, buf, len - 1) == NV_ERR_REMOTE);
		if (i != HANDLE && i != HDR) /* those read a prefix of a longer buffer */
			CHECK(decode((enum msg)i, buf, len + 1) == NV_ERR_REMOTE);
	}
	/* an IPv6 handle may use all 16 address bytes */
	len = build(HANDLE, buf);
	buf[6] = 6;
	memset(buf + 16, 0xfe, 16);
	CHECK(decode(HANDLE, buf, len) == NV_OK);
}

int main(void)
{
	size_t i;
	int bad = 0;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		bad += run_row(&rows[i]);
	CHECK(bad == 0);
	test_special();
	printf("test_wire_bounds: %zu field rows, %d failed; %d check(s) failed\n",
	       sizeof(rows) / sizeof(rows[0]), bad, nvt_failures);
	return nvt_failures ? 1 : 0;
}
