/*
 * fault_cq - completion-queue overrun. The devices are limited to 16 CQ
 * entries (SIMVERBS_LIMITS=max_cqe=16), the receiver posts 32 receives and
 * does not poll while the sender fills them. Acceptable outcomes, checked:
 *   - the plugin refuses the connection with a message naming the CQ size
 *     and the device limit; or
 *   - the CQ overruns (IBV_EVENT_CQ_ERR): the receiver's next call fails
 *     within BOUND seconds with a message about the CQ, and stays failed; or
 *   - no overrun (the plugin bounded its CQ use): every message arrives
 *     intact.
 * Never a hang, a crash or a message delivered wrong.
 */
#include "config.h"

#include <string.h>
#include <unistd.h>

#include "fh.h"

#define N 32
#define MSG 4096
#define BOUND (10.0 * fh_scale())

int main(void)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	ncclNetDeviceHandle_v12_t *dh = NULL;
	void *lc, *s = NULL, *r = NULL, *smh, *rmh, *rreq[N], *sreq[N];
	char *sbuf, *rbuf;
	ncclResult_t cres = ncclSuccess, ares = ncclSuccess, res = ncclSuccess;
	struct fh f;
	int i, nr = 0, ns = 0, w0, rc;
	double t0;

	fh_watchdog(120);
	setenv("SIMVERBS_LIMITS", "max_cqe=16", 1);
	rc = fh_open(&f);
	if (rc)
		return rc;
	memset(handle, 0, sizeof(handle));
	FH_OK(f.net->listen(f.ctx, 0, handle, &lc));
	w0 = fh_warn_count();
	t0 = fh_now();
	while ((!s || !r) && cres == ncclSuccess && ares == ncclSuccess && fh_now() - t0 < BOUND) {
		if (!s)
			cres = f.net->connect(f.ctx, 0, handle, &s, &dh);
		if (!r)
			ares = f.net->accept(lc, &r, &dh);
	}
	if (cres != ncclSuccess || ares != ncclSuccess) {
		int wi = fh_warn_find(w0, "CQ", NULL);

		FH_CHECK(wi >= 0, "connect refused without naming the CQ");
		fh_log("refused at connect: %s", fh_warn_get(wi));
		goto out_listen;
	}
	FH_CHECK(s && r, "connect did not finish");
	sbuf = aligned_alloc(4096, (size_t)N * MSG);
	rbuf = aligned_alloc(4096, (size_t)N * MSG);
	memset(rbuf, 0, (size_t)N * MSG);
	smh = fh_reg(&f, s, sbuf, (size_t)N * MSG);
	rmh = fh_reg(&f, r, rbuf, (size_t)N * MSG);
	for (i = 0; i < N; i++)
		fh_fill(sbuf + (size_t)i * MSG, MSG, (uint64_t)i);
	/* Receiver: post everything it may, then stop polling. */
	t0 = fh_now();
	while (nr < N && res == ncclSuccess && fh_now() - t0 < BOUND) {
		void *data = rbuf + (size_t)nr * MSG;
		size_t size = MSG;
		int tag = nr;

		rreq[nr] = NULL;
		res = f.net->irecv(r, 1, &data, &size, &tag, &rmh, NULL, &rreq[nr]);
		nr += rreq[nr] != NULL;
		if (nr < N && ns < N) { /* the sender fills what is posted */
			sreq[ns] = NULL;
			FH_OK(f.net->isend(s, sbuf + (size_t)ns * MSG, MSG, ns, smh, NULL, &sreq[ns]));
			ns += sreq[ns] != NULL;
		}
	}
	t0 = fh_now();
	while (ns < N && fh_now() - t0 < 2 * fh_scale()) {
		sreq[ns] = NULL;
		res = f.net->isend(s, sbuf + (size_t)ns * MSG, MSG, ns, smh, NULL, &sreq[ns]);
		if (res != ncclSuccess)
			break;
		ns += sreq[ns] != NULL;
	}
	for (i = 0; i < ns; i++) /* sender side completes (its own CQ) */
		if (fh_wait(&f, sreq[i], NULL, &res, 2) || res != ncclSuccess)
			break;
	usleep(200000);
	fh_log("posted %d receives, %d sends, receiver has not polled", nr, ns);
	/* Now the receiver polls: overrun error, or every message intact. */
	w0 = fh_warn_count();
	res = ncclSuccess;
	for (i = 0; i < nr && res == ncclSuccess; i++) {
		int size = 0;

		FH_CHECK(fh_wait(&f, rreq[i], &size, &res, BOUND) == 0, "receive %d: no completion, "
			 "no error within %.0f s", i, BOUND);
		if (res == ncclSuccess)
			FH_CHECK(size == MSG && fh_check_pattern(rbuf + (size_t)i * MSG, MSG,
							      (uint64_t)i) == 0,
				 "receive %d: %d bytes or corrupt", i, size);
	}
	if (res != ncclSuccess) {
		int wi = fh_warn_find(w0, "CQ", NULL);
		void *req = NULL;
		size_t size = MSG;
		int tag = 0;

		FH_CHECK(wi >= 0, "the receiver's error does not name the CQ");
		fh_log("receiver failed at message %d: %s", i - 1, fh_warn_get(wi));
		res = f.net->irecv(r, 1, (void **)&rbuf, &size, &tag, &rmh, NULL, &req);
		FH_CHECK(res != ncclSuccess, "the comm did not stay failed after the overrun");
	} else {
		fh_log("no overrun: all %d messages intact", nr);
	}
	FH_OK(f.net->deregMr(s, smh));
	FH_OK(f.net->deregMr(r, rmh));
	FH_OK(f.net->closeSend(s));
	FH_OK(f.net->closeRecv(r));
	free(sbuf);
	free(rbuf);
out_listen:
	FH_OK(f.net->closeListen(lc));
	fh_close(&f);
	fh_log("PASS");
	return 0;
}
