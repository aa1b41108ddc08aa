/*
 * fault_lb - NCCL_IB_EVENT_BASED_LB and _REMOTE (speed-weighted striping over
 * fused NICs, lb.h): a send comm on a fused NIC of simib0 + simib1 to a
 * receive comm on simib2 + simib3 (QP 0: simib0 -> simib2, QP 1: simib1 ->
 * simib3, every message cut over both), all four ports at 800 Mb/s (simverbs
 * port-speed: the speed ibv_query_port_speed reports, with DEVICE_SPEED_CHANGE;
 * then bw-cap: 10 MB/s on what the port sends at 800 Mb/s, 5 at 400, well
 * below what simverbs moves on a shared 2-core machine). A stream of 1 MiB
 * messages, 8 in flight, each filled with its own pattern and checked byte
 * for byte, runs in phases; between them a port's speed changes. Per phase
 * the bytes each sending port put on the wire (simverbs' mlx5-style
 * counters/port_xmit_data, headers included) give the split, simib1 : simib0.
 * Cases, each in a child process (the knobs are read once at init):
 *   lb        (LB=1, REMOTE=1) equal at the start; simib0 at 400 Mb/s: 2 : 1,
 *             and the throughput against the weighted ideal (15 MB/s; an
 *             equal cut can do 10 at best); simib0 back: 1 : 1; the
 *             receiver's simib2 at 400 Mb/s: 2 : 1 (its speeds reach the
 *             sender); back: 1 : 1
 *   lb-local  (LB=1, REMOTE=0) simib2 at 400: still 1 : 1 (the sender never
 *             hears of it); simib0 at 400: 2 : 1
 *   off       (LB=0, the default) simib0 at 400: still 1 : 1, and its
 *             throughput (the equal cut's)
 *   lb-failover (LB=1 and NCCL_IB_RESILIENCY_PORT_FAILOVER=1) weighted 2 : 1,
 *             then simib0 goes down mid-stream: the stream goes on intact over
 *             simib1 alone (failover's one WARN per comm)
 *   lb-hostile a speed buffer with a broken magic lands in the sender's region:
 *             its next isend fails the comm, one WARN names it
 * A split must be within 4% of the ratio; no call may fail, no WARN. The
 * throughput check is loose (the machine is shared): the weighted cut must
 * beat the best an equal cut can do by 10%; the figures are printed (here:
 * 13.9 - 15.0 MB/s, 93 - 100% of the ideal 15; LB=0: 9.8 - 10.0 MB/s).
 * Usage: fault_lb [lb|lb-local|off]
 */
#include "config.h"

#include <inttypes.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm.h"
#include "fh.h"
#include "lb.h"

#define W 8
#define MSG (1u << 20)	/* simverbs pays a fixed time per capped WR: large ones */
#define TAG 9
#define SPEED 800	/* Mb/s */
#define CAP_DIV 10	/* a 10 MB/s cap per port at 800 Mb/s */
/* MB/s: one port at half speed, an equal cut: twice the slow port's cap (the weighted
 * ideal: 1.5 times that) */
#define IDEAL (2.0 * SPEED / 2 / 8 / CAP_DIV)	/* simverbs' MB are 10^6 bytes */

struct lbt {
	struct fh f;
	void *l, *s, *r, *smh, *rmh;
	char *sbuf, *rbuf;
	uint64_t seq;	/* messages sent so far (their patterns' seeds) */
	int dev[4];	/* simib0..3 among the plugin's devices */
};

/* "<verb> <dev>[:1] <v>": port-speed (port 1) or bw-cap. */
static void ctl(const char *verb, const char *dev, int v)
{
	char cmd[96];
	int rc;

	snprintf(cmd, sizeof(cmd), "%s %s%s %d", verb, dev, strcmp(verb, "bw-cap") ? ":1" : "", v);
	rc = fh_sv_control(cmd);
	FH_CHECK(rc == 0, "simverbs_control(%s) = %d", cmd, rc);
}

/*
 * The speed dev reports (port-speed: with DEVICE_SPEED_CHANGE), and a bandwidth cap of
 * CAP_DIV times less than it (ibv_query_port_speed counts in 100 Mb/s, so the speeds
 * stay in the hundreds; the caps are kept well below what simverbs moves on this machine).
 */
static void set_speed(const char *dev, int mbps)
{
	ctl("port-speed", dev, mbps);
	ctl("bw-cap", dev, mbps / 8 / CAP_DIV);
}

/* Bytes port 1 of local device d of comm c has sent (simverbs counts them in 4-byte words). */
static uint64_t xmit_bytes(void *comm, int d)
{
	const struct nv_comm *c = comm;
	char path[512];
	unsigned long long v = 0;
	FILE *fp;

	FH_CHECK(fh_sv_control("flush-counters") == 0, "flush-counters");
	snprintf(path, sizeof(path), "%s/ports/%d/counters/port_xmit_data",
		 c->dev[d].hca->ctx->device->ibdev_path, c->dev[d].dev->port);
	fp = fopen(path, "r");
	FH_CHECK(fp != NULL, "cannot open %s", path);
	FH_CHECK(fscanf(fp, "%llu", &v) == 1, "cannot read %s", path);
	fclose(fp);
	return (uint64_t)v * 4;
}

/* n messages, W in flight, every byte checked; returns the seconds it took. */
static double stream(struct lbt *t, int n)
{
	void *rreq[W], *sreq[W];
	int ir = 0, is = 0, dr = 0, ds = 0, done, sz;
	double t0 = fh_now();
	struct fh *f = &t->f;

	while (dr < n || ds < n) {
		FH_CHECK(fh_now() - t0 < 60 * fh_scale(), "stuck at receive %d / send %d of %d", dr,
			 ds, n);
		if (ir < n && ir - dr < W) {
			void *data = t->rbuf + (size_t)(ir % W) * MSG, *req = NULL;
			size_t cap = MSG;
			int tag = TAG;

			memset(data, 0xee, 64); /* a stale message never passes the check */
			FH_OK(f->net->irecv(t->r, 1, &data, &cap, &tag, &t->rmh, NULL, &req));
			if (req)
				rreq[ir++ % W] = req;
		}
		if (is < n && is - ds < W) {
			char *data = t->sbuf + (size_t)(is % W) * MSG;
			void *req = NULL;

			fh_fill(data, MSG, t->seq + (uint64_t)is);
			FH_OK(f->net->isend(t->s, data, MSG, TAG, t->smh, NULL, &req));
			if (req)
				sreq[is++ % W] = req;
		}
		if (dr < ir) {
			FH_OK(f->net->test(rreq[dr % W], &done, &sz));
			if (done) {
				FH_CHECK(sz == (int)MSG, "message %d: %d bytes", dr, sz);
				FH_CHECK(fh_check_pattern(t->rbuf + (size_t)(dr % W) * MSG, MSG,
							  t->seq + (uint64_t)dr) == 0,
					 "message %" PRIu64 " corrupt", t->seq + (uint64_t)dr);
				dr++;
			}
		}
		if (ds < is) {
			FH_OK(f->net->test(sreq[ds % W], &done, &sz));
			if (done)
				ds++;
		}
	}
	t->seq += (uint64_t)n;
	return fh_now() - t0;
}

/*
 * A few messages at a time until the sender's QP 0 weighs share0 (of
 * NV_LB_ONE), or 10 s; for at least 0.5 s when share0 is 0.5 (a change that
 * must not move the split: the event has had time to arrive).
 */
static void settle(struct lbt *t, double share0, const char *what)
{
	const struct nv_comm *c = t->s;
	double t0 = fh_now(), got = 0.5, least = share0 == 0.5 ? 0.5 : 0;

	while (fh_now() - t0 < 10 * fh_scale()) {
		stream(t, 2);
		if (c->lb)
			got = (double)c->lb->pw[c->qps[0].dev][c->qps[0].rdev] / NV_LB_ONE;
		if (got > share0 - 0.01 && got < share0 + 0.01 && fh_now() - t0 >= least)
			return;
	}
	FH_FAIL("%s: QP 0's share stayed %.3f, expected %.3f", what, got, share0);
}

/*
 * One measured phase of n messages: the split simib1 : simib0 must be ratio
 * (within 4%); returns the throughput in MB/s.
 */
static double phase(struct lbt *t, int n, double ratio, const char *what)
{
	uint64_t a0 = xmit_bytes(t->s, 0), b0 = xmit_bytes(t->s, 1), a, b;
	double sec = stream(t, n), r, mbs;

	a = xmit_bytes(t->s, 0) - a0;
	b = xmit_bytes(t->s, 1) - b0;
	FH_CHECK(a > 0 && b > 0, "%s: no bytes on a port (%" PRIu64 ", %" PRIu64 ")", what, a, b);
	r = (double)b / (double)a;
	mbs = (double)n * MSG / sec / 1e6;
	fh_log("%s: simib0 %" PRIu64 " B, simib1 %" PRIu64 " B, split 1 : %.3f (expected 1 : %.1f), "
	       "%.1f MB/s", what, a, b, r, ratio, mbs);
	FH_CHECK(r > ratio * 0.96 && r < ratio * 1.04, "%s: split 1 : %.3f, expected 1 : %.1f",
		 what, r, ratio);
	return mbs;
}

static void open_case(struct lbt *t, const char *lb, const char *remote)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	int va, vb, i, rc;

	memset(t, 0, sizeof(*t));
	setenv("NCCL_IB_EVENT_BASED_LB", lb, 1);
	setenv("NCCL_IB_EVENT_BASED_LB_REMOTE", remote, 1);
	rc = fh_open_simverbs(&t->f);
	if (rc)
		exit(rc);
	for (i = 0; i < 4; i++) {
		char name[16];

		snprintf(name, sizeof(name), "simib%d", i);
		t->dev[i] = fh_dev_by_name(&t->f, name);
		FH_CHECK(t->dev[i] >= 0, "simverbs did not give %s", name);
		set_speed(name, SPEED);
	}
	FH_OK(e2e_make_vdevice(&t->f.e2e, 2, &t->dev[0], &va));
	FH_OK(e2e_make_vdevice(&t->f.e2e, 2, &t->dev[2], &vb));
	FH_OK(t->f.net->listen(t->f.ctx, vb, handle, &t->l));
	fh_join(&t->f, t->l, va, handle, &t->s, &t->r, 20, "connect simib0+1 to simib2+3");
	FH_CHECK(((struct nv_comm *)t->s)->nq == 2 && ((struct nv_comm *)t->s)->nqps == 2,
		 "expected 2 QPs, both used per message");
	t->sbuf = aligned_alloc(4096, (size_t)W * MSG);
	t->rbuf = aligned_alloc(4096, (size_t)W * MSG);
	FH_CHECK(t->sbuf && t->rbuf, "out of memory");
	t->smh = fh_reg(&t->f, t->s, t->sbuf, (size_t)W * MSG);
	t->rmh = fh_reg(&t->f, t->r, t->rbuf, (size_t)W * MSG);
}

static void close_case(struct lbt *t, int warns)
{
	FH_CHECK(fh_warn_count() == warns, "%d WARN(s), expected %d; the first: %s",
		 fh_warn_count(), warns, fh_warn_count() ? fh_warn_get(0) : "-");
	FH_OK(t->f.net->deregMr(t->s, t->smh));
	FH_OK(t->f.net->deregMr(t->r, t->rmh));
	FH_OK(t->f.net->closeSend(t->s));
	FH_OK(t->f.net->closeRecv(t->r));
	FH_OK(t->f.net->closeListen(t->l));
	free(t->sbuf);
	free(t->rbuf);
	fh_close(&t->f);
}

static void case_lb(void)
{
	struct lbt t;
	double mbs;

	open_case(&t, "1", "1");
	FH_CHECK(((struct nv_comm *)t.s)->lb && ((struct nv_comm *)t.r)->lb &&
			 ((struct nv_comm *)t.r)->lb->push, "LB state on both sides");
	settle(&t, 0.5, "start");
	phase(&t, 32, 1.0, "lb: equal speeds");
	set_speed("simib0", SPEED / 2);
	settle(&t, 1.0 / 3, "lb: simib0 halved");
	mbs = phase(&t, 48, 2.0, "lb: simib0 at half speed");
	fh_log("lb: simib0 at half speed: %.2f MB/s, %.0f%% of the weighted ideal %.1f MB/s (an "
	       "equal cut: at most %.1f MB/s)", mbs, 100 * mbs / (IDEAL * 1.5), IDEAL * 1.5, IDEAL);
	FH_CHECK(mbs > IDEAL * 1.1, "lb: %.2f MB/s, not 10%% better than an equal cut can be "
		 "(%.1f MB/s)", mbs, IDEAL);
	set_speed("simib0", SPEED);
	settle(&t, 0.5, "lb: simib0 restored");
	phase(&t, 32, 1.0, "lb: simib0 restored");
	set_speed("simib2", SPEED / 2);
	settle(&t, 1.0 / 3, "lb: the receiver's simib2 halved");
	FH_CHECK(((struct nv_comm *)t.s)->lb->rspeed[0] == SPEED / 2, "remote speed %u",
		 ((struct nv_comm *)t.s)->lb->rspeed[0]);
	phase(&t, 32, 2.0, "lb: the receiver's simib2 at half speed");
	set_speed("simib2", SPEED);
	settle(&t, 0.5, "lb: simib2 restored");
	phase(&t, 32, 1.0, "lb: simib2 restored");
	close_case(&t, 0);
}

static void case_lb_local(void)
{
	struct lbt t;

	open_case(&t, "1", "0");
	FH_CHECK(((struct nv_comm *)t.s)->lb && !((struct nv_comm *)t.r)->lb,
		 "REMOTE=0: the receiver was asked for its speeds");
	set_speed("simib2", SPEED / 2);
	settle(&t, 0.5, "lb-local: simib2 halved");
	phase(&t, 32, 1.0, "lb-local: the receiver's simib2 at half speed");
	FH_CHECK(((struct nv_comm *)t.s)->lb->rspeed[0] == 0, "REMOTE=0: a remote speed arrived");
	set_speed("simib2", SPEED);
	set_speed("simib0", SPEED / 2);
	settle(&t, 1.0 / 3, "lb-local: simib0 halved");
	phase(&t, 32, 2.0, "lb-local: simib0 at half speed");
	close_case(&t, 0);
}

static void case_off(void)
{
	struct lbt t;
	double mbs;

	open_case(&t, "0", "1");
	FH_CHECK(!((struct nv_comm *)t.s)->lb && !((struct nv_comm *)t.r)->lb, "LB state with LB=0");
	set_speed("simib0", SPEED / 2);
	settle(&t, 0.5, "off: simib0 halved");
	mbs = phase(&t, 48, 1.0, "off: simib0 at half speed");
	fh_log("off: simib0 at half speed: %.2f MB/s, %.0f%% of the weighted ideal %.1f MB/s (an "
	       "equal cut: at most %.1f MB/s)", mbs, 100 * mbs / (IDEAL * 1.5), IDEAL * 1.5, IDEAL);
	close_case(&t, 0);
}

/* With port failover: weighted, then simib0 goes down mid-stream; the stream goes on intact
 * over simib1 alone (one WARN per comm, failover's), then the port comes back. */
static void case_lb_failover(void)
{
	struct lbt t;
	uint64_t a0, b0;

	setenv("NCCL_IB_RESILIENCY_PORT_FAILOVER", "1", 1);
	open_case(&t, "1", "1");
	set_speed("simib0", SPEED / 2);
	settle(&t, 1.0 / 3, "lb-failover: simib0 halved");
	phase(&t, 16, 2.0, "lb-failover: simib0 at half speed");
	FH_CHECK(fh_sv_control("port-down simib0 1") == 0, "port-down");
	stream(&t, 24);
	a0 = xmit_bytes(t.s, 0);
	b0 = xmit_bytes(t.s, 1);
	stream(&t, 16);
	FH_CHECK(xmit_bytes(t.s, 0) == a0 && xmit_bytes(t.s, 1) - b0 >= 16ull * MSG,
		 "lb-failover: after simib0 went down, not everything on simib1");
	FH_CHECK(((struct nv_comm *)t.s)->nqps == 1, "lb-failover: %d QPs left",
		 ((struct nv_comm *)t.s)->nqps);
	fh_log("lb-failover: simib0 down mid-stream, 40 messages intact over simib1");
	FH_CHECK(fh_sv_control("port-up simib0 1") == 0, "port-up");
	set_speed("simib0", SPEED);
	close_case(&t, 2);
}

/*
 * A hostile speed buffer (what a broken or malicious receiver could write into
 * the sender's region): the sender's next message fails the comm with one WARN
 * naming it, nothing is sent on the bad cut.
 */
static void case_lb_hostile(void)
{
	struct lbt t;
	struct nv_comm *c;
	uint8_t *in;
	void *req = NULL, *data;
	size_t cap = MSG;
	int tag = TAG, i, done, sz;
	ncclResult_t r = ncclSuccess;
	void *rreq;

	open_case(&t, "1", "1");
	stream(&t, 4); /* the receiver's first write has landed */
	c = t.s;
	in = nv_send_ctrl_of(c)->lb_in;
	FH_CHECK(in[NV_WIRE_LB_COUNT_OFF + 7] == 1, "lb-hostile: the receiver's speeds: count %u",
		 in[NV_WIRE_LB_COUNT_OFF + 7]);
	in[0] ^= 0xff; /* magic broken */
	__atomic_store_n(&in[NV_WIRE_LB_COUNT_OFF + 7], 2, __ATOMIC_RELEASE);
	data = t.rbuf;
	for (i = 0; i < 100000 && !req; i++)
		FH_OK(t.f.net->irecv(t.r, 1, &data, &cap, &tag, &t.rmh, NULL, &req));
	FH_CHECK(req != NULL, "lb-hostile: irecv gave no request");
	rreq = req;
	for (i = 0; i < 100000 && r == ncclSuccess; i++) {
		req = NULL;
		r = t.f.net->isend(t.s, t.sbuf, MSG, TAG, t.smh, NULL, &req);
		FH_CHECK(!req || r != ncclSuccess, "lb-hostile: the message went");
		FH_OK(t.f.net->test(rreq, &done, &sz)); /* simverbs moves the CTS on a poll */
	}
	FH_CHECK(r == ncclRemoteError, "lb-hostile: isend returned %d (head %" PRIu64 ", fifo seq %"
		 PRIu64 ", error %d)", (int)r, ((struct nv_send_comm *)c)->head,
		 nv_send_ctrl_of(c)->fifo[((struct nv_send_comm *)c)->head % NV_FIFO_SLOTS][0].seq,
		 (int)c->error);
	FH_CHECK(fh_warn_find(0, "the peer wrote a speed buffer with magic", "protocol violation",
			      NULL) >= 0, "lb-hostile: no WARN naming the buffer");
	fh_log("lb-hostile: %s", fh_warn_get(0));
	FH_OK(t.f.net->deregMr(t.s, t.smh));
	FH_OK(t.f.net->deregMr(t.r, t.rmh));
	t.f.net->closeSend(t.s);
	t.f.net->closeRecv(t.r);
	FH_OK(t.f.net->closeListen(t.l));
	free(t.sbuf);
	free(t.rbuf);
	fh_close(&t.f);
}

static const struct {
	const char *name;
	void (*fn)(void);
} cases[] = { { "lb", case_lb }, { "lb-local", case_lb_local }, { "off", case_off },
	      { "lb-failover", case_lb_failover }, { "lb-hostile", case_lb_hostile } };

int main(int argc, char **argv)
{
	size_t i;

	fh_watchdog(300);
	unsetenv("NCCL_IB_HCA");
	/* 800 Mb/s from the start: what the plugin reads at init (a port-speed now would
	 * race the connect with its event); port-speed then changes it with an event */
	setenv("SIMVERBS_DEVICES", "simib0:ll=ib,vendor=mellanox,speed_mbps=800;"
	       "simib1:ll=ib,vendor=mellanox,speed_mbps=800;"
	       "simib2:ll=ib,vendor=mellanox,speed_mbps=800;"
	       "simib3:ll=ib,vendor=mellanox,speed_mbps=800", 1);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pid_t pid;
		int st;

		if (argc >= 2 && strcmp(argv[1], cases[i].name))
			continue;
		fflush(NULL);
		pid = fork();
		FH_CHECK(pid >= 0, "fork");
		if (pid == 0) {
			cases[i].fn();
			_exit(0);
		}
		st = fh_waitpid(pid, 240);
		if (WIFEXITED(st) && WEXITSTATUS(st) == FH_SKIP)
			return FH_SKIP;
		FH_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "case %s failed (status 0x%x)",
			 cases[i].name, st);
		fh_log("case %s: ok", cases[i].name);
	}
	return 0;
}
