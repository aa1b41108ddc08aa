/*
 * nccl-net-bench-pairs.c - `--pairs N`: what idle comm pairs cost. NCCL opens
 * a send and a receive comm per peer and channel, so an all-to-all job holds
 * thousands; this opens N of them and reports what they took.
 *
 * Ranks pair up (0 -> 1, 2 -> 3, ...): the receiving rank listens N times
 * (NCCL listens once per connection), the handles go over the out-of-band
 * channel, then the sending rank connects N send comms while the receiving
 * one accepts N receive comms, both polling non-blocking as NCCL's proxy
 * does. Each rank measures what the comms added to the process, from after
 * init (the plugin's per-process set-up not counted) to after the last comm
 * is up: resident memory (/proc/self/status VmRSS), file descriptors
 * (/proc/self/fd), threads, and on simverbs the verbs objects and pinned
 * bytes (its `objects` control command, test/simverbs/README.md). No buffer
 * of the benchmark is registered: every MR counted is the plugin's own.
 * Rank 0 prints the figures per comm and a `pairs:` line for scripts
 * (scripts/peer-cost.sh).
 */
#include "config.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/nccl-net-bench.h"

#define NB_HS NCCL_NET_HANDLE_MAXSIZE

/* One rank's figures, gathered at rank 0. */
struct nb_pairs_rank {
	int role;			/* 0 none, 1 send comms, 2 receive comms */
	double listen_s, connect_s;
	struct nb_usage before, after, closed;
};

static long nb_status_field(const char *name)
{
	FILE *f = fopen("/proc/self/status", "r");
	size_t len = strlen(name);
	char line[256];
	long v = -1;

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, name, len) && line[len] == ':') {
			v = atol(line + len + 1);
			break;
		}
	if (f)
		fclose(f);
	return v;
}

static long nb_count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	long n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;	/* the directory's own descriptor */
}

typedef int (*nb_ctl_fn)(const char *cmd);

/* simverbs' control entry, in the libibverbs the plugin loaded; NULL elsewhere. */
static nb_ctl_fn nb_simverbs_ctl(void)
{
	void *lib = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_NOLOAD);
	void *sym = lib ? dlsym(lib, "simverbs_control") : NULL;
	nb_ctl_fn fn;

	if (!sym)
		sym = dlsym(RTLD_DEFAULT, "simverbs_control");
	if (lib)
		dlclose(lib);
	memcpy(&fn, &sym, sizeof(fn));
	return sym ? fn : NULL;
}

/* Runs simverbs' `objects` with stderr going to a pipe (one short line fits in it). */
static int nb_simverbs_objects(char *buf, size_t len)
{
	nb_ctl_fn ctl = nb_simverbs_ctl();
	int p[2], save, rc;
	ssize_t n;

	if (!ctl || pipe(p) != 0)
		return -1;
	fflush(stderr);
	save = dup(2);
	dup2(p[1], 2);
	rc = ctl("objects");
	fflush(stderr);
	dup2(save, 2);
	close(save);
	close(p[1]);
	n = read(p[0], buf, len - 1);
	close(p[0]);
	if (rc != 0 || n <= 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

static long long nb_objects_field(const char *line, const char *name)
{
	char key[32];
	const char *s;

	snprintf(key, sizeof(key), " %s ", name);
	s = strstr(line, key);
	return s ? atoll(s + strlen(key)) : -1;
}

void nb_usage_now(struct nb_usage *u)
{
	char line[512];

	u->rss_kib = nb_status_field("VmRSS");
	u->threads = nb_status_field("Threads");
	u->fds = nb_count_fds();
	if (nb_simverbs_objects(line, sizeof(line)) != 0) {
		u->qp = u->cq = u->mr = u->pd = u->chan = -1;
		u->pinned = -1;
		return;
	}
	u->qp = (long)nb_objects_field(line, "qp");
	u->cq = (long)nb_objects_field(line, "cq");
	u->mr = (long)nb_objects_field(line, "mr");
	u->pd = (long)nb_objects_field(line, "pd");
	u->chan = (long)nb_objects_field(line, "comp_channel");
	u->pinned = nb_objects_field(line, "pinned_bytes");
}

struct nb_pairs {
	struct nb_net *net;
	struct nb_oob *oob;
	int dev, n, role, peer;
	void **comms, **lcomms;
	char *all;			/* every rank's listen handles */
};

static int nb_pairs_listen(struct nb_pairs *p, double *secs)
{
	size_t hsz = (size_t)p->n * NB_HS;
	char *mine = calloc(1, hsz);
	double t0 = nb_now();
	int i, rc = -1;

	if (!mine)
		return -1;
	for (i = 0; p->role == 2 && i < p->n; i++)
		if (nb_net_listen(p->net, p->dev, mine + (size_t)i * NB_HS, &p->lcomms[i]) != 0)
			goto out;
	*secs = nb_now() - t0;
	rc = nb_oob_allgather(p->oob, mine, p->all, hsz);
out:
	free(mine);
	return rc;
}

/* One pass over the comms not yet up; returns how many are up, -1 on error. */
static int nb_pairs_step(struct nb_pairs *p)
{
	const char *h = p->all + (size_t)p->peer * (size_t)p->n * NB_HS;
	int i, up = 0;

	for (i = 0; i < p->n; i++) {
		if (!p->comms[i] && p->role == 1 &&
		    nb_net_connect(p->net, p->dev, (void *)(h + (size_t)i * NB_HS), &p->comms[i]) != 0)
			return -1;
		if (!p->comms[i] && p->role == 2) {
			if (nb_net_accept(p->net, p->lcomms[i], &p->comms[i]) != 0)
				return -1;
			if (p->comms[i] && nb_net_close_listen(p->net, p->lcomms[i]) != 0)
				return -1;
			if (p->comms[i])
				p->lcomms[i] = NULL;
		}
		up += p->comms[i] != NULL;
	}
	return up;
}

static int nb_pairs_connect(struct nb_pairs *p, double *secs)
{
	double t0 = nb_now();
	uint64_t spins = 0;

	while (p->role) {
		int up = nb_pairs_step(p);

		if (up < 0)
			return -1;
		if (up == p->n)
			break;
		if ((++spins & 255) == 0 && (nb_past_deadline("--pairs connection establishment") ||
					     nb_oob_peer_lost(p->oob)))
			return -1;
	}
	*secs = nb_now() - t0;
	return 0;
}

static void nb_pairs_close(struct nb_pairs *p)
{
	int i;

	for (i = 0; p->comms && p->lcomms && i < p->n; i++) {
		if (p->comms[i] && p->role == 1)
			nb_net_close_send(p->net, p->comms[i]);
		else if (p->comms[i])
			nb_net_close_recv(p->net, p->comms[i]);
		if (p->lcomms[i])
			nb_net_close_listen(p->net, p->lcomms[i]);
	}
}

/* Per comm: (after - before) / n, or -1 when unknown. */
static double nb_per(long long after, long long before, int n)
{
	return after < 0 || before < 0 ? -1.0 : (double)(after - before) / n;
}

static void nb_pairs_side(const char *name, const struct nb_pairs_rank *r, int n)
{
	printf("#   %-4s %10.1f %10.1f %6.2f %6.2f %6.2f %6.2f %7.2f %7.3f\n", name,
	       nb_per(r->after.rss_kib, r->before.rss_kib, n),
	       nb_per(r->after.pinned, r->before.pinned, n) / 1024.0,
	       nb_per(r->after.qp, r->before.qp, n), nb_per(r->after.cq, r->before.cq, n),
	       nb_per(r->after.mr, r->before.mr, n), nb_per(r->after.fds, r->before.fds, n),
	       nb_per(r->after.threads, r->before.threads, n), r->connect_s);
}

static void nb_pairs_kv(const char *side, const struct nb_pairs_rank *r, int n)
{
	printf(" %s_rss_kib=%.1f %s_pinned_kib=%.2f %s_qp=%.3f %s_cq=%.3f %s_mr=%.3f %s_fd=%.3f "
	       "%s_threads=%.3f %s_left_qp=%ld %s_left_fd=%ld", side,
	       nb_per(r->after.rss_kib, r->before.rss_kib, n), side,
	       nb_per(r->after.pinned, r->before.pinned, n) / 1024.0, side,
	       nb_per(r->after.qp, r->before.qp, n), side, nb_per(r->after.cq, r->before.cq, n),
	       side, nb_per(r->after.mr, r->before.mr, n), side,
	       nb_per(r->after.fds, r->before.fds, n), side,
	       nb_per(r->after.threads, r->before.threads, n), side,
	       r->closed.qp < 0 ? -1 : r->closed.qp - r->before.qp, side,
	       r->closed.fds - r->before.fds);
}

static void nb_pairs_print(const struct nb_ctx *c, const struct nb_pairs_rank *all, int n)
{
	const struct nb_pairs_rank *s = &all[0], *r = &all[1];
	double conn = s->connect_s > r->connect_s ? s->connect_s : r->connect_s;

	printf("#\n# pairs: %d idle comm pairs between ranks 0 and 1, plugin %s (ncclNet v%d), "
	       "device %d %s\n", n, c->e->net->name, c->e->net->version, c->dev, c->props.name);
	printf("#   all %d connected in %.3f s (%.1f us per pair; the %d listens took %.3f s)\n",
	       n, conn, conn * 1e6 / n, n, r->listen_s);
	printf("#   per comm: %10s %10s %6s %6s %6s %6s %7s %7s\n", "RSS KiB", "pinned KiB",
	       "QPs", "CQs", "MRs", "fds", "threads", "secs");
	nb_pairs_side("send", s, n);
	nb_pairs_side("recv", r, n);
	printf("pairs: plugin=%s n=%d connect_s=%.4f listen_s=%.4f", c->e->net->name, n, conn,
	       r->listen_s);
	nb_pairs_kv("send", s, n);
	nb_pairs_kv("recv", r, n);
	printf("\n");
	fflush(stdout);
}

int nb_pairs_run(struct nb_ctx *c, int npairs)
{
	struct nb_pairs_rank me, *all = calloc((size_t)c->nranks, sizeof(me));
	struct nb_pairs p = { .net = c->e->net, .oob = c->e->oob, .dev = c->dev, .n = npairs };
	int rc = -1;

	memset(&me, 0, sizeof(me));
	if (c->rank % 2 == 0 && c->rank + 1 < c->nranks)
		p.role = 1, p.peer = c->rank + 1;
	else if (c->rank % 2 == 1)
		p.role = 2, p.peer = c->rank - 1;
	me.role = p.role;
	p.comms = calloc((size_t)npairs, sizeof(void *));
	p.lcomms = calloc((size_t)npairs, sizeof(void *));
	p.all = calloc((size_t)c->nranks, (size_t)npairs * NB_HS);
	if (!all || !p.comms || !p.lcomms || !p.all) {
		nb_err("out of memory for %d comm pairs", npairs);
		goto out;
	}
	if (nb_oob_barrier(p.oob) != 0)
		goto out;
	nb_usage_now(&me.before);
	if (nb_pairs_listen(&p, &me.listen_s) != 0 || nb_oob_barrier(p.oob) != 0 ||
	    nb_pairs_connect(&p, &me.connect_s) != 0)
		goto out;
	nb_usage_now(&me.after);
	if (nb_oob_barrier(p.oob) != 0)
		goto out;
	nb_pairs_close(&p);
	memset(p.comms, 0, (size_t)npairs * sizeof(void *));
	memset(p.lcomms, 0, (size_t)npairs * sizeof(void *));
	nb_usage_now(&me.closed);
	if (nb_oob_allgather(p.oob, &me, all, sizeof(me)) != 0)
		goto out;
	if (c->rank == 0)
		nb_pairs_print(c, all, npairs);
	rc = nb_oob_barrier(p.oob);
out:
	nb_pairs_close(&p);
	free(p.comms);
	free(p.lcomms);
	free(p.all);
	free(all);
	return rc;
}
