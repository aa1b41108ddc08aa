/*
 * fault_rules - second, independent tests of two rules that had one test
 * each (test_wire's secret comparison, test_select's range selection):
 *  1. The secret length rule: the listener compares the WHOLE secret of the
 *     handle (NV_WIRE_SECRET_LEN bytes) - a handle differing from the
 *     listener's in only its first, a middle, or its last byte is refused
 *     on both sides ("wrong secret" / "did not present the secret"), the
 *     unchanged handle connects; and every listener's secret is random over
 *     its whole length (two listeners' secrets differ in both halves).
 *  2. The address range rule (NCCL_IB_ADDR_RANGE), end to end on RoCE in
 *     children with their own knobs: <handshake address>/32 puts that
 *     address on the wire, and a range that holds no GID of the port
 *     (127.0.0.0/8: loopback is never in a RoCE GID table, unless lo is the
 *     only interface; 10.254.253.0/24) leaves NCCL's start entry, index 0
 *     (link-local fe80::, reported "NOT usable" at INFO): never an address
 *     outside it.
 */
#include "config.h"

#include <arpa/inet.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "fh.h"
#include "ibv.h"
#include "wire.h"

#define SECRET_OFF 32 /* wire.c: the secret's offset in the handle */

static void secret_rule(struct fh *f, int dev)
{
	static const int pos[] = { 0, 15, 16, NV_WIRE_SECRET_LEN - 1 };
	char handle[NCCL_NET_HANDLE_MAXSIZE], h2[NCCL_NET_HANDLE_MAXSIZE],
		other[NCCL_NET_HANDLE_MAXSIZE];
	ncclNetDeviceHandle_v12_t *dh = NULL;
	void *lc, *lc2, *s, *r;
	unsigned k;
	double t0;
	int w0;

	FH_OK(f->net->listen(f->ctx, dev, handle, &lc));
	FH_OK(f->net->listen(f->ctx, dev, other, &lc2));
	FH_CHECK(memcmp(handle + SECRET_OFF, other + SECRET_OFF, 16) &&
			 memcmp(handle + SECRET_OFF + 16, other + SECRET_OFF + 16, 16),
		 "two listeners' secrets agree in one half: not random over the whole length");
	FH_OK(f->net->closeListen(lc2));
	for (k = 0; k < sizeof(pos) / sizeof(pos[0]); k++) {
		ncclResult_t res = ncclSuccess;

		memcpy(h2, handle, sizeof(h2));
		h2[SECRET_OFF + pos[k]] ^= 0x01;
		w0 = fh_warn_count();
		s = r = NULL;
		t0 = fh_now();
		while (res == ncclSuccess && !s) {
			res = f->net->connect(f->ctx, dev, h2, &s, &dh);
			FH_OK(f->net->accept(lc, &r, &dh));
			FH_CHECK(!r, "accept returned a comm for secret byte %d changed", pos[k]);
			FH_CHECK(fh_now() - t0 < 20 * fh_scale(), "no verdict for secret byte %d",
				 pos[k]);
		}
		FH_CHECK(res != ncclSuccess && !s, "connect with secret byte %d changed succeeded",
			 pos[k]);
		FH_CHECK(fh_warn_find(w0, "wrong secret", NULL) >= 0 &&
				 fh_warn_find(w0, "did not present the secret", NULL) >= 0,
			 "secret byte %d changed: the refusal is not explained on both sides", pos[k]);
	}
	memcpy(h2, handle, sizeof(h2));
	fh_join(f, lc, dev, h2, &s, &r, 20, "the unchanged handle did not connect");
	FH_OK(f->net->closeSend(s));
	FH_OK(f->net->closeRecv(r));
	FH_OK(f->net->closeListen(lc));
	fh_log("secret: a change in byte 0, 15, 16 or %d is refused; the right one connects",
	       NV_WIRE_SECRET_LEN - 1);
}

/* ---- address range, in children ------------------------------------------------ */
struct range_case {
	char range[64];
	char want_gid[64];	/* exact, or a prefix when it ends in ':' */
};

static int gid_is(const char *gid, const char *want)
{
	size_t n = strlen(want);

	return want[n - 1] == ':' ? !strncmp(gid, want, n) : !strcmp(gid, want);
}

static int range_child(void *arg)
{
	const struct range_case *rc = arg;
	char gid[64];
	struct fh f;
	void *s = NULL, *r = NULL;
	int dev, st;

	setenv("NCCL_IB_ADDR_RANGE", rc->range, 1);
	setenv("NCCL_IB_ADDR_FAMILY", "AF_INET", 1);
	setenv("NCCL_VERBS_CONNECT_TIMEOUT_MS", "3000", 1);
	st = fh_open(&f);
	if (st)
		return st;
	dev = fh_dev_by_name(&f, "simroce0");
	FH_CHECK(dev >= 0, "no simroce0");
	fh_pair(&f, dev, &s, &r, 20);
	nv_ibv_gid_str(&((struct nv_comm *)s)->dev[0].gid.gid, gid, sizeof(gid));
	FH_CHECK(gid_is(gid, rc->want_gid), "NCCL_IB_ADDR_RANGE=%s: local GID %s, expected %s",
		 rc->range, gid, rc->want_gid);
	nv_ibv_gid_str((const union ibv_gid *)((struct nv_comm *)r)->rmeta->dev[0].gid, gid,
		       sizeof(gid));
	FH_CHECK(gid_is(gid, rc->want_gid), "NCCL_IB_ADDR_RANGE=%s: GID on the wire %s, "
		 "expected %s", rc->range, gid, rc->want_gid);
	FH_OK(f.net->closeSend(s));
	FH_OK(f.net->closeRecv(r));
	fh_log("NCCL_IB_ADDR_RANGE=%s: GID %s used and sent", rc->range, gid);
	fh_close(&f);
	return 0;
}

static void range_rule(const char *hs_addr)
{
	struct range_case c[3];
	unsigned i;

	memset(c, 0, sizeof(c));
	/* a RoCE port's GID table holds its netdev's addresses, never loopback's
	 * (simverbs binds the port to lo only on a host with no other interface) */
	snprintf(c[0].range, sizeof(c[0].range), "127.0.0.0/8");
	snprintf(c[0].want_gid, sizeof(c[0].want_gid), "%s",
		 strcmp(hs_addr, "127.0.0.1") ? "fe80:" : "::ffff:127.0.0.1");
	snprintf(c[1].range, sizeof(c[1].range), "%s/32", hs_addr);
	snprintf(c[1].want_gid, sizeof(c[1].want_gid), "::ffff:%s", hs_addr);
	snprintf(c[2].range, sizeof(c[2].range), "10.254.253.0/24");
	snprintf(c[2].want_gid, sizeof(c[2].want_gid), "fe80:");
	for (i = 0; i < 3; i++) {
		if (i == 1 && !strcmp(hs_addr, "127.0.0.1"))
			continue; /* only loopback here: case 0 covers it */
		FH_CHECK(e2e_reap(e2e_spawn(NULL, range_child, &c[i]), 60 * fh_scale()) == 0,
			 "NCCL_IB_ADDR_RANGE=%s: child failed", c[i].range);
	}
}

/* The IPv4 handshake address the plugin picks, learned in a child ("" if none). */
static int g_pipe[2];

static int addr_child(void *arg)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE], addr[INET_ADDRSTRLEN] = "";
	struct fh f;
	void *lc;
	int rc;

	(void)arg;
	rc = fh_open(&f);
	if (rc)
		return rc;
	FH_OK(f.net->listen(f.ctx, 0, handle, &lc));
	/* the range rule reads simverbs' RoCE GID table (simroce0) */
	if (handle[6] == 4 && !e2e_real() && fh_sv_control("status") >= 0)
		inet_ntop(AF_INET, handle + 16, addr, sizeof(addr));
	FH_OK(f.net->closeListen(lc));
	fh_close(&f);
	e2e_pipe_write(g_pipe[1], addr, sizeof(addr));
	return 0;
}

int main(void)
{
	char addr[INET_ADDRSTRLEN];
	struct fh f;
	pid_t pid;
	int rc, dev;

	fh_watchdog(180);
	/* children first: none may inherit a loaded plugin */
	FH_CHECK(pipe(g_pipe) == 0, "pipe");
	pid = e2e_spawn(NULL, addr_child, NULL);
	e2e_pipe_read(g_pipe[0], addr, sizeof(addr), 30 * fh_scale());
	rc = e2e_reap(pid, 30 * fh_scale());
	if (rc == FH_SKIP)
		return FH_SKIP;
	FH_CHECK(rc == 0, "the child learning the handshake address failed");
	if (addr[0])
		range_rule(addr);
	else
		fh_log("not on simverbs (or real-device mode) or no IPv4 handshake address: range rule "
		       "skipped");
	rc = fh_open(&f);
	if (rc)
		return rc;
	dev = fh_dev_by_name(&f, e2e_dev("simroce0"));
	secret_rule(&f, dev < 0 ? 0 : dev);
	fh_close(&f);
	fh_log("PASS");
	return 0;
}
