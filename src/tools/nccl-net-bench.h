/*
 * nccl-net-bench.h - internal interfaces of nccl-net-bench, a benchmark that
 * loads any ncclNet plugin and drives it the way NCCL's proxy does.
 *
 * Layers (one file each; each calls only the files listed above it):
 *   nccl-net-bench.c         errors, the clock, the run's deadline (nb_err, nb_now, ...)
 *   nccl-net-bench-ncclib.c  NCCL's own IB transport, loaded as a plugin (nb_net_load_nccl_ib)
 *   nccl-net-bench-net.c     plugin loading, v6..v12 adapters, logger (nb_net_*)
 *   nccl-net-bench-oob.c     launcher (--np fork), TCP rendezvous, OOB collectives (nb_oob_*)
 *   nccl-net-bench-engine.c  connections, slot pipeline, progress loop (nb_conn_*, nb_run)
 *   nccl-net-bench-ar.c      ring allreduce plan with NCCL chunking (nb_ar_*)
 *   nccl-net-bench-tests.c   sendrecv, latency, multirecv, alltoall plans (nb_test_*)
 *   nccl-net-bench-out.c     table, CSV, SVG (nb_out_*)
 *   nccl-net-bench-self.c    --self: one process, a loopback pair (nb_self_*)
 *   nccl-net-bench-pairs.c   --pairs N: what N idle comm pairs cost (nb_pairs_run)
 *   nccl-net-bench-main.c    options, per-size driver, main
 */
#ifndef NCCL_NET_BENCH_H
#define NCCL_NET_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "nccl/net.h"

#define NB_STEPS 8		/* NCCL_STEPS: pipeline slots per connection */
#define NB_MAX_GROUP 8		/* most receives grouped into one irecv */
#define NB_SIZES_ARRAY 64	/* test() receive sizes array, like NCCL_PROXY_MAX_SUBS */
#define NB_MAX_RESULTS 512
#define NB_MAX_PLUGINS 4	/* -p A,B,...: plugins compared in one run */

#define NB_FMT(a, b) __attribute__((format(printf, a, b)))

/* ---- errors and logging ------------------------------------------------ */

extern int nb_rank;			/* -1 in the launcher */
void nb_err(const char *fmt, ...) NB_FMT(1, 2);
void nb_info(const char *fmt, ...) NB_FMT(1, 2);
double nb_now(void);			/* monotonic seconds */
/* Overall deadline (monotonic seconds); every wait checks it. */
extern double nb_deadline;
int nb_past_deadline(const char *what);

/* ---- plugin (nccl-net-bench-net.c) ------------------------------------- */

/* Device properties, widened to the newest layout whatever table is used. */
struct nb_props {
	char name[64];
	char pci[160];
	uint64_t guid;
	int ptr_support;
	int reg_is_global;
	int force_flush;
	int speed;
	int port;
	float latency;
	int max_comms;
	int max_recvs;
	int dev_type;
	size_t max_p2p_bytes;
};

/* Calls made through nb_net_* and how many of them found nothing to do
 * (--calls; scripts/cpu-cost.sh splits a plugin's instructions with them). */
struct nb_calls {
	uint64_t isend, isend_null;	/* isend calls; those returning no request */
	uint64_t irecv, irecv_null;
	uint64_t test, test_idle;	/* test calls; those returning done = 0 */
};

struct nb_net {
	void *lib;
	char path[512];		/* what dlopen() accepted */
	int version;		/* 6 .. 12 */
	const void *table;	/* ncclNet_v<version>_t */
	const char *name;	/* the table's name */
	void *ctx;		/* v11+ per-communicator context */
	int initialized;
	struct nb_calls calls;
};

/* spec: a plugin like NCCL_NET_PLUGIN, or "nccl-ib[:PATH]" (NCCL's IB transport). */
int nb_net_load(struct nb_net *net, const char *spec, int want_version);
#define NB_NCCL_IB "nccl-ib"
/* nccl-net-bench-ncclib.c: path NULL = nb_nccl_lib_default(). */
int nb_net_load_nccl_ib(struct nb_net *net, const char *path);
const char *nb_nccl_lib_default(void);
int nb_net_init(struct nb_net *net);
/* --profile FILE: init hands the plugin (v10+) a recording profiler callback
 * and isend/irecv a handle per operation; FILE gets a line per event. Call
 * before nb_net_init; rank >= 0 in a multi-rank run appends ".<rank>". */
int nb_prof_open(const char *path, int rank);
int nb_net_devices(struct nb_net *net, int *ndev);
int nb_net_props(struct nb_net *net, int dev, struct nb_props *p);
int nb_net_listen(struct nb_net *net, int dev, void *handle, void **lcomm);
int nb_net_connect(struct nb_net *net, int dev, void *handle, void **scomm);
/* makeVDevice (v9+) over the devices in list "A,B,..."; *dev gets the new one. */
int nb_net_make_vdevice(struct nb_net *net, const char *list, int *dev);
int nb_net_accept(struct nb_net *net, void *lcomm, void **rcomm);
int nb_net_regmr(struct nb_net *net, void *comm, void *data, size_t size, void **mh);
int nb_net_deregmr(struct nb_net *net, void *comm, void *mh);
int nb_net_isend(struct nb_net *net, void *scomm, void *data, size_t size, int tag, void *mh,
		 void **req);
int nb_net_irecv(struct nb_net *net, void *rcomm, int n, void **data, size_t *sizes, int *tags,
		 void **mhs, void **req);
int nb_net_iflush(struct nb_net *net, void *rcomm, int n, void **data, int *sizes, void **mhs,
		  void **req);
int nb_net_test(struct nb_net *net, void *req, int *done, int *sizes);
int nb_net_close_send(struct nb_net *net, void *comm);
int nb_net_close_recv(struct nb_net *net, void *comm);
int nb_net_close_listen(struct nb_net *net, void *comm);
void nb_net_unload(struct nb_net *net);
/* --calls: one "# calls" line with net->calls; rank < 0 for --self. */
void nb_net_print_calls(const struct nb_net *net, int rank);
const char *nb_result_str(int res);
/* Last WARN the plugin logged (empty if none). */
const char *nb_net_last_warn(void);

/* ---- out-of-band rendezvous (nccl-net-bench-oob.c) ---------------------- */

struct nb_oob {
	int rank;
	int nranks;
	int *fds;		/* root: fds[r] for r > 0; others: fds[0] = root */
};

/* Join: rank 0 listens on port (or uses listen_fd >= 0), others connect to host. */
int nb_oob_init(struct nb_oob *oob, int rank, int nranks, const char *host, int port,
		int listen_fd);
int nb_oob_allgather(struct nb_oob *oob, const void *mine, void *all, size_t size);
int nb_oob_barrier(struct nb_oob *oob);
/* Non-blocking: 1 when a peer's OOB socket reached EOF (the peer died). */
int nb_oob_peer_lost(struct nb_oob *oob);
/* The first rank whose out-of-band connection is gone, -1 if none; prints nothing. */
int nb_oob_peer_gone(const struct nb_oob *oob);
void nb_oob_close(struct nb_oob *oob);
/* --np: fork nranks ranks; returns 1 in each child (rank set), 0 in the launcher (*status). */
int nb_launch_local(int nranks, double timeout_s, int *rank, int *listen_fd, int *port,
		    int *status);
int nb_parse_hostport(const char *s, char *host, size_t hlen, int *port);

/* ---- engine (nccl-net-bench-engine.c) ----------------------------------- */

struct nb_unit {
	size_t size[NB_MAX_GROUP];	/* send: bytes per tag; recv: bytes received */
	void *req[NB_MAX_GROUP];	/* send: one per tag; recv: req[0] for the group */
	int nposted;
	int ndone;
	void *flush_req;
	int flushing;
};

/*
 * One direction of one peer connection, like one NCCL proxy connection: a
 * registered buffer of ngroup * buffsize bytes, NB_STEPS slots of buffsize/8
 * per tag; a unit (one isend per tag / one grouped irecv) spans slice_steps
 * slots, so at most NB_STEPS / slice_steps units are in flight.
 * Counters are monotonic unit indices within a phase:
 *   send: ready = filled by the kernel, posted = isend'ed, done = tested done
 *   recv: posted = irecv'ed, done = tested done (+flushed), ready = consumed
 */
struct nb_conn {
	int peer;
	int is_send;
	void *comm;
	void *mh;
	char *buf;
	size_t buffsize;
	size_t stepsize;
	int ngroup;
	int slice_steps;
	int depth;
	int tags[NB_MAX_GROUP];
	uint64_t total, posted, done, ready;
	/* Bytes of each unit slot that have carried data since the connection was made, and
	 * the bytes carried beyond that (a slot's first use: see nb_warm_iters). */
	size_t warm[NB_STEPS];
	uint64_t first_use;
	struct nb_unit unit[NB_STEPS];
	int sizes[NB_SIZES_ARRAY];	/* recv test() sizes, zero between uses */
};

struct nb_step {
	struct nb_conn *rconn;		/* unit to consume, or NULL */
	struct nb_conn *sconn;		/* unit to fill, or NULL */
	size_t rsize;			/* expected bytes per tag received */
	size_t ssize;			/* bytes per tag to send */
	int op;				/* test-specific */
	size_t off;			/* test-specific: element / byte offset */
	int iter;
};

struct nb_stream;
typedef int (*nb_next_fn)(struct nb_stream *s, struct nb_step *step);
typedef int (*nb_exec_fn)(struct nb_stream *s, const struct nb_step *step, char **rptr,
			  char **sptr);

/* A sequence of steps executed in order, like one GPU primitive loop. */
struct nb_stream {
	nb_next_fn next;
	nb_exec_fn exec;
	void (*reset)(struct nb_stream *s);	/* back to the first step */
	void *state;
	struct nb_step cur;
	int have_cur;
	int finished;
	long wrong;			/* elements found wrong by exec */
};

struct nb_engine {
	struct nb_net *net;
	struct nb_oob *oob;
	int dev;
	int flush;			/* call iflush after receives */
	size_t buffsize;
	struct nb_conn *conns;
	int nconns;
	uint64_t polls;
	uint64_t events;		/* progress made (posts, completions, steps) */
	int yield_us;			/* idle spin before sched_yield(); -1 never */
	int recv_depth;			/* receives posted ahead per connection (1..NB_STEPS) */
	int stats;			/* time the passes (--stats) */
	double t_exec, t_net;		/* seconds in streams / in plugin calls */
	uint64_t idle;			/* passes without progress */
};

struct nb_edge {
	int src, dst;
	int ngroup;
	int slice_steps;
};

/* Establish the connections of the edges that involve this rank (collective). */
int nb_engine_connect(struct nb_engine *e, const struct nb_edge *edges, int nedges);
void nb_engine_close(struct nb_engine *e);
struct nb_conn *nb_engine_find(struct nb_engine *e, int peer, int is_send);
/* Run streams to completion; conns' totals must be set (nb_stream_count helps). */
int nb_run(struct nb_engine *e, struct nb_stream *streams, int nstreams);
/* Counts the units a (fresh) stream will use on its connections into conn->total. */
void nb_stream_count(struct nb_stream *s);
void nb_engine_reset(struct nb_engine *e);
/* After a run of iters iterations: how many iterations a run needs to carry data through
 * every unit slot of this rank's connections (0 when it has none). */
int nb_warm_iters(const struct nb_engine *e, int iters);
/* Bytes carried through slots for the first time, over this rank's connections. */
uint64_t nb_first_use(const struct nb_engine *e);

/* ---- tests ---------------------------------------------------------------- */

enum nb_test_id { NB_T_SENDRECV, NB_T_SENDRECV_BI, NB_T_LATENCY, NB_T_ALLREDUCE, NB_T_MULTIRECV,
		  NB_T_ALLTOALL, NB_T_COUNT };

struct nb_opts {
	unsigned tests;			/* bit mask of enum nb_test_id */
	size_t minbytes, maxbytes;
	double factor;
	int iters, warmup, repeat;
	int check;
	int np, rank, nranks;
	char root[256];
	const char *plugin;		/* -p as given */
	const char *plugins[NB_MAX_PLUGINS];	/* -p split at commas (NULL: default) */
	int nplugins;
	int net_version;
	int dev;
	const char *vdev;		/* --vdev: physical devices fused by makeVDevice */
	size_t buffsize;
	int groups;
	int flush;			/* -1 auto, 0 off, 1 on */
	const char *csv, *plot;
	int quiet;
	double timeout;
	int list;
	int yield_us;
	int recv_depth;			/* --recv-depth (default NB_STEPS) */
	int stats;
	int self;			/* --self: one-process loopback rounds */
	int idle;			/* --idle: 0 off, NB_IDLE_TEST, NB_IDLE_ISEND */
	int send_first;			/* --send-first: --self rounds try isend before irecv */
	int calls;			/* --calls: print nb_net.calls per rank */
	const char *profile;		/* --profile FILE */
	int pairs;			/* --pairs N: open N idle comm pairs, report their cost */
};

/* Per-size measurement context handed to the test plans. */
struct nb_ctx {
	struct nb_engine *e;
	const struct nb_opts *o;
	struct nb_props props;
	int rank, nranks;
	int dev;			/* -d, or the virtual device made by --vdev */
	int groups;			/* tags per unit in multirecv */
};

struct nb_result {
	int test;
	int plugin;			/* index into nb_opts.plugins */
	size_t size;
	size_t count;
	const char *type;
	const char *redop;
	double time_us;			/* median over repetitions */
	double time_min_us;		/* fastest repetition */
	double algbw, busbw;
	double cpu_busbw;		/* busbw per CPU second of the busiest writing rank */
	long wrong;
};

const char *nb_test_name(int t);
int nb_test_parse(const char *list, unsigned *mask);
int nb_test_edges(int t, const struct nb_ctx *c, struct nb_edge *edges, int max);
/* Most edges test t has among nranks ranks (the size of nb_test_edges' array). */
int nb_test_max_edges(int t, int nranks);
/* The size test t measures for a requested size: alltoall rounds down to a multiple of
 * nranks (each rank gets size / nranks, as alltoall_perf); 0 skips the size. */
size_t nb_test_size(int t, const struct nb_ctx *c, size_t size);
/* Runs iters iterations of test t at size bytes; *wrong gets the elements found wrong. */
int nb_test_run(int t, struct nb_ctx *c, size_t size, int iters, int check, long *wrong);
void nb_test_describe(int t, const struct nb_ctx *c, size_t size, struct nb_result *r);
double nb_test_bytes(int t, const struct nb_ctx *c, size_t size, double *busfactor);

/* --self (nccl-net-bench-self.c): rounds of irecv + isend + test on a loopback pair. */
/* --idle KIND of --self: what the -n calls are */
#define NB_IDLE_TEST 1		/* test() of a posted receive nothing is sent to */
#define NB_IDLE_ISEND 2		/* isend() before the receiver posted anything */
int nb_idle_parse(const char *arg, int *idle);
/* idle 0: warmup + rounds rounds; else warmup rounds, `rounds` idle calls, one round. */
int nb_self_run(struct nb_net *net, int dev, size_t size, int warmup, int rounds, int idle,
		int send_first);

/* --pairs N (nccl-net-bench-pairs.c): rank 2k opens N send comms to rank 2k+1; rank 0
 * prints what the comms cost per comm (memory, pinned bytes, QPs, CQs, MRs, fds, threads)
 * and how long connecting them all took. */
int nb_pairs_run(struct nb_ctx *c, int npairs);

/* What the process holds (nccl-net-bench-pairs.c); -1 where it cannot be known
 * (verbs objects and pinned bytes: simverbs' `objects` control only). */
struct nb_usage {
	long rss_kib, threads, fds;
	long qp, cq, mr, pd, chan;
	long long pinned;
};
void nb_usage_now(struct nb_usage *u);

/* The connect phase of a test (nccl-net-bench-cost.c): each rank measures the
 * time and what its comms added (nb_cost_begin before nb_engine_connect,
 * nb_cost_end after); rank 0 prints min / median / max over the ranks. */
struct nb_cost {
	double t0, connect_s;
	int nconns;
	long long buf_bytes;		/* the benchmark's own registered buffers */
	struct nb_usage before, after;
};
void nb_cost_begin(struct nb_cost *k);
void nb_cost_end(struct nb_cost *k, const struct nb_engine *e);
int nb_cost_report(const struct nb_ctx *c, const struct nb_cost *k);

/* Allreduce (nccl-net-bench-ar.c). */
int nb_ar_run(struct nb_ctx *c, size_t count, int iters, int check, long *wrong);
void nb_ar_release(void);

/* Pattern helpers shared by the tests. */
void nb_fill(char *p, size_t n, uint32_t seed, size_t off);
long nb_verify(const char *p, size_t n, uint32_t seed, size_t off);

/* ---- output (nccl-net-bench-out.c) --------------------------------------- */

void nb_out_header(int t, const struct nb_ctx *c);
void nb_out_row(const struct nb_result *r);
void nb_out_summary(int t, const struct nb_result *rs, int n);
/* cs[rs[i].plugin] describes the plugin of result i; np plugins. */
int nb_out_csv(const char *path, const struct nb_result *rs, int n, const struct nb_ctx *cs);
int nb_out_svg(const char *path, const struct nb_result *rs, int n, const struct nb_ctx *cs,
	       int np);
/* Per size of test t: each plugin's busbw (latency: half round trip) and its ratio to the first. */
void nb_out_compare(int t, const struct nb_result *rs, int n, const struct nb_ctx *cs, int np);
void nb_fmt_size(char *buf, size_t len, double bytes);
int nb_parse_size(const char *s, size_t *out);

#endif /* NCCL_NET_BENCH_H */
