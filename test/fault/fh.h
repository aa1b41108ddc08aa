/*
 * fh.h - what the failure/abuse/leak/soak tests (test/fault/) add to the
 * end-to-end harness (test/e2e/e2e.h, linked as libe2e.la): the plugin is
 * loaded by e2e_open() through ncclNetPlugin_v12 and e2e's recording logger;
 * fh adds per-message WARN searches, a watchdog, simverbs fault control,
 * resource counters and bounded transfer helpers. fh_open_raw() calls init
 * itself (with e2e_logger): configuration tests need init's result and the
 * WARNs of a FAILING init, which e2e_open() treats as fatal.
 * Every wait is bounded: a hang is a test failure, never a driver timeout.
 * Every time limit taken by fh (and fh_watchdog) is multiplied by fh_scale().
 *
 * Exit codes: 0 pass, 1 fail, 77 skip (no plugin / no device).
 */
#ifndef NV_FAULT_FH_H
#define NV_FAULT_FH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#include "nccl/net.h"
#include "e2e.h"

#define FH_SKIP 77

struct fh {
	struct e2e_net e2e;	/* loaded through e2e_open(.., 12) unless raw */
	void *dl;		/* raw mode only */
	ncclNet_v12_t *net;	/* the v12 table, for direct calls */
	void *ctx;
	int ndev;
	int raw;
};

/* Fails the test with file:line and a message (never returns). */
#define FH_FAIL(...) fh_fail(__FILE__, __LINE__, __VA_ARGS__)
#define FH_CHECK(cond, ...) \
	do { \
		if (!(cond)) \
			FH_FAIL(__VA_ARGS__); \
	} while (0)
#define FH_OK(call) \
	do { \
		ncclResult_t fh_r_ = (call); \
		if (fh_r_ != ncclSuccess) \
			FH_FAIL("%s returned %d", #call, (int)fh_r_); \
	} while (0)

void fh_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));
void fh_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
double fh_now(void);
/* Factor for time limits: FH_TIME_SCALE (set by check-valgrind / check-tsan), else 1. */
double fh_scale(void);
/* Hard time limit for the whole test (SIGALRM -> message, exit 1; children inherit none). */
void fh_watchdog(unsigned seconds);

/* The plugin. fh_open returns 0, or FH_SKIP when it cannot be loaded or has no device. */
int fh_open(struct fh *f);
void fh_close(struct fh *f);
/* fh_open, then FH_SKIP unless the verbs library is simverbs (its control commands). */
int fh_open_simverbs(struct fh *f);
/* dlopen + init only; returns init's result (for configuration tests). */
ncclResult_t fh_open_raw(struct fh *f);
/* Index of the first device whose name starts with prefix, or -1. */
int fh_dev_by_name(struct fh *f, const char *prefix);
/* simverbs' two default devices, InfiniBand and RoCE, which most tests run on both. */
#define FH_SIM_NDEVS 2
extern const char *const fh_sim_devs[FH_SIM_NDEVS];
/* Index of fh_sim_devs[i] (on real devices: e2e_dev's, test/e2e/e2e.h) among the
 * plugin's devices; fails the test without it. */
int fh_sim_dev(struct fh *f, int i);

/* ---- recorded WARNs (e2e's logger, or fh's own in raw mode) ------------------ */
int fh_warn_count(void);
const char *fh_warn_get(int i); /* valid until the next fh_warn_reset */
void fh_warn_reset(void);
/* Index of the first WARN (from `from`) containing every given substring, or -1. */
int fh_warn_find(int from, const char *needle, ...) __attribute__((sentinel));
/* Count of WARNs containing `needle`. */
int fh_warn_count_with(const char *needle);
/* Prints every WARN recorded (for failure diagnosis). */
void fh_warn_dump(void);

/* ---- connections ---------------------------------------------------------- */
/* Listen + connect + accept in this process, interleaved, bounded by timeout_s. */
void fh_pair(struct fh *f, int dev, void **send, void **recv, double timeout_s);
/* Connect / accept alone, bounded; return the first non-success result (0 on success). */
ncclResult_t fh_connect(struct fh *f, int dev, void *handle, void **send, double timeout_s);
ncclResult_t fh_accept(struct fh *f, void *listen, void **recv, double timeout_s);
/*
 * Connect to `handle` and accept on `listen`, interleaved, until both comms exist; any failure
 * or no comms within timeout_s (scaled) fails the test, naming `what`.
 */
void fh_join(struct fh *f, void *listen, int dev, void *handle, void **send, void **recv,
	     double timeout_s, const char *what);

void *fh_reg(struct fh *f, void *comm, void *buf, size_t size);
/*
 * A loopback send/recv pair on device dev with one registered buffer of len
 * bytes on each side (fh_conn_open fails the test when it cannot). Closing
 * deregisters and closes what is open, a failed comm too, and frees.
 */
struct fh_conn {
	struct fh *f;
	int dev;
	const char *devname;	/* for messages; set by the caller */
	void *s, *r, *smh, *rmh;
	char *sbuf, *rbuf;
};
void fh_conn_open(struct fh *f, int dev, size_t len, struct fh_conn *c);
void fh_conn_close(struct fh_conn *c);
/*
 * Closes side failed_side (0 send, 1 receive) of c, then drives the other
 * side (receives or sends of len bytes with tag) until a call fails, within
 * bound seconds; fails the test when a request completes or none fails.
 */
void fh_conn_other_side_fails(struct fh_conn *c, int failed_side, size_t len, int tag,
			      double bound);
/* One message: isend + irecv until both complete. Returns ncclSuccess, the first error,
 * or ncclInternalError (after FH_FAIL-free report) when the deadline passes. */
ncclResult_t fh_xfer(struct fh *f, void *s, void *r, void *sbuf, void *smh, size_t ssize,
		     void *rbuf, void *rmh, size_t rsize, int tag, int *got, double timeout_s);
/* Waits on a request until done or error; -1 on deadline. */
int fh_wait(struct fh *f, void *req, int *sizes, ncclResult_t *res, double timeout_s);

/* ---- processes and resources ---------------------------------------------- */
/* simverbs_control() of the loaded fabric (0 or errno; -1 when simverbs is absent). */
int fh_sv_control(const char *cmd);
int fh_count_fds(void);
long fh_rss_kb(void);
/* Writes/reads exactly n bytes on a pipe; 0 ok, -1 on EOF/error/deadline. */
int fh_write_all(int fd, const void *buf, size_t n);
int fh_read_all(int fd, void *buf, size_t n, double timeout_s);
/* Waits for a child with a deadline (kills it after); returns its wait status or -1. */
int fh_waitpid(pid_t pid, double timeout_s);

/* Deterministic pattern fill / check (seeded). */
void fh_fill(void *buf, size_t n, uint64_t seed);
int fh_check_pattern(const void *buf, size_t n, uint64_t seed);
uint64_t fh_rand(uint64_t *state);

#endif /* NV_FAULT_FH_H */
