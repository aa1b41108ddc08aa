/*
 * rma_bench.c - rma_harness -b: figures between ranks 0 and 1 (others idle;
 * across simulated hosts when the ranks are: test/cluster/cl-rma.sh): put,
 * get and put+signal bandwidth per size (a window of 16 requests in flight,
 * in MB/s), and the signal's half round trip (8 B put+signal answered by one,
 * in us).
 */
#include <sched.h>
#include <string.h>

#include "rma_harness.h"

static void bench_bw(const char *what, size_t size, int iters)
{
	void *req[16] = { NULL };
	uint64_t t0 = now_ns();

	for (int i = 0; i < iters; i++) {
		int k = i % 16;

		if (req[k])
			OK(wait_req(req[k]));
		if (!strcmp(what, "get"))
			POST(rma.iget(rctx, 0, 0, srcw, size, 0, dstw, 1, 0, &req[k]), &req[k]);
		else if (!strcmp(what, "put"))
			POST(rma.iput(rctx, 0, 0, srcw, size, 0, dstw, 1, 0, &req[k]), &req[k]);
		else
			POST(rma.iputSignal(rctx, 0, 0, srcw, size, 0, dstw, 1, 0, sigw, 1,
					    NCCL_NET_SIGNAL_OP_ADD, true, 0, &req[k]), &req[k]);
	}
	for (int k = 0; k < 16; k++)
		if (req[k])
			OK(wait_req(req[k]));
	printf("%-10s %10zu %10.1f\n", what, size,
	       (double)size * iters / ((double)(now_ns() - t0) / 1e3));
}

static void bench_lat(int iters)
{
	int peer = 1 - rank;
	uint64_t t0 = 0;
	void *req;

	for (int i = 0; i <= iters; i++) {
		if (i == 1)
			t0 = now_ns();
		if (rank == 0) {
			POST(rma.iputSignal(rctx, 0, 0, srcw, 8, 0, dstw, (uint32_t)peer, 8, sigw, 1,
					    NCCL_NET_SIGNAL_OP_ADD, true, 0, &req), &req);
			OK(wait_req(req));
		}
		for (int spin = 0; __atomic_load_n(&sig[rank], __ATOMIC_ACQUIRE) < (uint64_t)i + 1;)
			if (++spin > 100)
				sched_yield(); /* as simverbs' poll does: a loaded host */
		if (rank == 1) {
			POST(rma.iputSignal(rctx, 0, 0, srcw, 8, 0, dstw, (uint32_t)peer, 0, sigw, 1,
					    NCCL_NET_SIGNAL_OP_ADD, true, 0, &req), &req);
			OK(wait_req(req));
		}
	}
	if (rank == 0)
		printf("%-10s %10d %10.2f us (half round trip)\n", "signal", 8,
		       (double)(now_ns() - t0) / 1e3 / iters / 2);
}

void run_bench(void)
{
	static const size_t sizes[] = { 8, 4096, 65536, 1 << 20, 4 << 20 };

	barrier(20, nranks);
	if (rank == 0) {
		printf("%-10s %10s %10s\n", "op", "bytes", "MB/s");
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			int iters = sizes[i] >= (1 << 20) ? 64 : 2000;

			bench_bw("put", sizes[i], iters);
			bench_bw("putsignal", sizes[i], iters);
			bench_bw("get", sizes[i], iters);
		}
	}
	barrier(21, nranks);
	memset(sig, 0, 4096);
	barrier(22, nranks);
	if (rank < 2)
		bench_lat(2000);
	barrier(23, nranks);
}

