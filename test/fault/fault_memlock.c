/*
 * fault_memlock - memory registration running out of lockable memory.
 *   - init warns, naming the limit, when RLIMIT_MEMLOCK is not unlimited,
 *     and stays quiet when it is (where the test may raise it);
 *   - a registration failing with ENOMEM names the size it tried and the
 *     RLIMIT_MEMLOCK value, and the comm stays usable afterwards.
 * simverbs fails reg_mr with ENOMEM like the kernel when the pinned bytes
 * would exceed RLIMIT_MEMLOCK (opt-in: SIMVERBS_MEMLOCK=1): with a 1 MiB
 * limit the first 4 MiB registration must fail.
 * Each case runs in a child process (limits and knobs are per process).
 */
#include "config.h"

#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fh.h"

#define LIMIT (1u << 20)
#define BIG (4u << 20)
#define NBUF 24

static int set_memlock(rlim_t v)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl))
		return -1;
	rl.rlim_cur = v;
	if (v == RLIM_INFINITY || v > rl.rlim_max)
		rl.rlim_max = v;
	return setrlimit(RLIMIT_MEMLOCK, &rl);
}

static int case_warns(void)
{
	struct fh f;
	char want[64];

	FH_CHECK(set_memlock(LIMIT) == 0, "setrlimit");
	FH_OK(fh_open_raw(&f));
	snprintf(want, sizeof(want), "RLIMIT_MEMLOCK is %u bytes", LIMIT);
	FH_CHECK(fh_warn_find(0, want, "unlimited", NULL) >= 0, "init did not warn '%s'", want);
	fh_log("init warns: %s", fh_warn_get(fh_warn_find(0, want, NULL)));
	fh_close(&f);
	return 0;
}

static int case_quiet(void)
{
	struct fh f;

	if (set_memlock(RLIM_INFINITY)) {
		fh_log("cannot raise RLIMIT_MEMLOCK to unlimited here (not privileged)");
		return 77;
	}
	FH_OK(fh_open_raw(&f));
	FH_CHECK(fh_warn_find(0, "RLIMIT_MEMLOCK", NULL) < 0, "init warned with an unlimited limit");
	fh_log("unlimited: no warning");
	fh_close(&f);
	return 0;
}

static int case_enomem(void)
{
	static char *bufs[NBUF];
	void *mh[NBUF], *s, *r, *smh, *rmh;
	char want_size[32], want_lim[64], sb[64] = "still works", rb[64];
	struct fh f;
	ncclResult_t res = ncclSuccess;
	int i, n, got = 0, w0, wi;

	FH_CHECK(set_memlock(LIMIT) == 0, "setrlimit");
	if (fh_open(&f))
		return 77;
	fh_pair(&f, 0, &s, &r, 20);
	smh = fh_reg(&f, s, sb, sizeof(sb));
	rmh = fh_reg(&f, r, rb, sizeof(rb));
	w0 = fh_warn_count();
	for (n = 0; n < NBUF && res == ncclSuccess; n++) {
		bufs[n] = aligned_alloc(4096, BIG);
		FH_CHECK(bufs[n] != NULL, "out of memory");
		memset(bufs[n], 0, BIG);
		mh[n] = NULL;
		res = f.net->regMr(s, bufs[n], BIG, NCCL_PTR_HOST, &mh[n]);
	}
	FH_CHECK(n == 1, "%d registrations of %u bytes over a %u-byte RLIMIT_MEMLOCK before one "
		 "failed (simverbs without SIMVERBS_MEMLOCK support?)", n - (res != ncclSuccess), BIG,
		 LIMIT);
	FH_CHECK(mh[n - 1] == NULL, "failed regMr returned a handle");
	snprintf(want_size, sizeof(want_size), "%u", BIG);
	snprintf(want_lim, sizeof(want_lim), "RLIMIT_MEMLOCK is %u bytes", LIMIT);
	wi = fh_warn_find(w0, want_size, want_lim, NULL);
	FH_CHECK(wi >= 0, "registration %d failed (%d) without a WARN naming %s and '%s'", n,
		 (int)res, want_size, want_lim);
	fh_log("registration %d of %u bytes failed (%d) after %d succeeded: %s", n, BIG, (int)res,
	       n - 1, fh_warn_get(wi));
	/* The comm is unharmed: free some, transfer, register again. */
	for (i = 0; i < n - 1; i++)
		FH_OK(f.net->deregMr(s, mh[i]));
	FH_OK(fh_xfer(&f, s, r, sb, smh, sizeof(sb), rb, rmh, sizeof(rb), 1, &got, 10));
	FH_CHECK(got == (int)sizeof(sb) && !strcmp(rb, sb), "transfer after ENOMEM");
	FH_OK(f.net->regMr(s, bufs[0], 4096, NCCL_PTR_HOST, &mh[0]));
	FH_OK(f.net->deregMr(s, mh[0]));
	FH_OK(f.net->deregMr(s, smh));
	FH_OK(f.net->deregMr(r, rmh));
	FH_OK(f.net->closeSend(s));
	FH_OK(f.net->closeRecv(r));
	for (i = 0; i < n; i++)
		free(bufs[i]);
	fh_close(&f);
	return 0;
}

int main(void)
{
	static const struct {
		const char *name;
		int (*fn)(void);
	} cases[] = {
		{ "init warns when memlock is limited", case_warns },
		{ "init quiet when memlock is unlimited", case_quiet },
		{ "ENOMEM from registration", case_enomem },
	};
	const char *fab = getenv("SIMVERBS_FABRIC");
	int failed = 0, skipped = 0;
	size_t i;

	fh_watchdog(120);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pid_t pid = fork();
		int st;

		FH_CHECK(pid >= 0, "fork");
		if (pid == 0) {
			char name[128];

			/* a fabric per case: its knobs must not touch other runs */
			snprintf(name, sizeof(name), "%s-m%zu", fab ? fab : "nvfault", i);
			setenv("SIMVERBS_FABRIC", name, 1);
			setenv("SIMVERBS_MEMLOCK", "1", 1);
			_exit(cases[i].fn());
		}
		st = fh_waitpid(pid, 60);
		if (st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 77) {
			fh_log("%s: SKIP", cases[i].name);
			skipped++;
		} else if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fh_log("%s: FAILED (status 0x%x)", cases[i].name, st);
			failed++;
		} else {
			fh_log("%s: ok", cases[i].name);
		}
	}
	return failed ? 1 : skipped == (int)(sizeof(cases) / sizeof(cases[0])) ? 77 : 0;
}
