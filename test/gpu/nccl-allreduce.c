/*
 * nccl-allreduce - real NCCL drives the plugin.
 *
 * N ranks as processes on one host (forked before any CUDA call).  Rank 0's
 * ncclUniqueId reaches the others through pipes (rank 0 -> parent -> ranks).
 * Each rank sets its own NCCL_HOSTID, so NCCL treats the ranks as separate
 * nodes: two ranks may share a GPU and everything between them crosses the
 * network, which NCCL_NET=Verbs pins to our plugin (NCCL_NET_PLUGIN: -p PATH)
 * so NCCL cannot fall back silently.  NCCL logs at INFO into one file per rank
 * (NCCL_DEBUG_FILE under -l DIR).
 *
 * Runs AllReduce (sum; float32 and bfloat16), AllGather and Send/Recv (ring)
 * over sizes -b .. -e (factor -f), checks every element after copying the
 * result back, prints an nccl-tests-style table per collective, and then
 * checks each rank's NCCL log: "Loaded net plugin Verbs (vN)" with the
 * version this NCCL loads (v12 from 2.30, v11 for 2.28/2.29), "Using network
 * Verbs", the devices NCCL saw ("GPU Direct RDMA Enabled|Disabled for HCA"),
 * NET channels, and with -g 0|1 whether they are GPUDirect ("/GDRDMA").
 *
 * Exit: 0 all good; 1 wrong values or a log assertion failed; 2 an NCCL or
 * CUDA error (message printed); 77 no GPU.
 */
#include "config.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <getopt.h>
#include <nccl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 16
#define MAX_SIZES 48

enum test { T_AR_F32, T_AR_BF16, T_AG, T_SR, NTESTS };
static const char *const test_name[NTESTS] = {
	"AllReduce sum float32", "AllReduce sum bfloat16", "AllGather uint8", "Send/Recv ring uint8",
};

struct result {
	double us;		/* time per operation */
	uint64_t wrong;		/* elements that differ */
	int done;
};

/* Shared between the parent and the ranks (MAP_SHARED before fork). */
struct shared {
	struct result r[MAX_RANKS][NTESTS][MAX_SIZES];
	int nccl_version[MAX_RANKS];
	int status[MAX_RANKS];	/* 0 running/ok, else exit code */
	char err[MAX_RANKS][512];
};

static struct {
	int nranks;
	size_t min_bytes, max_bytes;
	int factor, iters, warmup, timeout, expect_gdr, check_only;
	const char *plugin, *logdir;
} opt = { 2, 8, 256u << 20, 2, 5, 1, 240, -1, 0, NULL, "." };

static struct shared *sh;
static int my_rank;

#define FAIL(...) do { \
	snprintf(sh->err[my_rank], sizeof(sh->err[0]), __VA_ARGS__); \
	fprintf(stderr, "rank %d: %s\n", my_rank, sh->err[my_rank]); \
	exit(2); } while (0)
#define CUDACHK(c) do { cudaError_t e_ = (c); \
	if (e_ != cudaSuccess) FAIL("%s:%d: %s: %s", __FILE__, __LINE__, #c, \
				    cudaGetErrorString(e_)); } while (0)
#define NCCLCHK(comm, c) do { ncclResult_t r_ = (c); \
	if (r_ != ncclSuccess) FAIL("%s:%d: %s: %s (%s)", __FILE__, __LINE__, #c, \
				    ncclGetErrorString(r_), ncclGetLastError(comm)); } while (0)

/* The size after s: times the factor, the last one exactly max_bytes. */
static size_t next_size(size_t s)
{
	size_t n = s * (size_t)opt.factor;

	return s < opt.max_bytes && n > opt.max_bytes ? opt.max_bytes : n;
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* ---- data patterns: exact in float32 and bfloat16 sums ---- */
static float f32_val(int r, size_t i)
{
	return (float)((int)((i * 7 + (size_t)r * 13) % 61) - 30);
}

static float bf16_val(int r, size_t i)
{
	return (float)((int)((i * 5 + (size_t)r * 3) % 17) - 8);
}

static uint16_t to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return (uint16_t)(u >> 16);	/* exact: small integers */
}

static float from_bf16(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static uint8_t byte_val(int r, size_t i)
{
	return (uint8_t)(r * 29 + i * 7 + (i >> 10));
}

struct bufs {
	void *send, *recv;	/* device */
	unsigned char *hsend, *hrecv;
	cudaStream_t stream;
	ncclComm_t comm;
};

/* Bytes this rank sends and the element count NCCL is given. */
static size_t test_count(enum test t, size_t bytes, size_t *send_bytes)
{
	size_t n;

	switch (t) {
	case T_AR_F32: n = bytes / 4; *send_bytes = n * 4; return n;
	case T_AR_BF16: n = bytes / 2; *send_bytes = n * 2; return n;
	case T_AG: n = bytes / (size_t)opt.nranks; *send_bytes = n; return n;
	default: *send_bytes = bytes; return bytes;
	}
}

static void fill_send(struct bufs *b, enum test t, size_t count, size_t send_bytes)
{
	for (size_t i = 0; i < count; i++) {
		if (t == T_AR_F32)
			((float *)b->hsend)[i] = f32_val(my_rank, i);
		else if (t == T_AR_BF16)
			((uint16_t *)b->hsend)[i] = to_bf16(bf16_val(my_rank, i));
		else
			b->hsend[i] = byte_val(my_rank, i);
	}
	CUDACHK(cudaMemcpy(b->send, b->hsend, send_bytes, cudaMemcpyHostToDevice));
	CUDACHK(cudaMemset(b->recv, 0xff, opt.max_bytes));	/* NaN / 0xff: "not written" */
}

static uint64_t check_recv(struct bufs *b, enum test t, size_t count)
{
	int n = opt.nranks, from = (my_rank + n - 1) % n;
	size_t bytes = t == T_AR_F32 ? count * 4 : t == T_AR_BF16 ? count * 2 :
		       t == T_AG ? count * (size_t)n : count;
	uint64_t wrong = 0;

	CUDACHK(cudaMemcpy(b->hrecv, b->recv, bytes, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < (t == T_AG ? count * (size_t)n : count); i++) {
		if (t == T_AR_F32 || t == T_AR_BF16) {
			float want = 0, got;

			for (int r = 0; r < n; r++)
				want += t == T_AR_F32 ? f32_val(r, i) : bf16_val(r, i);
			got = t == T_AR_F32 ? ((float *)b->hrecv)[i]
					    : from_bf16(((uint16_t *)b->hrecv)[i]);
			wrong += got != want;
		} else if (t == T_AG) {
			wrong += b->hrecv[i] != byte_val((int)(i / count), i % count);
		} else {
			wrong += b->hrecv[i] != byte_val(from, i);
		}
	}
	return wrong;
}

static void run_op(struct bufs *b, enum test t, size_t count)
{
	int n = opt.nranks;

	switch (t) {
	case T_AR_F32:
		NCCLCHK(b->comm, ncclAllReduce(b->send, b->recv, count, ncclFloat32, ncclSum,
					       b->comm, b->stream));
		break;
	case T_AR_BF16:
		NCCLCHK(b->comm, ncclAllReduce(b->send, b->recv, count, ncclBfloat16, ncclSum,
					       b->comm, b->stream));
		break;
	case T_AG:
		NCCLCHK(b->comm, ncclAllGather(b->send, b->recv, count, ncclUint8, b->comm,
					       b->stream));
		break;
	default:
		NCCLCHK(b->comm, ncclGroupStart());
		NCCLCHK(b->comm, ncclSend(b->send, count, ncclUint8, (my_rank + 1) % n, b->comm,
					  b->stream));
		NCCLCHK(b->comm, ncclRecv(b->recv, count, ncclUint8, (my_rank + n - 1) % n,
					  b->comm, b->stream));
		NCCLCHK(b->comm, ncclGroupEnd());
		break;
	}
}

static void run_size(struct bufs *b, enum test t, int si, size_t bytes)
{
	size_t send_bytes, count = test_count(t, bytes, &send_bytes);
	int iters = opt.iters;
	struct result *res = &sh->r[my_rank][t][si];
	double t0;

	if (!count)
		return;
	if (bytes > (1u << 20))
		iters = (int)((size_t)opt.iters * (1u << 20) / bytes);
	iters = iters < 1 ? 1 : iters;
	fill_send(b, t, count, send_bytes);
	for (int i = 0; i < opt.warmup; i++)
		run_op(b, t, count);
	CUDACHK(cudaStreamSynchronize(b->stream));
	t0 = now_us();
	for (int i = 0; i < iters; i++)
		run_op(b, t, count);
	CUDACHK(cudaStreamSynchronize(b->stream));
	res->us = (now_us() - t0) / iters;
	res->wrong = check_recv(b, t, count);
	res->done = 1;
}

static void rank_env(int rank)
{
	char v[1024];

	snprintf(v, sizeof(v), "nccl-verbs-check-%d-rank%d", (int)getppid(), rank);
	setenv("NCCL_HOSTID", v, 1);	/* a node of its own: NCCL must use the network */
	snprintf(v, sizeof(v), "%s/nccl-rank%d.log", opt.logdir, rank);
	setenv("NCCL_DEBUG_FILE", v, 1);
	setenv("NCCL_DEBUG", "INFO", 0);
	setenv("NCCL_DEBUG_SUBSYS", "INIT,ENV,NET,BOOTSTRAP", 0);
	setenv("NCCL_NET", "Verbs", 0);
	if (opt.plugin)
		setenv("NCCL_NET_PLUGIN", opt.plugin, 1);
}

static int rank_main(int rank, int id_wr, int id_rd)
{
	struct bufs b;
	ncclUniqueId id;
	int ngpu = 0;
	uint64_t wrong = 0;

	my_rank = rank;
	rank_env(rank);
	if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < 1)
		return 77;
	CUDACHK(cudaSetDevice(rank % ngpu));
	NCCLCHK(NULL, ncclGetVersion(&sh->nccl_version[rank]));
	if (rank == 0) {
		NCCLCHK(NULL, ncclGetUniqueId(&id));
		if (write(id_wr, &id, sizeof(id)) != (ssize_t)sizeof(id))
			FAIL("cannot pass the unique id: %s", strerror(errno));
	} else if (read(id_rd, &id, sizeof(id)) != (ssize_t)sizeof(id)) {
		FAIL("no unique id from rank 0");
	}
	memset(&b, 0, sizeof(b));
	CUDACHK(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking));
	CUDACHK(cudaMalloc(&b.send, opt.max_bytes));
	CUDACHK(cudaMalloc(&b.recv, opt.max_bytes));
	b.hsend = malloc(opt.max_bytes);
	b.hrecv = malloc(opt.max_bytes);
	if (!b.hsend || !b.hrecv)
		FAIL("out of host memory");
	NCCLCHK(NULL, ncclCommInitRank(&b.comm, opt.nranks, id, rank));
	for (int t = 0; t < NTESTS; t++) {
		int si = 0;

		for (size_t s = opt.min_bytes; s <= opt.max_bytes && si < MAX_SIZES;
		     s = next_size(s), si++) {
			run_size(&b, (enum test)t, si, s);
			wrong += sh->r[rank][t][si].wrong;
		}
	}
	NCCLCHK(b.comm, ncclCommFinalize(b.comm));
	NCCLCHK(b.comm, ncclCommDestroy(b.comm));
	cudaFree(b.send);
	cudaFree(b.recv);
	return wrong ? 1 : 0;
}

/* ---- parent: tables ---- */
static double bus_factor(enum test t)
{
	double n = opt.nranks;

	return t == T_AR_F32 || t == T_AR_BF16 ? 2.0 * (n - 1) / n : t == T_AG ? (n - 1) / n : 1.0;
}

static uint64_t print_tables(void)
{
	uint64_t total = 0;

	for (int t = 0; t < NTESTS; t++) {
		int si = 0;
		double peak = 0;

		printf("#\n# %s, %d ranks\n#%12s %12s %10s %10s %10s %8s\n", test_name[t], opt.nranks,
		       "size(B)", "count", "time(us)", "algbw", "busbw", "#wrong");
		printf("#%12s %12s %10s %10s %10s %8s\n", "", "(elements)", "", "(GB/s)", "(GB/s)", "");
		for (size_t s = opt.min_bytes; s <= opt.max_bytes && si < MAX_SIZES;
		     s = next_size(s), si++) {
			size_t sb, count = test_count((enum test)t, s, &sb);
			size_t bytes = t == T_AG ? sb * (size_t)opt.nranks : sb;	/* as moved */
			double us = 0, algbw;
			uint64_t wrong = 0;
			int missing = 0;

			if (!count)
				continue;
			for (int r = 0; r < opt.nranks; r++) {
				const struct result *x = &sh->r[r][t][si];

				missing += !x->done;
				us = x->us > us ? x->us : us;
				wrong += x->wrong;
			}
			if (missing) {
				printf(" %12zu %12zu %10s %10s %10s %8s\n", bytes, count, "-", "-", "-",
				       "n/a");
				total++;
				continue;
			}
			algbw = (double)bytes / us / 1e3;
			peak = algbw * bus_factor((enum test)t) > peak ? algbw * bus_factor((enum test)t)
								      : peak;
			printf(" %12zu %12zu %10.1f %10.3f %10.3f %8llu\n", bytes, count, us, algbw,
			       algbw * bus_factor((enum test)t), (unsigned long long)wrong);
			total += wrong;
		}
		printf("# %s: peak busbw %.3f GB/s\n", test_name[t], peak);
	}
	return total;
}

/* ---- parent: NCCL log assertions ---- */
static int expected_plugin_version(int code)
{
	if (code >= 23000)
		return 12;
	if (code >= 22800)
		return 11;
	return 0;	/* not asserted */
}

struct log_facts {
	int loaded_v, using_verbs, channels, gdr_channels, gdr_on, gdr_off, plugin_warns;
	char devices[512];
};

static void log_scan_line(struct log_facts *f, const char *line)
{
	const char *p;
	char dev[64];
	int hca;

	if ((p = strstr(line, "Loaded net plugin Verbs (v")))
		f->loaded_v = atoi(p + strlen("Loaded net plugin Verbs (v"));
	if (strstr(line, "Using network Verbs"))
		f->using_verbs = 1;
	if (strstr(line, "via NET/Verbs/")) {
		f->channels++;
		f->gdr_channels += strstr(line, "/GDRDMA") != NULL;
	}
	if ((p = strstr(line, "GPU Direct RDMA "))) {
		bool on = !strncmp(p + 16, "Enabled", 7);

		f->gdr_on += on;
		f->gdr_off += !on;
		if ((p = strstr(p, " for HCA ")) && sscanf(p, " for HCA %d '%63[^']'", &hca, dev) == 2 &&
		    strlen(f->devices) + strlen(dev) + 16 < sizeof(f->devices))
			snprintf(f->devices + strlen(f->devices), sizeof(f->devices) - strlen(f->devices),
				 "%s%d:%s(GDR %s)", f->devices[0] ? " " : "", hca, dev, on ? "on" : "off");
	}
	if (strstr(line, "NCCL WARN") && strstr(line, "NET/Verbs")) {
		/* advice about this host's memlock limit is no failure of the run */
		bool memlock = strstr(line, "RLIMIT_MEMLOCK") != NULL;

		f->plugin_warns += !memlock;
		fprintf(stderr, "  plugin warning%s: %s", memlock ? " (not counted)" : "", line);
	}
}

static int check_log(int rank)
{
	char path[1200], line[2048];
	struct log_facts f;
	int want = expected_plugin_version(sh->nccl_version[rank]), bad = 0;
	FILE *fp;

	memset(&f, 0, sizeof(f));
	snprintf(path, sizeof(path), "%s/nccl-rank%d.log", opt.logdir, rank);
	fp = fopen(path, "r");
	if (!fp) {
		printf("rank %d: no NCCL log %s: %s\n", rank, path, strerror(errno));
		return 1;
	}
	while (fgets(line, sizeof(line), fp))
		log_scan_line(&f, line);
	fclose(fp);
	printf("rank %d: NCCL %d.%d.%d, loaded net plugin Verbs (v%d), %s, devices [%s], "
	       "%d NET channel line(s), %d GDRDMA\n", rank, sh->nccl_version[rank] / 10000,
	       sh->nccl_version[rank] / 100 % 100, sh->nccl_version[rank] % 100, f.loaded_v,
	       f.using_verbs ? "using network Verbs" : "NOT using network Verbs", f.devices,
	       f.channels, f.gdr_channels);
#define LOGCHECK(c, ...) do { if (!(c)) { printf("rank %d: log check failed: ", rank); \
	printf(__VA_ARGS__); printf(" (%s)\n", path); bad = 1; } } while (0)
	LOGCHECK(f.loaded_v > 0, "no \"Loaded net plugin Verbs (vN)\"");
	LOGCHECK(!want || f.loaded_v == want, "plugin loaded as v%d, NCCL %d should load v%d",
		 f.loaded_v, sh->nccl_version[rank], want);
	LOGCHECK(f.using_verbs, "no \"Using network Verbs\"");
	LOGCHECK(f.devices[0], "no \"GPU Direct RDMA ... for HCA\" device line");
	LOGCHECK(f.channels > 0, "no channel \"via NET/Verbs/\"");
	LOGCHECK(!f.plugin_warns, "%d plugin warning(s)", f.plugin_warns);
	if (opt.expect_gdr == 1) {
		LOGCHECK(f.gdr_on > 0, "GPUDirect expected, NCCL reports it disabled for every HCA");
		LOGCHECK(f.gdr_channels > 0, "GPUDirect expected, no channel uses GDRDMA");
	} else if (opt.expect_gdr == 0) {
		LOGCHECK(f.gdr_on == 0, "host staging expected, NCCL reports GPU Direct RDMA enabled");
		LOGCHECK(f.gdr_channels == 0, "host staging expected, %d channel(s) use GDRDMA",
			 f.gdr_channels);
	}
#undef LOGCHECK
	return bad;
}

/* ---- parent: processes ---- */
static void usage(const char *me)
{
	fprintf(stderr, "usage: %s [-n ranks] [-b min_bytes] [-e max_bytes] [-f factor] [-i iters] "
		"[-w warmup] [-t timeout_s] [-p plugin.so] [-l logdir] [-g 0|1 (expect GPUDirect)]\n"
		"       %s -C NCCL_VERSION_CODE [-n ranks] [-l logdir] [-g 0|1]: only check the logs\n",
		me, me);
	exit(2);
}

static size_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	if (*end == 'K' || *end == 'k')
		v *= 1024;
	else if (*end == 'M' || *end == 'm')
		v *= 1024 * 1024;
	else if (*end == 'G' || *end == 'g')
		v *= 1024.0 * 1024 * 1024;
	return (size_t)v;
}

static void parse(int argc, char **argv)
{
	int c;

	while ((c = getopt(argc, argv, "n:b:e:f:i:w:t:p:l:g:C:h")) != -1) {
		switch (c) {
		case 'n': opt.nranks = atoi(optarg); break;
		case 'b': opt.min_bytes = parse_size(optarg); break;
		case 'e': opt.max_bytes = parse_size(optarg); break;
		case 'f': opt.factor = atoi(optarg); break;
		case 'i': opt.iters = atoi(optarg); break;
		case 'w': opt.warmup = atoi(optarg); break;
		case 't': opt.timeout = atoi(optarg); break;
		case 'p': opt.plugin = optarg; break;
		case 'l': opt.logdir = optarg; break;
		case 'g': opt.expect_gdr = atoi(optarg); break;
		case 'C': opt.check_only = atoi(optarg); break;
		default: usage(argv[0]);
		}
	}
	if (opt.nranks < 2 || opt.nranks > MAX_RANKS || opt.factor < 2 || !opt.min_bytes ||
	    opt.min_bytes > opt.max_bytes || opt.iters < 1 || opt.warmup < 0 || opt.timeout < 1)
		usage(argv[0]);
}

/* Waits for every rank (killing them all at the timeout); worst status. */
static int wait_ranks(pid_t *pids)
{
	double end = now_us() + opt.timeout * 1e6;
	int left = opt.nranks, worst = 0;

	while (left) {
		int st;
		pid_t p = waitpid(-1, &st, WNOHANG);

		if (p <= 0) {
			if (now_us() > end) {
				printf("timeout after %d s: killing the ranks\n", opt.timeout);
				for (int r = 0; r < opt.nranks; r++)
					if (pids[r] > 0)
						kill(pids[r], SIGKILL);
				end = now_us() + 3600e6;
				worst = worst > 3 ? worst : 3;
			}
			usleep(20000);
			continue;
		}
		for (int r = 0; r < opt.nranks; r++) {
			if (pids[r] != p)
				continue;
			sh->status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			if (sh->status[r])
				printf("rank %d exited with %d%s%s\n", r, sh->status[r],
				       sh->err[r][0] ? ": " : "", sh->err[r]);
			if (sh->status[r] == 77 && !worst)
				worst = 77;
			else if (sh->status[r] && sh->status[r] != 77)
				worst = sh->status[r] > worst || worst == 77 ? sh->status[r] : worst;
			pids[r] = 0;
			left--;
		}
	}
	return worst;
}

/* true: rank 0's unique id arrived within the timeout. */
static bool id_from_rank0(int fd, ncclUniqueId *id)
{
	struct pollfd p = { fd, POLLIN, 0 };

	return poll(&p, 1, opt.timeout * 1000) == 1 && read(fd, id, sizeof(*id)) == (ssize_t)sizeof(*id);
}

int main(int argc, char **argv)
{
	int to_parent[2], to_rank[MAX_RANKS][2], worst, bad = 0;
	pid_t pids[MAX_RANKS];
	ncclUniqueId id;
	uint64_t wrong;

	parse(argc, argv);
	setvbuf(stdout, NULL, _IOLBF, 0);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 2;
	if (opt.check_only) {	/* the log assertions alone, on existing logs */
		for (int r = 0; r < opt.nranks; r++) {
			sh->nccl_version[r] = opt.check_only;
			bad |= check_log(r);
		}
		return bad;
	}
	if (pipe(to_parent))
		return 2;
	for (int r = 0; r < opt.nranks; r++) {
		if (pipe(to_rank[r]))
			return 2;
		pids[r] = fork();
		if (pids[r] < 0)
			return 2;
		if (!pids[r]) {
			/* keep only our own ends, so a dead rank 0 means EOF everywhere */
			close(to_parent[0]);
			if (r)
				close(to_parent[1]);
			for (int j = 0; j <= r; j++)
				close(to_rank[j][1]);
			for (int j = 0; j < r; j++)
				close(to_rank[j][0]);
			_exit(rank_main(r, to_parent[1], to_rank[r][0]));
		}
	}
	/* relay rank 0's id; a rank that dies before reading it just gets EPIPE */
	signal(SIGPIPE, SIG_IGN);
	close(to_parent[1]);
	if (id_from_rank0(to_parent[0], &id))
		for (int r = 1; r < opt.nranks; r++)
			if (write(to_rank[r][1], &id, sizeof(id)) != (ssize_t)sizeof(id))
				printf("cannot pass the id to rank %d\n", r);
	for (int r = 0; r < opt.nranks; r++)
		close(to_rank[r][1]);	/* a rank still waiting sees EOF */
	worst = wait_ranks(pids);
	if (worst == 77) {
		printf("no GPU (cudaGetDeviceCount): skipped\n");
		return 77;
	}
	wrong = print_tables();
	for (int r = 0; r < opt.nranks; r++)
		bad |= check_log(r);
	printf("# %s: %d ranks, %llu wrong element(s), log checks %s, worst rank status %d\n",
	       worst || wrong || bad ? "FAILED" : "OK", opt.nranks, (unsigned long long)wrong,
	       bad ? "failed" : "passed", worst);
	if (worst)
		return worst == 1 ? 1 : 2;
	return wrong || bad ? 1 : 0;
}
