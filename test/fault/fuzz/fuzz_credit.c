/*
 * libFuzzer target: the sender's checks of the eager credit a receiver
 * RDMA-writes (src/cts.h): the credit word (nv_eager_word_bad) and the grant
 * on a clear-to-send's entry 0 (nv_cts_grant_read, nv_cts_grant_bad), applied
 * as nv_eager_isend and nv_eager_cts_credit (src/eager.c) apply them.
 * Input: 8 bytes the sender's next sequence (head), 1 byte its grant now
 * (head - 32 + value % 65, at least 0), 8 bytes the credit word, then the
 * 64-byte CTS entry (missing bytes are zero). Each verdict is checked
 * against the same bound computed without wrap-around.
 */
#include "config.h"

#include "cts.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct nv_cts_entry e;
	unsigned __int128 bound;
	uint64_t head = 0, word = 0, grant, cur, flag, seq;
	uint32_t off;
	int bad;

	if (size < 17)
		return 0;
	memcpy(&head, data, 8);
	if (head > UINT64_MAX - 2 * NV_CTS_GRANT_MAX)
		head %= 1ull << 62; /* 2^64 messages are not sent */
	cur = head + data[8] % (2 * NV_CTS_GRANT_MAX + 1);
	cur = cur >= NV_CTS_GRANT_MAX ? cur - NV_CTS_GRANT_MAX : 0;
	memcpy(&word, data + 9, 8);
	memset(&e, 0, sizeof(e));
	memcpy(&e, data + 17, size - 17 < sizeof(e) ? size - 17 : sizeof(e));
	bound = (unsigned __int128)head + NV_CTS_GRANT_MAX;
	grant = cur;

	/* the credit word: sequences below it may go eager */
	bad = nv_eager_word_bad(word, head);
	FUZZ_ASSERT(bad == ((unsigned __int128)word > bound));
	if (!bad && word > grant)
		grant = word;

	/* a CTS's grant: read the flag first; 0 flag or 0 offset gives nothing */
	off = nv_cts_grant_read(&e, &flag);
	FUZZ_ASSERT(flag == e.seq && off == (flag ? e.eager.grant : 0));
	if (flag && off) {
		seq = flag - 1;
		bad = nv_cts_grant_bad(seq, off, head);
		FUZZ_ASSERT(bad == (off > NV_CTS_GRANT_MAX ||
				    (unsigned __int128)seq + off > bound));
		if (!bad && seq + off > grant)
			grant = seq + off;
	}
	/* what the sender takes: only grows, never past the ring it may fill */
	FUZZ_ASSERT(grant >= cur && (unsigned __int128)grant <= bound);
	return 0;
}
