/*
 * fault_fo_idle - port failover (NCCL_IB_RESILIENCY_PORT_FAILOVER) when a
 * port goes down under a comm pair with nothing in flight, on devices that
 * behave as rdma_rxe (simverbs link_down=local, err_post=drop: a port going
 * down raises IBV_EVENT_PORT_ERR and nothing else; its QPs stay in RTS).
 *
 * The sender fuses simib0 + simib1, the receiver simib2 + simib3 (rail 0 is
 * simib0 <-> simib2, rail 1 simib1 <-> simib3, like the two ranks of
 * check-rxe's failover step). A first stream runs over both rails and
 * completes; with the pair idle, simib0's port goes down (under the sender
 * only); then a second stream is posted. The receiver's first CTS goes on
 * rail 0 to the dead port: it is neither delivered nor failed before the
 * QP's retry limit (NCCL_IB_TIMEOUT=24 with simverbs' timeout-scale 1 here:
 * 550 s), and the sender, which
 * waits for that CTS, has nothing in flight and gets no error completion.
 * Only the PORT_ERR can tell the sender's comm: its next call must start the
 * failover round, whose STATE tells the receiver. Required: within BOUND
 * seconds every byte of every message of the second stream arrives, each
 * comm ran one round, and each comm gave one WARN naming simib0:1.
 *
 * BOUND is stretched by FH_TIME_SCALE and by the load per CPU (at load 10+
 * on 2 CPUs the round itself still takes well under a second of CPU); it
 * stays far below the retry limit that is the only other way out.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "failover.h"
#include "fh.h"

#define W 4
#define MAXSZ (256u * 1024)
#define NMSG 16
#define TAG 9

/* How many times over the CPUs are busy (1-minute load per online CPU, at least 1). */
static double load_factor(void)
{
	double load = 0;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	FILE *f = fopen("/proc/loadavg", "r");

	if (f) {
		if (fscanf(f, "%lf", &load) != 1)
			load = 0;
		fclose(f);
	}
	if (ncpu < 1)
		ncpu = 1;
	return load / (double)ncpu > 1.0 ? load / (double)ncpu : 1.0;
}

static size_t msg_size(uint64_t seed, int i)
{
	static const size_t sizes[] = { 262144, 4096, 100000, 1, 65536, 9000 };

	return sizes[(seed + (uint64_t)i) % (sizeof(sizes) / sizeof(sizes[0]))];
}

struct pair {
	struct fh *f;
	void *s, *r, *smh, *rmh;
	char *sbuf, *rbuf;
};

/* NMSG messages, W in flight; 0 when every one arrived intact within secs. */
static int stream(struct pair *p, uint64_t seed, double secs, const char *what)
{
	void *rreq[W], *sreq[W];
	int ir = 0, is = 0, dr = 0, ds = 0, done, sz;
	double end = fh_now() + secs;
	ncclNet_v12_t *net = p->f->net;

	while (dr < NMSG || ds < NMSG) {
		if (fh_now() > end) {
			fh_log("%s: stuck at receive %d / send %d of %d after %.1f s", what, dr, ds,
			       NMSG, secs);
			return -1;
		}
		if (ir < NMSG && ir - dr < W) {
			void *data = p->rbuf + (size_t)(ir % W) * MAXSZ, *req = NULL;
			size_t cap = MAXSZ;
			int tag = TAG;

			memset(data, 0xee, MAXSZ);
			FH_OK(net->irecv(p->r, 1, &data, &cap, &tag, &p->rmh, NULL, &req));
			if (req)
				rreq[ir++ % W] = req;
		}
		if (is < NMSG && is - ds < W) {
			char *data = p->sbuf + (size_t)(is % W) * MAXSZ;
			void *req = NULL;

			fh_fill(data, msg_size(seed, is), seed * 1000 + (uint64_t)is);
			FH_OK(net->isend(p->s, data, msg_size(seed, is), TAG, p->smh, NULL, &req));
			if (req)
				sreq[is++ % W] = req;
		}
		if (dr < ir) {
			FH_OK(net->test(rreq[dr % W], &done, &sz));
			if (done) {
				FH_CHECK((size_t)sz == msg_size(seed, dr), "%s: message %d: %d bytes, "
					 "sent %zu", what, dr, sz, msg_size(seed, dr));
				FH_CHECK(fh_check_pattern(p->rbuf + (size_t)(dr % W) * MAXSZ, (size_t)sz,
							  seed * 1000 + (uint64_t)dr) == 0,
					 "%s: message %d (%d bytes) corrupt", what, dr, sz);
				dr++;
			}
		}
		if (ds < is) {
			FH_OK(net->test(sreq[ds % W], &done, &sz));
			if (done)
				ds++;
		}
	}
	return 0;
}

/* A fused NIC of the two named devices. */
static int vdev_of(struct fh *f, const char *a, const char *b)
{
	int devs[2] = { fh_dev_by_name(f, a), fh_dev_by_name(f, b) }, vdev;

	FH_CHECK(devs[0] >= 0 && devs[1] >= 0, "simverbs did not give %s and %s", a, b);
	FH_OK(e2e_make_vdevice(&f->e2e, 2, devs, &vdev));
	return vdev;
}

int main(void)
{
	double bound = 15.0 * fh_scale() * load_factor(), t0;
	unsigned ss, sr, rs, rr;
	struct pair p = { 0 };
	struct fh f;
	int vs, vr, w0, rc;

	fh_watchdog((unsigned)(60 + 2 * bound));
	unsetenv("NCCL_IB_HCA");
	setenv("SIMVERBS_DEVICES", "simib0:ll=ib,link_down=local,err_post=drop;"
	       "simib1:ll=ib,link_down=local,err_post=drop;"
	       "simib2:ll=ib,link_down=local,err_post=drop;"
	       "simib3:ll=ib,link_down=local,err_post=drop", 1);
	setenv("NCCL_IB_RESILIENCY_PORT_FAILOVER", "1", 1);
	setenv("NCCL_IB_TIMEOUT", "24", 1);
	rc = fh_open(&f);
	if (rc)
		return rc;
	/* real time: a WR to a dead port fails after 4.096 us * 2^24 * 8 = 550 s */
	FH_CHECK(fh_sv_control("timeout-scale 1") == 0, "timeout-scale 1");
	vs = vdev_of(&f, "simib0", "simib1");
	vr = vdev_of(&f, "simib2", "simib3");
	p.f = &f;
	e2e_pair2(&f.e2e, vr, vs, &p.s, &p.r, 20 * fh_scale());
	FH_CHECK(p.s && p.r, "no comm pair between the fused NICs");
	p.sbuf = aligned_alloc(4096, (size_t)W * MAXSZ);
	p.rbuf = aligned_alloc(4096, (size_t)W * MAXSZ);
	FH_CHECK(p.sbuf && p.rbuf, "out of memory");
	p.smh = fh_reg(&f, p.s, p.sbuf, (size_t)W * MAXSZ);
	p.rmh = fh_reg(&f, p.r, p.rbuf, (size_t)W * MAXSZ);

	FH_CHECK(stream(&p, 3, bound, "before") == 0, "both rails up: the stream did not finish");
	nv_fo_stats(p.s, &ss, &sr);
	nv_fo_stats(p.r, &rs, &rr);
	FH_CHECK(ss == 0 && rs == 0, "a failover round before any fault (%u/%u)", ss, rs);

	/* idle: every request completed; the port goes down under the sender only */
	w0 = fh_warn_count();
	FH_CHECK(fh_sv_control("port-down simib0 1") == 0, "port-down simib0 1");
	t0 = fh_now();
	if (stream(&p, 5, bound, "after") != 0) {
		fh_warn_dump();
		FH_FAIL("simib0 went down under an idle comm pair (only IBV_EVENT_PORT_ERR "
			"tells the sender): not every message arrived within %.1f s", bound);
	}
	nv_fo_stats(p.s, &ss, &sr);
	nv_fo_stats(p.r, &rs, &rr);
	FH_CHECK(ss == 1 && rs == 1, "%u/%u failover rounds (want one per comm)", ss, rs);
	if (fh_warn_count() - w0 != 2 ||
	    fh_warn_find(w0, "send comm to", "simib0:1", "NCCL_IB_RESILIENCY_PORT_FAILOVER", NULL) < 0 ||
	    fh_warn_find(w0, "receive comm from", "simib0:1", "NCCL_IB_RESILIENCY_PORT_FAILOVER",
			 NULL) < 0) {
		fh_warn_dump();
		FH_FAIL("%d WARN(s); expected one per comm naming simib0:1", fh_warn_count() - w0);
	}
	fh_log("idle pair, simib0 down: both comms failed over, %d messages intact in %.2f s "
	       "(bound %.1f s): %s", NMSG, fh_now() - t0, bound, fh_warn_get(w0));

	FH_OK(f.net->deregMr(p.s, p.smh));
	FH_OK(f.net->deregMr(p.r, p.rmh));
	FH_OK(f.net->closeSend(p.s));
	FH_OK(f.net->closeRecv(p.r));
	free(p.sbuf);
	free(p.rbuf);
	FH_CHECK(fh_sv_control("port-up simib0 1") == 0, "port-up simib0 1");
	FH_CHECK(fh_sv_control("reset") == 0, "reset");
	fh_close(&f);
	fh_log("fault_fo_idle: ok");
	return 0;
}
