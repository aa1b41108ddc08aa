/*
 * fault_soak - many messages of random sizes (0 B .. 4 MiB, mostly small),
 * random tags and grouped receives (1..8) over several connections between
 * two processes, InfiniBand and RoCE alternating; every byte is verified.
 * Zero corrupt, lost, duplicated or mis-sized messages allowed.
 *
 *   fault_soak [--messages N] [--conns K] [--depth D] [--seed S]
 *
 * Defaults: 20000 messages, 4 connections, 4 receive groups in flight per
 * connection (the make-check run). The long run is test/fault/soak.sh.
 * Built a second time as fault_soak_qps: 10000 messages over 4 QPs per
 * connection with NCCL_IB_SPLIT_DATA_ON_QPS=1 (multi-QP chunking).
 *
 * Both processes derive the same schedule from the seed: connection c, step
 * k -> a group of g messages with distinct tags, sizes and contents. The
 * sender issues a step's isends in a shuffled order (tag matching), the
 * receiver posts one grouped irecv per step. Message contents are a function
 * of (seed, c, k, j), so the receiver checks every byte and every size; the
 * first 16 bytes (when present) carry (c, k, j) so a misrouted or repeated
 * message names itself.
 */
#include "config.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fh.h"

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
};

static struct opts O = { 20000, 4, 4, 0x5eed };

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
	long quota = O.messages / O.conns + (c < O.messages % O.conns), k = 0, m = 0;
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

static int open_devs(struct fh *f, int devs[2])
{
	int rc = fh_open(f);

	if (rc)
		return rc;
	devs[0] = fh_dev_by_name(f, e2e_dev("simib0"));
	devs[1] = fh_dev_by_name(f, e2e_dev("simroce0"));
	if (devs[0] < 0)
		devs[0] = 0;
	if (devs[1] < 0)
		devs[1] = devs[0];
	return 0;
}

static void setup_conn(struct fh *f, struct conn *cn, int c)
{
	cn->buf = aligned_alloc(4096, (size_t)O.depth * SLOT_BYTES);
	FH_CHECK(cn->buf != NULL, "out of memory");
	memset(cn->buf, 0, (size_t)O.depth * SLOT_BYTES);
	cn->mh = fh_reg(f, cn->comm, cn->buf, (size_t)O.depth * SLOT_BYTES);
	cn->nsteps = steps_for(c, &cn->msgs);
}

static void teardown(struct fh *f, struct conn *cn, int send)
{
	FH_OK(f->net->deregMr(cn->comm, cn->mh));
	FH_OK(send ? f->net->closeSend(cn->comm) : f->net->closeRecv(cn->comm));
	free(cn->buf);
}

static int receiver(int hout)
{
	static struct conn cn[MAXK];
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	void *lc[MAXK];
	uint8_t *scratch = malloc(SLOT_BYTES);
	struct fh f;
	int devs[2], c, left, rc;
	long bytes = 0, msgs = 0;
	double last = fh_now();

	rc = open_devs(&f, devs);
	if (rc)
		return rc;
	for (c = 0; c < O.conns; c++) {
		memset(handle, 0, sizeof(handle));
		FH_OK(f.net->listen(f.ctx, devs[c & 1], handle, &lc[c]));
		FH_CHECK(fh_write_all(hout, handle, sizeof(handle)) == 0, "handle pipe");
	}
	for (c = 0; c < O.conns; c++) {
		FH_OK(fh_accept(&f, lc[c], &cn[c].comm, 60));
		FH_OK(f.net->closeListen(lc[c]));
		setup_conn(&f, &cn[c], c);
	}
	do {
		left = 0;
		for (c = 0; c < O.conns; c++) {
			if (recv_pass(&f, c, &cn[c], scratch, &bytes))
				last = fh_now();
			left |= cn[c].retired < cn[c].nsteps;
		}
		FH_CHECK(fh_now() - last < STALL_S, "receiver: no progress for %.0f s", STALL_S);
	} while (left);
	for (c = 0; c < O.conns; c++) {
		msgs += cn[c].msgs;
		teardown(&f, &cn[c], 0);
	}
	fh_log("receiver: %ld messages, %.1f MiB verified", msgs, (double)bytes / (1 << 20));
	free(scratch);
	fh_close(&f);
	return 0;
}

static int sender(int hin)
{
	static struct conn cn[MAXK];
	char handles[MAXK][NCCL_NET_HANDLE_MAXSIZE];
	ncclNetDeviceHandle_v12_t *dh = NULL;
	struct fh f;
	int devs[2], c, left, rc, nconn = 0;
	double last = fh_now();

	rc = open_devs(&f, devs);
	if (rc)
		return rc;
	for (c = 0; c < O.conns; c++)
		FH_CHECK(fh_read_all(hin, handles[c], NCCL_NET_HANDLE_MAXSIZE, 60) == 0,
			 "no handle from the receiver");
	while (nconn < O.conns) {
		for (c = 0; c < O.conns; c++)
			if (!cn[c].comm) {
				FH_OK(f.net->connect(f.ctx, devs[c & 1], handles[c], &cn[c].comm, &dh));
				nconn += cn[c].comm != NULL;
			}
		FH_CHECK(fh_now() - last < 60, "connect did not finish");
	}
	for (c = 0; c < O.conns; c++)
		setup_conn(&f, &cn[c], c);
	last = fh_now();
	do {
		left = 0;
		for (c = 0; c < O.conns; c++) {
			if (send_pass(&f, c, &cn[c]))
				last = fh_now();
			left |= cn[c].retired < cn[c].nsteps;
		}
		FH_CHECK(fh_now() - last < STALL_S, "sender: no progress for %.0f s", STALL_S);
	} while (left);
	for (c = 0; c < O.conns; c++)
		teardown(&f, &cn[c], 1);
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
		else
			FH_FAIL("usage: %s [--messages N] [--conns K] [--depth D] [--seed S]", argv[0]);
	}
	FH_CHECK(O.messages > 0 && O.conns >= 1 && O.conns <= MAXK && O.depth >= 1 &&
			 O.depth <= MAXD, "option out of range (conns 1..%d, depth 1..%d)", MAXK,
		 MAXD);
}

int main(int argc, char **argv)
{
	int p[2], st_r, st_s;
	pid_t pr, ps;
	double t0 = fh_now();

	/* fault_soak_qps: the same soak over 4 QPs per connection, messages split over them. */
	if (strstr(argv[0], "_qps")) {
		setenv("NCCL_IB_QPS_PER_CONNECTION", "4", 0);
		setenv("NCCL_IB_SPLIT_DATA_ON_QPS", "1", 0);
		O.messages = 10000;
	}
	if (getenv("FAULT_SOAK_MESSAGES")) /* check-valgrind runs a short one */
		O.messages = atol(getenv("FAULT_SOAK_MESSAGES"));
	parse(argc, argv);
	/* make check: 60 s per 20k messages is far beyond need; long runs set no limit */
	if (O.messages <= 100000)
		fh_watchdog(180);
	fh_log("soak: %ld messages, %d connections, depth %d, seed 0x%llx", O.messages, O.conns,
	       O.depth, (unsigned long long)O.seed);
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
