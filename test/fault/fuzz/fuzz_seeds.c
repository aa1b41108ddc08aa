/*
 * fuzz_seeds - writes the seed corpus of the wire fuzzers: valid encodings
 * of every message (as the plugin sends them) plus a few near misses.
 * Usage: fuzz_seeds <corpus-dir>   (creates <dir>/<target>/seed-*)
 * Build: see test/fault/fuzz.sh --seeds.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "cts.h"
#include "fo_msg.h"
#include "wire.h"

static const char *root;

static void put(const char *target, const char *name, const void *buf, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, target);
	if (mkdir(path, 0755) && errno != EEXIST)
		perror(path);
	snprintf(path, sizeof(path), "%s/%s/%s", root, target, name);
	f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, len, f) != len)
		perror(path);
	if (f)
		fclose(f);
}

static void meta_example(struct nv_meta *m, int role, int ll, int ndevs, int nqps)
{
	int i;

	memset(m, 0, sizeof(*m));
	m->role = (uint8_t)role;
	m->ndevs = (uint8_t)ndevs;
	m->nqps = (uint16_t)nqps;
	m->sl = 3;
	m->tc = 106;
	m->little_endian = 1;
	m->split = nqps > 1;
	m->addr = 0x7f1234560000ull;
	m->region_len = 4096 + 64;
	m->probe_addr = m->addr + 4096;
	for (i = 0; i < ndevs; i++) {
		struct nv_meta_dev *d = &m->dev[i];

		d->lid = ll == NV_WIRE_LL_IB ? (uint16_t)(1 + i) : 0;
		d->port = 1;
		d->mtu = 5;
		d->link_layer = (uint8_t)ll;
		d->gid_index = ll == NV_WIRE_LL_IB ? 0 : 3;
		d->gid[0] = 0xfe;
		d->gid[1] = 0x80;
		d->gid[10] = d->gid[11] = 0xff;
		d->gid[12] = 127;
		d->gid[15] = (uint8_t)(1 + i);
		d->rkey = 0x1100u + (uint32_t)i;
		snprintf(d->name, sizeof(d->name), "%s%d", ll == NV_WIRE_LL_IB ? "mlx5_" : "roce", i);
	}
	for (i = 0; i < nqps; i++) {
		m->qp[i].qpn = 0x8000u + (uint32_t)i;
		m->qp[i].dev = (uint8_t)(i % ndevs);
		m->qp[i].ece_valid = i & 1;
		m->qp[i].ece_vendor_id = 0x15b3;
		m->qp[i].ece_options = 0x30000000;
	}
}

/* A receiver's version-4 META with its eager ring (one device, one QP). */
static void meta_eager_example(struct nv_meta *m, uint32_t max)
{
	meta_example(m, NV_META_ROLE_RECV, NV_WIRE_LL_IB, 1, 1);
	m->version = 4;
	m->eager.ring_addr = 0x7f2000000000ull;
	m->eager.ring_rkey = 0x2200;
	m->eager.max = max;
	m->eager.entry = NV_EAGER_ENTRY(max);
	m->eager.slots = NV_EAGER_SLOTS;
}

/* The eager path's seeds: ring trailers and credit (eager.h). */
static void eager_seeds(void)
{
	struct nv_eager_trailer t = { .size = 100, .tag = 7, .seq = 42 };
	uint8_t b[12 + sizeof(struct nv_cts_entry)];
	struct nv_cts_entry e;
	uint64_t seq = 41, head = 1000, word = 1020;
	uint32_t max = 8191; /* as 1 + value % NV_EAGER_LIMIT: 8192 */

	/* trailer: expected sequence, eager limit, trailer */
	memcpy(b, &seq, 8);
	memcpy(b + 8, &max, 4);
	memcpy(b + 12, &t, sizeof(t));
	put("eager", "seed-arrived", b, 12 + sizeof(t));
	t.size = 9000;
	memcpy(b + 12, &t, sizeof(t));
	put("eager", "seed-too-big", b, 12 + sizeof(t));
	t.seq = 10;
	memcpy(b + 12, &t, sizeof(t));
	put("eager", "seed-older", b, 12 + sizeof(t));

	/* credit: head, grant now, credit word, CTS entry 0 with its grant */
	memset(&e, 0, sizeof(e));
	e.addr = 0x7f0000100000ull;
	e.size = 4096;
	e.rkey[0] = 0x1234;
	e.eager.grant = 20;
	e.tag = 3;
	e.nreqs = 1;
	e.seq = 1005 + 1;
	{
		uint8_t c[17 + sizeof(e)];

		memcpy(c, &head, 8);
		c[8] = 2 * NV_CTS_GRANT_MAX;
		memcpy(c + 9, &word, 8);
		memcpy(c + 17, &e, sizeof(e));
		put("credit", "seed-word-and-cts", c, sizeof(c));
		word = 0;
		memcpy(c + 9, &word, 8);
		put("credit", "seed-cts", c, sizeof(c));
	}
}

/* A failover round: a receiver's STATE with its open receives, and READY (fo_msg.h). */
static void fo_seeds(void)
{
	static uint8_t b[1 + NV_FO_HDR_SIZE + NV_FO_PAYLOAD_MAX];
	struct nv_cts_entry e[2];
	struct nv_fo_hdr h = { .type = NV_FO_MSG_STATE, .epoch = 1, .dead = 1, .head = 52 };
	uint32_t len = 0;
	int i;

	b[0] = 1; /* the receiver has 2 devices */
	memset(e, 0, sizeof(e));
	for (i = 0; i < 2; i++) {
		e[i].addr = 0x7f0000200000ull + (uint64_t)i * 0x10000;
		e[i].size = 65536;
		e[i].rkey[0] = 0x100 + (uint32_t)i;
		e[i].rkey[1] = 0x200 + (uint32_t)i;
		e[i].tag = (uint32_t)i;
		e[i].nreqs = 2;
		e[i].seq = 50 + 1;
	}
	nv_fo_rec_encode(b + 1 + NV_FO_HDR_SIZE, &len, 50, 2, e);
	e[0].nreqs = 1;
	e[0].seq = 51 + 1;
	nv_fo_rec_encode(b + 1 + NV_FO_HDR_SIZE, &len, 51, 1, e);
	h.nrec = 2;
	h.len = len;
	nv_fo_hdr_encode(&h, b + 1);
	put("fo", "seed-state", b, 1 + NV_FO_HDR_SIZE + len);
	memset(&h, 0, sizeof(h));
	h.type = NV_FO_MSG_STATE;
	h.suspect = 2;
	h.epoch = 3;
	h.head = 7;
	nv_fo_hdr_encode(&h, b + 1);
	put("fo", "seed-state-sender", b, 1 + NV_FO_HDR_SIZE);
	h.type = NV_FO_MSG_READY;
	h.suspect = 0;
	nv_fo_hdr_encode(&h, b + 1);
	put("fo", "seed-ready", b, 1 + NV_FO_HDR_SIZE);
}

/* The receiver's speed buffer (fuzz_lb: the device count byte, then the buffer). */
static void lb_seeds(void)
{
	struct nv_lb_speeds v = { .ndevs = 2, .mbps = { 400000, 200000 }, .count = 3 };
	uint8_t b[1 + NV_WIRE_LB_SIZE];

	b[0] = 1; /* two devices */
	nv_wire_lb_encode(&v, b + 1);
	put("lb", "seed-two", b, sizeof(b));
	v.ndevs = 8;
	for (int i = 0; i < 8; i++)
		v.mbps[i] = i == 5 ? 0 : 100000u * (uint32_t)(i + 1);
	b[0] = 7;
	nv_wire_lb_encode(&v, b + 1);
	put("lb", "seed-eight", b, sizeof(b));
	b[0] = 6; /* a near miss: eight speeds from a writer of seven devices */
	put("lb", "seed-count-miss", b, sizeof(b));
}

int main(int argc, char **argv)
{
	static uint8_t meta_buf[NV_WIRE_META_SIZE_V4];
	static uint8_t stream[3 * NV_WIRE_HDR_SIZE + NV_WIRE_HELLO_SIZE + NV_WIRE_META_SIZE_V4 +
			      NV_WIRE_STATUS_SIZE];
	uint8_t buf[128];
	struct nv_handle h;
	struct nv_msg_hdr m = { 0 };
	struct nv_hello hello;
	struct nv_meta meta;
	size_t off;
	int i;

	if (argc != 2) {
		fprintf(stderr, "usage: %s <corpus-dir>\n", argv[0]);
		return 2;
	}
	root = argv[1];

	memset(&h, 0, sizeof(h));
	h.family = AF_INET;
	inet_pton(AF_INET, "10.1.2.3", h.addr);
	h.port = 40123;
	h.ndevs = 1;
	for (i = 0; i < NV_WIRE_SECRET_LEN; i++)
		h.secret[i] = (uint8_t)(i * 37 + 1);
	nv_wire_handle_encode(&h, buf);
	put("handle", "seed-v4", buf, NV_WIRE_HANDLE_SIZE);
	h.family = AF_INET6;
	inet_pton(AF_INET6, "fe80::1:2", h.addr);
	h.scope_id = 2;
	h.ndevs = 2;
	nv_wire_handle_encode(&h, buf);
	put("handle", "seed-v6", buf, NV_WIRE_HANDLE_SIZE);
	memset(buf + NV_WIRE_HANDLE_SIZE, 0, sizeof(buf) - NV_WIRE_HANDLE_SIZE);
	put("handle", "seed-ncclbuf", buf, 128); /* as NCCL's 128-byte buffer */

	for (i = NV_MSG_HELLO; i <= NV_MSG_STATUS; i++) {
		char name[32];

		m.type = (uint16_t)i;
		m.len = nv_wire_payload_size((uint16_t)i);
		nv_wire_hdr_encode(&m, buf);
		snprintf(name, sizeof(name), "seed-type%d", i);
		put("hdr", name, buf, NV_WIRE_HDR_SIZE);
	}
	m.type = NV_MSG_META; /* a receiver's META with its eager ring */
	m.version = 4;
	m.len = NV_WIRE_META_SIZE_V4;
	nv_wire_hdr_encode(&m, buf);
	put("hdr", "seed-type2-v4", buf, NV_WIRE_HDR_SIZE);
	m.version = 0;

	memcpy(hello.secret, h.secret, sizeof(hello.secret));
	hello.conn_id = 0x5566778899aabbccull;
	nv_wire_hello_encode(&hello, buf);
	put("hello", "seed", buf, NV_WIRE_HELLO_SIZE);

	for (i = 0; i < NV_WST_MAX_; i++) {
		char name[32];

		nv_wire_status_encode((uint32_t)i, buf);
		snprintf(name, sizeof(name), "seed-%d", i);
		put("status", name, buf, NV_WIRE_STATUS_SIZE);
	}

	meta_example(&meta, NV_META_ROLE_SEND, NV_WIRE_LL_IB, 1, 1);
	nv_wire_meta_encode(&meta, meta_buf);
	put("meta", "seed-ib-1", meta_buf, NV_WIRE_META_SIZE);
	meta_example(&meta, NV_META_ROLE_RECV, NV_WIRE_LL_ETH, 2, 4);
	nv_wire_meta_encode(&meta, meta_buf);
	put("meta", "seed-roce-2x4", meta_buf, NV_WIRE_META_SIZE);
	meta_example(&meta, NV_META_ROLE_SEND, NV_WIRE_LL_IB, 8, 128);
	nv_wire_meta_encode(&meta, meta_buf);
	put("meta", "seed-ib-8x128", meta_buf, NV_WIRE_META_SIZE);
	meta_eager_example(&meta, 8192);
	nv_wire_meta_encode(&meta, meta_buf);
	put("meta", "seed-recv-eager", meta_buf, NV_WIRE_META_SIZE_V4);

	/* A connector's first flight (hello + meta), then a status. */
	off = 0;
	m.type = NV_MSG_HELLO;
	m.len = NV_WIRE_HELLO_SIZE;
	nv_wire_hdr_encode(&m, stream + off);
	nv_wire_hello_encode(&hello, stream + off + NV_WIRE_HDR_SIZE);
	off += NV_WIRE_HDR_SIZE + NV_WIRE_HELLO_SIZE;
	meta_example(&meta, NV_META_ROLE_SEND, NV_WIRE_LL_ETH, 1, 2);
	m.type = NV_MSG_META;
	m.len = NV_WIRE_META_SIZE;
	nv_wire_hdr_encode(&m, stream + off);
	nv_wire_meta_encode(&meta, stream + off + NV_WIRE_HDR_SIZE);
	off += NV_WIRE_HDR_SIZE + NV_WIRE_META_SIZE;
	m.type = NV_MSG_STATUS;
	m.len = NV_WIRE_STATUS_SIZE;
	nv_wire_hdr_encode(&m, stream + off);
	nv_wire_status_encode(NV_WST_PROBE_FAILED, stream + off + NV_WIRE_HDR_SIZE);
	off += NV_WIRE_HDR_SIZE + NV_WIRE_STATUS_SIZE;
	put("stream", "seed-connector", stream, off);

	/* A listener's answer to an eager sender: its version-4 META, then a status. */
	off = 0;
	meta_eager_example(&meta, 4096);
	m.type = NV_MSG_META;
	m.version = 4;
	m.len = NV_WIRE_META_SIZE_V4;
	nv_wire_hdr_encode(&m, stream + off);
	nv_wire_meta_encode(&meta, stream + off + NV_WIRE_HDR_SIZE);
	off += NV_WIRE_HDR_SIZE + NV_WIRE_META_SIZE_V4;
	m.type = NV_MSG_STATUS;
	m.version = 0;
	m.len = NV_WIRE_STATUS_SIZE;
	nv_wire_hdr_encode(&m, stream + off);
	nv_wire_status_encode(0, stream + off + NV_WIRE_HDR_SIZE);
	off += NV_WIRE_HDR_SIZE + NV_WIRE_STATUS_SIZE;
	put("stream", "seed-listener-eager", stream, off);

	/* A ready slot of 3 grouped receives (seq 41 -> entries carry 42), 2 devices. */
	{
		struct nv_cts_entry e[3];
		uint8_t cbuf[9 + sizeof(e)];
		uint64_t seq = 41;
		int32_t recs[1 + 2 * NV_CTS_MAX_RECVS];

		memset(e, 0, sizeof(e));
		for (i = 0; i < 3; i++) {
			e[i].addr = 0x7f0000100000ull + (uint64_t)i * 0x10000;
			e[i].size = i == 2 ? 0 : 4096u << i;
			e[i].rkey[0] = 0x1234 + (uint32_t)i;
			e[i].rkey[1] = 0x5678 + (uint32_t)i;
			e[i].tag = 7 + (uint32_t)i;
			e[i].nreqs = 3;
			e[i].seq = seq + 1;
		}
		memcpy(cbuf, &seq, 8);
		cbuf[8] = 1; /* rdevs 2 */
		memcpy(cbuf + 9, e, sizeof(e));
		put("cts", "seed-slot3", cbuf, sizeof(cbuf));
		put("cts", "seed-slot1", cbuf, 9 + sizeof(e[0]));
		/* records: n = 3, (reported, capacity) pairs */
		((uint8_t *)recs)[0] = 3;
		{
			uint8_t rb[1 + 3 * 8];
			int32_t v[6] = { 100, 4096, 0, 8192, 8192, 8192 };

			rb[0] = 3;
			memcpy(rb + 1, v, sizeof(v));
			put("records", "seed-3", rb, sizeof(rb));
		}
	}
	eager_seeds();
	fo_seeds();
	lb_seeds();
	return 0;
}
