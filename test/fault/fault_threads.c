/*
 * fault_threads - concurrency as NCCL produces it:
 *   - THREADS threads, each connecting its own pair of comms (IB and RoCE
 *     alternating) and driving it with verified traffic, all at once;
 *   - on every pair, a second thread registers and deregisters other
 *     buffers on the SAME send and receive comms while the first one
 *     transfers (NCCL's user-buffer registration runs beside the proxy).
 * Every message is checked byte for byte. Run plain in make check, and
 * under ThreadSanitizer by `make check-tsan` (test/fault/tsan.sh), which
 * builds the plugin and this test with clang -fsanitize=thread.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "fh.h"

#define THREADS 4
#define MSGS_DEFAULT 2000
#define MAXMSG (256u << 10)
#define REGBUF (1u << 20)

static struct fh F;
static int devs[2];
static int msgs = MSGS_DEFAULT;

struct pair {
	int idx;
	void *s, *r;
	atomic_int stop;
	long regs;
	pthread_t reg_thread;
};

/* Registration churn on the comms the transfer thread is using. */
static void *reg_main(void *arg)
{
	struct pair *p = arg;
	char *buf = aligned_alloc(4096, REGBUF);
	uint64_t r = 0x1234 + (uint64_t)p->idx;

	FH_CHECK(buf != NULL, "out of memory");
	while (!atomic_load(&p->stop)) {
		size_t off = (fh_rand(&r) % 64) * 4096, len = 4096 + fh_rand(&r) % (REGBUF / 2);
		void *comm = fh_rand(&r) & 1 ? p->s : p->r;
		void *mh = fh_reg(&F, comm, buf + off, len);

		FH_OK(F.net->deregMr(comm, mh));
		p->regs++;
	}
	free(buf);
	return NULL;
}

static void *xfer_main(void *arg)
{
	struct pair *p = arg;
	char *sbuf = aligned_alloc(4096, MAXMSG), *rbuf = aligned_alloc(4096, MAXMSG);
	void *smh, *rmh;
	uint64_t r = 0xabc + (uint64_t)p->idx;
	int i, got;

	FH_CHECK(sbuf && rbuf, "out of memory");
	fh_pair(&F, devs[p->idx & 1], &p->s, &p->r, 60);
	smh = fh_reg(&F, p->s, sbuf, MAXMSG);
	rmh = fh_reg(&F, p->r, rbuf, MAXMSG);
	FH_CHECK(pthread_create(&p->reg_thread, NULL, reg_main, p) == 0, "pthread_create");
	for (i = 0; i < msgs; i++) {
		size_t n = fh_rand(&r) % 8 ? fh_rand(&r) % 4096 : fh_rand(&r) % MAXMSG;
		uint64_t seed = (uint64_t)p->idx << 32 | (uint64_t)i;

		fh_fill(sbuf, n, seed);
		FH_OK(fh_xfer(&F, p->s, p->r, sbuf, smh, n, rbuf, rmh, MAXMSG, i % 7, &got,
			      20 * fh_scale()));
		FH_CHECK(got == (int)n && fh_check_pattern(rbuf, n, seed) == 0,
			 "thread %d message %d: %d bytes of %zu, or corrupt", p->idx, i, got, n);
	}
	atomic_store(&p->stop, 1);
	pthread_join(p->reg_thread, NULL);
	FH_OK(F.net->deregMr(p->s, smh));
	FH_OK(F.net->deregMr(p->r, rmh));
	FH_OK(F.net->closeSend(p->s));
	FH_OK(F.net->closeRecv(p->r));
	free(sbuf);
	free(rbuf);
	return NULL;
}

int main(void)
{
	static struct pair pairs[THREADS];
	pthread_t t[THREADS];
	const char *m = getenv("FAULT_THREADS_MSGS");
	long regs = 0;
	double t0;
	int i, rc;

	fh_watchdog(120);
	if (m)
		msgs = atoi(m);
	rc = fh_open(&F);
	if (rc)
		return rc;
	devs[0] = fh_dev_by_name(&F, e2e_dev("simib0"));
	devs[1] = fh_dev_by_name(&F, e2e_dev("simroce0"));
	if (devs[0] < 0 || devs[1] < 0)
		devs[0] = devs[1] = 0;
	t0 = fh_now();
	for (i = 0; i < THREADS; i++) {
		pairs[i].idx = i;
		FH_CHECK(pthread_create(&t[i], NULL, xfer_main, &pairs[i]) == 0, "pthread_create");
	}
	for (i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		regs += pairs[i].regs;
	}
	fh_log("%d threads x %d verified messages, %ld concurrent registrations, %.1f s", THREADS,
	       msgs, regs, fh_now() - t0);
	FH_CHECK(regs > 0, "the registration threads never ran");
	fh_close(&F);
	fh_log("PASS");
	return 0;
}
