/*
 * test_wire - handle and handshake message encode/decode: round trips,
 * and rejection of truncated, oversized, garbage and hostile input.
 */
#include "config.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "cts.h"
#include "wire.h"

#include "nvtest.h"

static char why[NV_WIRE_WHY_LEN];

static void test_handle(void)
{
	struct nv_handle h = { 0 }, d;
	uint8_t buf[128];
	int i;

	h.family = AF_INET;
	h.addr[0] = 10;
	h.addr[3] = 7;
	h.port = 41000;
	h.ndevs = 2;
	for (i = 0; i < NV_WIRE_SECRET_LEN; i++)
		h.secret[i] = (uint8_t)(i * 7 + 1);
	memset(buf, 0xee, sizeof(buf));
	nv_wire_handle_encode(&h, buf);
	CHECK(buf[NV_WIRE_HANDLE_SIZE] == 0xee); /* never writes past its size */
	CHECK(nv_wire_handle_decode(buf, NV_WIRE_HANDLE_SIZE, &d, why, sizeof(why)) == NV_OK);
	CHECK(d.family == AF_INET && d.port == 41000 && d.ndevs == 2 && !memcmp(d.addr, h.addr, 16));
	CHECK(nv_wire_secret_equal(d.secret, h.secret));
	CHECK(d.gids[0][0] == 0 && d.gids[1][15] == 0);
	h.gids[0][10] = h.gids[0][11] = 0xff; /* the listener's RoCE GIDs travel */
	h.gids[0][15] = 7;
	h.gids[1][0] = 0xfd;
	nv_wire_handle_encode(&h, buf);
	CHECK(nv_wire_handle_decode(buf, NV_WIRE_HANDLE_SIZE, &d, why, sizeof(why)) == NV_OK);
	CHECK(!memcmp(d.gids, h.gids, sizeof(h.gids)));
	memset(h.gids, 0, sizeof(h.gids));
	/* network byte order: the magic reads "NVM1" */
	CHECK(!memcmp(buf, "NVM1", 4));

	h.family = AF_INET6;
	memset(h.addr, 0, 16);
	h.addr[15] = 1;
	h.scope_id = 3;
	nv_wire_handle_encode(&h, buf);
	CHECK(nv_wire_handle_decode(buf, 128, &d, why, sizeof(why)) == NV_OK);
	CHECK(d.family == AF_INET6 && d.scope_id == 3 && d.addr[15] == 1);

	/* truncated */
	for (i = 0; i < NV_WIRE_HANDLE_SIZE; i++)
		CHECK(nv_wire_handle_decode(buf, (size_t)i, &d, why, sizeof(why)) == NV_ERR_REMOTE);
	CHECK(strstr(why, "truncated") != NULL);
	/* bad magic, version, family, port */
	buf[0] ^= 0xff;
	CHECK(nv_wire_handle_decode(buf, 128, &d, why, sizeof(why)) == NV_ERR_REMOTE);
	CHECK(strstr(why, "magic") != NULL);
	buf[0] ^= 0xff;
	buf[5] = 9;
	CHECK(nv_wire_handle_decode(buf, 128, &d, why, sizeof(why)) == NV_ERR_REMOTE);
	CHECK(strstr(why, "version") != NULL);
	buf[5] = NV_WIRE_VERSION_BASE;
	buf[6] = 5;
	CHECK(nv_wire_handle_decode(buf, 128, &d, why, sizeof(why)) == NV_ERR_REMOTE);
	buf[6] = 6;
	buf[7] = 0; /* device count */
	CHECK(nv_wire_handle_decode(buf, 128, &d, why, sizeof(why)) == NV_ERR_REMOTE);
	CHECK(strstr(why, "device count") != NULL);
	buf[7] = 9;
	CHECK(nv_wire_handle_decode(buf, 128, &d, why, sizeof(why)) == NV_ERR_REMOTE);
	buf[7] = 1;
	CHECK(nv_wire_handle_decode(buf, 128, &d, why, sizeof(why)) == NV_OK);
	buf[8] = buf[9] = 0;
	CHECK(nv_wire_handle_decode(buf, 128, &d, why, sizeof(why)) == NV_ERR_REMOTE);
	CHECK(nv_wire_handle_decode(NULL, 128, &d, why, sizeof(why)) == NV_ERR_REMOTE);
}

static void test_hdr(void)
{
	struct nv_msg_hdr m = { .type = NV_MSG_META, .len = NV_WIRE_META_SIZE }, d;
	uint8_t buf[NV_WIRE_HDR_SIZE];

	nv_wire_hdr_encode(&m, buf);
	CHECK(nv_wire_hdr_decode(buf, sizeof(buf), &d, why, sizeof(why)) == NV_OK);
	CHECK(d.type == NV_MSG_META && d.len == NV_WIRE_META_SIZE);
	CHECK(nv_wire_hdr_decode(buf, sizeof(buf) - 1, &d, why, sizeof(why)) == NV_ERR_REMOTE);

	/* oversized: a length that does not match the type is refused up front */
	m.len = 1u << 30;
	nv_wire_hdr_encode(&m, buf);
	CHECK(nv_wire_hdr_decode(buf, sizeof(buf), &d, why, sizeof(why)) == NV_ERR_REMOTE);
	CHECK(strstr(why, "length") != NULL);
	m.len = NV_WIRE_META_SIZE - 1;
	nv_wire_hdr_encode(&m, buf);
	CHECK(nv_wire_hdr_decode(buf, sizeof(buf), &d, why, sizeof(why)) == NV_ERR_REMOTE);
	/* unknown type */
	m.type = 77;
	m.len = 8;
	nv_wire_hdr_encode(&m, buf);
	CHECK(nv_wire_hdr_decode(buf, sizeof(buf), &d, why, sizeof(why)) == NV_ERR_REMOTE);
	CHECK(strstr(why, "unknown") != NULL);
	/* garbage: HTTP request */
	memcpy(buf, "GET / HTTP/1.1\r\n", 16);
	CHECK(nv_wire_hdr_decode(buf, sizeof(buf), &d, why, sizeof(why)) == NV_ERR_REMOTE);
	CHECK(strstr(why, "magic") != NULL);
}

static void test_hello_status(void)
{
	struct nv_hello h = { .conn_id = 0x1122334455667788ULL }, d;
	uint8_t buf[NV_WIRE_HELLO_SIZE];
	uint32_t code;

	memset(h.secret, 0xab, sizeof(h.secret));
	nv_wire_hello_encode(&h, buf);
	CHECK(nv_wire_hello_decode(buf, sizeof(buf), &d, why, sizeof(why)) == NV_OK);
	CHECK(d.conn_id == h.conn_id && nv_wire_secret_equal(d.secret, h.secret));
	d.secret[31] ^= 1;
	CHECK(!nv_wire_secret_equal(d.secret, h.secret));
	CHECK(nv_wire_hello_decode(buf, sizeof(buf) - 1, &d, why, sizeof(why)) != NV_OK);
	buf[NV_WIRE_HELLO_SIZE - 1] = 1; /* reserved */
	CHECK(nv_wire_hello_decode(buf, sizeof(buf), &d, why, sizeof(why)) != NV_OK);

	nv_wire_status_encode(NV_WST_LINK_MISMATCH, buf);
	CHECK(nv_wire_status_decode(buf, NV_WIRE_STATUS_SIZE, &code, why, sizeof(why)) == NV_OK);
	CHECK(code == NV_WST_LINK_MISMATCH);
	CHECK(strstr(nv_wire_status_str(code), "NCCL_IB_HCA") != NULL);
	nv_wire_status_encode(1000, buf);
	CHECK(nv_wire_status_decode(buf, NV_WIRE_STATUS_SIZE, &code, why, sizeof(why)) != NV_OK);
	CHECK(strcmp(nv_wire_status_str(1000), "unknown failure code") == 0);
}

static void fill_meta(struct nv_meta *m)
{
	int i;

	memset(m, 0, sizeof(*m));
	m->version = 3; /* what the decoder reports for a version-3 layout */
	m->role = NV_META_ROLE_SEND;
	m->ndevs = 2;
	m->nqps = 4;
	m->sl = 3;
	m->tc = 106;
	m->little_endian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
	m->split = 1;
	m->addr = 0x7f0000001000ULL;
	m->region_len = 65536;
	m->probe_addr = m->addr + 65536 - 8;
	for (i = 0; i < 2; i++) {
		m->dev[i].lid = (uint16_t)(5 + i);
		m->dev[i].port = 1;
		m->dev[i].mtu = 5;
		m->dev[i].link_layer = NV_WIRE_LL_IB;
		m->dev[i].gid[0] = 0xfe;
		m->dev[i].rkey = 0x1234 + (uint32_t)i;
		snprintf(m->dev[i].name, sizeof(m->dev[i].name), "simib%d", i);
	}
	for (i = 0; i < 4; i++) {
		m->qp[i].qpn = 0x100 + (uint32_t)i;
		m->qp[i].dev = (uint8_t)(i % 2);
		m->qp[i].ece_valid = 1;
		m->qp[i].ece_vendor_id = 0x15b3;
		m->qp[i].ece_options = 0x30000000u + (uint32_t)i;
	}
}

static nv_status_t meta_roundtrip(const struct nv_meta *m, struct nv_meta *d)
{
	static uint8_t buf[NV_WIRE_META_SIZE + 1];

	nv_wire_meta_encode(m, buf);
	return nv_wire_meta_decode(buf, NV_WIRE_META_SIZE, d, why, sizeof(why));
}

static void test_meta(void)
{
	static uint8_t buf[NV_WIRE_META_SIZE + 16];
	static struct nv_meta m, d;
	size_t i;

	fill_meta(&m);
	CHECK(meta_roundtrip(&m, &d) == NV_OK);
	CHECK(!memcmp(&m, &d, sizeof(m)));

	nv_wire_meta_encode(&m, buf);
	CHECK(nv_wire_meta_decode(buf, NV_WIRE_META_SIZE + 1, &d, why, sizeof(why)) != NV_OK);
	for (i = 0; i < NV_WIRE_META_SIZE; i += 97)
		CHECK(nv_wire_meta_decode(buf, i, &d, why, sizeof(why)) != NV_OK);

	/* Each hostile field, one at a time. */
#define HOSTILE(stmt, word)                                                   \
	do {                                                                  \
		fill_meta(&m);                                                \
		stmt;                                                         \
		CHECK(meta_roundtrip(&m, &d) == NV_ERR_REMOTE);               \
		CHECK(strstr(why, word) != NULL);                             \
	} while (0)
	HOSTILE(m.role = 9, "role");
	HOSTILE(m.ndevs = 0, "device count");
	HOSTILE(m.ndevs = 9, "device count");
	HOSTILE(m.nqps = 0, "QP count");
	HOSTILE(m.nqps = 129, "QP count");
	HOSTILE(m.sl = 16, "service level");
	HOSTILE(m.little_endian = !m.little_endian, "byte order");
	HOSTILE(m.split = 2, "flag");
	HOSTILE(m.addr = 0, "control region");
	HOSTILE(m.addr = ~0ULL - 10, "control region");
	HOSTILE(m.probe_addr = m.addr + m.region_len, "probe");
	HOSTILE(m.probe_addr = m.addr - 8, "probe");
	HOSTILE(m.dev[1].mtu = 6, "MTU");
	HOSTILE(m.dev[0].port = 0, "port");
	HOSTILE(m.dev[1].link_layer = 3, "link layer");
	HOSTILE(m.dev[1].link_layer = NV_WIRE_LL_ETH, "mix");
	HOSTILE(m.dev[0].lid = 0, "LID");
	HOSTILE(m.dev[0].lid = 0xc001, "LID");
	HOSTILE(m.dev[0].rkey = 0, "rkey");
	HOSTILE(m.dev[0].name[0] = 0, "name");
	HOSTILE(m.dev[0].name[2] = '\n', "printable");
	HOSTILE(m.qp[3].qpn = 0, "QP 3");
	HOSTILE(m.qp[3].qpn = 0x1000000, "QP 3");
	HOSTILE(m.qp[2].dev = 2, "QP 2");
	HOSTILE(m.qp[2].ece_valid = 2, "QP 2");
	/* RoCE with an all-zero GID */
	HOSTILE((m.dev[0].link_layer = m.dev[1].link_layer = NV_WIRE_LL_ETH,
		 memset(m.dev[0].gid, 0, 16)), "GID");

	/* Garbage in slots beyond the counts (the encoder never writes those). */
	fill_meta(&m);
	nv_wire_meta_encode(&m, buf);
	buf[32 + 3 * 64 + 5] = 1; /* dev slot 3 */
	CHECK(nv_wire_meta_decode(buf, NV_WIRE_META_SIZE, &d, why, sizeof(why)) != NV_OK);
	CHECK(strstr(why, "unused device") != NULL);
	nv_wire_meta_encode(&m, buf);
	memset(buf + 32 + 32, 'x', NV_WIRE_DEVNAME_LEN); /* dev 0 name without NUL */
	CHECK(nv_wire_meta_decode(buf, NV_WIRE_META_SIZE, &d, why, sizeof(why)) != NV_OK);
	CHECK(strstr(why, "unterminated") != NULL);
	nv_wire_meta_encode(&m, buf);
	buf[NV_WIRE_META_SIZE - 1] = 1; /* qp slot 127 */
	CHECK(nv_wire_meta_decode(buf, NV_WIRE_META_SIZE, &d, why, sizeof(why)) != NV_OK);
	CHECK(strstr(why, "unused QP") != NULL);

	/* Random garbage never decodes (and never crashes). */
	srand(1);
	for (i = 0; i < 2000; i++) {
		size_t k;

		for (k = 0; k < NV_WIRE_META_SIZE; k++)
			buf[k] = (uint8_t)rand();
		CHECK(nv_wire_meta_decode(buf, NV_WIRE_META_SIZE, &d, why, sizeof(why)) != NV_OK);
	}
	/* Random single-byte corruption of a valid message: decodes or refuses, never crashes. */
	for (i = 0; i < 5000; i++) {
		fill_meta(&m);
		nv_wire_meta_encode(&m, buf);
		buf[(size_t)rand() % NV_WIRE_META_SIZE] ^= (uint8_t)(1 + rand() % 255);
		(void)nv_wire_meta_decode(buf, NV_WIRE_META_SIZE, &d, why, sizeof(why));
	}
}

/* Version 4: a one-device one-QP receiver's META with its eager ring. */
static void test_meta_eager(void)
{
	static uint8_t buf[NV_WIRE_META_SIZE_V4];
	static struct nv_meta m, d;
	struct nv_msg_hdr h = { .type = NV_MSG_META, .version = 4, .len = NV_WIRE_META_SIZE_V4 }, hd;
	uint8_t hb[NV_WIRE_HDR_SIZE];
	uint8_t *x = buf + NV_WIRE_META_SIZE; /* the extension */
	size_t i;

	fill_meta(&m);
	m.role = NV_META_ROLE_RECV;
	m.ndevs = 1;
	m.nqps = 1;
	memset(&m.dev[1], 0, sizeof(m.dev[1]));
	memset(&m.qp[1], 0, 3 * sizeof(m.qp[1]));
	m.qp[0].dev = 0;
	m.split = 0;
	m.version = 4;
	m.eager.ring_addr = 0x7f0000200000ULL;
	m.eager.ring_rkey = 0x4321;
	m.eager.max = 4096;
	m.eager.entry = NV_EAGER_ENTRY(4096);
	m.eager.slots = NV_EAGER_SLOTS;
	CHECK(NV_EAGER_ENTRY(4096) == 4160 && NV_EAGER_ENTRY(0) == 64 && NV_EAGER_ENTRY(48) == 64);
	nv_wire_meta_encode(&m, buf);
	CHECK(nv_wire_meta_decode(buf, sizeof(buf), &d, why, sizeof(why)) == NV_OK);
	CHECK(!memcmp(&m, &d, sizeof(m)));
	/* the version-3 prefix alone: no eager */
	CHECK(nv_wire_meta_decode(buf, NV_WIRE_META_SIZE, &d, why, sizeof(why)) == NV_OK);
	CHECK(d.version == 3 && d.eager.max == 0);
	/* the header tells which length a META has */
	nv_wire_hdr_encode(&h, hb);
	CHECK(nv_wire_hdr_decode(hb, sizeof(hb), &hd, why, sizeof(why)) == NV_OK);
	CHECK(hd.version == 4 && hd.len == NV_WIRE_META_SIZE_V4);
	CHECK(nv_wire_payload_size_v(NV_MSG_META, 3) == NV_WIRE_META_SIZE);
	CHECK(nv_wire_payload_size_v(NV_MSG_STATUS, 4) == NV_WIRE_STATUS_SIZE);
	/* every byte of geometry and reserved fields is checked, and the ring's alignment */
	for (i = 7; i < NV_WIRE_META_EAGER_SIZE; i += i == 7 ? 5 : 1) {
		uint8_t save = x[i];

		x[i] ^= 0x41;
		CHECK(nv_wire_meta_decode(buf, sizeof(buf), &d, why, sizeof(why)) != NV_OK);
		x[i] = save;
	}
	/* only a receiver of one device and one QP may offer a ring */
	m.role = NV_META_ROLE_SEND;
	nv_wire_meta_encode(&m, buf);
	CHECK(nv_wire_meta_decode(buf, sizeof(buf), &d, why, sizeof(why)) != NV_OK);
	CHECK(strstr(why, "eager ring offered") != NULL);
	m.role = NV_META_ROLE_RECV;
	m.eager.max = NV_EAGER_LIMIT + 1;
	m.eager.entry = NV_EAGER_ENTRY(m.eager.max);
	nv_wire_meta_encode(&m, buf);
	CHECK(nv_wire_meta_decode(buf, sizeof(buf), &d, why, sizeof(why)) != NV_OK);
	m.eager.max = 64;
	m.eager.entry = NV_EAGER_ENTRY(64);
	m.eager.ring_addr = UINT64_MAX & ~63ULL; /* wraps */
	nv_wire_meta_encode(&m, buf);
	CHECK(nv_wire_meta_decode(buf, sizeof(buf), &d, why, sizeof(why)) != NV_OK);
	m.eager.ring_addr = 0x7f0000200000ULL;
	m.eager.ring_rkey = 0;
	nv_wire_meta_encode(&m, buf);
	CHECK(nv_wire_meta_decode(buf, sizeof(buf), &d, why, sizeof(why)) != NV_OK);
}

/* Ring trailers the peer wrote: arrival by sequence, size within the limit. */
static void test_eager_trailer(void)
{
	struct nv_eager_trailer t = { .size = 8, .tag = 3, .seq = 11 };
	char w[160];

	CHECK(nv_eager_trailer_check(&t, 10, 4096, w, sizeof(w)) == 1);
	CHECK(nv_eager_trailer_check(&t, 11, 4096, w, sizeof(w)) == 0); /* an older one */
	CHECK(nv_eager_trailer_check(&t, 42, 4096, w, sizeof(w)) == 0);
	t.size = 4097;
	CHECK(nv_eager_trailer_check(&t, 10, 4096, w, sizeof(w)) == -1);
	CHECK(strstr(w, "4097 bytes") && strstr(w, "limit of 4096"));
	CHECK(nv_eager_trailer_check(&t, 10, 4096, NULL, 0) == -1);
	t.size = 0;
	CHECK(nv_eager_trailer_check(&t, 10, 4096, NULL, 0) == 1);
	t.size = UINT32_MAX;
	CHECK(nv_eager_trailer_check(&t, 10, NV_EAGER_LIMIT, NULL, 0) == -1);
}

/* NCCL_IB_EVENT_BASED_LB_REMOTE's speed buffer: layout, byte order and every rejection. */
static void test_lb_speeds(void)
{
	static const uint8_t want[NV_WIRE_LB_SIZE] = {
		0x4e, 0x56, 0x4c, 0x42, 0, 1, 0, 2,		/* "NVLB", version 1, 2 devices */
		0, 0, 0x9c, 0x40, 0, 0, 0x4e, 0x20,		/* 40000, 20000 Mb/s */
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 7,				/* count 7, last */
	};
	struct nv_lb_speeds v = { .ndevs = 2, .mbps = { 40000, 20000 }, .count = 7 }, out;
	uint8_t buf[NV_WIRE_LB_SIZE];
	char reason[160];

	nv_wire_lb_encode(&v, buf);
	CHECK(memcmp(buf, want, sizeof(want)) == 0);
	CHECK(nv_wire_lb_decode(buf, 2, &out, reason, sizeof(reason)) == 0);
	CHECK(out.ndevs == 2 && out.mbps[0] == 40000 && out.mbps[1] == 20000 && out.count == 7);
	CHECK(nv_wire_lb_decode(buf, 3, &out, reason, sizeof(reason)) == -1 && strstr(reason, "2 devices"));
	buf[5] = 2; /* version 2 */
	CHECK(nv_wire_lb_decode(buf, 2, &out, reason, sizeof(reason)) == -1 && strstr(reason, "version 2"));
	buf[5] = 1;
	buf[0] ^= 1;
	CHECK(nv_wire_lb_decode(buf, 2, &out, reason, sizeof(reason)) == -1 && strstr(reason, "magic"));
	buf[0] ^= 1;
	buf[16] = 1; /* a speed for device 2 of 2 */
	CHECK(nv_wire_lb_decode(buf, 2, &out, reason, sizeof(reason)) == -1 && strstr(reason, "device 2"));
	buf[16] = 0;
	buf[8] = 0xff; /* device 0 above 100 Tb/s */
	CHECK(nv_wire_lb_decode(buf, 2, &out, reason, sizeof(reason)) == -1 && strstr(reason, "device 0"));
}

int main(void)
{
	test_handle();
	test_hdr();
	test_hello_status();
	test_meta();
	test_meta_eager();
	test_eager_trailer();
	test_lb_speeds();
	return nvt_exit("test_wire");
}
