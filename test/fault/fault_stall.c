/*
 * fault_stall - stall reports (NCCL_VERBS_STALL_MS, event.h) and state lines
 * (NCCL_VERBS_DUMP_FILE, comm.h), on a loopback pair of simroce0:
 *   cts        a send whose receive is never posted: within the stall time
 *              (plus sweeps, scaled by load) one WARN says the send waits for
 *              the receiver's clear-to-send, not the network, and names the
 *              device, QPN, peer, size and tag; one, not one per call;
 *   counters   N messages of known sizes, then a dump through the trigger
 *              file: one state line per open comm (both), with msgs and bytes
 *              equal to what was sent;
 *   nocomp     the link loses every packet (simverbs `loss 1`) after the
 *              receive is posted: the send's WRs never complete, and the
 *              WARN says the network or the peer's NIC is not acknowledging,
 *              with the port's counter deltas.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fh.h"

#define STALL_MS 400
#define BIG 65536	/* above the eager limit: the clear-to-send path */

static char dump_path[256];

/* Waits (calling isend on req_slot's comm while *req is NULL, else test) for a
 * WARN containing needle; returns its index. */
static int wait_warn(struct fh_conn *c, void **req, size_t size, int tag, const char *needle,
		     double bound)
{
	double end = fh_now() + bound;
	int i, done;

	for (;;) {
		for (i = 0; i < fh_warn_count(); i++)
			if (strstr(fh_warn_get(i), needle))
				return i;
		if (!*req)
			FH_OK(c->f->net->isend(c->s, c->sbuf, size, tag, c->smh, NULL, req));
		else if (c->f->net->test(*req, &done, NULL) != ncclSuccess)
			FH_FAIL("the request failed before the stall WARN");
		FH_CHECK(fh_now() < end, "no WARN with '%s' within %.1f s", needle, bound);
		usleep(1000);
	}
}

static void case_cts(struct fh *f, int dev)
{
	struct fh_conn c = { .devname = "simroce0" };
	void *sreq = NULL, *rreq = NULL;
	double bound = (STALL_MS / 1000.0 + 1.5) * fh_scale();
	const char *w;
	size_t size = BIG;
	int tag = 7, i;
	ncclResult_t res;

	fh_conn_open(f, dev, BIG, &c);
	fh_warn_reset();
	i = wait_warn(&c, &sreq, BIG, 7, "stall: send", bound);
	w = fh_warn_get(i);
	fh_log("cts: %s", w);
	FH_CHECK(strstr(w, "waits for the receiver's clear-to-send") &&
		 strstr(w, "the peer has not posted its receive: rank behind or hung, not the "
			"network") && strstr(w, "simroce0:1 QPN 0x") && strstr(w, "peer ") &&
		 strstr(w, "65536-byte") && strstr(w, "tag 7"), "cts: wrong WARN: %s", w);
	/* still waiting for another stall time: no second WARN (repeats are 30 s apart) */
	{
		double end = fh_now() + 2.0 * STALL_MS / 1000.0;

		while (fh_now() < end && !sreq) {
			FH_OK(f->net->isend(c.s, c.sbuf, BIG, 7, c.smh, NULL, &sreq));
			usleep(1000);
		}
	}
	FH_CHECK(fh_warn_count_with("stall: ") == 1, "cts: %d stall WARNs, not 1",
		 fh_warn_count_with("stall: "));
	FH_OK(f->net->irecv(c.r, 1, (void **)&c.rbuf, &size, &tag, &c.rmh, NULL, &rreq));
	FH_CHECK(rreq != NULL, "cts: irecv gave no request");
	while (!sreq)
		FH_OK(f->net->isend(c.s, c.sbuf, BIG, 7, c.smh, NULL, &sreq));
	FH_CHECK(fh_wait(f, sreq, NULL, &res, 10) == 0 && res == ncclSuccess,
		 "cts: send did not complete");
	FH_CHECK(fh_wait(f, rreq, NULL, &res, 10) == 0 && res == ncclSuccess,
		 "cts: recv did not complete");
	fh_conn_close(&c);
}

static void case_counters(struct fh *f, int dev)
{
	struct fh_conn c = { .devname = "simroce0" };
	unsigned long long total = 0;
	void *rreq = NULL;
	char want[96];
	double end;
	int n, k, got, i;
	FILE *fp;

	fh_conn_open(f, dev, BIG, &c);
	for (n = 0; n < 20; n++) {
		size_t len = (size_t)(n * 3001) % BIG;

		FH_OK(fh_xfer(f, c.s, c.r, c.sbuf, c.smh, len, c.rbuf, c.rmh, BIG, n, &got,
			      10));
		total += len;
	}
	fh_warn_reset();
	fp = fopen(dump_path, "w");
	FH_CHECK(fp != NULL, "cannot create %s", dump_path);
	fclose(fp);
	end = fh_now() + 3.0 * fh_scale();
	{
		size_t size = BIG;
		int tag = 555;

		FH_OK(f->net->irecv(c.r, 1, (void **)&c.rbuf, &size, &tag, &c.rmh, NULL, &rreq));
		FH_CHECK(rreq != NULL, "counters: irecv gave no request");
	}
	while (fh_warn_count_with("comm state: ") < 2) {
		void *req = NULL;
		int done;

		/* calls of both comms that find nothing to do: they take their dump requests */
		FH_OK(f->net->isend(c.s, c.sbuf, BIG, 999, c.smh, NULL, &req));
		FH_CHECK(req == NULL, "counters: a send of another tag went");
		FH_OK(f->net->test(rreq, &done, NULL));
		FH_CHECK(fh_now() < end, "counters: %d state lines within %.1f s, not 2",
			 fh_warn_count_with("comm state: "), 3.0 * fh_scale());
		usleep(1000);
	}
	snprintf(want, sizeof(want), "msgs=20 bytes=%llu ", total);
	for (k = 0, i = 0; i < fh_warn_count(); i++) {
		const char *w = fh_warn_get(i);

		if (!strstr(w, "comm state: "))
			continue;
		fh_log("counters: %s", w);
		FH_CHECK(strstr(w, want), "counters: not '%s' in: %s", want, w);
		k += strstr(w, "comm state: send simroce0:1") != NULL;
		k += 2 * (strstr(w, "comm state: recv simroce0:1") != NULL);
	}
	FH_CHECK(k == 3, "counters: the send and the recv comm must each have one line (%d)", k);
	unlink(dump_path);
	fh_warn_reset();
	fh_conn_close(&c);
}

static void case_nocomp(struct fh *f, int dev)
{
	struct fh_conn c = { .devname = "simroce0" };
	void *sreq = NULL, *rreq = NULL;
	double bound = (STALL_MS / 1000.0 + 1.5) * fh_scale();
	size_t size = BIG;
	int tag = 7, i;
	const char *w;

	fh_conn_open(f, dev, BIG, &c);
	FH_OK(f->net->irecv(c.r, 1, (void **)&c.rbuf, &size, &tag, &c.rmh, NULL, &rreq));
	FH_CHECK(rreq != NULL, "nocomp: irecv gave no request");
	/* the clear-to-send arrives, then the link goes silent */
	while (!sreq) {
		void *probe = NULL;

		FH_OK(f->net->isend(c.s, c.sbuf, 0, 12345, c.smh, NULL, &probe));
		FH_CHECK(probe == NULL, "nocomp: a send of a wrong tag went");
		break;
	}
	usleep(100000);
	/* ACK timeouts of 4.3 s (the fabric may scale them down for other tests) */
	FH_CHECK(fh_sv_control("timeout-scale 1") == 0, "nocomp: timeout-scale failed");
	FH_CHECK(fh_sv_control("loss 1 simroce0") == 0, "nocomp: simverbs loss 1 failed");
	fh_warn_reset();
	i = wait_warn(&c, &sreq, BIG, 7, "stall: send", bound);
	w = fh_warn_get(i);
	fh_log("nocomp: %s", w);
	FH_CHECK(strstr(w, "without a completion") &&
		 strstr(w, "the network or the peer's NIC is not acknowledging") &&
		 strstr(w, "simroce0:1 QPN 0x") && strstr(w, "65536-byte") &&
		 strstr(w, "simroce0:1 counters in the last"), "nocomp: wrong WARN: %s", w);
	FH_CHECK(fh_sv_control("loss 0 simroce0") == 0, "nocomp: simverbs 'loss 0' failed");
	fh_conn_close(&c);
}

int main(void)
{
	struct fh f;
	char env[32];
	int rc, dev;

	snprintf(env, sizeof(env), "%d", STALL_MS);
	setenv("NCCL_VERBS_STALL_MS", env, 1);
	snprintf(dump_path, sizeof(dump_path), "%s/nvstall-dump.%d",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
	unlink(dump_path);
	setenv("NCCL_VERBS_DUMP_FILE", dump_path, 1);
	setenv("NCCL_IB_TIMEOUT", "20", 1); /* 4.3 s per ACK timeout: the stall comes first */
	fh_watchdog(120);
	rc = fh_open(&f);
	if (rc)
		return rc;
	if (e2e_real() && e2e_skip_real("fault_stall", "simverbs loss control"))
		return 77;
	dev = fh_sim_dev(&f, 1);
	case_cts(&f, dev);
	case_counters(&f, dev);
	case_nocomp(&f, dev);
	fh_close(&f);
	unlink(dump_path);
	fh_log("PASS");
	return 0;
}
