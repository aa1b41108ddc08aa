/*
 * fault_hold - NCCL_VERBS_LINK_HOLD_MS: a comm on one RoCE port (simroce0,
 * both sides on it, as two ranks behind one switch port each) rides through
 * a link flap. A stream of messages goes both ways at once (two pairs of
 * comms, a window of 8 in flight each way, sizes 0 B .. 300 KB, each filled
 * with its own pattern, every byte checked; a message delivered twice would
 * corrupt the later message that reuses its buffer or complete a receive
 * early, and sizes are checked too); at message 20 the link goes down
 * (simverbs link-down: port DOWN, its address GIDs removed) and comes back
 * 0.5 s later with the address two GID slots further on. Cases, each in a
 * child process with its own plugin:
 *   flap       hold 20 s: nothing fails, no WARN, each comm prints one
 *              "holding" and one "recovered" line, the recovered line says
 *              the GID index moved and the comm now uses the new index, and
 *              the stream is intact; the eager path is off with the hold
 *   grouped    the same with grouped receives (2 per irecv)
 *   too-long   hold 400 ms and the link stays down: every comm fails with
 *              the sticky error naming the port, the peer and how long it
 *              waited, within the hold plus a bounded margin, one WARN each
 *   off        hold 0 (the default): the flap fails the comms, as before
 *   soak       12 random flaps (FH_HOLD_FLAPS=50 for more) on one long-lived pair each way
 */
#include "config.h"

#include <fcntl.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm.h"
#include "fh.h"

#define W 8
#define MAXSZ (320u * 1024)
#define NMSG 48
#define SOAK_FLAPS 12 /* FH_HOLD_FLAPS=50 for the soak */
#define F 20 /* the message the flap comes at */
#define TAG 7

struct dir {
	void *s, *r, *smh, *rmh;
	char *sbuf, *rbuf;
	void *rreq[W], *sreq[2 * W];
	int ir, is, dr, ds, filled;
	uint64_t seed;
};

static const char *mode;
static int grouped;
static int nmsg = NMSG;

static size_t msg_size(const struct dir *d, int i)
{
	static const size_t sizes[] = { 300000, 0, 65536, 1, 100000, 4096, 200000, 9000 };
	uint64_t st = d->seed + (uint64_t)i * 7919u;

	return sizes[fh_rand(&st) % (sizeof(sizes) / sizeof(sizes[0]))];
}

/* Send m's length: grouped receives take two sends each, into halves of a slot. */
static size_t msg_len(const struct dir *d, int m)
{
	size_t s = msg_size(d, m), part = grouped ? MAXSZ / 2 : MAXSZ;

	return s > part ? part : s;
}

/* Receive i takes sends i * n .. i * n + n - 1 (tags TAG, TAG + 1). */
static ncclResult_t post_recv(struct fh *f, struct dir *d)
{
	int n = grouped ? 2 : 1, tags[2] = { TAG, TAG + 1 };
	size_t part = MAXSZ / (size_t)n, cap[2] = { part, part };
	void *data[2], *mh[2] = { d->rmh, d->rmh }, *req = NULL;
	ncclResult_t r;

	data[0] = d->rbuf + (size_t)(d->ir % W) * MAXSZ;
	data[1] = (char *)data[0] + part;
	memset(data[0], 0xee, MAXSZ); /* a stale byte is never the pattern */
	r = f->net->irecv(d->r, n, data, cap, tags, mh, NULL, &req);
	if (r == ncclSuccess && req)
		d->rreq[d->ir++ % W] = req;
	return r;
}

/* One step of one direction: 0 going on, 1 done, -1 a call failed. */
static int step(struct fh *f, struct dir *d, int *flap_at)
{
	int n = grouped ? 2 : 1, done, sz[2];
	size_t part = MAXSZ / (size_t)n;
	ncclResult_t r;

	if (d->ir < nmsg && d->ir - d->dr < W && post_recv(f, d) != ncclSuccess)
		return -1;
	/* as NCCL: the sender tries its isend whether or not the receive is posted */
	if (d->is < nmsg * n && d->is - d->ds < W * n) {
		int m = d->is;
		char *data = d->sbuf + (size_t)(m % (W * n)) * part;
		void *req = NULL;

		if (d->filled <= m) {
			fh_fill(data, msg_len(d, m), d->seed * 1000 + (uint64_t)m);
			d->filled = m + 1;
		}
		if (m == F * n && !*flap_at && strcmp(mode, "soak"))
			*flap_at = 1;
		r = f->net->isend(d->s, data, msg_len(d, m), TAG + m % n, d->smh, NULL, &req);
		if (r != ncclSuccess)
			return -1;
		if (req)
			d->sreq[d->is++ % (W * n)] = req;
	}
	if (d->dr < d->ir) {
		r = f->net->test(d->rreq[d->dr % W], &done, sz);
		if (r != ncclSuccess)
			return -1;
		if (done) {
			const char *b = d->rbuf + (size_t)(d->dr % W) * MAXSZ;

			for (int k = 0; k < n; k++) {
				int m = d->dr * n + k;

				FH_CHECK((size_t)sz[k] == msg_len(d, m), "%s: message %d: %d bytes, sent "
					 "%zu", mode, m, sz[k], msg_len(d, m));
				FH_CHECK(fh_check_pattern(b + (size_t)k * part, msg_len(d, m),
							  d->seed * 1000 + (uint64_t)m) == 0,
					 "%s: message %d (%zu bytes) corrupt", mode, m, msg_len(d, m));
			}
			d->dr++;
		}
	}
	if (d->ds < d->is) {
		r = f->net->test(d->sreq[d->ds % (W * n)], &done, sz);
		if (r != ncclSuccess)
			return -1;
		if (done)
			d->ds++;
	}
	return d->dr == nmsg && d->ds == nmsg * n;
}

static void dir_open(struct fh *f, int dev, struct dir *d, uint64_t seed)
{
	memset(d, 0, sizeof(*d));
	d->seed = seed;
	fh_pair(f, dev, &d->s, &d->r, 20);
	d->sbuf = aligned_alloc(4096, (size_t)W * MAXSZ);
	d->rbuf = aligned_alloc(4096, (size_t)W * MAXSZ);
	FH_CHECK(d->sbuf && d->rbuf, "out of memory");
	d->smh = fh_reg(f, d->s, d->sbuf, (size_t)W * MAXSZ);
	d->rmh = fh_reg(f, d->r, d->rbuf, (size_t)W * MAXSZ);
}

static void dir_close(struct fh *f, struct dir *d)
{
	FH_OK(f->net->deregMr(d->s, d->smh));
	FH_OK(f->net->deregMr(d->r, d->rmh));
	FH_OK(f->net->closeSend(d->s));
	FH_OK(f->net->closeRecv(d->r));
	free(d->sbuf);
	free(d->rbuf);
}

/* Lines of the captured log containing every needle. */
static int count_lines(const char *log, const char *a, const char *b)
{
	int n = 0;

	for (const char *p = log; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		char line[2048];

		snprintf(line, sizeof(line), "%.*s", (int)(len < sizeof(line) ? len : sizeof(line) - 1),
			 p);
		if (strstr(line, a) && (!b || strstr(line, b)))
			n++;
		p = nl ? nl + 1 : NULL;
	}
	return n;
}

static char *slurp(const char *path)
{
	FILE *fp = fopen(path, "r");
	char *buf = calloc(1, 1 << 20);
	size_t n;

	FH_CHECK(fp && buf, "cannot read %s", path);
	n = fread(buf, 1, (1 << 20) - 1, fp);
	buf[n] = 0;
	fclose(fp);
	return buf;
}

/*
 * soak: one long-lived pair each way, FH_HOLD_FLAPS (default 12) flaps of 20 .. 300 ms at random
 * moments (2 .. 10 messages after the link came back from the previous one, or in the middle of
 * its recovery), the GID re-indexed by each; every byte checked, no WARN, every hold recovered.
 */
static void soak(struct fh *f, struct dir *a, struct dir *b, int flaps)
{
	uint64_t st = 0xf1a9;
	int done = 0, fa = 0, fb = 0, down = 0, next_at = 2 + (int)(fh_rand(&st) % 9);
	double t_up = 0, t0 = fh_now(), end = t0 + 120 * fh_scale();

	while (!(fa == 1 && fb == 1)) {
		if (!fa)
			fa = step(f, a, &down);
		if (!fb)
			fb = step(f, b, &down);
		FH_CHECK(fa >= 0 && fb >= 0, "soak: a call failed at flap %d (messages %d/%d)", done,
			 a->dr, b->dr);
		FH_CHECK(fh_now() < end, "soak: stuck at flap %d (a %d/%d, b %d/%d of %d)", done,
			 a->dr, a->ds, b->dr, b->ds, nmsg);
		if (!down && done < flaps && a->is >= next_at) {
			FH_CHECK(fh_sv_control("link-down simroce0 1") == 0, "link-down");
			t_up = fh_now() + (20 + (double)(fh_rand(&st) % 281)) / 1000;
			down = 1;
		} else if (down && fh_now() > t_up) {
			FH_CHECK(fh_sv_control("link-up simroce0 1") == 0, "link-up");
			down = 0;
			done++;
			next_at = a->is + 2 + (int)(fh_rand(&st) % 9);
		}
	}
	FH_CHECK(done == flaps, "soak: only %d of %d flaps before the streams ended", done, flaps);
	fh_log("soak: %d flaps of 20-300 ms, 2 x %d messages intact (%.1f s)", flaps, nmsg,
	       fh_now() - t0);
}

static int run_case(void)
{
	struct fh f;
	struct dir a, b;
	int rc, dev, flap = 0, fa = 0, fb = 0, gid0, w0;
	double t_down = 0, t_fail = 0, hold_s;
	char log[64];
	int saved, fd;

	grouped = !strcmp(mode, "grouped");
	if (!strcmp(mode, "soak"))
		nmsg = 12 * (getenv("FH_HOLD_FLAPS") ? atoi(getenv("FH_HOLD_FLAPS")) : SOAK_FLAPS) + 40;
	setenv("NCCL_VERBS_LINK_HOLD_MS", !strcmp(mode, "off") ? "0" :
	       !strcmp(mode, "too-long") ? "400" : "20000", 1);
	setenv("E2E_VERBOSE", "1", 1);
	setenv("NCCL_DEBUG", "INFO", 1);
	hold_s = !strcmp(mode, "too-long") ? 0.4 : 20;
	snprintf(log, sizeof(log), "/tmp/fault_hold.%d.log", (int)getpid());
	fd = open(log, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	saved = dup(2);
	FH_CHECK(fd >= 0 && saved >= 0, "log file");
	dup2(fd, 2);
	rc = fh_open(&f);
	if (rc) {
		dup2(saved, 2);
		return rc;
	}
	dev = fh_dev_by_name(&f, "simroce0");
	FH_CHECK(dev >= 0, "no simroce0");
	dir_open(&f, dev, &a, 11);
	dir_open(&f, dev, &b, 29);
	gid0 = ((struct nv_comm *)a.s)->dev[0].gid.index;
	FH_CHECK(((struct nv_send_comm *)a.s)->eager.max == 0 ||
		 !strcmp(mode, "off"), "the eager path is on with NCCL_VERBS_LINK_HOLD_MS");
	w0 = fh_warn_count();
	if (!strcmp(mode, "soak")) {
		int flaps = getenv("FH_HOLD_FLAPS") ? atoi(getenv("FH_HOLD_FLAPS")) : SOAK_FLAPS;
		char *text;
		int h, back;

		soak(&f, &a, &b, flaps);
		dup2(saved, 2);
		text = slurp(log);
		h = count_lines(text, "holding its requests", NULL);
		back = count_lines(text, "recovered after", "NCCL_VERBS_LINK_HOLD_MS");
		if (fh_warn_count() != w0 || h != back || h < flaps) {
			fputs(text, stderr);
			FH_FAIL("soak: %d WARN(s), %d holding and %d recovered lines for %d flaps",
				fh_warn_count() - w0, h, back, flaps);
		}
		fh_log("soak: %d flaps of 20-300 ms at random moments, 2 x %d messages intact, %d "
		       "holds, each recovered, no WARN", flaps, nmsg, h);
		free(text);
		unlink(log);
		dir_close(&f, &a);
		dir_close(&f, &b);
		fh_close(&f);
		return 0;
	}
	for (double end = fh_now() + 60 * fh_scale();;) {
		if (!fa)
			fa = step(&f, &a, &flap);
		if (!fb)
			fb = step(&f, &b, &flap);
		if (flap == 1) {
			FH_CHECK(fh_sv_control("link-down simroce0 1") == 0, "link-down");
			t_down = fh_now();
			flap = 2;
		}
		if (flap == 2 && strcmp(mode, "too-long") && fh_now() > t_down + 0.5) {
			FH_CHECK(fh_sv_control("link-up simroce0 1") == 0, "link-up");
			flap = 3;
		}
		if ((fa < 0 || fb < 0) && !t_fail)
			t_fail = fh_now();
		if ((fa && fb) || fa < 0 || fb < 0)
			if (fa != 0 && fb != 0)
				break;
		if (fh_now() > end) {
			dup2(saved, 2);
			FH_FAIL("%s: stuck (a %d/%d of %d, b %d/%d)", mode, a.dr, a.ds, NMSG, b.dr, b.ds);
		}
	}
	if (flap == 2)
		FH_CHECK(fh_sv_control("link-up simroce0 1") == 0, "link-up");
	dup2(saved, 2);
	{
		char *text = slurp(log);
		int hold = count_lines(text, "holding its requests", NULL);
		int back = count_lines(text, "recovered after", "NCCL_VERBS_LINK_HOLD_MS");
		int warns = fh_warn_count() - w0;

		if (!strcmp(mode, "flap") || !strcmp(mode, "grouped")) {
			int gid1 = ((struct nv_comm *)a.s)->dev[0].gid.index;

			if (fa != 1 || fb != 1 || warns || hold != 4 || back != 4 ||
			    count_lines(text, "recovered after", "GID index") != 4 || gid1 != gid0 + 2) {
				fputs(text, stderr);
				FH_FAIL("%s: streams %d %d, %d WARN(s), %d holding and %d recovered "
					"lines (want 0 and 4, 4), GID index %d -> %d", mode, fa, fb, warns,
					hold, back, gid0, gid1);
			}
			fh_log("%s: 2 x %d messages intact through a 0.5 s flap, GID index %d -> %d, one "
			       "holding and one recovered line per comm", mode, NMSG, gid0, gid1);
		} else if (!strcmp(mode, "too-long")) {
			double margin = 2.5 * fh_scale();

			if (fa != -1 || fb != -1 || t_fail - t_down > hold_s + margin ||
			    fh_warn_find(w0, "simroce0:1", "NCCL_VERBS_LINK_HOLD_MS=400", "waited",
					 NULL) < 0 || warns > 4) {
				fputs(text, stderr);
				FH_FAIL("too-long: streams %d %d, failed %.2f s after the link went down "
					"(hold 0.4 s + %.1f s), %d WARN(s)", fa, fb, t_fail - t_down,
					margin, warns);
			}
			fh_log("too-long: failed %.2f s after the link went down, naming port, peer "
			       "and the wait: %s", t_fail - t_down, fh_warn_get(w0));
		} else {
			FH_CHECK(fa == -1 || fb == -1, "off: the flap did not fail the comms");
			fh_log("off: the flap fails the comms (%d WARN(s))", warns);
		}
		free(text);
	}
	unlink(log);
	if (fa == 1 && fb == 1) {
		dir_close(&f, &a);
		dir_close(&f, &b);
	} else { /* failed comms: closing still gives everything back */
		struct dir *ds[2] = { &a, &b };

		for (int i = 0; i < 2; i++) {
			f.net->deregMr(ds[i]->s, ds[i]->smh);
			f.net->deregMr(ds[i]->r, ds[i]->rmh);
			f.net->closeSend(ds[i]->s);
			f.net->closeRecv(ds[i]->r);
			free(ds[i]->sbuf);
			free(ds[i]->rbuf);
		}
	}
	fh_close(&f);
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const modes[] = { "flap", "grouped", "too-long", "off", "soak" };

	fh_watchdog((unsigned)(240 * fh_scale()));
	if (argc > 1) {
		mode = argv[1];
		return run_case();
	}
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		pid_t pid = fork();
		int st;

		FH_CHECK(pid >= 0, "fork");
		if (pid == 0) {
			mode = modes[i];
			exit(run_case());
		}
		FH_CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
		if (WIFEXITED(st) && WEXITSTATUS(st) == FH_SKIP)
			return FH_SKIP;
		FH_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "case %s failed", modes[i]);
	}
	return 0;
}
