/*
 * fault_memlock - memory registration running out of lockable memory.
 *   - init warns, naming the limit, once per process, when RLIMIT_MEMLOCK
 *     applies (finite, no CAP_IPC_LOCK), and stays quiet when it is
 *     unlimited or CAP_IPC_LOCK exempts the process (root);
 *   - a registration failing with ENOMEM names the size it tried and the
 *     RLIMIT_MEMLOCK value, and the comm stays usable afterwards.
 * simverbs fails reg_mr with ENOMEM like the kernel when the pinned bytes
 * would exceed RLIMIT_MEMLOCK without CAP_IPC_LOCK (dropped here): with a
 * 1 MiB limit the first 4 MiB registration must fail.
 * Each case runs in a child process (limits and knobs are per process).
 */
#include "config.h"

#include <linux/capability.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
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

/* Drops CAP_IPC_LOCK from the effective set so RLIMIT_MEMLOCK applies to us;
 * returns whether we had it. */
static int drop_ipc_lock(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];
	int had;

	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d))
		return -1;
	had = (d[0].effective >> CAP_IPC_LOCK) & 1;
	d[0].effective &= ~(1u << CAP_IPC_LOCK);
	return syscall(SYS_capset, &h, d) ? -1 : had;
}

static int has_ipc_lock(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	memset(d, 0, sizeof(d));
	return !syscall(SYS_capget, &h, d) && ((d[0].effective >> CAP_IPC_LOCK) & 1);
}

/* The limit applies (no CAP_IPC_LOCK): warned, once per process, over two
 * init/finalize cycles. */
static int case_warns(void)
{
	struct fh f;
	char want[64];

	FH_CHECK(set_memlock(LIMIT) == 0, "setrlimit");
	FH_CHECK(drop_ipc_lock() >= 0, "capset");
	FH_OK(fh_open_raw(&f));
	snprintf(want, sizeof(want), "RLIMIT_MEMLOCK is %u bytes", LIMIT);
	FH_CHECK(fh_warn_find(0, want, "unlimited", "CAP_IPC_LOCK", NULL) >= 0,
		 "init did not warn '%s'", want);
	fh_log("init warns: %s", fh_warn_get(fh_warn_find(0, want, NULL)));
	fh_close(&f);
	FH_OK(fh_open_raw(&f));
	fh_close(&f);
	FH_CHECK(fh_warn_count_with("RLIMIT_MEMLOCK") == 1,
		 "%d RLIMIT_MEMLOCK warnings over two inits, want one per process",
		 fh_warn_count_with("RLIMIT_MEMLOCK"));
	return 0;
}

/* A finite limit with CAP_IPC_LOCK (root): the kernel ignores it, no warning. */
static int case_quiet_cap(void)
{
	struct fh f;

	if (!has_ipc_lock()) {
		fh_log("no CAP_IPC_LOCK here (not root)");
		return 77;
	}
	FH_CHECK(set_memlock(LIMIT) == 0, "setrlimit");
	FH_OK(fh_open_raw(&f));
	FH_CHECK(fh_warn_find(0, "RLIMIT_MEMLOCK", NULL) < 0,
		 "init warned although CAP_IPC_LOCK exempts us from the limit");
	fh_log("CAP_IPC_LOCK: no warning");
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
	FH_CHECK(drop_ipc_lock() >= 0, "capset");
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
	FH_CHECK(drop_ipc_lock() >= 0, "capset"); /* the limit applies, as to a user */
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
		 "failed (simverbs not applying RLIMIT_MEMLOCK?)", n - (res != ncclSuccess), BIG,
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
		{ "init quiet with CAP_IPC_LOCK", case_quiet_cap },
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
