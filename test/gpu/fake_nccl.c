/*
 * fake_nccl: a stand-in libnccl.so.2 for testing the nccl-allreduce client's
 * own logic without a GPU (nccl_fake.sh): the process model (fork, the
 * unique id through pipes), the checks of every element, the tables, the
 * exit codes and the log assertions.  It is NOT NCCL and does not load the
 * plugin: ranks exchange data through one shared-memory segment per
 * communicator (a slot per rank, a barrier), synchronously at each call.
 * It writes into NCCL_DEBUG_FILE the INFO lines real NCCL 2.30 writes
 * (format strings of src/plugin/net/net_v12.cc, src/init.cc,
 * src/graph/topo.cc, src/transport/net.cc), so the client's log checks run.
 *   FAKE_NCCL_CORRUPT=<rank>  that rank's float AllReduce results get
 *                             element 0 off by one (the client must see it)
 *   FAKE_NCCL_FAIL=<rank>     that rank's first AllGather fails
 *   FAKE_NCCL_SLOT=<bytes>    per-rank slot (default 4 MiB; larger ops fail)
 */
#include "config.h"

#include <fcntl.h>
#include <nccl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct fake_hdr {
	_Atomic int count, gen;	/* barrier */
};

struct ncclComm {
	int rank, n;
	size_t slot;
	struct fake_hdr *hdr;
	char *slots;
	char name[sizeof(((ncclUniqueId *)0)->internal)];
	FILE *log;
	int ngroup;
	struct { const void *send; void *recv; size_t bytes; int peer; } grp[8];
};

static int fake_group_depth;
static struct ncclComm *fake_group_comm;

ncclResult_t ncclGetVersion(int *version)
{
	*version = 23007;
	return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result)
{
	return result == ncclSuccess ? "no error" : "fake_nccl error";
}

const char *ncclGetLastError(ncclComm_t comm)
{
	(void)comm;
	return "fake_nccl: see FAKE_NCCL_* in fake_nccl.c";
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	memset(id, 0, sizeof(*id));
	snprintf(id->internal, sizeof(id->internal), "/fakenccl-%d-%ld", (int)getpid(),
		 (long)ts.tv_nsec);
	return ncclSuccess;
}

static void fake_barrier(struct ncclComm *c)
{
	int g = atomic_load(&c->hdr->gen);

	if (atomic_fetch_add(&c->hdr->count, 1) == c->n - 1) {
		atomic_store(&c->hdr->count, 0);
		atomic_fetch_add(&c->hdr->gen, 1);
	} else {
		while (atomic_load(&c->hdr->gen) == g)
			sched_yield();
	}
}

/* The INFO lines of NCCL 2.30 that the client asserts on. */
static void fake_log(struct ncclComm *c)
{
	const char *f = getenv("NCCL_DEBUG_FILE");
	const char *gdr = getenv("SIMVERBS_GPUDIRECT");
	int on = gdr && !strcmp(gdr, "1");
	const char *p = "fake:0:0 [0] NCCL INFO";

	if (!f || !(c->log = fopen(f, "w")))
		return;
	fprintf(c->log, "%s NET/Plugin: Loaded net plugin Verbs (v12)\n", p);
	fprintf(c->log, "%s Using network Verbs\n", p);
	fprintf(c->log, "%s NET/Verbs : GPU Direct RDMA %s for HCA 0 'simib0'\n", p,
		on ? "Enabled" : "Disabled");
	fprintf(c->log, "%s Channel 00/0 : %d[0] -> %d[0] [send] via NET/Verbs/0%s\n", p, c->rank,
		(c->rank + 1) % c->n, on ? "/GDRDMA" : "");
	fflush(c->log);
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
	struct ncclComm *c = calloc(1, sizeof(*c));
	const char *s = getenv("FAKE_NCCL_SLOT");
	size_t bytes;
	int fd;

	if (!c || nranks < 1 || rank < 0 || rank >= nranks)
		return ncclInvalidArgument;
	c->rank = rank;
	c->n = nranks;
	c->slot = s ? strtoull(s, NULL, 0) : 4u << 20;
	snprintf(c->name, sizeof(c->name), "%s", id.internal);
	bytes = 4096 + c->slot * (size_t)nranks;
	fd = shm_open(c->name, O_RDWR | O_CREAT, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)bytes))
		return ncclSystemError;
	c->hdr = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (c->hdr == MAP_FAILED)
		return ncclSystemError;
	c->slots = (char *)c->hdr + 4096;
	fake_barrier(c);	/* everyone attached */
	if (rank == 0)
		shm_unlink(c->name);
	fake_log(c);
	*comm = c;
	return ncclSuccess;
}

static float bf16_to_f(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static uint16_t f_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return (uint16_t)(u >> 16);
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
			   ncclRedOp_t op, ncclComm_t c, cudaStream_t s)
{
	size_t es = t == ncclFloat32 ? 4 : 2;
	const char *corrupt = getenv("FAKE_NCCL_CORRUPT");

	(void)s;
	if (op != ncclSum || (t != ncclFloat32 && t != ncclBfloat16) || count * es > c->slot)
		return ncclInvalidArgument;
	memcpy(c->slots + c->slot * (size_t)c->rank, send, count * es);
	fake_barrier(c);
	for (size_t i = 0; i < count; i++) {
		float sum = 0;

		for (int r = 0; r < c->n; r++) {
			const char *p = c->slots + c->slot * (size_t)r;

			sum += t == ncclFloat32 ? ((const float *)p)[i]
						: bf16_to_f(((const uint16_t *)p)[i]);
		}
		if (t == ncclFloat32)
			((float *)recv)[i] = sum;
		else
			((uint16_t *)recv)[i] = f_to_bf16(sum);
	}
	if (corrupt && atoi(corrupt) == c->rank && t == ncclFloat32 && count)
		((float *)recv)[0] += 1;
	fake_barrier(c);
	return ncclSuccess;
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t t,
			   ncclComm_t c, cudaStream_t s)
{
	const char *fail = getenv("FAKE_NCCL_FAIL");

	(void)s;
	if (fail && atoi(fail) == c->rank)
		return ncclInternalError;
	if (t != ncclUint8 || count > c->slot)
		return ncclInvalidArgument;
	memcpy(c->slots + c->slot * (size_t)c->rank, send, count);
	fake_barrier(c);
	for (int r = 0; r < c->n; r++)
		memcpy((char *)recv + count * (size_t)r, c->slots + c->slot * (size_t)r, count);
	fake_barrier(c);
	return ncclSuccess;
}

/* nccl.h declares these without a prototype: give them one */
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

ncclResult_t ncclGroupStart(void)
{
	fake_group_depth++;
	return ncclSuccess;
}

static ncclResult_t fake_p2p(ncclComm_t c, const void *send, void *recv, size_t bytes, int peer)
{
	if (!fake_group_depth || c->ngroup == 8 || bytes > c->slot || peer < 0 || peer >= c->n)
		return ncclInvalidUsage;
	c->grp[c->ngroup].send = send;
	c->grp[c->ngroup].recv = recv;
	c->grp[c->ngroup].bytes = bytes;
	c->grp[c->ngroup].peer = peer;
	c->ngroup++;
	fake_group_comm = c;
	return ncclSuccess;
}

ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t t, int peer, ncclComm_t c,
		      cudaStream_t s)
{
	(void)s;
	return t == ncclUint8 ? fake_p2p(c, send, NULL, count, peer) : ncclInvalidArgument;
}

ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t t, int peer, ncclComm_t c,
		      cudaStream_t s)
{
	(void)s;
	return t == ncclUint8 ? fake_p2p(c, NULL, recv, count, peer) : ncclInvalidArgument;
}

/* One send and one receive per rank (the client's ring) through the slots. */
ncclResult_t ncclGroupEnd(void)
{
	struct ncclComm *c = fake_group_comm;

	if (!fake_group_depth)
		return ncclInvalidUsage;
	if (--fake_group_depth || !c)
		return ncclSuccess;
	for (int i = 0; i < c->ngroup; i++)
		if (c->grp[i].send)
			memcpy(c->slots + c->slot * (size_t)c->rank, c->grp[i].send, c->grp[i].bytes);
	fake_barrier(c);
	for (int i = 0; i < c->ngroup; i++)
		if (c->grp[i].recv)
			memcpy(c->grp[i].recv, c->slots + c->slot * (size_t)c->grp[i].peer,
			       c->grp[i].bytes);
	fake_barrier(c);
	c->ngroup = 0;
	fake_group_comm = NULL;
	return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t c)
{
	fake_barrier(c);
	return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t c)
{
	if (c->log)
		fclose(c->log);
	munmap(c->hdr, 4096 + c->slot * (size_t)c->n);
	free(c);
	return ncclSuccess;
}
