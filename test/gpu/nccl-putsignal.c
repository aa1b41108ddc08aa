/*
 * nccl-putsignal - real NCCL's one-sided operations through our RMA tables
 * (NCCL 2.29+ ncclPutSignal / ncclWaitSignal / ncclSignal; NCCL 2.30+ finds
 * ncclRmaPlugin_v14 or _v13 in the net plugin's library, docs/rma.md).
 *
 * N ranks as processes on one host (forked before any CUDA call), each its own
 * NCCL_HOSTID so every peer is a remote node and NCCL's RMA proxy (the plugin)
 * carries the traffic, not its copy engine; rank 0's ncclUniqueId reaches the
 * others through pipes. Each rank allocates symmetric memory (ncclMemAlloc),
 * registers it as windows (ncclCommWindowRegister, NCCL_WIN_COLL_SYMMETRIC),
 * then for sizes -b .. -e (x4): a barrier (ncclSignal to every peer,
 * ncclWaitSignal), ncclPutSignal of its chunk for each peer into that peer's
 * window at offset rank * size (signal 0, context 0) in one group,
 * ncclWaitSignal for one signal from every peer, then every byte checked;
 * prints the time per all-to-all. Then every rank's NCCL log must show
 * "RMA/Plugin: Loaded rma plugin Verbs" and "Assigned plugin Verbs": without
 * them NCCL used its internal IB proxy and the plugin was not tested.
 *
 * usage: nccl-putsignal -n RANKS [-b MIN] [-e MAX] [-i ITERS] -l LOGDIR [-p PLUGIN]
 * Exit: 0 all good; 1 wrong bytes or a log check failed; 2 an NCCL or CUDA
 * error; 77 no GPU, or an nccl.h older than 2.29 (no ncclPutSignal).
 */
#include "config.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 16

static struct {
	int nranks, iters;
	size_t min_bytes, max_bytes;
	const char *logdir, *plugin;
} opt = { 2, 5, 8, 4 << 20, NULL, NULL };

#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= 22902

static int my_rank;

#define FAIL(code, ...) do { \
	printf("rank %d: ", my_rank); \
	printf(__VA_ARGS__); \
	putchar('\n'); \
	exit(code); \
} while (0)
#define CUDACHK(c) do { \
	cudaError_t e_ = (c); \
	if (e_ != cudaSuccess) FAIL(2, "%s: %s", #c, cudaGetErrorString(e_)); \
} while (0)
#define NCCLCHK(c) do { \
	ncclResult_t r_ = (c); \
	if (r_ != ncclSuccess) FAIL(2, "%s: %s", #c, ncclGetErrorString(r_)); \
} while (0)

static unsigned char pat(int from, int to, size_t i, size_t size)
{
	return (unsigned char)(from * 31 + to * 7 + i * 13 + (i >> 8) + size);
}

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* ncclSignal to every peer, then one signal from each (the API guide's barrier) */
static void barrier(ncclComm_t comm, cudaStream_t s, ncclWaitSignalDesc_t *d, int n)
{
	NCCLCHK(ncclGroupStart());
	for (int i = 0; i < n; i++)
		NCCLCHK(ncclSignal(d[i].peer, 0, 0, 0, comm, s));
	NCCLCHK(ncclGroupEnd());
	NCCLCHK(ncclWaitSignal(n, d, comm, s));
}

static int rank_main(int rank, int id_wr, int id_rd)
{
	ncclWaitSignalDesc_t d[MAX_RANKS];
	size_t total = opt.max_bytes * (size_t)opt.nranks;
	unsigned char *send, *recv, *h = malloc(total);
	ncclWindow_t sw, rw;
	ncclComm_t comm;
	ncclUniqueId id;
	cudaStream_t s;
	int ngpu = 0, n = 0;
	char v[1024];

	my_rank = rank;
	snprintf(v, sizeof(v), "nccl-putsignal-%d-rank%d", (int)getppid(), rank);
	setenv("NCCL_HOSTID", v, 1);	/* a node of its own: the network, not the copy engine */
	snprintf(v, sizeof(v), "%s/nccl-putsignal-rank%d.log", opt.logdir, rank);
	setenv("NCCL_DEBUG_FILE", v, 1);
	setenv("NCCL_DEBUG", "INFO", 0);
	setenv("NCCL_DEBUG_SUBSYS", "INIT,NET", 0);
	setenv("NCCL_NET", "Verbs", 0);
	if (opt.plugin)
		setenv("NCCL_NET_PLUGIN", opt.plugin, 1);
	if (!h || cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < 1)
		return 77;
	CUDACHK(cudaSetDevice(rank % ngpu));
	NCCLCHK(ncclGetVersion(&n));
	if (n < 23000) {	/* 2.29 has ncclPutSignal but loads no RMA plugin */
		printf("rank %d: NCCL %d loads no RMA plugin (2.30+): skipped\n", rank, n);
		return 77;
	}
	n = 0;
	if (rank == 0) {
		NCCLCHK(ncclGetUniqueId(&id));
		if (write(id_wr, &id, sizeof(id)) != (ssize_t)sizeof(id))
			FAIL(2, "cannot pass the unique id");
	} else if (read(id_rd, &id, sizeof(id)) != (ssize_t)sizeof(id)) {
		FAIL(2, "no unique id from rank 0");
	}
	NCCLCHK(ncclCommInitRank(&comm, opt.nranks, id, rank));
	CUDACHK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	NCCLCHK(ncclMemAlloc((void **)&send, total));
	NCCLCHK(ncclMemAlloc((void **)&recv, total));
	NCCLCHK(ncclCommWindowRegister(comm, send, total, &sw, NCCL_WIN_COLL_SYMMETRIC));
	NCCLCHK(ncclCommWindowRegister(comm, recv, total, &rw, NCCL_WIN_COLL_SYMMETRIC));
	for (int p = 0; p < opt.nranks; p++)
		if (p != rank)
			d[n++] = (ncclWaitSignalDesc_t){ .opCnt = 1, .peer = p, .sigIdx = 0, .ctx = 0 };
	for (size_t size = opt.min_bytes; size <= opt.max_bytes; size *= 4) {
		double t0 = 0;

		for (int p = 0; p < opt.nranks; p++)
			for (size_t i = 0; i < size; i++)
				h[(size_t)p * size + i] = pat(rank, p, i, size);
		CUDACHK(cudaMemcpy(send, h, (size_t)opt.nranks * size, cudaMemcpyHostToDevice));
		for (int it = 0; it <= opt.iters; it++) {
			if (it == 1)
				t0 = now_us();
			CUDACHK(cudaMemsetAsync(recv, 0, (size_t)opt.nranks * size, s));
			barrier(comm, s, d, n);	/* every window cleared before anyone puts */
			NCCLCHK(ncclGroupStart());
			for (int i = 0; i < n; i++)
				NCCLCHK(ncclPutSignal(send + (size_t)d[i].peer * size, size, ncclUint8,
						      d[i].peer, rw, (size_t)rank * size, 0, 0, 0, comm,
						      s));
			NCCLCHK(ncclGroupEnd());
			NCCLCHK(ncclWaitSignal(n, d, comm, s));
		}
		CUDACHK(cudaStreamSynchronize(s));
		if (rank == 0)
			printf("%10zu B to each of %d peers: %.1f us per all-to-all (with a barrier)\n",
			       size, n, (now_us() - t0) / opt.iters);
		CUDACHK(cudaMemcpy(h, recv, (size_t)opt.nranks * size, cudaMemcpyDeviceToHost));
		for (int i = 0; i < n; i++)
			for (size_t j = 0; j < size; j++)
				if (h[(size_t)d[i].peer * size + j] != pat(d[i].peer, rank, j, size))
					FAIL(1, "%zu B from rank %d: byte %zu is 0x%02x, expected 0x%02x",
					     size, d[i].peer, j, h[(size_t)d[i].peer * size + j],
					     pat(d[i].peer, rank, j, size));
	}
	barrier(comm, s, d, n);	/* nobody deregisters while a peer still puts */
	CUDACHK(cudaStreamSynchronize(s));
	NCCLCHK(ncclCommWindowDeregister(comm, sw));
	NCCLCHK(ncclCommWindowDeregister(comm, rw));
	NCCLCHK(ncclMemFree(send));
	NCCLCHK(ncclMemFree(recv));
	NCCLCHK(ncclCommFinalize(comm));
	NCCLCHK(ncclCommDestroy(comm));
	printf("rank %d: put+signal to %d peers, %zu .. %zu B, every byte: ok\n", rank, n,
	       opt.min_bytes, opt.max_bytes);
	return 0;
}

/* The rank's NCCL log names our RMA plugin as loaded and assigned. */
static int check_log(int rank)
{
	char path[1024], line[2048];
	int loaded = 0, assigned = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/nccl-putsignal-rank%d.log", opt.logdir, rank);
	f = fopen(path, "r");
	if (!f) {
		printf("rank %d: no NCCL log %s\n", rank, path);
		return 1;
	}
	while (fgets(line, sizeof(line), f)) {
		loaded |= strstr(line, "RMA/Plugin: Loaded rma plugin Verbs") != NULL;
		assigned |= strstr(line, "RMA/Plugin: Assigned plugin Verbs") != NULL;
	}
	fclose(f);
	if (!loaded || !assigned)
		printf("rank %d: its NCCL log lacks 'RMA/Plugin: %s': NCCL did not use our RMA "
		       "tables\n", rank, loaded ? "Assigned plugin Verbs" : "Loaded rma plugin Verbs");
	return !loaded || !assigned;
}

static int run(void)
{
	int to_parent[2], to_rank[MAX_RANKS][2], worst = 0, bad = 0;
	pid_t pids[MAX_RANKS];
	ncclUniqueId id;
	struct pollfd pf;

	if (pipe(to_parent))
		return 2;
	for (int r = 0; r < opt.nranks; r++) {
		if (pipe(to_rank[r]) || (pids[r] = fork()) < 0)
			return 2;
		if (!pids[r]) {
			/* only our own ends: a dead rank 0 means EOF for the others */
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
	signal(SIGPIPE, SIG_IGN);
	close(to_parent[1]);
	pf = (struct pollfd){ to_parent[0], POLLIN, 0 };
	if (poll(&pf, 1, 120000) == 1 && read(to_parent[0], &id, sizeof(id)) == (ssize_t)sizeof(id))
		for (int r = 1; r < opt.nranks; r++)
			if (write(to_rank[r][1], &id, sizeof(id)) != (ssize_t)sizeof(id))
				printf("cannot pass the id to rank %d\n", r);
	for (int r = 0; r < opt.nranks; r++) {
		int st, code;

		close(to_rank[r][1]);
		waitpid(pids[r], &st, 0);
		code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (code && code != 77)
			printf("rank %d exited with %d\n", r, code);
		worst = code > worst ? code : worst;
	}
	if (worst == 77) {
		printf("no GPU (cudaGetDeviceCount): skipped\n");
		return 77;
	}
	for (int r = 0; r < opt.nranks && !worst; r++)
		bad |= check_log(r);
	printf("# %s: %d ranks\n", worst || bad ? "FAILED" : "OK", opt.nranks);
	return worst ? (worst == 1 ? 1 : 2) : bad;
}

#else /* an nccl.h older than 2.29 */

static int run(void)
{
	printf("this nccl.h (NCCL %d) has no ncclPutSignal (NCCL 2.29+): skipped\n",
	       NCCL_VERSION_CODE);
	return 77;
}

#endif

int main(int argc, char **argv)
{
	int c;

	while ((c = getopt(argc, argv, "n:b:e:i:l:p:")) != -1) {
		switch (c) {
		case 'n': opt.nranks = atoi(optarg); break;
		case 'b': opt.min_bytes = strtoull(optarg, NULL, 0); break;
		case 'e': opt.max_bytes = strtoull(optarg, NULL, 0); break;
		case 'i': opt.iters = atoi(optarg); break;
		case 'l': opt.logdir = optarg; break;
		case 'p': opt.plugin = optarg; break;
		default: goto usage;
		}
	}
	if (opt.nranks < 2 || opt.nranks > MAX_RANKS || !opt.min_bytes ||
	    opt.min_bytes > opt.max_bytes || opt.iters < 1 || !opt.logdir)
		goto usage;
	setvbuf(stdout, NULL, _IOLBF, 0);
	return run();
usage:
	fprintf(stderr, "usage: %s -n RANKS [-b MIN] [-e MAX] [-i ITERS] -l LOGDIR [-p PLUGIN]\n",
		argv[0]);
	return 2;
}
