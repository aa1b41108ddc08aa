/*
 * test_read_order - the order in which the accessors of peer-written control
 * data read their fields: the ready flag first, every other field after it.
 * A NIC may land an entry in any order of cache lines, so a field read
 * before its flag may be older than the flag says (a torn entry).
 *
 * Page traps: the structure is placed so that its flag lies alone on the
 * second of two pages and every other field on the first, both pages
 * PROT_NONE. Each first touch of a page faults; the SIGSEGV handler notes
 * which page and makes it readable, and the load runs again. The first
 * fault must be the flag's page. Checked: nv_cts_grant_read (the grant a
 * clear-to-send carries), nv_cts_slot_ready and nv_eager_trailer_check.
 * x86-64 only (fields at their natural alignment, the structure not at its
 * 64-byte one, which x86-64 loads do not mind); elsewhere it skips (77).
 */
#include "config.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cts.h"

#include "nvtest.h"

static char *pages;
static long psz;
static volatile sig_atomic_t nfaults, order[4];

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	char *a = si->si_addr;
	int pg;

	(void)uc;
	if (!pages || a < pages || a >= pages + 2 * psz) {
		signal(sig, SIG_DFL); /* a real fault: die of it */
		return;
	}
	pg = a >= pages + psz;
	if (nfaults < 4)
		order[nfaults] = pg;
	nfaults++;
	mprotect(pages + pg * psz, (size_t)psz, PROT_READ);
}

/* Both pages unreadable, the fault record cleared. */
static void arm(void)
{
	nfaults = 0;
	order[0] = order[1] = -1;
	CHECK(mprotect(pages, 2 * (size_t)psz, PROT_NONE) == 0);
}

/* Both pages writable, to fill them. */
static void disarm(void)
{
	CHECK(mprotect(pages, 2 * (size_t)psz, PROT_READ | PROT_WRITE) == 0);
}

/* The first page read must be the flag's (page 1); name: the accessor. */
static void expect_flag_first(const char *name)
{
	if (nfaults < 1 || order[0] != 1) {
		fprintf(stderr, "%s: read a field before the ready flag (faults %d, first on the "
			"%s page)\n", name, (int)nfaults, order[0] == 0 ? "fields'" : "flag's");
		nvt_failures++;
	}
}

static void cts_entry(void)
{
	/* seq (offset 56) alone on page 1, everything before it on page 0 */
	char *at = pages + psz - offsetof(struct nv_cts_entry, seq);
	const struct nv_cts_entry *e = (const struct nv_cts_entry *)(void *)at;
	struct nv_cts_entry x; /* filled here (aligned), copied bytewise */
	uint64_t flag = 0, zero = 0;
	uint32_t g;

	memset(&x, 0, sizeof(x));
	x.addr = 0x10000;
	x.size = 4096;
	x.rkey[0] = 0x100;
	x.eager.grant = 17;
	x.tag = 3;
	x.nreqs = 1;
	x.seq = 42 + 1;
	disarm();
	memcpy(at, &x, sizeof(x));

	arm();
	g = nv_cts_grant_read(e, &flag);
	CHECK(g == 17 && flag == 43);
	expect_flag_first("nv_cts_grant_read");
	CHECK(nfaults == 2); /* and it did read the grant */

	arm();
	CHECK(nv_cts_slot_ready(e, 42, 1) == 1);
	expect_flag_first("nv_cts_slot_ready");

	/* not landed yet: the flag alone is read, nothing else */
	disarm();
	memcpy(at + offsetof(struct nv_cts_entry, seq), &zero, sizeof(zero));
	arm();
	g = nv_cts_grant_read(e, &flag);
	CHECK(g == 0 && flag == 0);
	expect_flag_first("nv_cts_grant_read (empty slot)");
	CHECK(nfaults == 1);
	arm();
	CHECK(nv_cts_slot_ready(e, 42, 1) == 0);
	expect_flag_first("nv_cts_slot_ready (not landed)");
	CHECK(nfaults == 1);
}

static void eager_trailer(void)
{
	struct nv_eager_trailer *t =
		(struct nv_eager_trailer *)(pages + psz - offsetof(struct nv_eager_trailer, seq));

	disarm();
	t->size = 100;
	t->tag = 9;
	t->seq = 7 + 1;
	arm();
	CHECK(nv_eager_trailer_check(t, 7, 4096, NULL, 0) == 1);
	expect_flag_first("nv_eager_trailer_check");
	arm();
	CHECK(nv_eager_trailer_check(t, 8, 4096, NULL, 0) == 0);
	expect_flag_first("nv_eager_trailer_check (not arrived)");
	CHECK(nfaults == 1);
}

int main(void)
{
#if defined(__x86_64__)
	struct sigaction sa;

	psz = sysconf(_SC_PAGESIZE);
	pages = mmap(NULL, 2 * (size_t)psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pages == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGSEGV, &sa, NULL) == 0);
	cts_entry();
	eager_trailer();
	disarm();
	munmap(pages, 2 * (size_t)psz);
	pages = NULL;
	if (nvt_failures)
		fprintf(stderr, "test_read_order: %d failure(s)\n", nvt_failures);
	return nvt_failures ? 1 : 0;
#else
	fprintf(stderr, "test_read_order: page traps are set up for x86-64 only\n");
	return 77;
#endif
}
