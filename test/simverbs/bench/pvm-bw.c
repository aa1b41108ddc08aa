/*
 * pvm-bw: the ceiling of the simverbs fabric. simverbs moves RDMA data between processes with
 * process_vm_writev(2); this program measures that system call alone between two processes
 * (parent writes into a forked child's buffer), with the same message size and repetition
 * scheme as sv-rawbench, so fabric-bench.sh can print the fabric's share of it from one run.
 *
 * Output (one line per figure, key=value, GB/s = 1e9 bytes/s):
 *   pvm_call size=8 iters=<n> reps=<r> median_ns=<x> min_ns=<x> max_ns=<x> cpu_ns=<x>
 *   pvm_bw size=<bytes> iters=<n> reps=<r> median_GBps=<x> min_GBps=<x> max_GBps=<x> cpu_GBps=<x>
 * pvm_call is the cost of one 8-byte process_vm_writev: the floor of a fabric write's latency.
 * cpu_GBps is bytes per CPU second of the writing process (median), which other load on the
 * machine does not distort; sv-rawbench reports the same for its writer.
 * The child verifies the bytes of the last repetition, so a broken copy fails (exit 1).
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include "sb_common.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

struct pvm_opts {
	size_t size;
	unsigned iters;
	unsigned reps;
	unsigned small_iters;
};

struct pvm_hello {
	uint64_t addr;
	int32_t pid;
	int32_t pad;
};

static void usage(FILE *f)
{
	fprintf(f, "usage: pvm-bw [-s SIZE] [-n ITERS] [-r REPS] [-q]\n"
		   "  -s SIZE   message size (default 4M)\n"
		   "  -n ITERS  writes per repetition (default: 1 GiB worth, at least 8)\n"
		   "  -r REPS   repetitions; the median is reported (default 5)\n"
		   "  -q        quick mode (3 reps of 64 MiB) for tests\n");
}

static int parse_opts(int argc, char **argv, struct pvm_opts *o)
{
	int c, quick = 0;

	o->size = 4u << 20;
	o->iters = 0;
	o->reps = 5;
	while ((c = getopt(argc, argv, "s:n:r:qh")) != -1) {
		switch (c) {
		case 's':
			if (sb_parse_size(optarg, &o->size) || o->size == 0)
				return -1;
			break;
		case 'n':
			o->iters = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'r':
			o->reps = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'q':
			quick = 1;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			return -1;
		}
	}
	if (quick && o->reps > 3)
		o->reps = 3;
	o->small_iters = quick ? 5000 : 50000;
	if (o->iters == 0)
		o->iters = (unsigned)(((quick ? 64ull : 1024ull) << 20) / o->size);
	if (o->iters < 8)
		o->iters = 8;
	return o->reps ? 0 : -1;
}

/* Child: owns the target buffer, lets the parent write into it, verifies on request. */
static int run_child(int fd, const struct pvm_opts *o)
{
	uint8_t *buf;
	struct pvm_hello h = { .pid = (int32_t)getpid() };
	uint64_t seed;
	int32_t bad;

	if (posix_memalign((void **)&buf, 4096, o->size))
		return 1;
	memset(buf, 0, o->size);
	h.addr = (uint64_t)(uintptr_t)buf;
	if (sb_send_all(fd, &h, sizeof(h)) || sb_recv_all(fd, &seed, sizeof(seed)))
		return 1;
	bad = sb_verify(buf, o->size, seed) != o->size;
	if (sb_send_all(fd, &bad, sizeof(bad)))
		return 1;
	free(buf);
	return 0;
}

static int write_rep(const struct pvm_hello *h, uint8_t *src, const struct pvm_opts *o,
		     double *gbps, double *cpu_gbps)
{
	struct iovec l = { .iov_base = src, .iov_len = o->size };
	struct iovec r = { .iov_base = (void *)(uintptr_t)h->addr, .iov_len = o->size };
	uint64_t t0 = sb_now_ns(), c0 = sb_cpu_ns();

	for (unsigned i = 0; i < o->iters; i++) {
		ssize_t n = process_vm_writev(h->pid, &l, 1, &r, 1, 0);

		if (n != (ssize_t)o->size) {
			perror("process_vm_writev");
			return -1;
		}
	}
	*gbps = (double)o->size * o->iters / (double)(sb_now_ns() - t0);
	*cpu_gbps = (double)o->size * o->iters / (double)(sb_cpu_ns() - c0 + 1);
	return 0;
}

/* Cost of one small call, measured before the bandwidth runs (it writes bytes 0..7). */
static int call_cost(const struct pvm_hello *h, uint8_t *src, unsigned iters, unsigned reps)
{
	struct iovec l = { .iov_base = src, .iov_len = 8 };
	struct iovec r = { .iov_base = (void *)(uintptr_t)h->addr, .iov_len = 8 };
	double *ns = calloc(2 * (size_t)reps, sizeof(*ns)), *cpu = ns + reps;

	if (!ns)
		return -1;
	for (unsigned rep = 0; rep < reps; rep++) {
		uint64_t t0 = sb_now_ns(), c0 = sb_cpu_ns();

		for (unsigned i = 0; i < iters; i++) {
			if (process_vm_writev(h->pid, &l, 1, &r, 1, 0) != 8) {
				perror("process_vm_writev");
				free(ns);
				return -1;
			}
		}
		ns[rep] = (double)(sb_now_ns() - t0) / iters;
		cpu[rep] = (double)(sb_cpu_ns() - c0) / iters;
	}
	printf("pvm_call size=8 iters=%u reps=%u median_ns=%.0f min_ns=%.0f max_ns=%.0f "
	       "cpu_ns=%.0f\n", iters, reps, sb_median(ns, reps), sb_min(ns, reps),
	       sb_max(ns, reps), sb_median(cpu, reps));
	free(ns);
	return 0;
}

static int run_parent(int fd, const struct pvm_opts *o)
{
	struct pvm_hello h;
	uint8_t *src;
	double *bw = calloc(2 * (size_t)o->reps, sizeof(*bw)), *cpu = bw + o->reps;
	uint64_t seed = 0;
	int32_t bad = 1;
	int rc = 1;

	if (!bw || posix_memalign((void **)&src, 4096, o->size))
		return 1;
	if (sb_recv_all(fd, &h, sizeof(h)))
		goto out;
	if (o->size >= 8 && call_cost(&h, src, o->small_iters, o->reps))
		goto out;
	for (unsigned rep = 0; rep < o->reps; rep++) {
		seed = 1000 + rep;
		sb_fill(src, o->size, seed);
		if (write_rep(&h, src, o, &bw[rep], &cpu[rep]))
			goto out;
	}
	if (sb_send_all(fd, &seed, sizeof(seed)) || sb_recv_all(fd, &bad, sizeof(bad)))
		goto out;
	if (bad) {
		fprintf(stderr, "pvm-bw: data check failed in the target process\n");
		goto out;
	}
	printf("pvm_bw size=%zu iters=%u reps=%u median_GBps=%.3f min_GBps=%.3f max_GBps=%.3f "
	       "cpu_GBps=%.3f\n", o->size, o->iters, o->reps, sb_median(bw, o->reps),
	       sb_min(bw, o->reps), sb_max(bw, o->reps), sb_median(cpu, o->reps));
	rc = 0;
out:
	free(src);
	free(bw);
	return rc;
}

int main(int argc, char **argv)
{
	struct pvm_opts o;
	int sv[2], status, rc;
	pid_t pid;

	if (parse_opts(argc, argv, &o)) {
		usage(stderr);
		return 2;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
		perror("socketpair");
		return 1;
	}
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		close(sv[0]);
		_exit(run_child(sv[1], &o));
	}
	close(sv[1]);
	rc = run_parent(sv[0], &o);
	close(sv[0]);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "pvm-bw: child failed\n");
		rc = 1;
	}
	return rc;
}
