/*
 * sv-regprobe - what a device's ibv_reg_mr answers: one line per case, the same on every
 * run, so the answers of simverbs and of a kernel driver (rxe) can be compared with diff.
 * Runs on whatever libibverbs the loader finds (simverbs through LD_LIBRARY_PATH, or the
 * system's); test/simverbs/checks/regprobe.sh compares simverbs with rxe's answers.
 *
 *   sv-regprobe [-d DEVICE]   (default: the first device)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define NPG 64

static struct ibv_pd *pd;
static long pg;

static const char *ename(int e)
{
	static char buf[32];

	switch (e) {
	case 0: return "ok";
	case EINVAL: return "EINVAL";
	case EFAULT: return "EFAULT";
	case EPERM: return "EPERM";
	case ENOMEM: return "ENOMEM";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case EACCES: return "EACCES";
	default: snprintf(buf, sizeof(buf), "errno %d", e); return buf;
	}
}

/* One registration: prints its answer; deregisters what registered. */
static void reg(const char *what, void *addr, size_t len, uint64_t iova, unsigned int access,
		int use_iova)
{
	struct ibv_mr *mr;

	errno = 0;
	mr = use_iova ? ibv_reg_mr_iova2(pd, addr, len, iova, access)
		      : ibv_reg_mr(pd, addr, len, (int)access);
	printf("%-52s %s\n", what, mr ? "ok" : ename(errno ? errno : -1));
	if (mr)
		ibv_dereg_mr(mr);
}

static const char *resident(char *m, size_t npg)
{
	unsigned char vec[NPG];
	size_t i, n = 0;

	if (mincore(m, npg * (size_t)pg, vec))
		return "mincore failed";
	for (i = 0; i < npg; i++)
		n += vec[i] & 1;
	return n == npg ? "all resident" : n ? "some resident" : "none resident";
}

static void prefault(void)
{
	char *m = mmap(NULL, NPG * (size_t)pg, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct rusage r0, r1;
	struct ibv_mr *mr;
	size_t i;

	printf("%-52s %s\n", "untouched pages before registration", resident(m, NPG));
	mr = ibv_reg_mr(pd, m, NPG * (size_t)pg, IBV_ACCESS_LOCAL_WRITE);
	printf("%-52s %s\n", "after a LOCAL_WRITE registration", mr ? resident(m, NPG) : "reg failed");
	getrusage(RUSAGE_SELF, &r0);
	for (i = 0; i < NPG; i++)
		m[i * (size_t)pg] = 1;
	getrusage(RUSAGE_SELF, &r1);
	printf("%-52s %s\n", "writing them afterwards",
	       r1.ru_minflt - r0.ru_minflt < NPG / 2 ? "no page faults" : "page faults");
	if (mr)
		ibv_dereg_mr(mr);
	munmap(m, NPG * (size_t)pg);
	m = mmap(NULL, NPG * (size_t)pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mr = ibv_reg_mr(pd, m, NPG * (size_t)pg, 0);
	printf("%-52s %s\n", "after a read-only registration (PROT_READ)",
	       mr ? resident(m, NPG) : "reg failed");
	if (mr)
		ibv_dereg_mr(mr);
	munmap(m, NPG * (size_t)pg);
}

static void drop_ipc_lock(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d) == 0) {
		d[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
		syscall(SYS_capset, &h, d);
	}
}

/* RLIMIT_MEMLOCK without CAP_IPC_LOCK, in a child (it changes the process). */
static void memlock(char *buf)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		struct rlimit rl = { 1 << 20, 1 << 20 };

		drop_ipc_lock();
		setrlimit(RLIMIT_MEMLOCK, &rl);
		reg("4 MiB, RLIMIT_MEMLOCK 1 MiB, no CAP_IPC_LOCK", buf, 4 << 20, 0,
		    IBV_ACCESS_LOCAL_WRITE, 0);
		reg("512 KiB, RLIMIT_MEMLOCK 1 MiB, no CAP_IPC_LOCK", buf, 512 << 10, 0,
		    IBV_ACCESS_LOCAL_WRITE, 0);
		rl.rlim_cur = 0;
		setrlimit(RLIMIT_MEMLOCK, &rl);
		reg("1 byte, RLIMIT_MEMLOCK 0, no CAP_IPC_LOCK", buf, 1, 0, IBV_ACCESS_LOCAL_WRITE,
		    0);
		fflush(stdout);
		_exit(0);
	}
	waitpid(pid, NULL, 0);
}

static void rereg(char *buf)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	int rc;

	if (!mr) {
		printf("rereg: registration failed\n");
		return;
	}
	errno = 0;
	rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	printf("%-52s %d %s\n", "rereg_mr CHANGE_ACCESS", rc, rc ? ename(errno) : "");
	errno = 0;
	rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd, NULL, 0, 0);
	printf("%-52s %d %s\n", "rereg_mr CHANGE_PD", rc, rc ? ename(errno) : "");
	errno = 0;
	rc = ibv_rereg_mr(mr, 8, NULL, NULL, 0, 0);
	printf("%-52s %d %s\n", "rereg_mr an unknown flag", rc, rc ? ename(errno) : "");
	errno = 0;
	rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd, NULL, 0, IBV_ACCESS_LOCAL_WRITE);
	printf("%-52s %d %s\n", "rereg_mr access without CHANGE_ACCESS", rc, rc ? ename(errno) : "");
	ibv_dereg_mr(mr);
}

int main(int argc, char **argv)
{
	const char *want = argc == 3 && !strcmp(argv[1], "-d") ? argv[2] : NULL;
	unsigned int lw = IBV_ACCESS_LOCAL_WRITE;
	struct ibv_device **l;
	struct ibv_context *ctx = NULL;
	char *m, *buf;
	int n, i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	pg = sysconf(_SC_PAGESIZE);
	l = ibv_get_device_list(&n);
	for (i = 0; l && i < n && !ctx; i++)
		if (!want || !strcmp(ibv_get_device_name(l[i]), want))
			ctx = ibv_open_device(l[i]);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (!pd) {
		fprintf(stderr, "sv-regprobe: no device%s%s\n", want ? " " : "", want ? want : "");
		return 77;
	}
	m = mmap(NULL, 8 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	buf = aligned_alloc((size_t)pg, 4 << 20);
	memset(buf, 0, 4 << 20);
	mprotect(m + pg, (size_t)pg, PROT_READ);
	mprotect(m + 2 * pg, (size_t)pg, PROT_NONE);
	munmap(m + 3 * pg, (size_t)pg);
	reg("64 B LOCAL_WRITE", m + 8, 64, 0, lw, 0);
	reg("iova2: iova = address", m + 8, 64, (uintptr_t)m + 8, lw, 1);
	reg("iova2: iova at the same offset in another page", m + 8, 64, 0x10008, lw, 1);
	reg("iova2: iova at another offset in its page", m + 8, 64, 0x10000, lw, 1);
	reg("REMOTE_WRITE without LOCAL_WRITE", m, 64, 0, IBV_ACCESS_REMOTE_WRITE, 0);
	reg("REMOTE_ATOMIC without LOCAL_WRITE", m, 64, 0, IBV_ACCESS_REMOTE_ATOMIC, 0);
	reg("all remote rights", m, 64, 0, lw | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
	    IBV_ACCESS_REMOTE_ATOMIC, 0);
	reg("MW_BIND", m, 64, 0, lw | IBV_ACCESS_MW_BIND, 0);
	reg("ZERO_BASED", m, 64, 0, lw | IBV_ACCESS_ZERO_BASED, 0);
	reg("ON_DEMAND", m, 64, 0, lw | IBV_ACCESS_ON_DEMAND, 0);
	reg("HUGETLB", m, 64, 0, lw | IBV_ACCESS_HUGETLB, 0);
	reg("access bit 8", m, 64, 0, lw | 1u << 8, 1);
	reg("access bit 19", m, 64, 0, lw | 1u << 19, 1);
	reg("RELAXED_ORDERING (bit 20, optional range)", m, 64, 0, lw | IBV_ACCESS_RELAXED_ORDERING, 1);
	reg("access bit 25 (optional range)", m, 64, 0, lw | 1u << 25, 1);
	reg("access bit 30", m, 64, 0, lw | 1u << 30, 1);
	reg("length 0", m, 0, 0, lw, 0);
	reg("read-only page, read-only MR", m + pg, 64, 0, 0, 0);
	reg("read-only page, REMOTE_READ", m + pg, 64, 0, IBV_ACCESS_REMOTE_READ, 0);
	reg("read-only page, LOCAL_WRITE", m + pg, 64, 0, lw, 0);
	reg("read-only page, MW_BIND", m + pg, 64, 0, IBV_ACCESS_MW_BIND, 0);
	reg("PROT_NONE page", m + 2 * pg, 64, 0, 0, 0);
	reg("a range running into a PROT_NONE page", m + pg, 2 * (size_t)pg, 0, 0, 0);
	reg("unmapped page", m + 3 * pg, 64, 0, 0, 0);
	reg("NULL address", NULL, 64, 0, 0, 0);
	reg("a range whose end wraps", m, SIZE_MAX - 100, 0, 0, 0);
	prefault();
	rereg(buf);
	memlock(buf);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(l);
	return 0;
}
