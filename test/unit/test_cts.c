/*
 * test_cts - validators for what a peer RDMA-writes into our memory: the
 * clear-to-send slot (not yet written, partially written, valid, hostile)
 * the grouped-receive size records and the eager credit (the credit word and
 * the grant a clear-to-send carries).
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cts.h"

#include "nvtest.h"

static struct nv_cts_entry e[NV_CTS_MAX_RECVS];
static char why[192];

static void fill(uint64_t seq, uint32_t n)
{
	uint32_t i;

	memset(e, 0, sizeof(e));
	for (i = 0; i < n; i++) {
		e[i].addr = 0x10000 + i * 4096;
		e[i].size = 4096;
		e[i].rkey[0] = 0x100 + i;
		e[i].rkey[1] = 0x200 + i;
		e[i].tag = i;
		e[i].nreqs = n;
		e[i].seq = seq + 1;
	}
}

#define HOSTILE(stmt, word)                                                       \
	do {                                                                      \
		fill(7, 3);                                                       \
		stmt;                                                             \
		CHECK(nv_cts_slot_check(e, 7, 2, why, sizeof(why)) == -1);        \
		CHECK(strstr(why, word) != NULL);                                 \
	} while (0)

static void test_slot(void)
{
	fill(7, 3);
	CHECK(nv_cts_slot_check(e, 7, 2, why, sizeof(why)) == 1);
	CHECK(nv_cts_slot_check(e, 6, 2, why, sizeof(why)) == 0);	/* stale slot */
	CHECK(nv_cts_slot_check(e, 8, 2, why, sizeof(why)) == 0);	/* not yet written */
	e[2].seq = 0;
	CHECK(nv_cts_slot_check(e, 7, 2, why, sizeof(why)) == 0);	/* partially written */
	fill(7, 1);
	e[0].size = 0;
	e[0].addr = 0;
	e[0].rkey[0] = 0;
	CHECK(nv_cts_slot_check(e, 7, 2, why, sizeof(why)) == 1);	/* zero-byte receive */
	e[0].size = UINT32_MAX; /* the largest receive (maxP2pBytes <= 4 GiB - 1) */
	e[0].addr = 1ull << 40;
	e[0].rkey[0] = 5;
	CHECK(nv_cts_slot_check(e, 7, 2, why, sizeof(why)) == 1);
	HOSTILE(e[0].nreqs = 0, "0 grouped");
	HOSTILE(e[0].nreqs = 200, "200 grouped");
	HOSTILE(e[0].nreqs = 9, "9 grouped receives (max 8)");	/* just past the bound */
	fill(7, 8);							/* at the bound */
	CHECK(nv_cts_slot_check(e, 7, 2, why, sizeof(why)) == 1);
	fill(7, 8);
	e[7].nreqs = 7;	/* the last entry of a full group disagrees */
	CHECK(nv_cts_slot_check(e, 7, 2, why, sizeof(why)) == -1 && strstr(why, "entry 7"));
	HOSTILE(e[1].nreqs = 2, "entry 1");
	HOSTILE(e[2].size = 1ull << 40, "entry 2");
	HOSTILE(e[2].size = 1ull << 32, "entry 2");	/* sizes are 32-bit unsigned */
	HOSTILE(e[1].addr = 0, "entry 1");
	HOSTILE(e[1].addr = UINT64_MAX - 10, "entry 1");		/* wraps */
	HOSTILE(e[2].rkey[1] = 0, "entry 2");				/* second device */
	fill(7, 3);
	e[2].rkey[2] = 0; /* beyond the peer's device count: not used, not checked */
	CHECK(nv_cts_slot_check(e, 7, 2, why, sizeof(why)) == 1);
}

static void test_records(void)
{
	uint32_t rec[3] = { 10, 0, 4096 };
	uint32_t cap[3] = { 10, 5, 4096 };

	CHECK(nv_records_check(rec, cap, 3, why, sizeof(why)) == 0);
	rec[1] = 6;
	CHECK(nv_records_check(rec, cap, 3, why, sizeof(why)) == -1 && strstr(why, "receive 1"));
	rec[1] = UINT32_MAX; /* sizes are 32-bit unsigned: up to 4 GiB - 1 */
	CHECK(nv_records_check(rec, cap, 3, why, sizeof(why)) == -1);
	cap[2] = UINT32_MAX;
	rec[1] = 5;
	rec[2] = 3u << 30; /* 3 GiB into a 4 GiB - 1 receive: valid */
	CHECK(nv_records_check(rec, cap, 3, why, sizeof(why)) == 0);
}

static void test_credit(void)
{
	/* the credit word: up to NV_CTS_GRANT_MAX past the sender's next message */
	CHECK(!nv_eager_word_bad(0, 0) && !nv_eager_word_bad(32, 0) && nv_eager_word_bad(33, 0));
	CHECK(!nv_eager_word_bad(1032, 1000) && nv_eager_word_bad(UINT64_MAX, 1000));
	/* a CTS grant: its slot sequence + its offset, the same bound */
	CHECK(!nv_cts_grant_bad(10, 32, 10) && nv_cts_grant_bad(10, 33, 10));
	CHECK(!nv_cts_grant_bad(40, 2, 10) && nv_cts_grant_bad(41, 2, 10));
	CHECK(!nv_cts_grant_bad(0, 1, 0) && nv_cts_grant_bad(0, UINT32_MAX, 0));
	/* a hostile flag whose sequence + offset wraps past 2^64: refused, not a small grant */
	CHECK(nv_cts_grant_bad(UINT64_MAX - 10, 20, 0));
	CHECK(nv_cts_grant_bad(UINT64_MAX - 1, 32, 5));
}

int main(void)
{
	test_slot();
	test_records();
	test_credit();
	return nvt_exit("test_cts");
}
