/*
 * sv-rawbench: raw-verbs benchmark of a verbs fabric (written for simverbs, runs on any RC
 * device). Two processes (fork; QP data exchanged over a socketpair), one RC QP each:
 *   write_bw  RDMA WRITE bandwidth, side 0 -> side 1, message size sweep, WINDOW writes in
 *             flight; side 1 checks every byte that arrived (pattern), a mismatch fails.
 *   write_lat 8-byte RDMA WRITE ping-pong; each side spins on the last byte of its buffer;
 *             reported as half the round trip.
 *   imm_lat   8-byte RDMA WRITE_WITH_IMM ping-pong; each side waits for the receive completion
 *             (immediate, byte_len and data checked); half the round trip.
 * Every figure is the median (and min/max) over REPS repetitions, one key=value line each.
 * write_bw also prints cpu_GBps: bytes per CPU second of the writing process (simverbs copies
 * in the requester's process), which load from other processes does not distort.
 * Exit status: 0 ok, 1 verbs error / data error / timeout, 2 usage.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include "sb_common.h"
#include "sb_verbs.h"

#include <arpa/inet.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

enum { T_BW = 1, T_LAT = 2, T_IMM = 4 };
#define LAT_AREA 4096	/* after the bandwidth area: [0,8) written by the peer, [64,72) source */
#define SIG_EVERY 16	/* latency tests: one signalled send per SIG_EVERY */
#define MAX_SIZES 40

struct rb_opts {
	struct sb_cfg cfg;
	unsigned reps;
	size_t max_size;
	size_t sizes[MAX_SIZES];
	unsigned nsizes;
	unsigned window;
	size_t volume;		/* bytes per repetition and size */
	unsigned max_iters;	/* cap for small sizes */
	unsigned lat_iters;
	unsigned warmup;
	unsigned tests;
	unsigned timeout_s;
};

struct rb {
	struct sb_ctx c;
	const struct rb_opts *o;
	int fd;
	int side;
	uint64_t deadline;
	uint64_t last_peek;	/* sb_now_ns() of the last peer-alive check */
	uint64_t bw_seed;	/* pattern seed of the last write_bw repetition (same on both sides) */
	unsigned sig_pending;	/* signalled sends posted and not yet polled */
};

#define RB_ERR(fmt, ...) fprintf(stderr, "sv-rawbench[%d]: " fmt "\n", b->side, ##__VA_ARGS__)

static void arm_deadline(struct rb *b)
{
	b->last_peek = sb_now_ns();
	b->deadline = b->last_peek + (uint64_t)b->o->timeout_s * 1000000000ull;
}

/* Called every few thousand spins: gives up after the phase timeout, or when the peer process
 * has gone (its end of the socketpair closed). The socket is peeked at most every 10 ms so the
 * check (a syscall) does not show up in the latency being measured. */
static int timed_out(struct rb *b, const char *what)
{
	uint64_t now = sb_now_ns();
	char c;

	if (now - b->last_peek > 10000000ull) {
		b->last_peek = now;
		if (recv(b->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
			RB_ERR("peer process exited while waiting for %s", what);
			return 1;
		}
	}
	if (now < b->deadline)
		return 0;
	RB_ERR("timeout (%u s) waiting for %s", b->o->timeout_s, what);
	return 1;
}

static int post_write(struct rb *b, size_t loff, size_t roff, uint32_t len, int signaled,
		      int with_imm, uint32_t imm)
{
	struct ibv_sge sge = { .addr = (uintptr_t)b->c.buf + loff, .length = len,
			       .lkey = b->c.mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = loff, .sg_list = &sge, .num_sge = 1,
		.opcode = with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
		.send_flags = signaled ? IBV_SEND_SIGNALED : 0,
		.wr.rdma = { .remote_addr = b->c.remote.addr + roff, .rkey = b->c.remote.rkey },
	}, *bad;
	int ret;

	if (with_imm)
		wr.imm_data = htonl(imm);
	if (len <= b->c.max_inline && len <= 64)
		wr.send_flags |= IBV_SEND_INLINE;
	ret = ibv_post_send(b->c.qp, &wr, &bad);
	if (ret)
		RB_ERR("ibv_post_send(len %u): %s", len, strerror(ret));
	return ret ? -1 : 0;
}

static int post_recv(struct rb *b)
{
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = NULL, .num_sge = 0 }, *bad;
	int ret = ibv_post_recv(b->c.qp, &wr, &bad);

	if (ret)
		RB_ERR("ibv_post_recv: %s", strerror(ret));
	return ret ? -1 : 0;
}

static int wc_ok(struct rb *b, const struct ibv_wc *wc)
{
	if (wc->status == IBV_WC_SUCCESS)
		return 1;
	RB_ERR("completion error: %s (status %d, opcode %d, vendor_err 0x%x)",
	       ibv_wc_status_str(wc->status), wc->status, wc->opcode, wc->vendor_err);
	return 0;
}

/* ---- write bandwidth ------------------------------------------------------------------ */

static int bw_writes(struct rb *b, size_t size, unsigned iters, double *gbps, double *cpu_gbps)
{
	struct ibv_wc wc[16];
	unsigned posted = 0, done = 0, spins = 0;
	uint64_t t0 = sb_now_ns(), c0 = sb_cpu_ns();

	while (done < iters) {
		while (posted < iters && posted - done < b->o->window) {
			size_t off = (size_t)posted * size % b->o->max_size;

			if (post_write(b, off, off, (uint32_t)size, 1, 0, 0))
				return -1;
			posted++;
		}
		int n = ibv_poll_cq(b->c.cq, 16, wc);

		if (n < 0) {
			RB_ERR("ibv_poll_cq: %d", n);
			return -1;
		}
		for (int i = 0; i < n; i++)
			if (!wc_ok(b, &wc[i]))
				return -1;
		done += (unsigned)n;
		if (n == 0 && ++spins % 4096 == 0 && timed_out(b, "write completions"))
			return -1;
	}
	*gbps = (double)size * iters / (double)(sb_now_ns() - t0);
	*cpu_gbps = (double)size * iters / (double)(sb_cpu_ns() - c0 + 1);
	return 0;
}

/* One repetition: side 0 fills its source with this repetition's pattern and writes, side 1
 * checks the bytes and reports. Every repetition of the run has its own seed, so an offset no
 * write reached keeps the previous pattern and fails the check; side 1 does not clear its buffer,
 * which would leave the target's lines dirty in the other core's cache and tax the writer
 * with coherence traffic that pvm-bw (the ceiling) does not pay. */
static int bw_rep(struct rb *b, size_t size, unsigned iters, uint64_t seed, double *gbps,
		  double *cpu_gbps)
{
	size_t span = (size_t)iters * size < b->o->max_size ? (size_t)iters * size
							    : b->o->max_size;
	int32_t bad = 0;

	if (b->side == 0)
		sb_fill(b->c.buf, span, seed);
	if (sb_barrier(b->fd))
		return -1;
	arm_deadline(b);
	if (b->side == 0 && bw_writes(b, size, iters, gbps, cpu_gbps))
		return -1;
	if (sb_barrier(b->fd))
		return -1;
	if (b->side == 1) {
		size_t at = sb_verify(b->c.buf, span, seed);

		bad = at != span;
		if (bad)
			RB_ERR("write_bw size %zu: data mismatch at offset %zu of %zu", size, at,
			       span);
		return sb_send_all(b->fd, &bad, sizeof(bad)) || bad ? -1 : 0;
	}
	return sb_recv_all(b->fd, &bad, sizeof(bad)) || bad ? -1 : 0;
}

static int run_bw(struct rb *b)
{
	double *v = calloc(2 * (size_t)b->o->reps, sizeof(*v)), *cpu = v + b->o->reps;

	if (!v)
		return -1;
	for (unsigned s = 0; s < b->o->nsizes; s++) {
		size_t size = b->o->sizes[s];
		unsigned long long it = b->o->volume / size;

		if (it > b->o->max_iters)
			it = b->o->max_iters;
		if (it < 2ull * b->o->window)
			it = 2ull * b->o->window;
		for (unsigned r = 0; r < b->o->reps; r++) {
			if (bw_rep(b, size, (unsigned)it, ++b->bw_seed, &v[r], &cpu[r])) {
				free(v);
				return -1;
			}
		}
		/* Untimed integrity lap: each write to its own offset, so any single lost or
		 * misplaced write shows (the timed reps write each offset many times). */
		size_t lap = b->o->max_size / size > 4096 ? 4096 : b->o->max_size / size;
		double unused[2];

		if (bw_rep(b, size, (unsigned)lap, ++b->bw_seed, &unused[0], &unused[1])) {
			free(v);
			return -1;
		}
		if (b->side == 0)
			printf("write_bw size=%zu iters=%llu reps=%u median_GBps=%.6f "
			       "min_GBps=%.6f max_GBps=%.6f cpu_GBps=%.6f\n", size, it,
			       b->o->reps, sb_median(v, b->o->reps), sb_min(v, b->o->reps),
			       sb_max(v, b->o->reps), sb_median(cpu, b->o->reps));
		fflush(stdout);
	}
	free(v);
	return 0;
}

/* ---- ping-pong latency ---------------------------------------------------------------- */

/* Reaps send completions; for imm, also waits for the receive carrying `imm`. */
static int reap(struct rb *b, int want_recv, uint32_t imm, int *got)
{
	struct ibv_wc wc[8];
	int n = ibv_poll_cq(b->c.cq, 8, wc);

	if (n < 0) {
		RB_ERR("ibv_poll_cq: %d", n);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		if (!wc_ok(b, &wc[i]))
			return -1;
		if (!(wc[i].opcode & IBV_WC_RECV)) {
			b->sig_pending--;
			continue;
		}
		if (!want_recv || wc[i].opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
		    !(wc[i].wc_flags & IBV_WC_WITH_IMM) || wc[i].imm_data != htonl(imm) ||
		    wc[i].byte_len != 8) {
			RB_ERR("unexpected receive completion: opcode %d flags 0x%x imm 0x%x "
			       "byte_len %u (expected imm 0x%x, 8 bytes)", wc[i].opcode,
			       wc[i].wc_flags, ntohl(wc[i].imm_data), wc[i].byte_len, imm);
			return -1;
		}
		*got = 1;
	}
	return 0;
}

/* Waits until the peer's message number i has arrived. */
static int wait_msg(struct rb *b, int imm, unsigned i, uint8_t v)
{
	volatile uint8_t *flag = b->c.buf + b->o->max_size + 7;
	unsigned spins = 0;
	int got = 0;

	for (;;) {
		if (imm || b->sig_pending) {
			if (reap(b, imm, i, &got))
				return -1;
		}
		if (imm ? got : *flag == v)
			break;
		if (++spins % 4096 == 0 && timed_out(b, imm ? "write-with-imm" : "write data"))
			return -1;
	}
	if (imm) {
		if (*flag != v) {
			RB_ERR("message %u: receive completion before its data (0x%02x != 0x%02x)",
			       i, *flag, v);
			return -1;
		}
		return post_recv(b);
	}
	return 0;
}

static int send_msg(struct rb *b, int imm, unsigned i, uint8_t v)
{
	size_t src = b->o->max_size + 64;
	int sig = i % SIG_EVERY == SIG_EVERY - 1;

	memset(b->c.buf + src, v, 8);
	if (sig)
		b->sig_pending++;
	return post_write(b, src, b->o->max_size, 8, sig, imm, i);
}

static int lat_rep(struct rb *b, int imm, double *med_us)
{
	unsigned n = b->o->warmup + b->o->lat_iters;
	double *rtt = calloc(b->o->lat_iters, sizeof(*rtt));
	int rc = -1;

	if (!rtt)
		return -1;
	memset(b->c.buf + b->o->max_size, 0, 8);
	if (sb_barrier(b->fd))
		goto out;
	arm_deadline(b);
	for (unsigned i = 0; i < n; i++) {
		uint8_t v = (uint8_t)(i % 255 + 1);
		uint64_t t0 = sb_now_ns();

		if (b->side == 0 && (send_msg(b, imm, i, v) || wait_msg(b, imm, i, v)))
			goto out;
		if (b->side == 1 && (wait_msg(b, imm, i, v) || send_msg(b, imm, i, v)))
			goto out;
		if (i >= b->o->warmup)
			rtt[i - b->o->warmup] = (double)(sb_now_ns() - t0) / 2000.0;
	}
	while (b->sig_pending) {
		int got = 0;

		if (reap(b, 0, 0, &got) || (b->sig_pending && timed_out(b, "send completions")))
			goto out;
	}
	*med_us = sb_median(rtt, b->o->lat_iters);
	rc = sb_barrier(b->fd);
out:
	free(rtt);
	return rc;
}

static int run_lat(struct rb *b, int imm)
{
	double *v = calloc(b->o->reps, sizeof(*v));
	int rc = -1;

	if (!v)
		return -1;
	if (imm) {
		for (unsigned i = 0; i < b->o->cfg.rq_depth; i++)
			if (post_recv(b))
				goto out;
	}
	for (unsigned r = 0; r < b->o->reps; r++)
		if (lat_rep(b, imm, &v[r]))
			goto out;
	if (b->side == 0)
		printf("%s size=8 iters=%u reps=%u median_us=%.3f min_us=%.3f max_us=%.3f\n",
		       imm ? "imm_lat" : "write_lat", b->o->lat_iters, b->o->reps,
		       sb_median(v, b->o->reps), sb_min(v, b->o->reps), sb_max(v, b->o->reps));
	fflush(stdout);
	rc = 0;
out:
	free(v);
	return rc;
}

/* ---- processes and options ------------------------------------------------------------ */

static int run_side(const struct rb_opts *o, int fd, int side)
{
	struct rb b = { .o = o, .fd = fd, .side = side };
	char desc[256];
	int rc = 0;

	if (sb_setup(&b.c, &o->cfg, fd, side))
		return 1;
	if (side == 0) {
		sb_describe(&b.c, desc, sizeof(desc));
		printf("# sv-rawbench %s reps=%u window=%u\n", desc, o->reps, o->window);
		fflush(stdout);
	}
	if ((o->tests & T_BW) && run_bw(&b))
		rc = 1;
	if (!rc && (o->tests & T_LAT) && run_lat(&b, 0))
		rc = 1;
	if (!rc && (o->tests & T_IMM) && run_lat(&b, 1))
		rc = 1;
	if (!rc && sb_barrier(fd))
		rc = 1;
	sb_teardown(&b.c);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sv-rawbench [options]\n"
		"  -d DEV     device (default simib0; e.g. simroce0)\n"
		"  -i PORT    port (default 1)\n"
		"  -g IDX     GID index for the GRH (default: none on InfiniBand; on RoCE an\n"
		"             IPv4-mapped RoCE v2 GID)\n"
		"  -t LIST    tests: bw,lat,imm (default all)\n"
		"  -r REPS    repetitions, median reported (default 5)\n"
		"  -m SIZE    largest message of the sweep and buffer size (default 4M)\n"
		"  -S LIST    message sizes, comma separated (default 8,16,...,SIZE doubling)\n"
		"  -w N       writes in flight in write_bw (default 16)\n"
		"  -v BYTES   bytes written per repetition and size (default 256M)\n"
		"  -n N       latency round trips per repetition (default 10000)\n"
		"  -I         do not use inline sends\n"
		"  -T SEC     per-phase timeout (default 60)\n"
		"  -q         quick mode for tests: 3 reps, small volume, sizes 8,4K,64K,1M,max\n");
}

static int parse_sizes(const char *s, struct rb_opts *o)
{
	char *dup = strdup(s), *save = NULL, *tok;
	int rc = 0;

	o->nsizes = 0;
	for (tok = strtok_r(dup, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
		if (o->nsizes == MAX_SIZES || sb_parse_size(tok, &o->sizes[o->nsizes]) ||
		    o->sizes[o->nsizes] == 0)
			rc = -1;
		o->nsizes++;
	}
	free(dup);
	return rc;
}

static unsigned parse_tests(const char *s)
{
	unsigned t = 0;

	if (strstr(s, "bw"))
		t |= T_BW;
	if (strstr(s, "lat"))
		t |= T_LAT;
	if (strstr(s, "imm"))
		t |= T_IMM;
	return t;
}

static void set_defaults(struct rb_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->cfg.dev_name = "simib0";
	o->cfg.port = 1;
	o->cfg.gid_index = -1;
	o->cfg.want_inline = 1;
	o->cfg.sq_depth = 128;
	o->cfg.rq_depth = 64;
	o->cfg.cq_depth = 256;
	o->reps = 5;
	o->max_size = 4u << 20;
	o->window = 16;
	o->volume = 256u << 20;
	o->max_iters = 20000;
	o->lat_iters = 10000;
	o->warmup = 200;
	o->tests = T_BW | T_LAT | T_IMM;
	o->timeout_s = 60;
}

/* Applies -q and the default sweep; checks consistency. */
static int finish_opts(struct rb_opts *o, int quick)
{
	if (quick) {
		o->reps = o->reps > 3 ? 3 : o->reps;
		o->volume = 16u << 20;
		o->max_iters = 2000;
		o->lat_iters = o->lat_iters > 1000 ? 1000 : o->lat_iters;
		o->warmup = 50;
		if (o->nsizes == 0) {
			static const size_t q[] = { 8, 4096, 65536, 1u << 20 };

			for (unsigned i = 0; i < 4 && q[i] < o->max_size; i++)
				o->sizes[o->nsizes++] = q[i];
			o->sizes[o->nsizes++] = o->max_size;
		}
	}
	if (o->nsizes == 0)
		for (size_t s = 8; s <= o->max_size && o->nsizes < MAX_SIZES; s *= 2)
			o->sizes[o->nsizes++] = s;
	for (unsigned i = 0; i < o->nsizes; i++)
		if (o->sizes[i] > o->max_size)
			o->max_size = o->sizes[i];
	o->cfg.buf_size = o->max_size + LAT_AREA;
	if (o->window == 0 || o->window > o->cfg.sq_depth || o->reps == 0 || o->lat_iters == 0 ||
	    o->tests == 0)
		return -1;
	return 0;
}

static int parse_opts(int argc, char **argv, struct rb_opts *o)
{
	int c, quick = 0;

	set_defaults(o);
	while ((c = getopt(argc, argv, "d:i:g:t:r:m:S:w:v:n:IT:qh")) != -1) {
		int bad = 0;

		switch (c) {
		case 'd': o->cfg.dev_name = optarg; break;
		case 'i': o->cfg.port = (uint8_t)atoi(optarg); break;
		case 'g': o->cfg.gid_index = atoi(optarg); break;
		case 't': o->tests = parse_tests(optarg); break;
		case 'r': o->reps = (unsigned)atoi(optarg); break;
		case 'm': bad = sb_parse_size(optarg, &o->max_size) || o->max_size < 8; break;
		case 'S': bad = parse_sizes(optarg, o); break;
		case 'w': o->window = (unsigned)atoi(optarg); break;
		case 'v': bad = sb_parse_size(optarg, &o->volume); break;
		case 'n': o->lat_iters = (unsigned)atoi(optarg); break;
		case 'I': o->cfg.want_inline = 0; break;
		case 'T': o->timeout_s = (unsigned)atoi(optarg); break;
		case 'q': quick = 1; break;
		case 'h': usage(stdout); exit(0);
		default: bad = 1; break;
		}
		if (bad) {
			usage(stderr);
			return -1;
		}
	}
	if (optind != argc || finish_opts(o, quick)) {
		usage(stderr);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct rb_opts o;
	int sv[2], status, rc;
	pid_t pid;

	if (parse_opts(argc, argv, &o))
		return 2;
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
		/* exit(), not _exit(): simverbs' exit handlers (leak report) run in both sides */
		exit(run_side(&o, sv[1], 1));
	}
	close(sv[1]);
	rc = run_side(&o, sv[0], 0);
	close(sv[0]);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "sv-rawbench: the peer process failed\n");
		rc = 1;
	}
	return rc;
}
