/*
 * fault_failover - NCCL_IB_RESILIENCY_PORT_FAILOVER on a fused NIC (makeVDevice
 * of simib0 + simib1, one QP per device, every message split over both):
 * one device fails in the middle of a stream of messages (a window of 8 in
 * flight, sizes 0 B .. 300 KB, each filled with its own pattern) and the
 * stream goes on over the other one; every byte of every message is
 * checked, and a message that arrived twice would corrupt the later message
 * that reuses its receive buffer, or complete a receive early (sizes are
 * checked too). Cases, each on a fresh pair of comms:
 *   cts-lost        the receiver's CTS of message F fails before it is sent
 *   cts-ack-lost    that CTS lands, but the receiver's QP errors (ack lost)
 *   data-mid        the sender's chunk of F on rail 1 fails, rail 0's lands
 *   imm-lost        that chunk's data lands, its WRITE_WITH_IMM fails
 *   done-ack-lost   the WRITE_WITH_IMM lands (the receive completes), the
 *                   sender's completion says error: F must not be sent again
 *   qp-fatal-recv   the receiver's QP on rail 0 is moved to error (QP_FATAL)
 *   port-down       simib0 goes down under both sides at once (PORT_ERR)
 *   both-sides      both sides' rail-0 QPs fail at the same time
 *   recovery        (NCCL_IB_RESILIENCY_PORT_RECOVERY=1) simib0 down, then up: taken back
 *   cycles          (recovery on) 6 cycles of a random rail down and back on one pair
 *   two-rounds      (three rails) round 1 fails the peer's rail 0, round 2 has
 *                   retry-exceeded suspects on rail 1 on both sides: both blame
 *                   them, and agree
 *   recovery-limit  NCCL_IB_RESILIENCY_PORT_RECOVERY_ATTEMPTS_MAX 1, 3 and 256 (255
 *                   counted already): a rail down and back max + 1 times is taken
 *                   back exactly max times, then stays out
 *   soak            16 rounds of a random fault of the kinds above on a random
 *                   side and rail at a random message; the port comes back
 *                   and the next round's comm has both rails again
 * For each: no call fails, exactly one WARN per comm, naming the port and
 * the peer. Then, in a child process whose devices behave as rdma_rxe of
 * early Linux 6.1 (simverbs link_down=local, err_post=drop: a port going down
 * leaves its QPs in RTS and the next WR each runs completes with
 * LOC_QP_OP_ERR, nothing posted to a QP in error ever completes), "rxe":
 * port-down, qp-fatal-recv, data-mid (the drain's markers and the RECVs
 * posted after the error never come back: the round resets those QPs) and
 * a soak of 8 rounds. Then: both rails failing (the second after the first failover)
 * fails the comm with one WARN saying no device is left; and with failover
 * off (the default) the first case gives today's error.
 * Each case takes well under a second on an idle machine.
 */
#include "config.h"

#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm.h"
#include "failover.h"
#include "fh.h"
#include "fo_state.h"

#define BOUND (20.0 * fh_scale())
#define W 8
#define MAXSZ (320u * 1024)
#define NMSG 48
#define F 20 /* the message the fault aims at */
#define TAG 7

struct run {
	struct fh *f;
	void *s, *r, *smh, *rmh;
	char *sbuf, *rbuf;
	uint64_t seed;
	int n;
	const char *fault;	/* case name */
	int at;			/* message index of the fault */
	char soak[96];		/* soak: the simverbs command of this round's fault */
	ncclResult_t err;	/* first error of a call (ncclSuccess: none) */
};

static size_t msg_size(const struct run *x, int i)
{
	static const size_t sizes[] = { 300000, 0, 65536, 1, 100000, 4096, 200000, 9000 };
	uint64_t st = x->seed + (uint64_t)i * 7919u;

	return i == x->at ? 262144 : sizes[fh_rand(&st) % (sizeof(sizes) / sizeof(sizes[0]))];
}

static uint32_t qpn(void *comm, int i)
{
	return ((struct nv_comm *)comm)->qps[i].qp->qp_num;
}

/* The index in c->qps of the live QP on device d (the comm's devices, in vdev order). */
static int qp_of_dev(void *comm, int d)
{
	const struct nv_comm *c = comm;
	int i;

	for (i = 0; i < c->nqps; i++)
		if (c->qps[i].dev == d)
			return i;
	FH_FAIL("no live QP on device %d (%d QPs)", d, c->nqps);
	return -1;
}

static void ctl_run(const char *cmd)
{
	int rc = fh_sv_control(cmd);

	FH_CHECK(rc == 0, "simverbs_control(%s) = %d", cmd, rc);
}

#define ctl(fmt, a) \
	do { \
		char cmd_[128]; \
		snprintf(cmd_, sizeof(cmd_), fmt, a); \
		ctl_run(cmd_); \
	} while (0)

/* where: 0 just before irecv i, 1 just before isend i. */
static void inject(struct run *x, int i, int where)
{
	const char *k = x->fault;

	if (i != x->at)
		return;
	if (where == 0 && !strcmp(k, "cts-lost"))
		ctl("qp-fail-op 1 0x%x", qpn(x->r, i % 2)); /* CTS of i goes on QP i % nqps */
	else if (where == 0 && !strcmp(k, "cts-ack-lost"))
		ctl("qp-fail-op 1 0x%x ack", qpn(x->r, i % 2));
	else if (where == 1 && !strcmp(k, "data-mid"))
		ctl("qp-fail-op 1 0x%x", qpn(x->s, 1));
	else if (where == 1 && !strcmp(k, "imm-lost"))
		ctl("qp-fail-op 2 0x%x", qpn(x->s, 1)); /* data WRITE, then the 0-byte imm (AR) */
	else if (where == 1 && !strcmp(k, "done-ack-lost"))
		ctl("qp-fail-op 2 0x%x ack", qpn(x->s, 1));
	else if (where == 1 && !strcmp(k, "qp-fatal-recv"))
		ctl("qp-error 0x%x", qpn(x->r, 0));
	else if (where == 1 && !strcmp(k, "port-down"))
		FH_CHECK(fh_sv_control("port-down simib0 1") == 0, "port-down");
	else if (where == 1 && !strcmp(k, "both-sides")) {
		ctl("qp-fail-op 1 0x%x", qpn(x->s, 0));
		ctl("qp-error 0x%x", qpn(x->r, 0));
	} else if (where == 0 && !strcmp(k, "late-state")) {
		ctl("qp-fail-op 1 0x%x", qpn(x->r, 0)); /* CTS of i (even) goes on QP 0 */
	} else if (where == 1 && !strcmp(k, "late-state")) {
		/* after that CTS failed: the PORT_ERR, which starts a round by itself,
		 * comes second (first, the CTS would run after that round, a lone
		 * retry-exceeded on the last rail, and fail the comm) */
		FH_CHECK(fh_sv_control("port-down simib1 1") == 0, "port-down");
	} else if (where == 1 && !strcmp(k, "last-device")) {
		ctl("qp-fail-op 1 0x%x", qpn(x->s, 0));
	} else if (where == 1 && !strcmp(k, "recovery")) {
		FH_CHECK(fh_sv_control("port-down simib0 1") == 0, "port-down");
	} else if (where == 1 && !strcmp(k, "round1")) {
		ctl("qp-error 0x%x", qpn(x->r, qp_of_dev(x->r, 0))); /* the peer's rail 0 */
	} else if (where == 1 && !strcmp(k, "round2")) {
		/* retry exceeded on rail 1, on both sides: suspects only */
		ctl("qp-fail-op 1 0x%x", qpn(x->s, qp_of_dev(x->s, 1)));
		ctl("qp-fail-op 1 0x%x", qpn(x->r, qp_of_dev(x->r, 1)));
	} else if (where == 1 && !strcmp(k, "cycles")) {
		ctl_run(x->soak);
	} else if (where == 1 && !strcmp(k, "soak")) {
		ctl_run(x->soak);
	}
}

/* The stream; 0 when all n messages arrived intact, -1 on a call's error (x->err). */
static int stream(struct run *x)
{
	void *rreq[W], *sreq[W];
	int ir = 0, is = 0, dr = 0, ds = 0, hooked_r = 0, hooked_s = 0, filled = 0;
	double end = fh_now() + BOUND;
	const struct fh *f = x->f;

	while (dr < x->n || ds < x->n) {
		int done, sz;

		FH_CHECK(fh_now() < end, "%s: stuck at receive %d / send %d of %d", x->fault, dr, ds,
			 x->n);
		if (ir < x->n && ir - dr < W) {
			void *data = x->rbuf + (size_t)(ir % W) * MAXSZ, *req = NULL;
			size_t cap = MAXSZ;
			int tag = TAG;

			if (hooked_r <= ir) {
				inject(x, ir, 0);
				hooked_r = ir + 1;
			}
			memset(data, 0xee, MAXSZ); /* a stale byte is never the pattern */
			x->err = f->net->irecv(x->r, 1, &data, &cap, &tag, &x->rmh, NULL, &req);
			if (x->err != ncclSuccess)
				return -1;
			if (req)
				rreq[ir++ % W] = req;
		}
		/* as NCCL: the sender tries its isend whether or not the receive is posted */
		if (is < x->n && is - ds < W) {
			char *data = x->sbuf + (size_t)(is % W) * MAXSZ;
			void *req = NULL;

			if (filled <= is) {
				fh_fill(data, msg_size(x, is), x->seed * 1000 + (uint64_t)is);
				filled = is + 1;
			}
			if (hooked_s <= is) {
				inject(x, is, 1);
				hooked_s = is + 1;
			}
			x->err = f->net->isend(x->s, data, msg_size(x, is), TAG, x->smh, NULL, &req);
			if (x->err != ncclSuccess)
				return -1;
			if (req)
				sreq[is++ % W] = req;
		}
		if (dr < ir) {
			x->err = f->net->test(rreq[dr % W], &done, &sz);
			if (x->err != ncclSuccess)
				return -1;
			if (done) {
				const char *b = x->rbuf + (size_t)(dr % W) * MAXSZ;
				FH_CHECK((size_t)sz == msg_size(x, dr), "%s: message %d: %d bytes, "
					 "sent %zu", x->fault, dr, sz, msg_size(x, dr));
				FH_CHECK(fh_check_pattern(b, (size_t)sz, x->seed * 1000 + (uint64_t)dr) == 0,
					 "%s: message %d (%d bytes) corrupt", x->fault, dr, sz);
				dr++;
			}
		}
		if (ds < is) {
			x->err = f->net->test(sreq[ds % W], &done, &sz);
			if (x->err != ncclSuccess)
				return -1;
			if (done) {
				FH_CHECK((size_t)sz == msg_size(x, ds), "%s: send %d reports %d bytes",
					 x->fault, ds, sz);
				ds++;
			}
		}
	}
	return 0;
}

static void pair_open(struct fh *f, int vdev, struct run *x, const char *fault, uint64_t seed)
{
	memset(x, 0, sizeof(*x));
	x->f = f;
	x->fault = fault;
	x->seed = seed;
	x->n = NMSG;
	x->at = F;
	fh_pair(f, vdev, &x->s, &x->r, 20);
	FH_CHECK(((struct nv_comm *)x->s)->nqps == ((struct nv_comm *)x->s)->ndevs &&
			 ((struct nv_comm *)x->s)->nq == ((struct nv_comm *)x->s)->nqps,
		 "expected one QP per device (%d), all used per message",
		 ((struct nv_comm *)x->s)->ndevs);
	x->sbuf = aligned_alloc(4096, (size_t)W * MAXSZ);
	x->rbuf = aligned_alloc(4096, (size_t)W * MAXSZ);
	FH_CHECK(x->sbuf && x->rbuf, "out of memory");
	x->smh = fh_reg(f, x->s, x->sbuf, (size_t)W * MAXSZ);
	x->rmh = fh_reg(f, x->r, x->rbuf, (size_t)W * MAXSZ);
}

static void pair_close(struct run *x)
{
	FH_OK(x->f->net->deregMr(x->s, x->smh));
	FH_OK(x->f->net->deregMr(x->r, x->rmh));
	FH_OK(x->f->net->closeSend(x->s));
	FH_OK(x->f->net->closeRecv(x->r));
	free(x->sbuf);
	free(x->rbuf);
}

/* A fused NIC of simib0 .. simib<n-1>. */
static int open_vdev_n(struct fh *f, const char *failover, int n)
{
	int devs[3], vdev, rc, i;

	setenv("NCCL_IB_RESILIENCY_PORT_FAILOVER", failover, 1);
	rc = fh_open(f);
	if (rc)
		exit(rc);
	for (i = 0; i < n; i++) {
		char name[16];

		snprintf(name, sizeof(name), "simib%d", i);
		devs[i] = fh_dev_by_name(f, name);
		FH_CHECK(devs[i] >= 0, "simverbs did not give %s", name);
	}
	FH_OK(e2e_make_vdevice(&f->e2e, n, devs, &vdev));
	return vdev;
}

static int open_vdev(struct fh *f, const char *failover)
{
	return open_vdev_n(f, failover, 2);
}

static void one_case(struct fh *f, int vdev, const char *fault, const char *port, int resends)
{
	struct run x;
	unsigned rs, rr, ss, sr;
	int w0 = fh_warn_count(), n;
	double t0 = fh_now();

	pair_open(f, vdev, &x, fault, 11);
	if (stream(&x)) {
		fh_warn_dump();
		FH_FAIL("%s: a call failed (%d) with failover on", fault, (int)x.err);
	}
	n = fh_warn_count() - w0;
	if (n != 2 || fh_warn_find(w0, "send comm to", port, "NCCL_IB_RESILIENCY_PORT_FAILOVER",
				   NULL) < 0 ||
	    fh_warn_find(w0, "receive comm from", port, "NCCL_IB_RESILIENCY_PORT_FAILOVER", NULL) < 0) {
		fh_warn_dump();
		FH_FAIL("%s: %d WARN(s); expected one per comm naming %s", fault, n, port);
	}
	nv_fo_stats(x.s, &ss, &sr);
	nv_fo_stats(x.r, &rs, &rr);
	FH_CHECK(ss == 1 && rs == 1 && rr == 0 && (!resends || sr > 0),
		 "%s: %u/%u failover rounds, %u messages sent again", fault, ss, rs, sr);
	pair_close(&x);
	if (!strcmp(fault, "port-down"))
		FH_CHECK(fh_sv_control("port-up simib0 1") == 0, "port-up");
	fh_log("%s: %d messages intact, %u sent again, one WARN per comm (%.2f s): %s", fault,
	       NMSG, sr, fh_now() - t0, fh_warn_get(w0));
}

/*
 * Soak: rounds of a fresh pair, random sizes, a random fault (which side,
 * which rail, which operation from now, before or after it landed, a QP
 * moved to error, or the port going down) at a random message; the port
 * comes back and the next round's comm uses both rails again.
 */
static void soak(struct fh *f, int vdev, int rounds)
{
	uint64_t st = 0x5eed;
	double t0 = fh_now();
	int r, nfo = 0, nres = 0;

	for (r = 0; r < rounds; r++) {
		struct run x;
		unsigned ss, sr, rs, rr;
		int w0 = fh_warn_count(), kind, side, rail, n;
		const char *dev;

		pair_open(f, vdev, &x, "soak", 100 + (uint64_t)r);
		x.at = 4 + (int)(fh_rand(&st) % (NMSG - 16));
		kind = (int)(fh_rand(&st) % 4);
		side = (int)(fh_rand(&st) % 2);
		rail = (int)(fh_rand(&st) % 2);
		n = 1 + (int)(fh_rand(&st) % 3);
		dev = rail ? "simib1" : "simib0";
		if (kind == 0 || kind == 1)
			snprintf(x.soak, sizeof(x.soak), "qp-fail-op %d 0x%x%s", n,
				 qpn(side ? x.r : x.s, rail), kind ? " ack" : "");
		else if (kind == 2)
			snprintf(x.soak, sizeof(x.soak), "qp-error 0x%x", qpn(side ? x.r : x.s, rail));
		else
			snprintf(x.soak, sizeof(x.soak), "port-down %s 1", dev);
		if (stream(&x)) {
			fh_warn_dump();
			FH_FAIL("soak round %d (%s at message %d): a call failed (%d)", r, x.soak, x.at,
				(int)x.err);
		}
		nv_fo_stats(x.s, &ss, &sr);
		nv_fo_stats(x.r, &rs, &rr);
		n = fh_warn_count() - w0;
		/* an operation count past the stream's end may never come: no round then */
		if (ss != rs || ss > 1 || n != 2 * (int)ss) {
			fh_warn_dump();
			FH_FAIL("soak round %d (%s at message %d): rounds %u/%u, %d WARN(s)", r, x.soak,
				x.at, ss, rs, n);
		}
		FH_CHECK(kind < 2 || ss == 1, "soak round %d (%s): no failover", r, x.soak);
		nfo += (int)ss;
		nres += (int)sr;
		pair_close(&x);
		if (kind == 3)
			FH_CHECK(fh_sv_control(rail ? "port-up simib1 1" : "port-up simib0 1") == 0,
				 "port-up");
	}
	fh_log("soak: %d rounds, %d failovers, %d messages sent again, every byte checked (%.2f s)",
	       rounds, nfo, nres, fh_now() - t0);
}

/* The other rail fails too, after the first failover: the comm fails, with one WARN. */
static void last_device(struct fh *f, int vdev)
{
	struct run x;
	int w0 = fh_warn_count(), i;

	pair_open(f, vdev, &x, "last-device", 12);
	x.n = F + 10;
	x.at = F;
	FH_CHECK(stream(&x) == 0, "last-device: the first failure was not survived");
	FH_CHECK(((struct nv_comm *)x.s)->nqps == 1, "not down to one QP after the failover");
	ctl("qp-error 0x%x", qpn(x.s, 0)); /* the survivor */
	x.at = -1;
	x.seed = 13;
	for (i = 0; i < 3 && stream(&x) == 0; i++)
		;
	FH_CHECK(x.err != ncclSuccess, "last-device: no error after the last device failed");
	i = fh_warn_find(w0, "no device pair of the comm is left", NULL);
	if (i < 0) {
		fh_warn_dump();
		FH_FAIL("last-device: no WARN saying the last device failed");
	}
	fh_log("last-device: error %d: %s", (int)x.err, fh_warn_get(i));
	pair_close(&x);
}

/*
 * NCCL_IB_RESILIENCY_PORT_RECOVERY=1: simib0 goes down mid-stream (failover),
 * comes back (PORT_ACTIVE) while messages keep flowing, and both comms take
 * it back: two QPs, both used per message, every byte right, and the one
 * WARN per comm is the failure's (recovery is an INFO line).
 */
static void recovery(struct fh *f, int vdev)
{
	struct run x;
	unsigned ss, sr, rs, rr;
	int w0 = fh_warn_count(), k;
	double t0 = fh_now();

	pair_open(f, vdev, &x, "recovery", 21);
	x.n = F + 8;
	FH_CHECK(stream(&x) == 0, "recovery: the failure was not survived");
	FH_CHECK(((struct nv_comm *)x.s)->nqps == 1 && ((struct nv_comm *)x.r)->nqps == 1,
		 "recovery: not down to one QP after the failover");
	FH_CHECK(fh_sv_control("port-up simib0 1") == 0, "port-up");
	x.at = -1;
	/* the event thread delivers PORT_ACTIVE, then the start delay: bounded by time, not count */
	for (k = 0; fh_now() - t0 < BOUND && (((struct nv_comm *)x.s)->nqps != 2 ||
					       ((struct nv_comm *)x.r)->nqps != 2); k++) {
		x.seed = 22 + (uint64_t)k;
		x.n = 8;
		FH_CHECK(stream(&x) == 0, "recovery: a call failed while the port came back");
	}
	FH_CHECK(((struct nv_comm *)x.s)->nqps == 2 && ((struct nv_comm *)x.r)->nqps == 2 &&
			 ((struct nv_comm *)x.s)->nq == 2 && ((struct nv_comm *)x.r)->nq == 2,
		 "recovery: simib0 was not taken back (QPs %d/%d)", ((struct nv_comm *)x.s)->nqps,
		 ((struct nv_comm *)x.r)->nqps);
	x.n = NMSG; /* and traffic over both rails again */
	x.seed = 99;
	FH_CHECK(stream(&x) == 0, "recovery: traffic after the recovery failed");
	nv_fo_stats(x.s, &ss, &sr);
	nv_fo_stats(x.r, &rs, &rr);
	/* failover, recovery; one more recovery round when the two sides' start delays end
	 * apart (a loaded host: the first takes back one side's view only), as in cycles() */
	FH_CHECK(ss == rs && (ss == 2 || ss == 3),
		 "recovery: %u/%u rounds, want 2 (failover, recovery) or 3 (recovery in two)", ss, rs);
	if (fh_warn_count() - w0 != 2) {
		fh_warn_dump();
		FH_FAIL("recovery: %d WARNs, want the failure's one per comm", fh_warn_count() - w0);
	}
	fh_log("recovery: simib0 down, failed over, back up and taken back after %d short streams "
	       "(%.2f s), every byte right", k, fh_now() - t0);
	pair_close(&x);
}

/*
 * Failures and returns on one long-lived pair (recovery on): each cycle a
 * random rail's port goes down at a random message, comes back, and is
 * taken back before the next cycle; every byte of every message checked.
 */
static void cycles(struct fh *f, int vdev, int n)
{
	uint64_t st = 0xc1c1e;
	struct run x;
	unsigned ss, sr, rs, rr;
	int i, k, w0 = fh_warn_count();
	double t0 = fh_now(), tk;

	pair_open(f, vdev, &x, "cycles", 300);
	for (i = 0; i < n; i++) {
		int rail = (int)(fh_rand(&st) % 2);

		snprintf(x.soak, sizeof(x.soak), "port-down simib%d 1", rail);
		x.at = 2 + (int)(fh_rand(&st) % 20);
		x.n = 30;
		x.seed = 400 + (uint64_t)i;
		FH_CHECK(stream(&x) == 0, "cycle %d: rail %d down: a call failed", i, rail);
		FH_CHECK(((struct nv_comm *)x.s)->nqps == 1, "cycle %d: no failover", i);
		FH_CHECK(fh_sv_control(rail ? "port-up simib1 1" : "port-up simib0 1") == 0, "up");
		x.at = -1;
		for (k = 0, tk = fh_now(); fh_now() - tk < BOUND && (((struct nv_comm *)x.s)->nqps != 2 ||
								    ((struct nv_comm *)x.r)->nqps != 2);
		     k++) {
			x.n = 4;
			x.seed = 1000 + (uint64_t)(i * 300 + k);
			FH_CHECK(stream(&x) == 0, "cycle %d: a call failed while rail %d came back", i,
				 rail);
		}
		FH_CHECK(((struct nv_comm *)x.s)->nqps == 2 && ((struct nv_comm *)x.r)->nqps == 2,
			 "cycle %d: rail %d not taken back", i, rail);
	}
	nv_fo_stats(x.s, &ss, &sr);
	nv_fo_stats(x.r, &rs, &rr);
	/* a failover and a recovery per cycle; one more when the two sides' start delays
	 * end apart (the first recovery round takes back one side's view only) */
	FH_CHECK(ss >= 2u * (unsigned)n && rs == ss, "cycles: %u/%u rounds for %d cycles", ss, rs,
		 n);
	FH_CHECK(fh_warn_count() - w0 == 2 * n, "cycles: %d WARNs for %d failures",
		 fh_warn_count() - w0, n);
	fh_log("cycles: %d failures and returns on one pair in %u rounds, %u messages sent again, "
	       "every byte right (%.2f s)", n, ss, sr, fh_now() - t0);
	pair_close(&x);
}

/*
 * Verdicts over two rounds, on three rails (simib0..2): round 1 fails the
 * receiver's rail 0 for certain (its QP moved to error); round 2 injects
 * retry-exceeded on rail 1 on both sides (the sender's data write, the
 * receiver's next clear-to-send there, which usually comes after the round
 * began and then never fails): suspects only, named in the STATE
 * (PROBE_DELAY 0). The receiver's STATE of round 2 still names rail 0, but
 * that failed in round 1 and explains nothing now: the suspects must be
 * blamed, and both sides agree on it - each side's view of the other's
 * failed devices is the other's own - and go on over rail 2 with every
 * byte intact. A sender that took rail 0 for a new failure dismisses its
 * suspect while the receiver drops the rail: message 10 arrives corrupt.
 */
static void two_rounds(struct fh *f, int vdev)
{
	struct run x;
	const struct nv_fo *fs, *fr;
	unsigned ss, sr, rs, rr;
	int w0 = fh_warn_count();

	pair_open(f, vdev, &x, "round1", 31);
	FH_CHECK(((struct nv_comm *)x.s)->nqps == 3, "two rounds: expected 3 QPs");
	x.n = 24;
	x.at = 6;
	FH_CHECK(stream(&x) == 0, "two rounds: round 1 (the peer's rail 0) not survived");
	FH_CHECK(((struct nv_comm *)x.s)->nqps == 2 && ((struct nv_comm *)x.r)->nqps == 2,
		 "two rounds: not on rails 1 and 2 after round 1 (QPs %d/%d)",
		 ((struct nv_comm *)x.s)->nqps, ((struct nv_comm *)x.r)->nqps);
	x.fault = "round2";
	x.seed = 32;
	x.n = NMSG;
	x.at = 10;
	FH_CHECK(stream(&x) == 0, "two rounds: round 2 (suspects on rail 1) not survived");
	nv_fo_stats(x.s, &ss, &sr);
	nv_fo_stats(x.r, &rs, &rr);
	fs = ((struct nv_comm *)x.s)->fo;
	fr = ((struct nv_comm *)x.r)->fo;
	fh_log("two rounds: rounds %u/%u; sender failed 0x%x, peer's 0x%x; receiver failed 0x%x, "
	       "peer's 0x%x; QPs %d/%d", ss, rs, fs->dead_local, fs->dead_peer, fr->dead_local,
	       fr->dead_peer, ((struct nv_comm *)x.s)->nqps, ((struct nv_comm *)x.r)->nqps);
	FH_CHECK(ss == 2 && rs == 2, "two rounds: %u/%u rounds, want 2", ss, rs);
	FH_CHECK(fs->dead_local == fr->dead_peer && fr->dead_local == fs->dead_peer,
		 "two rounds: the sides disagree: sender failed 0x%x, the receiver thinks 0x%x; "
		 "receiver failed 0x%x, the sender thinks 0x%x", fs->dead_local, fr->dead_peer,
		 fr->dead_local, fs->dead_peer);
	FH_CHECK(fr->dead_local & 1, "two rounds: the receiver's rail 0 is no longer failed");
	/* whichever side saw the retry-exceeded (the sender, unless its WR was flushed by a
	 * round the receiver's began first) blamed its rail 1, not dismissed it */
	FH_CHECK((fs->dead_local | fr->dead_local) & 2, "two rounds: the retry-exceeded rail 1 was "
		 "dismissed (the peer's STATE named only a device of round 1)");
	FH_CHECK(((struct nv_comm *)x.s)->nqps == 1 && ((struct nv_comm *)x.r)->nqps == 1 &&
			 ((struct nv_comm *)x.s)->qps[0].dev == 2 &&
			 ((struct nv_comm *)x.r)->qps[0].dev == 2,
		 "two rounds: not on rail 2 alone after round 2");
	x.fault = "none";
	x.seed = 33;
	x.at = -1;
	FH_CHECK(stream(&x) == 0, "two rounds: traffic on rail 2 failed");
	FH_CHECK(fh_warn_count() - w0 == 4, "two rounds: %d WARNs, want one per comm per round",
		 fh_warn_count() - w0);
	pair_close(&x);
}

/* Streams of 4 messages until both comms have n QPs or `secs` pass: 1 when they have. */
static int wait_nqps(struct run *x, int n, double secs, int *k)
{
	double t0 = fh_now();

	x->at = -1;
	while (fh_now() - t0 < secs && (((struct nv_comm *)x->s)->nqps != n ||
					((struct nv_comm *)x->r)->nqps != n)) {
		x->n = 4;
		x->seed = 5000 + (uint64_t)(*k)++;
		FH_CHECK(stream(x) == 0, "%s: a call failed while waiting for %d QP(s)", x->fault, n);
	}
	return ((struct nv_comm *)x->s)->nqps == n && ((struct nv_comm *)x->r)->nqps == n;
}

/*
 * NCCL_IB_RESILIENCY_PORT_RECOVERY_ATTEMPTS_MAX=max (set by the caller):
 * simib0 goes down and comes back max + 1 times on one pair. The first max
 * times it is taken back; the last time it stays out (both comms keep one
 * QP for several times as long as any return took, every byte right).
 * preset: recoveries counted already on both comms (a long-lived comm that
 * came back this often; the counter must not wrap below the limit).
 */
static void recovery_limit(struct fh *f, int vdev, int max, int preset)
{
	struct run x;
	int i, k = 0;
	double t0 = fh_now(), slowest = 0;

	pair_open(f, vdev, &x, "recovery-limit", 500 + (uint64_t)max);
	for (i = 0; i < NV_COMM_MAX_DEVS; i++) {
		((struct nv_comm *)x.s)->fo->revivals[i] = (uint16_t)preset;
		((struct nv_comm *)x.r)->fo->revivals[i] = (uint16_t)preset;
	}
	for (i = 0; i <= max - preset; i++) {
		double tu;

		snprintf(x.soak, sizeof(x.soak), "port-down simib0 1");
		x.fault = "cycles"; /* inject x.soak at x.at */
		x.at = 3;
		x.n = 12;
		x.seed = 600 + (uint64_t)i;
		FH_CHECK(stream(&x) == 0, "recovery limit %d: failure %d: a call failed", max, i + 1);
		x.fault = "recovery-limit";
		FH_CHECK(((struct nv_comm *)x.s)->nqps == 1 && ((struct nv_comm *)x.r)->nqps == 1,
			 "recovery limit %d: failure %d: no failover", max, i + 1);
		FH_CHECK(fh_sv_control("port-up simib0 1") == 0, "port-up");
		tu = fh_now();
		if (i < max - preset) {
			FH_CHECK(wait_nqps(&x, 2, BOUND, &k), "recovery limit %d (%d counted before): "
				 "return %d of %d not taken back", max, preset, i + 1, max - preset);
			if (fh_now() - tu > slowest)
				slowest = fh_now() - tu;
		} else {
			double hold = 1.0 * fh_scale() + 4 * slowest;

			FH_CHECK(!wait_nqps(&x, 2, hold, &k) && ((struct nv_comm *)x.s)->nqps == 1 &&
					 ((struct nv_comm *)x.r)->nqps == 1,
				 "recovery limit %d (%d counted before): taken back a %d-th time",
				 max, preset, max + 1);
		}
	}
	x.n = NMSG; /* the survivor carries everything */
	x.seed = 777;
	x.at = -1;
	FH_CHECK(stream(&x) == 0, "recovery limit %d: traffic on the survivor failed", max);
	fh_log("recovery limit %d (%d counted before): taken back %d time(s), then stays out "
	       "(held %.2f s; slowest return %.2f s); %.2f s", max, preset, max - preset,
	       1.0 * fh_scale() + 4 * slowest, slowest, fh_now() - t0);
	pair_close(&x);
}

/* NCCL_IB_RESILIENCY_PORT_FAILOVER=0: the same fault is today's error. */
static void failover_off(struct fh *f, int vdev)
{
	struct run x;
	int w0 = fh_warn_count(), i;

	pair_open(f, vdev, &x, "data-mid", 14);
	FH_CHECK(stream(&x) != 0, "failover off: the fault did not fail the comm");
	FH_CHECK(fh_warn_count_with("NCCL_IB_RESILIENCY_PORT_FAILOVER") == 0,
		 "failover off, but a failover WARN");
	i = fh_warn_find(w0, "retry", NULL);
	if (i < 0)
		i = fh_warn_find(w0, "RETRY", NULL);
	if (i < 0) {
		fh_warn_dump();
		FH_FAIL("failover off: no error WARN about the failed work request");
	}
	fh_log("failover off: error %d: %s", (int)x.err, fh_warn_get(i));
	pair_close(&x);
}

/*
 * The rdma_rxe cases, in a child process (simverbs reads its device list once
 * per process): 0 when they passed.
 */
static int rxe_cases(int argc, char **argv)
{
	static const char *const faults[] = { "port-down", "qp-fatal-recv", "data-mid" };
	static const char *const ports[] = { "simib0:1", "simib0:1", "simib1:1" };
	struct fh f;
	int vdev, st;
	pid_t pid;
	size_t i;

	if (argc >= 2 && strcmp(argv[1], "rxe"))
		return 0;
	fflush(NULL);
	pid = fork();
	FH_CHECK(pid >= 0, "fork failed");
	if (pid) {
		FH_CHECK(waitpid(pid, &st, 0) == pid, "waitpid failed");
		return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	}
	setenv("SIMVERBS_DEVICES", "simib0:ll=ib,link_down=local,err_post=drop;"
	       "simib1:ll=ib,link_down=local,err_post=drop", 1);
	vdev = open_vdev(&f, "1");
	for (i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
		one_case(&f, vdev, faults[i], ports[i], 0);
	soak(&f, vdev, argc > 2 ? atoi(argv[2]) : 8);
	fh_close(&f);
	fh_log("rxe: ok");
	exit(0);
}

int main(int argc, char **argv)
{
	static const struct {
		const char *fault, *port;
		int resends; /* F (at least) was posted and had not all landed */
	} cases[] = {
		{ "cts-lost", "simib0:1", 0 },	    { "cts-ack-lost", "simib0:1", 0 },
		{ "data-mid", "simib1:1", 1 },	    { "imm-lost", "simib1:1", 1 },
		{ "done-ack-lost", "simib1:1", 0 }, { "qp-fatal-recv", "simib0:1", 0 },
		{ "port-down", "simib0:1", 0 },	    { "both-sides", "simib0:1", 0 },
	};
	struct fh f;
	int vdev;
	size_t i;

	fh_watchdog(300);
	unsetenv("NCCL_IB_HCA");
	FH_CHECK(rxe_cases(argc, argv) == 0, "the rdma_rxe cases failed");
	if (argc >= 2 && !strcmp(argv[1], "rxe"))
		return 0;
	setenv("SIMVERBS_DEVICES", "simib0:ll=ib;simib1:ll=ib;simib2:ll=ib", 1);
	vdev = open_vdev(&f, "1");
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (argc < 2 || !strcmp(argv[1], cases[i].fault))
			one_case(&f, vdev, cases[i].fault, cases[i].port, cases[i].resends);
	if (argc < 2 || !strcmp(argv[1], "last-device"))
		last_device(&f, vdev);
	if (argc < 2 || !strcmp(argv[1], "soak"))
		soak(&f, vdev, argc > 2 ? atoi(argv[2]) : 16);
	fh_close(&f);
	if (argc < 2 || !strcmp(argv[1], "recovery")) {
		setenv("NCCL_IB_RESILIENCY_PORT_RECOVERY", "1", 1);
		setenv("NCCL_IB_RESILIENCY_PORT_RECOVERY_START_DELAY", "20", 1);
		vdev = open_vdev(&f, "1");
		recovery(&f, vdev);
		fh_close(&f);
	}
	if (argc < 2 || !strcmp(argv[1], "cycles")) {
		setenv("NCCL_IB_RESILIENCY_PORT_RECOVERY", "1", 1);
		setenv("NCCL_IB_RESILIENCY_PORT_RECOVERY_START_DELAY", "20", 1);
		setenv("NCCL_IB_RESILIENCY_PORT_RECOVERY_ATTEMPTS_MAX", "100", 1);
		vdev = open_vdev(&f, "1");
		cycles(&f, vdev, argc > 2 ? atoi(argv[2]) : 6);
		fh_close(&f);
		unsetenv("NCCL_IB_RESILIENCY_PORT_RECOVERY_ATTEMPTS_MAX");
		unsetenv("NCCL_IB_RESILIENCY_PORT_RECOVERY");
		unsetenv("NCCL_IB_RESILIENCY_PORT_RECOVERY_START_DELAY");
	}
	if (argc < 2 || !strcmp(argv[1], "recovery-limit")) {
		static const int lim[][2] = { { 1, 0 }, { 3, 0 }, { 256, 255 } }; /* max, preset */

		setenv("NCCL_IB_RESILIENCY_PORT_RECOVERY", "1", 1);
		setenv("NCCL_IB_RESILIENCY_PORT_RECOVERY_START_DELAY", "20", 1);
		for (i = 0; i < sizeof(lim) / sizeof(lim[0]); i++) {
			char v[16];

			snprintf(v, sizeof(v), "%d", lim[i][0]);
			setenv("NCCL_IB_RESILIENCY_PORT_RECOVERY_ATTEMPTS_MAX", v, 1);
			vdev = open_vdev(&f, "1");
			recovery_limit(&f, vdev, lim[i][0], lim[i][1]);
			fh_close(&f);
		}
		unsetenv("NCCL_IB_RESILIENCY_PORT_RECOVERY_ATTEMPTS_MAX");
		unsetenv("NCCL_IB_RESILIENCY_PORT_RECOVERY");
		unsetenv("NCCL_IB_RESILIENCY_PORT_RECOVERY_START_DELAY");
	}
	if (argc < 2 || !strcmp(argv[1], "late-state")) {
		/* the receiver's timeouts on rail 0 (suspects) are decided before the
		 * sender's STATE (rail 1 failed for certain) arrives: still dismissed */
		setenv("NCCL_IB_RESILIENCY_PORT_FAILOVER_PROBE_DELAY", "0", 1);
		vdev = open_vdev(&f, "1");
		one_case(&f, vdev, "late-state", "simib1:1", 0);
		FH_CHECK(fh_sv_control("port-up simib1 1") == 0, "port-up");
		fh_close(&f);
		unsetenv("NCCL_IB_RESILIENCY_PORT_FAILOVER_PROBE_DELAY");
	}
	if (argc < 2 || !strcmp(argv[1], "two-rounds")) {
		setenv("NCCL_IB_RESILIENCY_PORT_FAILOVER_PROBE_DELAY", "0", 1);
		vdev = open_vdev_n(&f, "1", 3);
		two_rounds(&f, vdev);
		fh_close(&f);
		unsetenv("NCCL_IB_RESILIENCY_PORT_FAILOVER_PROBE_DELAY");
	}
	if (argc < 2 || !strcmp(argv[1], "off")) {
		unsetenv("NCCL_IB_RESILIENCY_PORT_FAILOVER");
		vdev = open_vdev(&f, "0");
		failover_off(&f, vdev);
		fh_close(&f);
	}
	fh_log("fault_failover: ok");
	return 0;
}
