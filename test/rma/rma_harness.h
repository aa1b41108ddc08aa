/*
 * rma_harness.h - what the files of rma_harness share: the loaded table, the
 * run's objects (collective, context, windows), the ranks' rendezvous
 * (barrier) and the checking helpers. rma_harness.c has the cases and main(),
 * rma_load.c the loader, rma_big.c the window sizes, rma_port.c the port
 * going down, rma_bench.c the figures.
 */
#ifndef RMA_HARNESS_H
#define RMA_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "nccl/rma.h"

#define MAXR 16
#define CHUNK (64 * 1024)

extern int nranks, rank, version;
extern ncclRma_v15_t rma;		/* the table loaded, adapted to v15 */
extern ncclRma_v13_t *v13;		/* set when the v13 table was loaded */
extern void *pctx, *coll, *rctx, *srcw, *dstw, *sigw;
extern unsigned char *src, *dst;
extern uint64_t *sig;			/* the signal window: 4096 bytes */
extern char hosts[MAXR][64];		/* every rank's host name */

#define FAIL(...) do { \
	fprintf(stderr, "rank %d: %s:%d: ", rank, __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); \
	fputc('\n', stderr); \
	exit(1); \
} while (0)
#define OK(call) do { \
	ncclResult_t r_ = (call); \
	if (r_ != ncclSuccess) \
		FAIL("%s returned %d", #call, r_); \
} while (0)

/* Retries while the plugin says "queue full" (NULL request). */
#define POST(call, reqp) do { \
	uint64_t end_ = now_ns() + 30000000000ull; \
	*(reqp) = NULL; \
	while (*(reqp) == NULL) { \
		OK(call); \
		if (*(reqp) == NULL) { \
			if (rma.rmaProgress) rma.rmaProgress(rctx); \
			if (now_ns() > end_) FAIL("%s: queue full for 30 s", #call); \
		} \
	} \
} while (0)

uint64_t now_ns(void);
/* Every live rank (want of them: nranks, or nranks - 1 once the last rank was
 * killed) reaches this barrier; fails after 60 s naming ph. Every live rank
 * calls the same barriers in the same order. */
void barrier(int ph, int want);
/* Tests req to completion; returns its result (fails after 30 s). */
ncclResult_t wait_req(void *req);
/* Waits until the 64-bit word w holds want (fails after 30 s). */
void wait_word(volatile uint64_t *w, uint64_t want, const char *what);

/* rma_load.c: dlopen and dlsym as NCCL's rma.cc does, into `rma` */
void load(void);
/* rma_big.c: windows of each size in sizes[n] (-W) */
void phase_big(const size_t *sizes, int n);
/* rma_port.c: the port of host `down` goes down (-L); dir: the files shared
 * with the script that takes it down and up */
void phase_port_down(const char *down, const char *dir);
/* rma_bench.c: -b */
void run_bench(void);

#endif /* RMA_HARNESS_H */
