/*
 * fault_wqelat - the WR latency monitor of NCCL 2.31 (NCCL_IB_WQE_LATENCY_
 * THRESHOLD_NS, NCCL_IB_WQE_LATENCY_REPORT; src/wqelat.h), its INFO lines
 * recorded through e2e's logger, on loopback pairs of simroce0 with a
 * threshold of THR_MS:
 *   summary  N messages one after the other on a fresh pair: at closeSend
 *            one "WQE latency summary" line for its QP, with n=N, the
 *            threshold and p50 <= p90 <= p99 <= p99.9 <= max; none for the
 *            receive side (as NCCL, only the sender's data WRs are timed);
 *   slow     a send whose completion is polled 2 * THR_MS after its post
 *            (the test sleeps before calling test()): a "WQE slow:" line
 *            with delta at least that, count=1 and both QPNs; no stall line,
 *            as the comm's thread did not poll in the meantime;
 *   stall    the link loses every packet (simverbs `loss 1`) under a send
 *            the test keeps testing: a "WQE stall (no CQE):" line with an
 *            age above the threshold and inflight=1, and only one within the
 *            next half second (at most one a second per QP);
 *   off      after finalize and init again with the threshold 0: the summary
 *            and slow steps log no "WQE " line at all.
 * Time bounds are lower bounds or scaled (fh_scale), never tight.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fh.h"

#define THR_MS 100
#define THR_NS (THR_MS * 1000000ull)
#define BIG 65536	/* above the eager limit: the clear-to-send path */
#define NMSG 20

/* The unsigned value after `key` in line w (key includes its '='); fails the test without. */
static unsigned long long field(const char *w, const char *key)
{
	const char *p = strstr(w, key);

	FH_CHECK(p != NULL, "no '%s' in: %s", key, w);
	return strtoull(p + strlen(key), NULL, 10);
}

static void case_summary(struct fh *f, int dev, int on)
{
	struct fh_conn c = { .devname = "simroce0" };
	unsigned long long p50, p90, p99, p999, max;
	const char *w;
	int n, got, i;

	fh_conn_open(f, dev, BIG, &c);
	fh_warn_reset();
	for (n = 0; n < NMSG; n++)
		FH_OK(fh_xfer(f, c.s, c.r, c.sbuf, c.smh, (size_t)(n * 3001 + 1), c.rbuf, c.rmh, BIG,
			      n, &got, 10));
	fh_conn_close(&c);
	if (!on) {
		FH_CHECK(fh_warn_count_with("WQE ") == 0, "off: %d 'WQE ' lines (summary step)",
			 fh_warn_count_with("WQE "));
		return;
	}
	FH_CHECK(fh_warn_count_with("WQE latency summary [send ") == 1,
		 "summary: %d send summary lines, not 1", fh_warn_count_with("WQE latency summary [send "));
	FH_CHECK(fh_warn_count_with("WQE latency summary [recv ") == 0,
		 "summary: a receive side summary");
	i = fh_warn_find(0, "WQE latency summary [send ", NULL);
	w = fh_warn_get(i);
	fh_log("summary: %s", w);
	FH_CHECK(field(w, " n=") == NMSG, "summary: n is not %d: %s", NMSG, w);
	FH_CHECK(field(w, " thr=") == THR_NS && strstr(w, "dev=simroce0 ") && strstr(w, " qpn=") &&
		 strstr(w, "post-to-poll ns: mean="), "summary: wrong line: %s", w);
	p50 = field(w, " p50=");
	p90 = field(w, " p90=");
	p99 = field(w, " p99=");
	p999 = field(w, " p99.9=");
	max = field(w, " max=");
	FH_CHECK(p50 > 0 && p50 <= p90 && p90 <= p99 && p99 <= p999 && p999 <= max,
		 "summary: percentiles out of order: %s", w);
}

static void post_recv(struct fh_conn *c, void **rreq, int tag)
{
	size_t size = BIG;

	FH_OK(c->f->net->irecv(c->r, 1, (void **)&c->rbuf, &size, &tag, &c->rmh, NULL, rreq));
	FH_CHECK(*rreq != NULL, "irecv gave no request");
}

/* isend until the send is posted (its clear-to-send came). */
static void post_send(struct fh_conn *c, void **sreq, int tag, double bound)
{
	double end = fh_now() + bound;

	while (!*sreq) {
		FH_OK(c->f->net->isend(c->s, c->sbuf, BIG, tag, c->smh, NULL, sreq));
		FH_CHECK(fh_now() < end, "the send was not posted within %.1f s", bound);
	}
}

static void case_slow(struct fh *f, int dev, int on)
{
	struct fh_conn c = { .devname = "simroce0" };
	void *sreq = NULL, *rreq = NULL;
	ncclResult_t res;
	const char *w;

	fh_conn_open(f, dev, BIG, &c);
	fh_warn_reset();
	post_recv(&c, &rreq, 7);
	post_send(&c, &sreq, 7, 10 * fh_scale());
	usleep(2 * THR_MS * 1000); /* its completion is polled this much later, at least */
	FH_CHECK(fh_wait(f, sreq, NULL, &res, 10) == 0 && res == ncclSuccess,
		 "slow: send did not complete");
	FH_CHECK(fh_wait(f, rreq, NULL, &res, 10) == 0 && res == ncclSuccess,
		 "slow: recv did not complete");
	if (on) {
		FH_CHECK(fh_warn_count_with("WQE slow: ") == 1, "slow: %d slow lines, not 1",
			 fh_warn_count_with("WQE slow: "));
		w = fh_warn_get(fh_warn_find(0, "WQE slow: ", NULL));
		fh_log("slow: %s", w);
		FH_CHECK(field(w, " delta=") >= 2 * THR_NS && field(w, " count=") == 1 &&
			 field(w, " thr=") == THR_NS && strstr(w, "local: qpn=") &&
			 strstr(w, "dev=simroce0 ") && strstr(w, "remote: qpn=") &&
			 !strstr(w, "localGid= ") && strstr(w, " p99.9="),
			 "slow: wrong line: %s", w);
		FH_CHECK(fh_warn_count_with("WQE stall") == 0,
			 "slow: a stall line for a completion that was not polled for");
	}
	fh_conn_close(&c);
	FH_CHECK(on || fh_warn_count_with("WQE ") == 0, "off: %d 'WQE ' lines (slow step)",
		 fh_warn_count_with("WQE "));
}

static void case_stall(struct fh *f, int dev)
{
	struct fh_conn c = { .devname = "simroce0" };
	void *sreq = NULL, *rreq = NULL;
	double bound = (THR_MS / 1000.0 + 1.5) * fh_scale(), end;
	int done, i;
	const char *w;

	fh_conn_open(f, dev, BIG, &c);
	/* ACK timeouts of 4.3 s (the fabric may scale them down for other tests) */
	FH_CHECK(fh_sv_control("timeout-scale 1") == 0, "stall: timeout-scale failed");
	post_recv(&c, &rreq, 9);
	usleep(100000); /* the clear-to-send arrives (as fault_stall), then the link goes silent */
	fh_warn_reset();
	FH_CHECK(fh_sv_control("loss 1 simroce0") == 0, "stall: simverbs loss 1 failed");
	post_send(&c, &sreq, 9, 10 * fh_scale());
	end = fh_now() + bound;
	while ((i = fh_warn_find(0, "WQE stall (no CQE): ", NULL)) < 0) {
		FH_OK(f->net->test(sreq, &done, NULL));
		FH_CHECK(!done, "stall: the send completed on a link that loses every packet");
		FH_CHECK(fh_now() < end, "stall: no stall line within %.1f s", bound);
		usleep(1000);
	}
	w = fh_warn_get(i);
	fh_log("stall: %s", w);
	FH_CHECK(field(w, " age=") > THR_NS && field(w, " stall_thr=") == THR_NS &&
		 field(w, " inflight=") == 1 && strstr(w, "local: qpn=") &&
		 strstr(w, "dev=simroce0 ") && strstr(w, "remote: qpn="),
		 "stall: wrong line: %s", w);
	end = fh_now() + 0.5;
	while (fh_now() < end) {
		FH_OK(f->net->test(sreq, &done, NULL));
		usleep(1000);
	}
	FH_CHECK(fh_warn_count_with("WQE stall (no CQE): ") == 1,
		 "stall: %d stall lines within half a second, not 1",
		 fh_warn_count_with("WQE stall (no CQE): "));
	FH_CHECK(fh_sv_control("loss 0 simroce0") == 0, "stall: simverbs 'loss 0' failed");
	fh_conn_close(&c);
}

int main(void)
{
	struct fh f;
	char env[32];
	int rc, dev;

	snprintf(env, sizeof(env), "%llu", THR_NS);
	setenv("NCCL_IB_WQE_LATENCY_THRESHOLD_NS", env, 1);
	unsetenv("NCCL_IB_WQE_LATENCY_REPORT"); /* its default, 1 */
	setenv("NCCL_IB_TIMEOUT", "20", 1); /* 4.3 s per ACK timeout: the stall comes first */
	e2e_record_info = 1;
	fh_watchdog(120);
	rc = fh_open(&f);
	if (rc)
		return rc;
	if (e2e_real() && e2e_skip_real("fault_wqelat", "simverbs loss control"))
		return 77;
	dev = fh_sim_dev(&f, 1);
	case_summary(&f, dev, 1);
	case_slow(&f, dev, 1);
	case_stall(&f, dev);
	fh_close(&f);

	setenv("NCCL_IB_WQE_LATENCY_THRESHOLD_NS", "0", 1);
	rc = fh_open(&f);
	if (rc)
		return rc;
	dev = fh_sim_dev(&f, 1);
	case_summary(&f, dev, 0);
	case_slow(&f, dev, 0);
	fh_close(&f);
	fh_log("PASS");
	return 0;
}
