/*
 * e2e.h - end-to-end test harness: dlopens the built plugin ($NV_TEST_PLUGIN),
 * takes the ncclNetPlugin_vN table of one ABI version and drives it the way
 * NCCL's core does (non-blocking connect/accept loops, test() polling, NULL
 * requests retried). One uniform API in the newest shape; each call is
 * adapted to the chosen version's signature, as NCCL's own adapters do.
 *
 * The logger given to init records every WARN so tests can assert on the
 * messages a user would see.
 */
#ifndef NV_E2E_H
#define NV_E2E_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "nccl/net.h"

#define E2E_FIRST_VERSION 6
#define E2E_LAST_VERSION 12
#define E2E_HANDLE_SIZE NCCL_NET_HANDLE_MAXSIZE

struct e2e_net {
	int ver;
	void *dl;
	const void *tbl;
	void *ctx; /* v11+ */
};

struct e2e_props {
	char name[64];
	int ptr_support;
	int max_recvs;
	int speed;
	int port;
	size_t max_p2p; /* maxP2pBytes (v9+; 0 where the version has none) */
};

/* Fatal test failure: prints, then exits 1 (tests are separate processes). */
#define E2E_FAIL(...) e2e_fail(__FILE__, __LINE__, __VA_ARGS__)
#define E2E_CHECK(c) \
	do { \
		if (!(c)) \
			E2E_FAIL("check failed: %s", #c); \
	} while (0)
#define E2E_OK(call) \
	do { \
		ncclResult_t r_ = (call); \
		if (r_ != ncclSuccess) \
			E2E_FAIL("%s returned %d", #call, (int)r_); \
	} while (0)

void e2e_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));
void e2e_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Loads the plugin and runs init; returns 0, or 77 when the plugin/devices are missing. */
int e2e_open(struct e2e_net *n, int ver);
void e2e_close(struct e2e_net *n);

/* The logger e2e_open() gives init: prints every WARN (INFO too with E2E_VERBOSE)
 * and records the WARNs for the functions below. */
void e2e_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Non-zero: e2e_logger records INFO messages too, among the WARNs (for tests of
 * what the plugin reports at INFO level). */
extern int e2e_record_info;

/* WARN messages recorded by e2e_logger since the last reset. */
int e2e_warn_count(void);
int e2e_warned(const char *substring);
void e2e_warn_reset(void);
const char *e2e_warn_text(void);

ncclResult_t e2e_devices(struct e2e_net *n, int *ndev);
ncclResult_t e2e_props(struct e2e_net *n, int dev, struct e2e_props *p);
ncclResult_t e2e_listen(struct e2e_net *n, int dev, void *handle, void **lc);
ncclResult_t e2e_connect(struct e2e_net *n, int dev, void *handle, void **sc);
ncclResult_t e2e_accept(struct e2e_net *n, void *lc, void **rc);
ncclResult_t e2e_reg_mr(struct e2e_net *n, void *comm, void *data, size_t size, int type,
			void **mh);
ncclResult_t e2e_dereg_mr(struct e2e_net *n, void *comm, void *mh);
ncclResult_t e2e_isend(struct e2e_net *n, void *sc, void *data, size_t size, int tag, void *mh,
		       void **req);
ncclResult_t e2e_irecv(struct e2e_net *n, void *rc, int nr, void **data, size_t *sizes,
		       int *tags, void **mh, void **req);
ncclResult_t e2e_iflush(struct e2e_net *n, void *rc, int nr, void **data, int *sizes, void **mh,
			void **req);
ncclResult_t e2e_test(struct e2e_net *n, void *req, int *done, int *sizes);
ncclResult_t e2e_close_send(struct e2e_net *n, void *sc);
ncclResult_t e2e_close_recv(struct e2e_net *n, void *rc);
ncclResult_t e2e_close_listen(struct e2e_net *n, void *lc);
/* v12 makeVDevice (ncclInvalidUsage on other versions). */
ncclResult_t e2e_make_vdevice(struct e2e_net *n, int ndevs, const int *devs, int *vdev);

/* ---- helpers ------------------------------------------------------------------ */
double e2e_now(void);
/* NCCL_VERBS_EAGER_MAX in effect (the environment's, else the default 4096). */
long e2e_eager_max(void);
/* Index of the device whose name starts with prefix, or -1. */
int e2e_find_dev(struct e2e_net *n, const char *prefix);
/* Real-device mode (test/device/run.sh): NV_TEST_DEVICES="D0[,D1]" names the
 * system's devices the test runs on instead of simverbs' simib0/simroce0/...
 * e2e_real: how many it names (0: simverbs, the make check run). e2e_real_dev:
 * the i-th name, NULL past the end. e2e_dev: the device to use where a test
 * names simverbs' `sim`: the first real device in that mode, else `sim`.
 * e2e_ndevs: how many entries of a list of n simverbs devices (one per link
 * layer) a test loops over: 1 in that mode (the named device has one link
 * layer), else n. e2e_skip_real: in that mode, notes that the case `what`
 * needs simverbs (`why`: fault injection, device limits, ...) and returns 1. */
#define E2E_MAX_REAL_DEVS 4
int e2e_real(void);
const char *e2e_real_dev(int i);
const char *e2e_dev(const char *sim);
int e2e_ndevs(int n);
int e2e_skip_real(const char *what, const char *why);
/* Connects and accepts from this one thread, interleaved; fails the test on error. */
void e2e_pair(struct e2e_net *n, int dev, void **sc, void **rc, double timeout_s);
/* The same with the receiver (listener) on rdev and the sender on sdev. */
void e2e_pair2(struct e2e_net *n, int rdev, int sdev, void **sc, void **rc, double timeout_s);
/* Connect (or accept) loop; returns the final result, comm NULL on timeout. */
ncclResult_t e2e_connect_wait(struct e2e_net *n, int dev, void *handle, void **sc, double t);
ncclResult_t e2e_accept_wait(struct e2e_net *n, void *lc, void **rc, double t);
/* Polls until done; returns the test result, or ncclInternalError (-1 in *done) on timeout. */
ncclResult_t e2e_wait(struct e2e_net *n, void *req, int *sizes, double timeout_s);
/* isend / irecv retried while they return a NULL request. */
void *e2e_isend_wait(struct e2e_net *n, void *sc, void *data, size_t size, int tag, void *mh,
		     double timeout_s);
void *e2e_irecv_wait(struct e2e_net *n, void *rc, int nr, void **data, size_t *sizes, int *tags,
		     void **mh, double timeout_s);

/* Deterministic content: byte i of message `id`. */
static inline uint8_t e2e_byte(uint32_t id, size_t i)
{
	return (uint8_t)((i * 2654435761u) >> 13 ^ id * 131u ^ (i >> 12));
}
void e2e_fill(void *buf, size_t len, uint32_t id);
/* Index of the first wrong byte, or -1. */
long e2e_verify(const void *buf, size_t len, uint32_t id);

/* Runs fn(arg) in a child process with the given NCCL_IB_HCA; returns its pid. */
pid_t e2e_spawn(const char *hca, int (*fn)(void *), void *arg);
/* Waits for pid up to timeout_s (then SIGKILLs it); returns its exit status or -1. */
int e2e_reap(pid_t pid, double timeout_s);

/* Pipes for passing a handle between processes. */
void e2e_pipe_write(int fd, const void *buf, size_t len);
void e2e_pipe_read(int fd, void *buf, size_t len, double timeout_s);

#endif /* NV_E2E_H */
