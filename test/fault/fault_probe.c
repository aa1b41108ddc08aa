/*
 * fault_probe - the connect-time path probe: with the peer's GID made
 * unreachable in simverbs (as a wrong GID, VLAN or route would), connect
 * and accept both fail within BOUND seconds - instead of a retry-exceeded
 * error on the first collective - and ONE message names both NICs and both
 * GIDs, with the hint about GIDs/VLAN/routing. Then, with the GID reachable
 * again, the same listener connects fine. RoCE only: GIDs route RoCE, while
 * InfiniBand is LID-routed (test/e2e/e2e_errors cuts an IB path with
 * drop-pid); this test pins the single message and the time bound. Then,
 * with NCCL_IB_TIMEOUT so long that the handshake's own timeout comes first,
 * the timeout's WARN names both GIDs (ours, then the peer's).
 */
#include "config.h"

#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "fh.h"
#include "ibv.h"

#define BOUND (5.0 * fh_scale())

static void gid_str(const uint8_t *g, char *out, size_t len)
{
	nv_ibv_gid_str((const union ibv_gid *)g, out, len);
}

static void run(struct fh *f, const char *devname, char *gid /* [64] */)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE], h2[NCCL_NET_HANDLE_MAXSIZE], cmd[128];
	ncclNetDeviceHandle_v12_t *dh = NULL;
	void *lc, *s = NULL, *r = NULL;
	ncclResult_t cres = ncclSuccess, ares = ncclSuccess;
	int dev = fh_dev_by_name(f, devname), w0, wi;
	double t0;
	struct nv_comm *probe_s, *probe_r;

	FH_CHECK(dev >= 0, "no %s", devname);
	/* Learn the GID this device uses from a working connection first. */
	fh_pair(f, dev, &s, &r, 20);
	probe_s = s;
	probe_r = r;
	gid_str(probe_s->rmeta->dev[0].gid, gid, 64);
	FH_CHECK(!memcmp(probe_s->rmeta->dev[0].gid, probe_r->rmeta->dev[0].gid, 16),
		 "loopback GIDs differ");
	FH_OK(f->net->closeSend(s));
	FH_OK(f->net->closeRecv(r));
	s = r = NULL;

	snprintf(cmd, sizeof(cmd), "gid-unreachable %s", gid);
	FH_CHECK(fh_sv_control(cmd) == 0, "simverbs '%s' failed", cmd);
	memset(handle, 0, sizeof(handle));
	FH_OK(f->net->listen(f->ctx, dev, handle, &lc));
	memcpy(h2, handle, sizeof(h2));
	w0 = fh_warn_count();
	t0 = fh_now();
	while ((cres == ncclSuccess || ares == ncclSuccess) && fh_now() - t0 < BOUND) {
		if (cres == ncclSuccess) {
			cres = f->net->connect(f->ctx, dev, h2, &s, &dh);
			FH_CHECK(!s, "connect succeeded over an unreachable path");
		}
		if (ares == ncclSuccess) {
			ares = f->net->accept(lc, &r, &dh);
			FH_CHECK(!r, "accept succeeded over an unreachable path");
		}
	}
	FH_CHECK(cres != ncclSuccess, "connect did not fail within %.0f s", BOUND);
	FH_CHECK(ares != ncclSuccess, "accept did not fail within %.0f s", BOUND);
	/* One message with both ends: "local <dev>:<port> ... GID <g> ... remote <dev> ... GID <g>" */
	wi = fh_warn_find(w0, "path check", "local ", "remote ", devname, gid,
			  "cannot reach each other", NULL);
	FH_CHECK(wi >= 0, "no single WARN naming both NICs, GID %s and the hint", gid);
	{
		const char *w = fh_warn_get(wi), *l = strstr(w, "local "), *rm = strstr(w, "remote ");

		FH_CHECK(l && rm && strstr(l, gid) && strstr(rm, gid) && strstr(l, devname) &&
				 strstr(rm, devname),
			 "the local and the remote part must each name the NIC and GID: %s", w);
		FH_CHECK(strstr(w, "hint:") && !strstr(strstr(w, "hint:") + 1, "hint:"),
			 "not exactly one hint: %s", w);
	}
	fh_log("%s: connect and accept failed in %.2f s: %s", devname, fh_now() - t0,
	       fh_warn_get(wi));
	FH_CHECK(fh_warn_find(w0, "accept", "path", NULL) >= 0 ||
			 fh_warn_find(w0, "accept", "gave up", NULL) >= 0,
		 "the accepting side's error does not explain the path check");

	snprintf(cmd, sizeof(cmd), "gid-reachable %s", gid);
	FH_CHECK(fh_sv_control(cmd) == 0, "simverbs '%s' failed", cmd);
	memcpy(h2, handle, sizeof(h2));
	fh_join(f, lc, dev, h2, &s, &r, 20, "connect after healing did not finish");
	FH_OK(f->net->closeSend(s));
	FH_OK(f->net->closeRecv(r));
	FH_OK(f->net->closeListen(lc));
}

/*
 * The path check's write retries longer than NCCL_VERBS_CONNECT_TIMEOUT_MS:
 * connect or accept fails on the handshake's timeout, and that WARN names our
 * NIC and GID and the peer's (a forced GID index with no route looks so).
 */
static void run_timeout(struct fh *f, const char *devname, const char *gid)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE], h2[NCCL_NET_HANDLE_MAXSIZE], cmd[128], pat[96];
	ncclNetDeviceHandle_v12_t *dh = NULL;
	void *lc, *s = NULL, *r = NULL;
	ncclResult_t cres = ncclSuccess, ares = ncclSuccess;
	int dev = fh_dev_by_name(f, devname), w0, wi;
	double t0;

	/* simverbs' retry clock at real time (its default runs 100 times faster) */
	FH_CHECK(fh_sv_control("timeout-scale 1") == 0, "simverbs timeout-scale failed");
	snprintf(cmd, sizeof(cmd), "gid-unreachable %s", gid);
	FH_CHECK(fh_sv_control(cmd) == 0, "simverbs '%s' failed", cmd);
	memset(handle, 0, sizeof(handle));
	FH_OK(f->net->listen(f->ctx, dev, handle, &lc));
	memcpy(h2, handle, sizeof(h2));
	w0 = fh_warn_count();
	t0 = fh_now();
	while ((cres == ncclSuccess || ares == ncclSuccess) && fh_now() - t0 < BOUND) {
		if (cres == ncclSuccess)
			cres = f->net->connect(f->ctx, dev, h2, &s, &dh);
		if (ares == ncclSuccess)
			ares = f->net->accept(lc, &r, &dh);
		FH_CHECK(!s && !r, "a comm over an unreachable path");
	}
	FH_CHECK(cres != ncclSuccess && ares != ncclSuccess, "connect %d, accept %d after %.0f s",
		 cres, ares, BOUND);
	snprintf(pat, sizeof(pat), "GID %s QPN", gid);
	wi = fh_warn_find(w0, "NCCL_VERBS_CONNECT_TIMEOUT_MS", "path-check", pat, NULL);
	if (wi < 0)
		fh_warn_dump();
	FH_CHECK(wi >= 0, "no timeout WARN naming GID %s", gid);
	{
		const char *w = fh_warn_get(wi), *p = strstr(w, "(peer ");

		FH_CHECK(strstr(w, pat) < p && p && strstr(p, devname) && strstr(p, pat),
			 "the timeout WARN must name our GID and then the peer's: %s", w);
	}
	fh_log("%s: the handshake timed out in %.2f s: %s", devname, fh_now() - t0,
	       fh_warn_get(wi));
	snprintf(cmd, sizeof(cmd), "gid-reachable %s", gid);
	FH_CHECK(fh_sv_control(cmd) == 0, "simverbs '%s' failed", cmd);
	FH_CHECK(fh_sv_control("timeout-scale 0.01") == 0, "simverbs timeout-scale failed");
	FH_OK(f->net->closeListen(lc));
}

int main(void)
{
	struct fh f;
	char gid[64], tmo[16];
	int rc;

	fh_watchdog(120);
	rc = fh_open(&f);
	if (rc)
		return rc;
	if (fh_sv_control("status") < 0) {
		fh_log("not running on simverbs; skipping");
		return FH_SKIP;
	}
	/* GIDs route RoCE; InfiniBand is LID-routed (e2e_errors cuts its path with drop-pid). */
	run(&f, "simroce0", gid);
	fh_close(&f);
	setenv("NCCL_IB_TIMEOUT", "20", 1); /* 4 s per try: the handshake gives up first */
	snprintf(tmo, sizeof(tmo), "%d", (int)(1000 * fh_scale()));
	setenv("NCCL_VERBS_CONNECT_TIMEOUT_MS", tmo, 1);
	rc = fh_open(&f);
	if (rc)
		return rc;
	run_timeout(&f, "simroce0", gid);
	fh_close(&f);
	fh_log("PASS");
	return 0;
}
