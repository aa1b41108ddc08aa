/*
 * libFuzzer target: nv_wire_meta_decode (QPNs, LIDs, GIDs, rkeys, control
 * region; in version 4 a receiver's eager ring). Accepted metadata must
 * re-encode to exactly the bytes given, in the layout its length selects.
 */
#include "config.h"

#include "fuzz_common.h"

static void check_meta(const struct nv_meta *m)
{
	int i;

	FUZZ_ASSERT(m->role == NV_META_ROLE_SEND || m->role == NV_META_ROLE_RECV);
	FUZZ_ASSERT(m->ndevs >= 1 && m->ndevs <= NV_WIRE_MAX_DEVS);
	FUZZ_ASSERT(m->nqps >= 1 && m->nqps <= NV_WIRE_MAX_QPS);
	FUZZ_ASSERT(m->sl <= 15);
	/* The control region and the probe word never wrap or leave the region. */
	FUZZ_ASSERT(m->addr != 0 && m->region_len >= 8 && m->addr + m->region_len > m->addr);
	FUZZ_ASSERT(m->probe_addr >= m->addr && m->probe_addr + 8 <= m->addr + m->region_len);
	for (i = 0; i < m->ndevs; i++) {
		const struct nv_meta_dev *d = &m->dev[i];

		FUZZ_ASSERT(d->mtu >= 1 && d->mtu <= 5 && d->port != 0 && d->rkey != 0);
		FUZZ_ASSERT(d->link_layer == m->dev[0].link_layer);
		FUZZ_ASSERT(memchr(d->name, '\0', sizeof(d->name)) && d->name[0]);
	}
	for (i = 0; i < m->nqps; i++) {
		FUZZ_ASSERT(m->qp[i].qpn != 0 && m->qp[i].qpn <= 0xffffff);
		FUZZ_ASSERT(m->qp[i].dev < m->ndevs);
	}
	if (m->version < 4) {
		FUZZ_ASSERT(m->version == 3 && !m->eager.ring_addr && !m->eager.max);
		return;
	}
	/* the eager ring: a one-device one-QP receiver's, of the fixed geometry, not wrapping */
	FUZZ_ASSERT(m->version == 4 && m->role == NV_META_ROLE_RECV && m->ndevs == 1 &&
		    m->nqps == 1);
	FUZZ_ASSERT(m->eager.max >= 1 && m->eager.max <= NV_EAGER_LIMIT);
	FUZZ_ASSERT(m->eager.entry == NV_EAGER_ENTRY(m->eager.max) &&
		    m->eager.slots == NV_EAGER_SLOTS);
	FUZZ_ASSERT(m->eager.ring_addr && !(m->eager.ring_addr & 63) && m->eager.ring_rkey);
	FUZZ_ASSERT(m->eager.ring_addr + (uint64_t)m->eager.slots * m->eager.entry >
		    m->eager.ring_addr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t out[NV_WIRE_META_SIZE_V4];
	static struct nv_meta m;
	char why[NV_WIRE_WHY_LEN];

	why[0] = '\0';
	if (nv_wire_meta_decode(data, size, &m, why, sizeof(why)) != NV_OK) {
		fuzz_check_why(why, sizeof(why));
		return 0;
	}
	check_meta(&m);
	nv_wire_meta_encode(&m, out);
	FUZZ_ASSERT(size == nv_wire_payload_size_v(NV_MSG_META, m.version));
	FUZZ_ASSERT(memcmp(out, data, size) == 0);
	return 0;
}
