/*
 * fault_soak - many messages of random sizes (0 B .. 4 MiB, mostly small),
 * random tags and grouped receives (1..8) over several connections between
 * two processes, InfiniBand and RoCE alternating; every byte is verified.
 * Zero corrupt, lost, duplicated or mis-sized messages allowed.
 *
 *   fault_soak [--messages N] [--conns K] [--depth D] [--seed S] [--failover F]
 *
 * Defaults: 20000 messages, 4 connections, 4 receive groups in flight per
 * connection (the make-check run). The long run is test/fault/soak.sh.
 * Built a second time as fault_soak_qps: 10000 messages over 4 QPs per
 * connection with NCCL_IB_SPLIT_DATA_ON_QPS=1 (multi-QP chunking), and a
 * third time as fault_soak_fo: 6000 messages with --failover 2 (below).
 *
 * Both processes derive the same schedule from the seed: connection c, step
 * k -> a group of g messages with distinct tags, sizes and contents. The
 * sender issues a step's isends in a shuffled order (tag matching), the
 * receiver posts one grouped irecv per step. Message contents are a function
 * of (seed, c, k, j), so the receiver checks every byte and every size; the
 * first 16 bytes (when present) carry (c, k, j) so a misrouted or repeated
 * message names itself.
 *
 * The eager path is on unless NCCL_VERBS_EAGER_MAX=0 (its default): both
 * processes count the messages that went eager on their comms, and the run
 * fails when none did (or, with it off, when some did).
 *
 * --failover F adds F connections over a fused NIC (makeVDevice of simib1 +
 * simib2, one QP each, every message split over both) with
 * NCCL_IB_RESILIENCY_PORT_FAILOVER and _RECOVERY on, and the sender injects
 * random faults into them through simverbs' control while the soak runs: a
 * work request of a QP of either side failing (its acknowledgement lost or
 * not), a QP of either side moved to error, or a rail's port going down and
 * coming back. One fault at a time: the next one waits until the faulted
 * comms went through their failover round, and only hits a rail that is live
 * on both sides of every comm it reaches while the other rail is live too,
 * so a comm always has a rail left. A failed rail comes back when recovery
 * takes it (a side starts a recovery round only between requests, so under
 * steady traffic that may take a while); every byte of every message is
 * still checked. The counts of faults by kind, failover rounds and rails
 * taken back are printed at the end.
 */
#include "config.h"

#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm.h"
#include "fh.h"
#include "fo_state.h"

#define MAXG 8
#define SLOT_BYTES (4u << 20) /* one slot holds a step: 1 x 4 MiB or 8 x 512 KiB */
#define SUB_BYTES (SLOT_BYTES / MAXG)
#define MAXK 16
#define MAXD 16
#define STALL_S 30.0

struct step {
	int g;
	int tag[MAXG];
	size_t size[MAXG];
};

struct opts {
	long messages;
	int conns, depth;
	uint64_t seed;
	int fused;	/* --failover: connections over the fused NIC, faults injected */
};

static struct opts O = { 20000, 4, 4, 0x5eed, 0 };

static int nconns(void)
{
	return O.conns + O.fused;
}

/* ---- the shared schedule ------------------------------------------------------ */

static uint64_t mix(uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t s = a * 0x9e3779b97f4a7c15ull ^ b * 0xc2b2ae3d27d4eb4full ^ c;

	return fh_rand(&s);
}

static size_t pick_size(uint64_t *r, int grouped)
{
	uint64_t p = fh_rand(r) % 1000, v = fh_rand(r);

	if (p < 50)
		return 0;
	if (p < 750)
		return 1 + v % 256;
	if (p < 950)
		return 257 + v % (65536 - 256);
	if (grouped || p < 995)
		return 65537 + v % (SUB_BYTES - 65536);
	return SUB_BYTES + 1 + v % (SLOT_BYTES - SUB_BYTES);
}

static void schedule(int c, long k, struct step *st)
{
	uint64_t r = mix(O.seed, (uint64_t)c, (uint64_t)k);
	uint64_t p = fh_rand(&r) % 100;
	int j, t;

	st->g = p < 70 ? 1 : 2 + (int)(fh_rand(&r) % (MAXG - 1));
	for (j = 0; j < st->g; j++) {
		/* distinct tags in a group; random across steps */
		do {
			st->tag[j] = (int)(fh_rand(&r) % 1000);
			for (t = 0; t < j && st->tag[t] != st->tag[j]; t++)
				;
		} while (t < j);
		st->size[j] = pick_size(&r, st->g > 1);
	}
}

/* Steps of connection c so that all connections together carry >= messages. */
static long steps_for(int c, long *msgs)
{
	long quota = O.messages / nconns() + (c < O.messages % nconns()), k = 0, m = 0;
	struct step st;

	while (m < quota) {
		schedule(c, k++, &st);
		m += st.g;
	}
	*msgs = m;
	return k;
}

/* Content: 8-byte words of a keyed generator; header (c, k, j) in the first 16 bytes. */
static void content(uint8_t *p, size_t n, int c, long k, int j)
{
	uint64_t s = mix(O.seed ^ 0xda7a, (uint64_t)c << 32 | (uint64_t)j, (uint64_t)k), w = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		if ((i & 7) == 0)
			w = fh_rand(&s);
		p[i] = (uint8_t)(w >> ((i & 7) * 8));
	}
	if (n >= 16) {
		uint64_t h0 = (uint64_t)c << 48 | (uint64_t)j << 40 | 0xabcdull, h1 = (uint64_t)k;

		memcpy(p, &h0, 8);
		memcpy(p + 8, &h1, 8);
	}
}

static long verify(const uint8_t *p, size_t n, int c, long k, int j, uint8_t *scratch)
{
	size_t i;

	content(scratch, n, c, k, j);
	if (!memcmp(p, scratch, n))
		return -1;
	for (i = 0; i < n && p[i] == scratch[i]; i++)
		;
	return (long)i;
}

/* ---- one connection's state -------------------------------------------------------- */

struct conn {
	void *comm, *mh;
	uint8_t *buf;		/* depth slots of SLOT_BYTES */
	long nsteps, msgs, next, retired;
	struct {
		long k;
		struct step st;
		void *req[MAXG];	/* send: one per message; recv: req[0] */
		int done[MAXG];
		int posted;
	} slot[MAXD];
};

static uint8_t *slot_buf(struct conn *cn, long k, int j)
{
	return cn->buf + (size_t)(k % O.depth) * SLOT_BYTES + (size_t)j * SUB_BYTES;
}

/* Sender: one progress pass; returns 1 if anything moved. */
static int send_pass(struct fh *f, int c, struct conn *cn)
{
	int moved = 0, j, order[MAXG];

	while (cn->next < cn->nsteps && cn->next - cn->retired < O.depth) {
		long k = cn->next;
		typeof(cn->slot[0]) *s = &cn->slot[k % O.depth];

		s->k = k;
		schedule(c, k, &s->st);
		for (j = 0; j < s->st.g; j++) {
			uint8_t *p = s->st.g == 1 ? slot_buf(cn, k, 0) : slot_buf(cn, k, j);

			content(p, s->st.size[j], c, k, j);
			s->req[j] = NULL;
			s->done[j] = 0;
		}
		s->posted = 0;
		cn->next++;
		moved = 1;
	}
	/*
	 * Like NCCL, a step's sends are all issued before the next step's: isend
	 * matches tags within the receiver's current clear-to-send slot only.
	 */
	for (long k = cn->retired, issued = 1; k < cn->next && issued; k++) {
		typeof(cn->slot[0]) *s = &cn->slot[k % O.depth];
		uint64_t r = mix(O.seed ^ 0x5aff1e, (uint64_t)c, (uint64_t)k);
		int all = 1;

		/* shuffled issue order, the same on every pass */
		for (j = 0; j < s->st.g; j++)
			order[j] = j;
		for (j = s->st.g - 1; j > 0; j--) {
			int x = (int)(fh_rand(&r) % (uint64_t)(j + 1)), t = order[j];

			order[j] = order[x];
			order[x] = t;
		}
		for (int o = 0; o < s->st.g; o++) {
			j = order[o];
			if (!s->req[j]) {
				uint8_t *p = s->st.g == 1 ? slot_buf(cn, k, 0) : slot_buf(cn, k, j);

				FH_OK(f->net->isend(cn->comm, p, s->st.size[j], s->st.tag[j], cn->mh,
						    NULL, &s->req[j]));
				moved |= s->req[j] != NULL;
			}
			if (s->req[j] && !s->done[j]) {
				FH_OK(f->net->test(s->req[j], &s->done[j], NULL));
				moved |= s->done[j];
			}
			issued &= s->req[j] != NULL;
			all &= s->done[j];
		}
		if (all && k == cn->retired) {
			cn->retired++;
			moved = 1;
		}
	}
	return moved;
}

/* Receiver: one progress pass; returns 1 if anything moved. */
static int recv_pass(struct fh *f, int c, struct conn *cn, uint8_t *scratch, long *bytes)
{
	int moved = 0, j;

	while (cn->next < cn->nsteps && cn->next - cn->retired < O.depth) {
		long k = cn->next;
		typeof(cn->slot[0]) *s = &cn->slot[k % O.depth];
		void *data[MAXG], *mhs[MAXG];
		size_t sizes[MAXG];

		s->k = k;
		schedule(c, k, &s->st);
		for (j = 0; j < s->st.g; j++) {
			data[j] = s->st.g == 1 ? slot_buf(cn, k, 0) : slot_buf(cn, k, j);
			/* capacity: the message, sometimes with room to spare */
			sizes[j] = s->st.size[j] + ((k + j) % 3 == 0 ? 64 : 0);
			if (sizes[j] > (s->st.g == 1 ? SLOT_BYTES : SUB_BYTES))
				sizes[j] = s->st.size[j];
			mhs[j] = cn->mh;
			memset(data[j], 0xee, s->st.size[j] < 64 ? s->st.size[j] : 64);
		}
		s->req[0] = NULL;
		FH_OK(f->net->irecv(cn->comm, s->st.g, data, sizes, s->st.tag, mhs, NULL, &s->req[0]));
		if (!s->req[0])
			break;
		s->done[0] = 0;
		cn->next++;
		moved = 1;
	}
	while (cn->retired < cn->next) {
		long k = cn->retired;
		typeof(cn->slot[0]) *s = &cn->slot[k % O.depth];
		int got[MAXG];

		FH_OK(f->net->test(s->req[0], &s->done[0], got));
		if (!s->done[0])
			break;
		for (j = 0; j < s->st.g; j++) {
			uint8_t *p = s->st.g == 1 ? slot_buf(cn, k, 0) : slot_buf(cn, k, j);
			long bad;

			FH_CHECK(got[j] == (int)s->st.size[j],
				 "conn %d step %ld msg %d (tag %d): %d bytes, expected %zu", c, k, j,
				 s->st.tag[j], got[j], s->st.size[j]);
			bad = verify(p, s->st.size[j], c, k, j, scratch);
			if (bad >= 0) {
				uint64_t h[2] = { 0, 0 };

				if (s->st.size[j] >= 16)
					memcpy(h, p, 16);
				FH_FAIL("conn %d step %ld msg %d (tag %d, %zu bytes): byte %ld corrupt; "
					"header says conn %u msg %u step %llu", c, k, j, s->st.tag[j],
					s->st.size[j], bad, (unsigned)(h[0] >> 48),
					(unsigned)(h[0] >> 40 & 0xff), (unsigned long long)h[1]);
			}
			*bytes += (long)s->st.size[j];
		}
		cn->retired++;
		if (getenv("FAULT_SOAK_PROGRESS") && cn->retired % 20000 == 0)
			fh_log("receiver: connection %d at step %ld of %ld", c, cn->retired,
			       cn->nsteps);
		moved = 1;
	}
	return moved;
}

/* ---- the two processes --------------------------------------------------------------- */

/* devs[0], devs[1]: InfiniBand and RoCE; devs[2]: the fused NIC (--failover). */
static int open_devs(struct fh *f, int devs[3])
{
	int rc = fh_open(f), fd[2];

	if (rc)
		return rc;
	devs[0] = fh_dev_by_name(f, e2e_dev("simib0"));
	devs[1] = fh_dev_by_name(f, e2e_dev("simroce0"));
	if (devs[0] < 0)
		devs[0] = 0;
	if (devs[1] < 0)
		devs[1] = devs[0];
	devs[2] = -1;
	if (!O.fused)
		return 0;
	fd[0] = fh_dev_by_name(f, "simib1");
	fd[1] = fh_dev_by_name(f, "simib2");
	FH_CHECK(fd[0] >= 0 && fd[1] >= 0, "--failover: simverbs did not give simib1 and simib2");
	FH_OK(e2e_make_vdevice(&f->e2e, 2, fd, &devs[2]));
	return 0;
}

static int conn_dev(const int devs[3], int c)
{
	return c < O.conns ? devs[c & 1] : devs[2];
}

static void setup_conn(struct fh *f, struct conn *cn, int c)
{
	cn->buf = aligned_alloc(4096, (size_t)O.depth * SLOT_BYTES);
	FH_CHECK(cn->buf != NULL, "out of memory");
	memset(cn->buf, 0, (size_t)O.depth * SLOT_BYTES);
	cn->mh = fh_reg(f, cn->comm, cn->buf, (size_t)O.depth * SLOT_BYTES);
	cn->nsteps = steps_for(c, &cn->msgs);
	if (c >= O.conns) {
		const struct nv_comm *x = cn->comm;

		FH_CHECK(x->fo && x->fo->failover && x->ndevs == 2 && x->nqps == 2,
			 "connection %d: expected failover on over 2 devices, 1 QP each (%d devices, "
			 "%d QPs, failover %s)", c, x->ndevs, x->nqps, x->fo ? "on" : "off");
	}
}

/* Messages that went eager and failover rounds, over this side's comms. */
struct tally {
	uint64_t eager, rounds, wc_errors, revived;
	int eager_comms;	/* comms where eager applies: one device, one QP */
};

static void teardown(struct fh *f, struct conn *cn, int send, struct tally *t)
{
	const struct nv_comm *x = cn->comm;

	t->eager += x->st.eager;
	t->rounds += x->st.failovers;
	for (int d = 0; x->fo && d < x->ndevs; d++)
		t->revived += x->fo->revivals[d];
	t->wc_errors += x->st.wc_errors;
	t->eager_comms += x->ndevs == 1 && x->nqps == 1;
	FH_OK(f->net->deregMr(cn->comm, cn->mh));
	FH_OK(send ? f->net->closeSend(cn->comm) : f->net->closeRecv(cn->comm));
	free(cn->buf);
}

/* The eager path ran when it is on (the default) for comms of one device and one QP,
 * and not when it is off. */
static void check_eager(const char *side, const struct tally *t)
{
	const char *e = getenv("NCCL_VERBS_EAGER_MAX"), *h = getenv("NCCL_VERBS_LINK_HOLD_MS");
	int on = (!e || atoi(e) > 0) && (!h || atoi(h) == 0) && t->eager_comms > 0;

	FH_CHECK(on ? t->eager > 0 : t->eager == 0, "%s: %llu messages went eager with the eager "
		 "path %s", side, (unsigned long long)t->eager, on ? "on" : "off");
}

/* ---- random faults on the fused connections (--failover) ------------------------- */

enum { FK_OP, FK_OP_ACK, FK_PEER_OP, FK_QP_ERROR, FK_PORT, FK_N };
static const char *const fk_name[FK_N] = { "work request failed", "acknowledgement lost",
					    "peer's work request failed", "QP to error",
					    "port down and up" };

struct injector {
	uint64_t rng;
	int phase;		/* 0 idle, 1 fault out (port down: until t_up), 2 wait for recovery */
	int kind, conn, rail;
	double next, t_up, t0;
	uint32_t epoch0[MAXK];
	long faults[FK_N];
	int hits[MAXK][2];	/* faults per connection and rail: recoveries are capped */
	char cmd[96];
};

/* Recoveries per device are capped (RECOVERY_ATTEMPTS_MAX, at most 1000): stay below. */
#define MAX_HITS 900
/* Faults stop this many steps before a fused connection's end, so each one resolves. */
#define RUNWAY 200

static void sv(const char *cmd)
{
	int rc = fh_sv_control(cmd);

	FH_CHECK(rc == 0, "simverbs_control(%s) = %d", cmd, rc);
}

/* No round under way or due, and both rails live on both sides (the vdev's devices are
 * in the same order on both: device index == rail). */
static int fused_whole(const struct nv_comm *x)
{
	const struct nv_fo *fo = x->fo;

	return fo->state == NV_FO_IDLE && !x->sink.fatal && !fo->later &&
	       !((fo->dead_local | fo->dead_peer) & 3u);
}

static void fused_state(const char *what, int c, const struct nv_comm *x, uint32_t epoch0)
{
	const struct nv_fo *fo = x->fo;

	fh_log("%s connection %d: epoch %u (was %u), state %d, dead 0x%x, peer's dead 0x%x, later "
	       "0x%x, suspect 0x%x, %d of %d QPs live, sink 0x%x, rails taken back %u/%u, %llu "
	       "rounds", what, c, fo->epoch, epoch0, fo->state, fo->dead_local, fo->dead_peer,
	       fo->later, fo->suspect, x->nqps, fo->nall, (unsigned)x->sink.fatal,
	       fo->revivals[0], fo->revivals[1], (unsigned long long)x->st.failovers);
}

static const struct nv_comm_qp *rail_qp(const struct nv_comm *x, int rail)
{
	for (int i = 0; i < x->fo->nall; i++)
		if (x->fo->all[i].dev == rail)
			return &x->fo->all[i];
	FH_FAIL("no QP on device %d", rail);
}

static void inject(struct injector *in, struct conn *cn)
{
	const struct nv_comm *x;
	const struct nv_comm_qp *q;
	int n, c;

	in->kind = (int)(fh_rand(&in->rng) % FK_N);
	in->conn = O.conns + (int)(fh_rand(&in->rng) % (uint64_t)O.fused);
	in->rail = (int)(fh_rand(&in->rng) % 2);
	n = 1 + (int)(fh_rand(&in->rng) % 3);
	for (c = O.conns; c < nconns(); c++)
		if (in->kind == FK_PORT || c == in->conn) {
			/* a rail that has had its share, or a comm not whole: another draw */
			if (in->hits[c][in->rail] >= MAX_HITS || !fused_whole(cn[c].comm))
				return;
		}
	x = cn[in->conn].comm;
	q = rail_qp(x, in->rail);
	switch (in->kind) {
	case FK_OP:
	case FK_OP_ACK:
		snprintf(in->cmd, sizeof(in->cmd), "qp-fail-op %d 0x%x%s", n, q->qp->qp_num,
			 in->kind == FK_OP_ACK ? " ack" : "");
		break;
	case FK_PEER_OP:
		snprintf(in->cmd, sizeof(in->cmd), "qp-fail-op %d 0x%x%s", n, q->rqpn,
			 fh_rand(&in->rng) & 1 ? " ack" : "");
		break;
	case FK_QP_ERROR:
		snprintf(in->cmd, sizeof(in->cmd), "qp-error 0x%x",
			 fh_rand(&in->rng) & 1 ? q->rqpn : q->qp->qp_num);
		break;
	default:
		snprintf(in->cmd, sizeof(in->cmd), "port-down simib%d 1", 1 + in->rail);
		in->t_up = fh_now() + (5 + (double)(fh_rand(&in->rng) % 46)) / 1000;
		break;
	}
	for (c = O.conns; c < nconns(); c++) {
		in->epoch0[c] = ((const struct nv_comm *)cn[c].comm)->fo->epoch;
		if (in->kind == FK_PORT || c == in->conn)
			in->hits[c][in->rail]++;
	}
	sv(in->cmd);
	in->faults[in->kind]++;
	in->phase = 1;
	in->t0 = fh_now();
}

/* Did every comm the fault reaches go through its round (epoch moved, no round under way)? */
static int fault_over(const struct injector *in, struct conn *cn)
{
	for (int c = O.conns; c < nconns(); c++) {
		const struct nv_comm *x = cn[c].comm;

		if (in->kind != FK_PORT && c != in->conn)
			continue;
		if (x->fo->epoch == in->epoch0[c] || x->fo->state != NV_FO_IDLE)
			return 0;
	}
	return 1;
}

/* One step of the injector, between the sender's passes. */
static void inject_step(struct injector *in, struct conn *cn)
{
	double now = fh_now();
	long left = LONG_MAX;
	int c;

	if (in->phase == 1 && in->kind == FK_PORT && now >= in->t_up) {
		char up[32];

		snprintf(up, sizeof(up), "port-up simib%d 1", 1 + in->rail);
		sv(up);
		in->phase = 2;
	} else if (in->phase == 1 && in->kind != FK_PORT) {
		in->phase = 2;
	}
	if (in->phase == 2) {
		if (fault_over(in, cn)) {
			in->phase = 0;
			in->next = now + (10 + (double)(fh_rand(&in->rng) % 90)) / 1000;
		} else if (now - in->t0 > 120 * fh_scale()) {
			for (c = O.conns; c < nconns(); c++)
				fused_state("sender:", c, cn[c].comm, in->epoch0[c]);
			FH_FAIL("fault %s (%s on connection %d, rail %d): the comms did not fail over "
				"in %.0f s", in->cmd, fk_name[in->kind], in->conn, in->rail,
				now - in->t0);
		}
		return;
	}
	if (in->phase || now < in->next)
		return;
	for (c = O.conns; c < nconns(); c++)
		left = cn[c].nsteps - cn[c].retired < left ? cn[c].nsteps - cn[c].retired : left;
	if (left > RUNWAY)
		inject(in, cn);
}

/* A port the last fault left down comes back (a connection ended first). */
static void inject_end(struct injector *in)
{
	long n = 0;

	if (in->phase == 1 && in->kind == FK_PORT) {
		char up[32];

		snprintf(up, sizeof(up), "port-up simib%d 1", 1 + in->rail);
		sv(up);
	}
	for (int k = 0; k < FK_N; k++)
		n += in->faults[k];
	fh_log("sender: %ld faults injected: %ld %s, %ld %s, %ld %s, %ld %s, %ld %s", n,
	       in->faults[0], fk_name[0], in->faults[1], fk_name[1], in->faults[2], fk_name[2],
	       in->faults[3], fk_name[3], in->faults[4], fk_name[4]);
	FH_CHECK(n > 0, "--failover: no fault was injected");
}

/* ---- the two processes --------------------------------------------------------------- */

static int receiver(int hout)
{
	static struct conn cn[MAXK];
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	void *lc[MAXK];
	uint8_t *scratch = malloc(SLOT_BYTES);
	struct tally t = { 0, 0, 0, 0, 0 };
	struct fh f;
	int devs[3], c, left, rc;
	long bytes = 0, msgs = 0;
	double last = fh_now();

	rc = open_devs(&f, devs);
	if (rc)
		return rc;
	for (c = 0; c < nconns(); c++) {
		memset(handle, 0, sizeof(handle));
		FH_OK(f.net->listen(f.ctx, conn_dev(devs, c), handle, &lc[c]));
		FH_CHECK(fh_write_all(hout, handle, sizeof(handle)) == 0, "handle pipe");
	}
	for (c = 0; c < nconns(); c++) {
		FH_OK(fh_accept(&f, lc[c], &cn[c].comm, 60));
		FH_OK(f.net->closeListen(lc[c]));
		setup_conn(&f, &cn[c], c);
	}
	do {
		left = 0;
		for (c = 0; c < nconns(); c++) {
			if (recv_pass(&f, c, &cn[c], scratch, &bytes))
				last = fh_now();
			left |= cn[c].retired < cn[c].nsteps;
		}
		FH_CHECK(fh_now() - last < STALL_S, "receiver: no progress for %.0f s", STALL_S);
	} while (left);
	for (c = 0; c < nconns(); c++) {
		msgs += cn[c].msgs;
		teardown(&f, &cn[c], 0, &t);
	}
	fh_log("receiver: %ld messages, %.1f MiB verified, %llu eager, %llu failover rounds, %llu "
	       "rails taken back", msgs, (double)bytes / (1 << 20), (unsigned long long)t.eager,
	       (unsigned long long)t.rounds, (unsigned long long)t.revived);
	check_eager("receiver", &t);
	free(scratch);
	fh_close(&f);
	return 0;
}

static int sender(int hin)
{
	static struct conn cn[MAXK];
	static struct injector in;
	char handles[MAXK][NCCL_NET_HANDLE_MAXSIZE];
	ncclNetDeviceHandle_v12_t *dh = NULL;
	struct tally t = { 0, 0, 0, 0, 0 };
	struct fh f;
	int devs[3], c, left, rc, nconn = 0;
	double last = fh_now();

	rc = open_devs(&f, devs);
	if (rc)
		return rc;
	for (c = 0; c < nconns(); c++)
		FH_CHECK(fh_read_all(hin, handles[c], NCCL_NET_HANDLE_MAXSIZE, 60) == 0,
			 "no handle from the receiver");
	while (nconn < nconns()) {
		for (c = 0; c < nconns(); c++)
			if (!cn[c].comm) {
				FH_OK(f.net->connect(f.ctx, conn_dev(devs, c), handles[c], &cn[c].comm,
						     &dh));
				nconn += cn[c].comm != NULL;
			}
		FH_CHECK(fh_now() - last < 60, "connect did not finish");
	}
	for (c = 0; c < nconns(); c++)
		setup_conn(&f, &cn[c], c);
	in.rng = O.seed ^ 0xfa11;
	in.next = fh_now() + 0.05;
	last = fh_now();
	do {
		left = 0;
		for (c = 0; c < nconns(); c++) {
			if (send_pass(&f, c, &cn[c]))
				last = fh_now();
			left |= cn[c].retired < cn[c].nsteps;
		}
		if (O.fused)
			inject_step(&in, cn);
		FH_CHECK(fh_now() - last < STALL_S, "sender: no progress for %.0f s", STALL_S);
	} while (left);
	if (O.fused)
		inject_end(&in);
	for (c = 0; c < nconns(); c++)
		teardown(&f, &cn[c], 1, &t);
	fh_log("sender: %llu eager, %llu failover rounds, %llu rails taken back, %llu error "
	       "completions", (unsigned long long)t.eager, (unsigned long long)t.rounds,
	       (unsigned long long)t.revived, (unsigned long long)t.wc_errors);
	check_eager("sender", &t);
	fh_close(&f);
	return 0;
}

static void parse(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : "";

		if (!strcmp(argv[i], "--messages"))
			O.messages = atol(v), i++;
		else if (!strcmp(argv[i], "--conns"))
			O.conns = atoi(v), i++;
		else if (!strcmp(argv[i], "--depth"))
			O.depth = atoi(v), i++;
		else if (!strcmp(argv[i], "--seed"))
			O.seed = strtoull(v, NULL, 0), i++;
		else if (!strcmp(argv[i], "--failover"))
			O.fused = atoi(v), i++;
		else
			FH_FAIL("usage: %s [--messages N] [--conns K] [--depth D] [--seed S] "
				"[--failover F]", argv[0]);
	}
	FH_CHECK(O.messages > 0 && O.conns >= 1 && O.fused >= 0 && nconns() <= MAXK &&
			 O.depth >= 1 && O.depth <= MAXD,
		 "option out of range (conns 1..%d with the failover ones, depth 1..%d)", MAXK,
		 MAXD);
}

/* --failover: the fused NIC's devices, failover and recovery on (both processes). */
static void failover_env(void)
{
	setenv("SIMVERBS_DEVICES", "simib0:ll=ib;simroce0:ll=eth;simib1:ll=ib;simib2:ll=ib", 1);
	unsetenv("NCCL_IB_HCA");
	setenv("NCCL_IB_RESILIENCY_PORT_FAILOVER", "1", 1);
	setenv("NCCL_IB_RESILIENCY_PORT_RECOVERY", "1", 1);
	setenv("NCCL_IB_RESILIENCY_PORT_RECOVERY_START_DELAY", "20", 0);
	setenv("NCCL_IB_RESILIENCY_PORT_RECOVERY_ATTEMPTS_MAX", "1000", 0);
	/* a message may see several faults while it waits for its receive */
	setenv("NCCL_IB_RESILIENCY_PORT_FAILOVER_MAX_ATTEMPTS", "1000", 0);
}

int main(int argc, char **argv)
{
	int p[2], st_r, st_s;
	pid_t pr, ps;
	double t0 = fh_now();
	const char *name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];

	/* fault_soak_qps: the same soak over 4 QPs per connection, messages split over them. */
	if (!strcmp(name, "fault_soak_qps")) {
		setenv("NCCL_IB_QPS_PER_CONNECTION", "4", 0);
		setenv("NCCL_IB_SPLIT_DATA_ON_QPS", "1", 0);
		O.messages = 10000;
	}
	/* fault_soak_fo: a short soak with faults injected into 2 fused-NIC connections. */
	if (!strcmp(name, "fault_soak_fo")) {
		O.messages = 6000;
		O.fused = 2;
	}
	if (getenv("FAULT_SOAK_MESSAGES")) /* check-valgrind runs a short one */
		O.messages = atol(getenv("FAULT_SOAK_MESSAGES"));
	parse(argc, argv);
	if (O.fused)
		failover_env();
	/* make check: 60 s per 20k messages is far beyond need; long runs set no limit */
	if (O.messages <= 100000)
		fh_watchdog(180);
	fh_log("soak: %ld messages, %d connections%s, depth %d, seed 0x%llx", O.messages, nconns(),
	       O.fused ? " (the last ones over the fused NIC, faults injected)" : "", O.depth,
	       (unsigned long long)O.seed);
	FH_CHECK(pipe(p) == 0, "pipe");
	pr = fork();
	if (pr == 0) {
		close(p[0]);
		_exit(receiver(p[1]));
	}
	close(p[1]);
	ps = fork();
	if (ps == 0)
		_exit(sender(p[0]));
	close(p[0]);
	st_s = fh_waitpid(ps, 1e9);
	st_r = fh_waitpid(pr, st_s == 0 ? 120 : 5);
	if (st_s == 77 << 8 || st_r == 77 << 8)
		return 77;
	FH_CHECK(st_s == 0 && st_r == 0, "sender status 0x%x, receiver status 0x%x", st_s, st_r);
	fh_log("PASS: %ld messages in %.1f s, 0 corrupt, 0 lost, 0 duplicated", O.messages,
	       fh_now() - t0);
	return 0;
}
