/*
 * nccl-net-bench-main.c - nccl-net-bench's options, the per-size measurement
 * driver and main(): the top of the benchmark, which calls the other files
 * (nccl-net-bench.h); the helpers they share are in nccl-net-bench.c.
 */
#include "config.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/nccl-net-bench.h"

#define NB_MAX_REPEAT 32

/* A failed rank ends at once; its peers see the OOB socket close and follow. */
static void nb_fail(void)
{
	fflush(NULL);
	_exit(1);
}

static void nb_usage(FILE *f)
{
	fprintf(f,
"Usage: nccl-net-bench [options]\n"
"  -t, --tests LIST      sendrecv,sendrecv-bi,latency,allreduce,multirecv,\n"
"                        alltoall or all (default sendrecv); alltoall: a comm\n"
"                        pair per peer, SIZE is a rank's whole buffer as in\n"
"                        alltoall_perf (SIZE / ranks to each peer)\n"
"  -b, --minbytes SIZE   smallest message (default 8; K/M/G suffixes)\n"
"  -e, --maxbytes SIZE   largest message (default 64M)\n"
"  -f, --stepfactor F    size multiplier between steps (default 2)\n"
"  -n, --iters N         timed iterations per size (default 20)\n"
"  -w, --warmup N        untimed iterations per size (default 5); with N > 0, more\n"
"                        when needed so that every buffer slot the timed ones use\n"
"                        has carried data before (0: none at all)\n"
"  -R, --repeat N        timed repetitions per size, median reported (default 1)\n"
"  -c, --check 0|1       check every received byte / reduced value (default 1)\n"
"      --np N            start N local ranks (default 2)\n"
"      --rank R --nranks N --root HOST:PORT\n"
"                        join a multi-host run (also OMPI_COMM_WORLD_RANK/SIZE,\n"
"                        PMI_RANK/SIZE, SLURM_PROCID/NTASKS; NCCL_NET_BENCH_ROOT)\n"
"  -p, --plugin NAME|PATH  plugin like NCCL_NET_PLUGIN (default: this build's\n"
"                        or the installed libnccl-net-verbs.so); nccl-ib[:PATH]\n"
"                        is NCCL's own IB transport, taken from libnccl.so.2\n"
"                        (default /usr/local/cuda/lib64, NCCL_NET_BENCH_NCCL_LIB);\n"
"                        A,B,... runs every test on each plugin, sizes\n"
"                        interleaved, and prints a comparison table\n"
"  -V, --net-version N   use the plugin's ncclNetPlugin_vN table (default newest)\n"
"  -d, --dev N           plugin device index (default 0)\n"
"      --vdev LIST       fuse the devices in LIST (e.g. 0,1) with makeVDevice and\n"
"                        use the virtual device (ncclNet v9+; overrides -d)\n"
"  -B, --buffsize SIZE   per-connection buffer, NCCL_BUFFSIZE-like (default 4M)\n"
"  -g, --groups K        tags grouped per irecv in multirecv (default min(maxRecvs,4))\n"
"      --flush auto|on|off  iflush after receives (auto: forceFlush property or\n"
"                        NCCL_NET_FORCE_FLUSH=1)\n"
"      --csv FILE        write results as CSV\n"
"      --plot FILE.svg   draw bus bandwidth against message size (a line per\n"
"                        test and plugin)\n"
"      --yield US        after US microseconds without progress, sched_yield() on\n"
"                        each idle pass (default 0 = at once, like NCCL's\n"
"                        proxy thread; -1 = always spin)\n"
"      --recv-depth N    receives posted ahead per connection, 1..8 (default 8,\n"
"                        NCCL_STEPS as NCCL's proxy; 1: the next receive is\n"
"                        posted only when the previous one is done)\n"
"      --stats           per rank: time in streams vs in plugin calls, idle passes,\n"
"                        bytes of buffer slots first used in the timed iterations\n"
"      --self            one process, no ranks: a loopback send/recv pair on -d,\n"
"                        -w + -n rounds of irecv+isend+test of -b bytes (for\n"
"                        scripts/cpu-cost.sh)\n"
"      --idle test|isend with --self: after the -w rounds, -n calls that find\n"
"                        nothing to do (test() of a receive nothing is sent to,\n"
"                        or isend() before any receive is posted), then one round\n"
"      --send-first      with --self: each round tries its isend before its irecv\n"
"                        (a plugin with an eager path sends at once)\n"
"      --pairs N         no tests: rank 0 opens N idle send comms to rank 1 (2k to\n"
"                        2k+1), which accepts them; prints per comm the memory,\n"
"                        pinned bytes, QPs, CQs, MRs, fds and threads they took\n"
"                        (verbs objects on simverbs) and the connect time\n"
"      --calls           per rank: isend/irecv calls (and how many returned no\n"
"                        request), test() calls (and how many returned not done)\n"
"      --profile FILE    hand the plugin (ncclNet v10+) a profiler callback that\n"
"                        writes a line per network event to FILE (FILE.<rank> per\n"
"                        rank): start ev= op= plugin= type=qp dev= qpn= opcode=\n"
"                        length= wr_id=, and stop ev=\n"
"  -q, --quiet           only summary lines and errors\n"
"  -T, --timeout SEC     end the whole run with an error after SEC (default 600)\n"
"  -l, --list            print the plugin's devices and exit\n"
"  -h, --help            this help\n"
"      --version         print the version and exit\n");
}

static int nb_env_int(const char *a, const char *b, const char *c, int *v)
{
	const char *names[3] = { a, b, c };
	int i;

	for (i = 0; i < 3; i++) {
		const char *s = getenv(names[i]);

		if (s && *s) {
			*v = atoi(s);
			return 1;
		}
	}
	return 0;
}

static const struct option nb_longopts[] = {
	{ "tests", required_argument, NULL, 't' }, { "minbytes", required_argument, NULL, 'b' },
	{ "maxbytes", required_argument, NULL, 'e' }, { "stepfactor", required_argument, NULL, 'f' },
	{ "iters", required_argument, NULL, 'n' }, { "warmup", required_argument, NULL, 'w' },
	{ "repeat", required_argument, NULL, 'R' }, { "check", required_argument, NULL, 'c' },
	{ "np", required_argument, NULL, 1 }, { "rank", required_argument, NULL, 2 },
	{ "nranks", required_argument, NULL, 3 }, { "root", required_argument, NULL, 4 },
	{ "plugin", required_argument, NULL, 'p' }, { "net-version", required_argument, NULL, 'V' },
	{ "dev", required_argument, NULL, 'd' }, { "buffsize", required_argument, NULL, 'B' },
	{ "groups", required_argument, NULL, 'g' }, { "flush", required_argument, NULL, 5 },
	{ "csv", required_argument, NULL, 6 }, { "plot", required_argument, NULL, 7 },
	{ "quiet", no_argument, NULL, 'q' }, { "timeout", required_argument, NULL, 'T' },
	{ "list", no_argument, NULL, 'l' }, { "yield", required_argument, NULL, 8 },
	{ "stats", no_argument, NULL, 9 }, { "help", no_argument, NULL, 'h' },
	{ "self", no_argument, NULL, 10 }, { "profile", required_argument, NULL, 11 },
	{ "vdev", required_argument, NULL, 12 }, { "idle", required_argument, NULL, 13 },
	{ "send-first", no_argument, NULL, 24 }, { "recv-depth", required_argument, NULL, 25 },
	{ "calls", no_argument, NULL, 14 }, { "pairs", required_argument, NULL, 26 },
	{ "version", no_argument, NULL, 256 }, { NULL, 0, NULL, 0 }
};

static int nb_opt_size(const char *arg, size_t *v, const char *what)
{
	if (nb_parse_size(arg, v) == 0)
		return 0;
	nb_err("bad %s '%s'", what, arg);
	return -1;
}

static int nb_opt_one(struct nb_opts *o, int ch, const char *arg)
{
	switch (ch) {
	case 't': return nb_test_parse(arg, &o->tests);
	case 'b': return nb_opt_size(arg, &o->minbytes, "--minbytes");
	case 'e': return nb_opt_size(arg, &o->maxbytes, "--maxbytes");
	case 'B': return nb_opt_size(arg, &o->buffsize, "--buffsize");
	case 'f': o->factor = atof(arg); return 0;
	case 'n': o->iters = atoi(arg); return 0;
	case 'w': o->warmup = atoi(arg); return 0;
	case 'R': o->repeat = atoi(arg); return 0;
	case 'c': o->check = atoi(arg); return 0;
	case 1: o->np = atoi(arg); return 0;
	case 2: o->rank = atoi(arg); return 0;
	case 3: o->nranks = atoi(arg); return 0;
	case 4: snprintf(o->root, sizeof(o->root), "%s", arg); return 0;
	case 'p': o->plugin = arg; return 0;
	case 'V': o->net_version = atoi(arg); return 0;
	case 'd': o->dev = atoi(arg); return 0;
	case 'g': o->groups = atoi(arg); return 0;
	case 5: o->flush = !strcmp(arg, "on") ? 1 : !strcmp(arg, "off") ? 0 : -1; return 0;
	case 6: o->csv = arg; return 0;
	case 7: o->plot = arg; return 0;
	case 'q': o->quiet = 1; return 0;
	case 'T': o->timeout = atof(arg); return 0;
	case 'l': o->list = 1; return 0;
	case 8: o->yield_us = atoi(arg); return 0;
	case 25: o->recv_depth = atoi(arg); return 0;
	case 9: o->stats = 1; return 0;
	case 10: o->self = 1; return 0;
	case 11: o->profile = arg; return 0;
	case 12: o->vdev = arg; return 0;
	case 13: return nb_idle_parse(arg, &o->idle);
	case 14: o->calls = 1; return 0;
	case 24: o->send_first = 1; return 0;
	case 26: o->pairs = atoi(arg); return o->pairs > 0 ? 0 : -1;
	default: return -1;
	}
}

/* -p A,B,...: o->plugins (one NULL entry, the default plugin, without -p). */
static int nb_split_plugins(struct nb_opts *o)
{
	char *list, *tok, *save = NULL;

	o->nplugins = 1;
	o->plugins[0] = NULL;
	if (!o->plugin || !strchr(o->plugin, ','))
		return (o->plugins[0] = o->plugin), 0;
	list = strdup(o->plugin);	/* lives as long as the process */
	o->nplugins = 0;
	for (tok = list ? strtok_r(list, ",", &save) : NULL; tok; tok = strtok_r(NULL, ",", &save)) {
		if (o->nplugins == NB_MAX_PLUGINS) {
			nb_err("-p: at most %d plugins", NB_MAX_PLUGINS);
			return -1;
		}
		o->plugins[o->nplugins++] = tok;
	}
	if (o->nplugins == 0) {
		nb_err("-p '%s' names no plugin", o->plugin);
		return -1;
	}
	return 0;
}

static int nb_opts_check(struct nb_opts *o)
{
	if (o->iters < 1 || o->warmup < 0 || o->repeat < 1 || o->repeat > NB_MAX_REPEAT) {
		nb_err("need --iters >= 1, --warmup >= 0, 1 <= --repeat <= %d", NB_MAX_REPEAT);
		return -1;
	}
	if (o->minbytes > o->maxbytes || (o->factor <= 1.0 && o->minbytes != o->maxbytes)) {
		nb_err("need --minbytes <= --maxbytes and --stepfactor > 1");
		return -1;
	}
	if (o->recv_depth < 1 || o->recv_depth > NB_STEPS) {
		nb_err("--recv-depth must be 1 .. %d", NB_STEPS);
		return -1;
	}
	if (o->buffsize < NB_STEPS * 64 || o->buffsize % (NB_STEPS * 64)) {
		nb_err("--buffsize must be a multiple of %d", NB_STEPS * 64);
		return -1;
	}
	if (o->net_version && (o->net_version < 6 || o->net_version > 12)) {
		nb_err("--net-version must be 6 .. 12");
		return -1;
	}
	if (o->timeout <= 0)
		o->timeout = 600;
	return nb_split_plugins(o);
}

static int nb_opts_parse(struct nb_opts *o, int argc, char **argv)
{
	const char *bs = getenv("NCCL_BUFFSIZE");
	int ch;

	memset(o, 0, sizeof(*o));
	o->tests = 1U << NB_T_SENDRECV;
	o->minbytes = 8;
	o->maxbytes = 64 << 20;
	o->factor = 2;
	o->iters = 20;
	o->warmup = 5;
	o->repeat = 1;
	o->check = 1;
	o->rank = -1;
	o->flush = -1;
	o->yield_us = 0;
	o->recv_depth = NB_STEPS;
	o->timeout = 600;
	o->buffsize = 4 << 20;
	if (bs && *bs && nb_parse_size(bs, &o->buffsize) != 0)
		o->buffsize = 4 << 20;
	while ((ch = getopt_long(argc, argv, "t:b:e:f:n:w:R:c:p:V:d:B:g:qT:lh", nb_longopts,
				 NULL)) != -1) {
		if (ch == 'h') {
			nb_usage(stdout);
			exit(0);
		}
		if (ch == 256) {
			printf("nccl-net-bench (nccl-net-verbs) %s\n", PACKAGE_VERSION);
			exit(0);
		}
		if (nb_opt_one(o, ch, optarg) != 0) {
			nb_usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		nb_err("unexpected argument '%s'", argv[optind]);
		return -1;
	}
	return nb_opts_check(o);
}

/* ---- measurement ------------------------------------------------------------ */

struct nb_sample {
	double t[NB_MAX_REPEAT];
	double cpu[NB_MAX_REPEAT];
	long wrong;
	double exec, net, wall;		/* --stats: timed repetitions only */
	uint64_t idle;
	uint64_t first_use;		/* --stats: bytes slots carried first in the timed ones */
	int warm;			/* iterations this rank needs to warm every slot */
};

static int nb_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Ranks that write data in test t (on simverbs the writer's CPU does the copy). */
static int nb_writer(int t, int r)
{
	if (t == NB_T_SENDRECV)
		return r % 2 == 0;
	if (t == NB_T_MULTIRECV)
		return r > 0;
	return 1;
}

/*
 * Over the repetitions: median and minimum of the slowest rank's wall time,
 * median of the busiest writing rank's CPU time (seconds per iteration). CPU time is
 * what load from other processes does not inflate (as sv-rawbench's cpu_GBps,
 * counted over the ranks that write data).
 */
static void nb_reduce_time(int test, const struct nb_sample *all, int nranks, int reps,
			   int iters, double *med, double *min, double *cpu)
{
	double t[NB_MAX_REPEAT], u[NB_MAX_REPEAT];
	int k, r;

	for (k = 0; k < reps; k++) {
		t[k] = u[k] = 0;
		for (r = 0; r < nranks; r++) {
			t[k] = all[r].t[k] > t[k] ? all[r].t[k] : t[k];
			if (nb_writer(test, r) && all[r].cpu[k] > u[k])
				u[k] = all[r].cpu[k];
		}
	}
	qsort(t, (size_t)reps, sizeof(double), nb_cmp_double);
	qsort(u, (size_t)reps, sizeof(double), nb_cmp_double);
	*min = t[0] / iters;
	*med = (reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2) / iters;
	*cpu = (reps % 2 ? u[reps / 2] : (u[reps / 2 - 1] + u[reps / 2]) / 2) / iters;
}

static double nb_cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * The untimed iterations (-w N, N > 0): N of them, then, when they left a buffer slot
 * unused that the timed iterations will use, one run that uses them all (every rank runs
 * the most any rank needs), so that what is timed is the steady state: no slot is used
 * for the first time (nb_slot_use; --stats prints the bytes that still were).
 */
static int nb_warmup(int t, struct nb_ctx *c, size_t size)
{
	const struct nb_opts *o = c->o;
	struct nb_sample *all;
	int need = 0, r, rc = -1;
	long w;

	if (nb_test_run(t, c, size, o->warmup, 0, &w) != 0)
		return -1;
	all = calloc((size_t)c->nranks, sizeof(*all));
	if (!all) {
		nb_err("out of memory");
		return -1;
	}
	all[c->rank].warm = nb_warm_iters(c->e, o->warmup);
	if (nb_oob_allgather(c->e->oob, &all[c->rank], all, sizeof(*all)) != 0)
		goto out;
	for (r = 0; r < c->nranks; r++)
		need = all[r].warm > need ? all[r].warm : need;
	if (need > o->iters)
		need = o->iters;	/* the timed runs go no further */
	rc = need > o->warmup ? nb_test_run(t, c, size, need, 0, &w) : 0;
out:
	free(all);
	return rc;
}

static int nb_timed(int t, struct nb_ctx *c, size_t size, struct nb_sample *me)
{
	const struct nb_opts *o = c->o;
	uint64_t first0;
	long w;
	int k;

	if (o->warmup && nb_warmup(t, c, size) != 0)
		return -1;
	first0 = nb_first_use(c->e);
	c->e->t_exec = c->e->t_net = 0;
	c->e->idle = 0;
	for (k = 0; k < o->repeat; k++) {
		double t0, c0;

		if (nb_oob_barrier(c->e->oob) != 0)
			return -1;
		t0 = nb_now();
		c0 = nb_cpu_now();
		if (nb_test_run(t, c, size, o->iters, 0, &w) != 0)
			return -1;
		me->t[k] = nb_now() - t0;
		me->cpu[k] = nb_cpu_now() - c0;
		me->wall += me->t[k];
	}
	me->exec = c->e->t_exec;
	me->net = c->e->t_net;
	me->idle = c->e->idle;
	me->first_use = nb_first_use(c->e) - first0;
	if (o->check && nb_test_run(t, c, size, 1, 1, &me->wrong) != 0)
		return -1;
	return 0;
}

static int nb_measure(int t, struct nb_ctx *c, size_t size, struct nb_result *res)
{
	struct nb_sample me, *all = calloc((size_t)c->nranks, sizeof(me));
	double secs, tmin, cpu, bytes, factor;
	int r;

	memset(&me, 0, sizeof(me));
	if (!all || nb_timed(t, c, size, &me) != 0 ||
	    nb_oob_allgather(c->e->oob, &me, all, sizeof(me)) != 0) {
		free(all);
		return -1;
	}
	nb_test_describe(t, c, size, res);
	nb_reduce_time(t, all, c->nranks, c->o->repeat, c->o->iters, &secs, &tmin, &cpu);
	if (t == NB_T_LATENCY) {
		secs /= 2;	/* half round trip */
		tmin /= 2;
	}
	bytes = nb_test_bytes(t, c, size, &factor);
	res->time_us = secs * 1e6;
	res->time_min_us = tmin * 1e6;
	res->algbw = secs > 0 ? bytes / secs / 1e9 : 0;
	res->busbw = res->algbw * factor;
	res->cpu_busbw = cpu > 0 && t != NB_T_LATENCY ? bytes * factor / cpu / 1e9 : 0;
	for (r = 0; r < c->nranks; r++)
		res->wrong += all[r].wrong;
	for (r = 0; c->o->stats && c->rank == 0 && r < c->nranks; r++)
		printf("#   stats rank %d: wall %.1f ms, in streams (copy/reduce/check) %.1f ms "
		       "(%.0f%%), in plugin calls %.1f ms (%.0f%%), idle passes %llu, "
		       "first-use bytes %llu\n", r,
		       all[r].wall * 1e3, all[r].exec * 1e3, 100 * all[r].exec / all[r].wall,
		       all[r].net * 1e3, 100 * all[r].net / all[r].wall,
		       (unsigned long long)all[r].idle, (unsigned long long)all[r].first_use);
	free(all);
	return 0;
}

static size_t nb_next_size(const struct nb_opts *o, size_t s)
{
	size_t n = (size_t)((double)s * o->factor);

	return n > s ? n : s + 1;
}

/* Tables of a multi-plugin run: each plugin's rows of test t from rs[first], then the comparison. */
static void nb_print_tables(int t, struct nb_ctx *cs, int np, const struct nb_result *rs,
			    int first, int n)
{
	static struct nb_result mine[NB_MAX_RESULTS];
	int pl, i, k;

	for (pl = 0; pl < np; pl++) {
		nb_out_header(t, &cs[pl]);
		for (i = first, k = 0; i < n; i++)
			if (rs[i].plugin == pl) {
				nb_out_row(&rs[i]);
				mine[k++] = rs[i];
			}
		nb_out_summary(t, mine, k);
	}
	nb_out_compare(t, rs + first, n - first, cs, np);
}

/*
 * One test over the whole size sweep on each of the np plugins (cs[]),
 * every size measured on each plugin in turn so load hits all alike;
 * results appended to rs.
 */
static int nb_one_test(int t, struct nb_ctx *cs, int np, struct nb_result *rs, int *nres)
{
	const struct nb_opts *o = cs[0].o;
	int max = nb_test_max_edges(t, cs[0].nranks);
	struct nb_edge *edges = calloc((size_t)max, sizeof(*edges));
	int nedges, pl, first = *nres, quiet = o->quiet || cs[0].rank != 0;
	size_t size, last = 0;

	if (!edges) {
		nb_err("out of memory");
		return -1;
	}
	for (pl = 0; pl < np; pl++) {
		struct nb_cost k;

		nedges = nb_test_edges(t, &cs[pl], edges, max);
		nb_cost_begin(&k);
		if (nb_engine_connect(cs[pl].e, edges, nedges) != 0) {
			free(edges);
			return -1;
		}
		nb_cost_end(&k, cs[pl].e);
		/* all-to-all: a comm pair per peer, what the connect phase cost each rank */
		if (t == NB_T_ALLTOALL && !o->quiet && nb_cost_report(&cs[pl], &k) != 0) {
			free(edges);
			return -1;
		}
	}
	free(edges);
	if (np == 1 && !quiet)
		nb_out_header(t, &cs[0]);
	for (size = o->minbytes; size <= o->maxbytes; size = nb_next_size(o, size)) {
		size_t eff = nb_test_size(t, &cs[0], size);

		if (eff == 0 || eff == last)
			continue;
		last = eff;
		for (pl = 0; pl < np; pl++) {
			struct nb_result r;

			memset(&r, 0, sizeof(r));
			if (nb_measure(t, &cs[pl], eff, &r) != 0)
				return -1;
			r.plugin = pl;
			if (np == 1 && !quiet)
				nb_out_row(&r);
			if (*nres < NB_MAX_RESULTS)
				rs[(*nres)++] = r;
		}
	}
	if (cs[0].rank == 0 && np == 1)
		nb_out_summary(t, rs, *nres);
	else if (cs[0].rank == 0)
		nb_print_tables(t, cs, np, rs, first, *nres);
	for (pl = 0; pl < np; pl++)
		nb_engine_close(cs[pl].e);
	return nb_oob_barrier(cs[0].e->oob);
}

/* ---- rank main ------------------------------------------------------------- */

static int nb_open_plugin(struct nb_net *net, const char *spec, const struct nb_opts *o,
			  struct nb_ctx *c)
{
	int ndev = 0;

	if (nb_net_load(net, spec, o->net_version) != 0 || nb_net_init(net) != 0 ||
	    nb_net_devices(net, &ndev) != 0)
		return -1;
	c->dev = o->dev;
	if (o->vdev && (nb_net_make_vdevice(net, o->vdev, &c->dev) != 0 ||
			nb_net_devices(net, &ndev) != 0))
		return -1;
	if (ndev <= 0 || c->dev < 0 || c->dev >= ndev) {
		nb_err("plugin %s has %d device(s); device %d is not one of them%s%s", net->name,
		       ndev, c->dev, nb_net_last_warn()[0] ? "; plugin said: " : "",
		       nb_net_last_warn());
		return -1;
	}
	return nb_net_props(net, c->dev, &c->props);
}

static int nb_list_one(const struct nb_opts *o, const char *spec)
{
	struct nb_props p;
	struct nb_net net;
	int ndev = 0, d;

	if (nb_net_load(&net, spec, o->net_version) != 0 || nb_net_init(&net) != 0 ||
	    nb_net_devices(&net, &ndev) != 0)
		return 1;
	printf("plugin %s (%s), ncclNet v%d, %d device(s)\n", net.name, net.path, net.version,
	       ndev);
	for (d = 0; d < ndev; d++) {
		if (nb_net_props(&net, d, &p) != 0)
			return 1;
		printf("  dev %d: %s port %d speed %d Mbps latency %.1f us ptrSupport 0x%x "
		       "maxComms %d maxRecvs %d forceFlush %d regIsGlobal %d pci %s\n", d, p.name,
		       p.port, p.speed, p.latency, p.ptr_support, p.max_comms, p.max_recvs,
		       p.force_flush, p.reg_is_global, p.pci);
	}
	nb_net_unload(&net);
	return 0;
}

static int nb_list(const struct nb_opts *o)
{
	int pl;

	for (pl = 0; pl < o->nplugins; pl++)
		if (nb_list_one(o, o->plugins[pl]) != 0)
			return 1;
	return 0;
}

static int nb_self(const struct nb_opts *o)
{
	struct nb_ctx c = { 0 };
	struct nb_net net;
	int rc;

	if ((o->profile && nb_prof_open(o->profile, -1) != 0) ||
	    nb_open_plugin(&net, o->plugins[0], o, &c) != 0)
		return 1;
	rc = nb_self_run(&net, c.dev, o->minbytes, o->warmup, o->iters, o->idle, o->send_first);
	if (o->calls)
		nb_net_print_calls(&net, -1);
	nb_net_unload(&net);
	return rc ? 1 : 0;
}

static void nb_setup_ctx(struct nb_ctx *c, const struct nb_opts *o)
{
	const char *ff = getenv("NCCL_NET_FORCE_FLUSH");
	int maxr = c->props.max_recvs > 0 ? c->props.max_recvs : 1;

	c->e->flush = o->flush >= 0 ? o->flush : (c->props.force_flush || (ff && atoi(ff) == 1));
	c->groups = o->groups > 0 ? o->groups : 4;
	if (c->groups > maxr)
		c->groups = maxr;	/* NCCL never groups more than maxRecvs */
	if (c->groups > NB_MAX_GROUP)
		c->groups = NB_MAX_GROUP;
	if (c->rank == 0 && !o->quiet)
		printf("# nccl-net-bench: %d ranks, plugin %s from %s, ncclNet v%d, device %d %s "
		       "(speed %d Mbps, maxRecvs %d%s)\n", c->nranks, c->e->net->name,
		       c->e->net->path, c->e->net->version, c->e->dev, c->props.name,
		       c->props.speed, c->props.max_recvs, c->e->flush ? ", iflush on" : "");
}

static void nb_engine_setup(struct nb_engine *e, struct nb_net *net, struct nb_oob *oob,
			    const struct nb_opts *o)
{
	e->net = net;
	e->oob = oob;
	e->dev = o->dev;
	e->buffsize = o->buffsize;
	e->yield_us = o->yield_us;
	e->recv_depth = o->recv_depth;
	e->stats = o->stats;
}

static int nb_rank_main(const struct nb_opts *o, const char *host, int port, int lfd)
{
	static struct nb_result rs[NB_MAX_RESULTS];
	static struct nb_engine e[NB_MAX_PLUGINS];
	static struct nb_ctx c[NB_MAX_PLUGINS];
	static struct nb_net net[NB_MAX_PLUGINS];
	struct nb_oob oob = { 0 };
	int t, nres = 0, i, pl, np = o->nplugins;
	long wrong = 0;

	nb_rank = o->rank;
	alarm((unsigned)o->timeout + 15);	/* last resort if a plugin call blocks */
	if (o->profile && nb_prof_open(o->profile, o->rank) != 0)
		nb_fail();
	if (nb_oob_init(&oob, o->rank, o->nranks, host, port, lfd) != 0)
		nb_fail();
	for (pl = 0; pl < np; pl++) {
		if (nb_open_plugin(&net[pl], o->plugins[pl], o, &c[pl]) != 0)
			nb_fail();
		nb_engine_setup(&e[pl], &net[pl], &oob, o);
		e[pl].dev = c[pl].dev;	/* -d, or the virtual device of --vdev */
		c[pl].e = &e[pl];
		c[pl].o = o;
		c[pl].rank = o->rank;
		c[pl].nranks = o->nranks;
		nb_setup_ctx(&c[pl], o);
	}
	for (pl = 0; o->pairs && pl < np; pl++)
		if (nb_pairs_run(&c[pl], o->pairs) != 0)
			nb_fail();
	for (t = 0; !o->pairs && t < NB_T_COUNT; t++)
		if ((o->tests & (1U << t)) && nb_one_test(t, c, np, rs, &nres) != 0)
			nb_fail();
	for (i = 0; i < nres; i++)
		wrong += rs[i].wrong;
	if (c[0].rank == 0 && ((o->csv && nb_out_csv(o->csv, rs, nres, c) != 0) ||
			       (o->plot && nb_out_svg(o->plot, rs, nres, c, np) != 0)))
		nb_fail();
	nb_ar_release();
	for (pl = 0; pl < np; pl++) {
		if (o->calls)
			nb_net_print_calls(&net[pl], o->rank);
		nb_net_unload(&net[pl]);
	}
	nb_oob_close(&oob);
	if (wrong && c[0].rank == 0)
		nb_err("%ld wrong values received", wrong);
	return wrong ? 1 : 0;
}

static int nb_multi_host(struct nb_opts *o, char *host, size_t hlen, int *port)
{
	const char *root = o->root[0] ? o->root : getenv("NCCL_NET_BENCH_ROOT");

	if (o->rank < 0 && !nb_env_int("OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID",
				       &o->rank))
		return 0;
	if (o->nranks <= 0)
		nb_env_int("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", &o->nranks);
	if (o->nranks < 2 || o->rank < 0 || o->rank >= o->nranks) {
		nb_err("need --nranks >= 2 and 0 <= --rank < --nranks (rank %d, nranks %d)",
		       o->rank, o->nranks);
		return -1;
	}
	if (!root || nb_parse_hostport(root, host, hlen, port) != 0) {
		nb_err("a multi-rank run needs --root HOST:PORT (or NCCL_NET_BENCH_ROOT)");
		return -1;
	}
	return 1;
}

int main(int argc, char **argv)
{
	struct nb_opts o;
	char host[256] = "127.0.0.1";
	int port = 0, lfd = -1, status = 0, multi;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (nb_opts_parse(&o, argc, argv) != 0)
		return 2;
	nb_deadline = nb_now() + o.timeout;
	if (o.list)
		return nb_list(&o);
	if (o.self)
		return nb_self(&o);
	multi = o.np ? 0 : nb_multi_host(&o, host, sizeof(host), &port);
	if (multi < 0)
		return 2;
	if (multi)
		return nb_rank_main(&o, host, port, -1);
	o.nranks = o.np ? o.np : 2;
	if (o.nranks < 2) {
		nb_err("--np must be at least 2");
		return 2;
	}
	if (!nb_launch_local(o.nranks, o.timeout + 5, &o.rank, &lfd, &port, &status))
		return status;
	return nb_rank_main(&o, host, port, lfd);
}
