/*
 * rma_port.c - rma_harness -L HOST,DIR: HOST's port goes down under traffic.
 * Run across simulated hosts (test/cluster/cl-rma.sh), which takes the link
 * down and up again; the two meet through files in DIR:
 *   ready.R    rank R puts on context 0, round after round, to every rank on
 *              another host where one side is HOST (the script takes the
 *              link down once every rank wrote it);
 *   failed.R   rank R saw a put fail (ncclRemoteError) and queryLastError
 *              true; the file holds the wall-clock time in ms (the script
 *              bounds it from the moment the link went down);
 *   up         the script brought the link back up.
 * Then queryLastError must still be true (sticky), context 0 must refuse new
 * work, and context 1 (idle during the outage) must carry a put and signal to
 * every one of those ranks.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rma_harness.h"

#define PORT_SIG (4 * MAXR)	/* signal words [PORT_SIG + sender] */

static void put_file(const char *dir, const char *name, long long v)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f || fprintf(f, "%lld\n", v) < 0 || fclose(f))
		FAIL("cannot write %s", path);
}

static void wait_file(const char *dir, const char *name, int secs)
{
	char path[512];
	uint64_t end = now_ns() + (uint64_t)secs * 1000000000ull;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	while (access(path, F_OK) != 0) {
		if (now_ns() > end)
			FAIL("%s did not appear in %d s", path, secs);
		usleep(20000);
	}
}

static long long wall_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Rounds of puts to every target until one fails; returns the failed rank. */
static int put_until_failure(const int *tg, int nt)
{
	uint64_t end = now_ns() + 120000000000ull;
	int failed = -1;

	while (failed < 0) {
		void *req[MAXR];

		if (now_ns() > end)
			FAIL("port down: no put failed in 120 s");
		for (int i = 0; i < nt; i++)
			POST(rma.iput(rctx, 0, 0, srcw, 4096, (uint64_t)rank * CHUNK, dstw,
				      (uint32_t)tg[i], NCCL_RMA_OPT_DEFAULT, &req[i]), &req[i]);
		for (int i = 0; i < nt; i++) {
			ncclResult_t r = wait_req(req[i]);

			if (r != ncclSuccess && r != ncclRemoteError)
				FAIL("port down: a put to rank %d returned %d, not ncclRemoteError",
				     tg[i], r);
			if (r != ncclSuccess && failed < 0)
				failed = tg[i];
		}
		usleep(2000);
	}
	return failed;
}

void phase_port_down(const char *down, const char *dir)
{
	bool on_down = !strcmp(hosts[rank], down), err = false;
	int tg[MAXR], nt = 0, failed;
	char name[32];
	long long ms;
	void *req = NULL;
	ncclResult_t r;

	for (int p = 0; p < nranks; p++)
		if (strcmp(hosts[p], hosts[rank]) && (on_down || !strcmp(hosts[p], down)))
			tg[nt++] = p;
	if (nt == 0)
		FAIL("port down: no rank on another host with %s on one side", down);
	barrier(40, nranks);
	snprintf(name, sizeof(name), "ready.%d", rank);
	put_file(dir, name, wall_ms());
	failed = put_until_failure(tg, nt);
	ms = wall_ms();
	OK(rma.queryLastError(rctx, &err));
	if (!err)
		FAIL("port down: a put failed and queryLastError is false");
	snprintf(name, sizeof(name), "failed.%d", rank);
	put_file(dir, name, ms);
	wait_file(dir, "up", 180);
	OK(rma.queryLastError(rctx, &err));
	if (!err)
		FAIL("port down: queryLastError false again once the link is back up");
	r = rma.iput(rctx, 0, 0, srcw, 8, 0, dstw, (uint32_t)tg[0], 0, &req);
	if (r == ncclSuccess || req)
		FAIL("port down: the failed context took new work (%d)", r);
	barrier(41, nranks);
	for (int i = 0; i < nt; i++) {
		POST(rma.iputSignal(rctx, 1, 0, srcw, 4096, (uint64_t)rank * CHUNK, dstw,
				    (uint32_t)tg[i], (uint64_t)(PORT_SIG + rank) * 8, sigw, 1,
				    NCCL_NET_SIGNAL_OP_ADD, true, NCCL_RMA_OPT_DEFAULT, &req), &req);
		OK(wait_req(req));
	}
	for (int i = 0; i < nt; i++)
		wait_word(&sig[PORT_SIG + tg[i]], 1, "context 1 after the link came back");
	barrier(42, nranks);
	printf("rank %d: port of %s down: put to rank %d failed (ncclRemoteError), queryLastError "
	       "true, still true with the link back up, context 0 refuses work, context 1 carries "
	       "a put and signal to %d ranks: ok\n", rank, down, failed, nt);
}
