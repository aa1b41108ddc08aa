/*
 * Process lifecycle: the leak report (SIMVERBS_LEAK_CHECK=1 makes a leaking
 * process exit 99 and name what leaked), a peer killed with SIGKILL (retry
 * exceeded at the survivor, its fabric entries and segments reclaimed, a new
 * process works), and a whole fabric whose processes all died being
 * garbage-collected by the next process.
 */
#include <signal.h>
#include <sys/stat.h>

#include "svt.h"

#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

static struct svt_pipe P;

static const char *fabric(void)
{
	static char name[160];
	const char *f = getenv("SIMVERBS_FABRIC");

	if (f && *f)
		snprintf(name, sizeof(name), "%s", f);
	else
		snprintf(name, sizeof(name), "simverbs-%u", (unsigned)getuid());
	return name;
}

static void leak_child(bool leak)
{
	struct svt_ep e;

	setenv("SIMVERBS_LEAK_CHECK", "1", 1);
	svt_ep_init(&e, "simib0", 16, 16, 4096, ACC);
	if (leak) {
		SVT_CHECK(ibv_alloc_pd(e.ctx));
		SVT_EQ(svt_control("leak-report"), 0);
	}
	svt_ep_fini(&e);
	if (leak) {
		e.ctx = svt_open("simroce0");	/* a context and a PD leak */
		exit(0);
	}
	exit(0);
}

static void check_leak_report(void)
{
	for (int leak = 0; leak < 2; leak++) {
		int errp[2];
		char out[4096] = "";
		size_t got = 0;
		ssize_t n;
		pid_t pid;

		SVT_EQ(pipe(errp), 0);
		fflush(stdout);
		pid = fork();
		SVT_CHECK(pid >= 0);
		if (!pid) {
			dup2(errp[1], 2);
			close(errp[0]);
			leak_child(leak);
		}
		close(errp[1]);
		while ((n = read(errp[0], out + got, sizeof(out) - 1 - got)) > 0)
			got += (size_t)n;
		close(errp[0]);
		SVT_EQ(svt_wait_child(pid), leak ? 99 : 0);
		if (leak) {
			SVT_CHECK(strstr(out, "simverbs leak: pd"));
			SVT_CHECK(strstr(out, "simverbs leak: context simroce0"));
			SVT_CHECK(strstr(out, "2 object(s) leaked"));
		} else {
			SVT_CHECK(!strstr(out, "leak"));
		}
	}
	printf("leak report: clean exit 0, leaking exit 99 with the objects named: ok\n");
}

/* Child for the kill test: connects to the parent, then waits to be killed. */
static void victim(void)
{
	struct svt_ep e;
	struct svt_info me, peer;

	svt_ep_init(&e, "simib0", 16, 16, 1 << 20, ACC);
	me = svt_ep_info(&e);
	svt_send(&P, &me, sizeof(me));
	svt_recv(&P, &peer, sizeof(peer));
	svt_connect(&e, &peer, 12, 7);
	svt_sync(&P);
	for (;;)
		pause();
}

static pid_t spawn_victim(struct svt_ep *e, struct svt_info *vi)
{
	struct svt_info me;
	pid_t pid;

	pid = svt_fork_peer(&P, victim);
	svt_ep_init(e, "simib0", 16, 16, 1 << 20, ACC);
	me = svt_ep_info(e);
	svt_recv(&P, vi, sizeof(*vi));
	svt_send(&P, &me, sizeof(me));
	svt_connect(e, vi, 12, 7);
	svt_sync(&P);
	return pid;
}

static bool seg_exists(uint32_t qpn)
{
	char path[300];
	struct stat st;

	snprintf(path, sizeof(path), "/dev/shm/sv.%s.r%u.%u", fabric(), qpn & 0xfff, qpn);
	return stat(path, &st) == 0;
}

static void check_kill9(void)
{
	struct svt_ep e;
	struct svt_info vi;
	struct ibv_wc wc;
	pid_t pid = spawn_victim(&e, &vi);

	SVT_EQ(svt_post_write(&e, IBV_WR_RDMA_WRITE, (uintptr_t)e.buf, 64, e.mr->lkey, vi.addr,
			      vi.rkey, 0, IBV_SEND_SIGNALED, 1), 0);
	SVT_EQ(svt_poll1(e.cq, 20000).status, IBV_WC_SUCCESS);
	SVT_CHECK(seg_exists(vi.qpn));
	kill(pid, SIGKILL);
	SVT_EQ(svt_wait_child(pid), 128 + SIGKILL);
	close(P.rd);
	close(P.wr);
	SVT_EQ(svt_post_write(&e, IBV_WR_RDMA_WRITE, (uintptr_t)e.buf, 64, e.mr->lkey, vi.addr,
			      vi.rkey, 0, IBV_SEND_SIGNALED, 2), 0);
	wc = svt_poll1(e.cq, 10000);
	SVT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR);
	svt_ep_fini(&e);

	/* a new process attaches: the dead one's entries are reclaimed and
	 * the fabric works again */
	{
		uint32_t dead_qpn = vi.qpn;

		pid = spawn_victim(&e, &vi);
		SVT_CHECK(!seg_exists(dead_qpn));
	}
	SVT_EQ(svt_post_write(&e, IBV_WR_RDMA_WRITE, (uintptr_t)e.buf, 64, e.mr->lkey, vi.addr,
			      vi.rkey, 0, IBV_SEND_SIGNALED, 3), 0);
	SVT_EQ(svt_poll1(e.cq, 20000).status, IBV_WC_SUCCESS);
	kill(pid, SIGKILL);
	SVT_EQ(svt_wait_child(pid), 128 + SIGKILL);
	close(P.rd);
	close(P.wr);
	svt_ep_fini(&e);
	printf("kill -9 of a peer: retry exceeded, entries reclaimed, new process works: ok\n");
}

static void check_fabric_gc(void)
{
	char name[200], path[300];
	struct stat st;
	pid_t pid;
	int ready[2];
	char c;

	snprintf(name, sizeof(name), "%s-gc", fabric());
	snprintf(path, sizeof(path), "/dev/shm/sv.%s", name);
	SVT_EQ(pipe(ready), 0);
	fflush(stdout);
	pid = fork();
	SVT_CHECK(pid >= 0);
	if (!pid) {
		struct svt_ep e;

		setenv("SIMVERBS_FABRIC", name, 1);
		svt_ep_init(&e, "simib0", 16, 16, 4096, ACC);
		SVT_EQ(write(ready[1], "r", 1), 1);
		for (;;)
			pause();
	}
	SVT_EQ(read(ready[0], &c, 1), 1);
	SVT_EQ(stat(path, &st), 0);
	kill(pid, SIGKILL);
	SVT_EQ(svt_wait_child(pid), 128 + SIGKILL);
	sleep(3);	/* GC spares fabrics younger than 2 s */
	fflush(stdout);
	pid = fork();
	SVT_CHECK(pid >= 0);
	if (!pid) {
		struct ibv_device **l = ibv_get_device_list(NULL);	/* attaches: runs GC */

		ibv_free_device_list(l);
		exit(0);
	}
	SVT_EQ(svt_wait_child(pid), 0);
	SVT_CHECK(stat(path, &st) != 0);
	printf("fabric of killed processes garbage-collected: ok\n");
}

int main(void)
{
	svt_control_fn_get();
	check_leak_report();
	check_kill9();
	check_fabric_gc();
	return 0;
}
