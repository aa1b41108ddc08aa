/*
 * Verbs API rules in one process: return conventions, the QP state machine
 * with its required attribute masks, RTR/RTS value checks, PD/CQ EBUSY,
 * create-time limits, dma-buf registration, GID types, fake sysfs, ECE.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <linux/capability.h>
#include <poll.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "svt.h"

/* exported by libibverbs (IBVERBS_1.0), declared only in rdma-core's driver.h */
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);

static void check_state_machine(struct svt_ep *a, struct svt_ep *b)
{
	struct svt_info bi = svt_ep_info(b);
	struct ibv_qp_attr at;
	struct ibv_qp_init_attr ia;
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

	/* RESET -> RTR is not a transition */
	svt_rtr_attr(a, &bi, &at);
	SVT_EQ(ibv_modify_qp(a->qp, &at, SVT_RTR_MASK), EINVAL);
	/* RESET -> INIT needs PKEY_INDEX | PORT | ACCESS_FLAGS, nothing else */
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_INIT;
	at.port_num = 1;
	SVT_EQ(ibv_modify_qp(a->qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), EINVAL);
	SVT_EQ(ibv_modify_qp(a->qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			     IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MTU), EINVAL);
	at.port_num = 9;
	SVT_EQ(ibv_modify_qp(a->qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			     IBV_QP_ACCESS_FLAGS), EINVAL);
	SVT_EQ(svt_to_init(a, acc), 0);
	SVT_EQ(ibv_query_qp(a->qp, &at, IBV_QP_STATE, &ia), 0);
	SVT_EQ(at.qp_state, IBV_QPS_INIT);
	/* post_send before RTS fails, post_recv in INIT works */
	SVT_EQ(svt_post_write(a, IBV_WR_SEND, 0, 0, 0, 0, 0, 0, 0, 1), EINVAL);
	SVT_EQ(svt_post_recv(a, 0, 0, 0, 1), 0);
	/* INIT -> RTR: each required bit matters */
	svt_rtr_attr(a, &bi, &at);
	SVT_EQ(ibv_modify_qp(a->qp, &at, SVT_RTR_MASK & ~IBV_QP_MIN_RNR_TIMER), EINVAL);
	SVT_EQ(ibv_modify_qp(a->qp, &at, SVT_RTR_MASK & ~IBV_QP_AV), EINVAL);
	SVT_EQ(ibv_modify_qp(a->qp, &at, SVT_RTR_MASK | IBV_QP_TIMEOUT), EINVAL);
	/* (a QPN or LID that leads nowhere is not an RTR error: sv_addr) */
	at.path_mtu = (enum ibv_mtu)(a->pattr.active_mtu + 1);
	SVT_EQ(ibv_modify_qp(a->qp, &at, SVT_RTR_MASK), EINVAL);
	svt_rtr_attr(a, &bi, &at);
	SVT_EQ(ibv_modify_qp(a->qp, &at, SVT_RTR_MASK), 0);
	/* RTR -> RTS: each required bit matters; values are range-checked */
	svt_rts_attr(&at, 14, 7, 7);
	SVT_EQ(ibv_modify_qp(a->qp, &at, SVT_RTS_MASK & ~IBV_QP_RNR_RETRY), EINVAL);
	SVT_EQ(ibv_modify_qp(a->qp, &at, SVT_RTS_MASK & ~IBV_QP_SQ_PSN), EINVAL);
	at.retry_cnt = 8;
	SVT_EQ(ibv_modify_qp(a->qp, &at, SVT_RTS_MASK), EINVAL);
	svt_rts_attr(&at, 14, 7, 7);
	at.cur_qp_state = IBV_QPS_INIT;
	SVT_EQ(ibv_modify_qp(a->qp, &at, SVT_RTS_MASK | IBV_QP_CUR_STATE), EINVAL);
	SVT_EQ(ibv_modify_qp(a->qp, &at, SVT_RTS_MASK), 0);
	/* RTS -> RTS with an allowed attribute; RTS -> INIT is not allowed */
	at.min_rnr_timer = 3;
	SVT_EQ(ibv_modify_qp(a->qp, &at, IBV_QP_MIN_RNR_TIMER), 0);
	at.qp_state = IBV_QPS_INIT;
	SVT_EQ(ibv_modify_qp(a->qp, &at, IBV_QP_STATE), EINVAL);
	/* -> ERR flushes the posted receive; -> RESET -> INIT works again */
	at.qp_state = IBV_QPS_ERR;
	SVT_EQ(ibv_modify_qp(a->qp, &at, IBV_QP_STATE), 0);
	{
		struct ibv_wc wc = svt_poll1(a->cq, 20000);

		SVT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
		SVT_EQ(wc.wr_id, 1);
		SVT_EQ(wc.opcode, IBV_WC_RECV);
	}
	at.qp_state = IBV_QPS_RESET;
	SVT_EQ(ibv_modify_qp(a->qp, &at, IBV_QP_STATE), 0);
	SVT_EQ(svt_post_recv(a, 0, 0, 0, 1), EINVAL);
	SVT_EQ(svt_to_init(a, acc), 0);
}

static void check_roce_rtr(void)
{
	struct svt_ep a, b;
	struct svt_info bi;
	struct ibv_qp_attr at;

	svt_ep_init(&a, "simroce0", 16, 16, 4096, IBV_ACCESS_LOCAL_WRITE);
	svt_ep_init(&b, "simroce0", 16, 16, 4096, IBV_ACCESS_LOCAL_WRITE);
	bi = svt_ep_info(&b);
	SVT_EQ(svt_to_init(&a, 0), 0);
	svt_rtr_attr(&a, &bi, &at);
	at.ah_attr.is_global = 0;	/* Ethernet needs a GRH */
	SVT_EQ(ibv_modify_qp(a.qp, &at, SVT_RTR_MASK), EINVAL);
	svt_rtr_attr(&a, &bi, &at);
	at.ah_attr.grh.sgid_index = 31;	/* empty GID entry */
	SVT_EQ(ibv_modify_qp(a.qp, &at, SVT_RTR_MASK), EINVAL);
	svt_rtr_attr(&a, &bi, &at);
	SVT_EQ(ibv_modify_qp(a.qp, &at, SVT_RTR_MASK), 0);
	svt_ep_fini(&a);
	svt_ep_fini(&b);
}

static void check_gids_and_sysfs(struct ibv_context *ctx)
{
	struct ibv_gid_entry ge;
	char path[PATH_MAX], *real;
	bool v1 = false, v2 = false, lo = false;

	for (uint32_t i = 0; i < 32; i++) {
		int rc = ibv_query_gid_ex(ctx, 1, i, &ge, 0);

		if (rc == ENODATA)
			continue;
		SVT_EQ(rc, 0);
		v1 |= ge.gid_type == IBV_GID_TYPE_ROCE_V1;
		v2 |= ge.gid_type == IBV_GID_TYPE_ROCE_V2;
		lo |= ge.gid.raw[10] == 0xff && ge.gid.raw[12] == 127 && ge.gid.raw[15] == 1;
	}
	SVT_CHECK(v1 && v2 && !lo);	/* the netdev's addresses, never loopback */
	SVT_EQ(ibv_query_gid_ex(ctx, 1, 0, &ge, 0), 0);
	SVT_EQ(ge.gid.raw[0], 0xfe);	/* link-local first */
	snprintf(path, sizeof(path), "%s/device", ctx->device->ibdev_path);
	real = realpath(path, NULL);
	SVT_CHECK(real && strstr(real, "/devices/pci0000:00/"));
	free(real);
	{
		char buf[64];

		SVT_CHECK(ibv_read_sysfs_file(ctx->device->ibdev_path, "ports/1/link_layer", buf,
					      sizeof(buf)) > 0);
		SVT_CHECK(!strcmp(buf, "Ethernet"));
		SVT_CHECK(ibv_read_sysfs_file(ctx->device->ibdev_path, "ports/1/gid_attrs/types/1",
					      buf, sizeof(buf)) > 0);
		SVT_CHECK(!strcmp(buf, "RoCE v2"));
	}
}

/* While one process rebuilds the fake sysfs tree (forced by removing its
 * config stamp), another resolving the `device` links never finds one
 * missing (links are replaced atomically). */
static void check_sysfs_rebuild(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	char links[2][PATH_MAX], stamp[PATH_MAX];
	pid_t pid;
	int p[2];

	SVT_CHECK(l && l[0] && l[1]);
	for (int i = 0; i < 2; i++)
		snprintf(links[i], sizeof(links[i]), "%s/device", l[i]->ibdev_path);
	snprintf(stamp, sizeof(stamp), "%s/../../../.simverbs-config", l[0]->ibdev_path);
	SVT_EQ(pipe(p), 0);
	fflush(stdout);
	pid = fork();
	SVT_CHECK(pid >= 0);
	if (!pid) {	/* reader: until the parent closes the pipe */
		struct pollfd pfd = { .fd = p[0], .events = POLLIN };
		long n = 0;

		close(p[1]);
		while (poll(&pfd, 1, 0) == 0) {
			char *real = realpath(links[n++ & 1], NULL);

			if (!real) {
				fprintf(stderr, "%s unresolvable during a rebuild (%s)\n",
					links[(n - 1) & 1], strerror(errno));
				_exit(1);
			}
			free(real);
		}
		_exit(0);
	}
	close(p[0]);
	for (int r = 0; r < 4; r++) {
		struct ibv_device **l2;

		SVT_EQ(unlink(stamp), 0);
		l2 = ibv_get_device_list(NULL);	/* rebuilds the tree */
		SVT_CHECK(l2);
		ibv_free_device_list(l2);
	}
	close(p[1]);
	SVT_EQ(svt_wait_child(pid), 0);
	ibv_free_device_list(l);
	printf("sysfs rebuild keeps the device links resolvable: ok\n");
}

static void check_objects(struct svt_ep *a)
{
	struct ibv_qp_init_attr qa;
	struct ibv_mr *mr;
	struct ibv_device_attr da;
	struct ibv_qp_attr at;
	int fd;
	void *p;

	SVT_EQ(ibv_query_device(a->ctx, &da), 0);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = a->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = (uint32_t)da.max_qp_wr + 1;
	errno = 0;
	SVT_CHECK(!ibv_create_qp(a->pd, &qa) && errno == EINVAL);
	qa.cap.max_send_wr = 1;
	qa.cap.max_inline_data = 100000;
	errno = 0;
	SVT_CHECK(!ibv_create_qp(a->pd, &qa) && errno == EINVAL);
	qa.cap.max_inline_data = 0;
	qa.qp_type = IBV_QPT_UC;	/* UD is emulated (sv_ud), UC is not */
	errno = 0;
	SVT_CHECK(!ibv_create_qp(a->pd, &qa) && errno == EOPNOTSUPP);
	errno = 0;
	SVT_CHECK(!ibv_create_cq(a->ctx, da.max_cqe + 1, NULL, NULL, 0) && errno == EINVAL);
	/* children keep PD and CQ alive */
	SVT_EQ(ibv_dealloc_pd(a->pd), EBUSY);
	SVT_EQ(ibv_destroy_cq(a->cq), EBUSY);
	/* MR rules */
	errno = 0;
	SVT_CHECK(!ibv_reg_mr(a->pd, a->buf, 4096, IBV_ACCESS_REMOTE_WRITE) && errno == EINVAL);
	errno = 0;
	SVT_CHECK(!ibv_reg_mr(a->pd, (void *)4096, 4096, 0) && errno == EFAULT);
	errno = 0;
	SVT_CHECK(!ibv_reg_dmabuf_mr(a->pd, 0, 4096, 0, -1, 0) && errno == EBADF);
	fd = memfd_create("svt", 0);
	SVT_CHECK(fd >= 0);
	SVT_EQ(ftruncate(fd, 65536), 0);
	mr = ibv_reg_dmabuf_mr(a->pd, 4096, 8192, 0x10000, fd, IBV_ACCESS_LOCAL_WRITE |
			       IBV_ACCESS_REMOTE_WRITE);
	SVT_CHECK(mr);
	SVT_EQ(ibv_dereg_mr(mr), 0);
	p = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	SVT_CHECK(p != MAP_FAILED);
	munmap(p, 65536);
	close(fd);
	SVT_EQ(ibv_query_ece(a->qp, &(struct ibv_ece){ 0 }), EOPNOTSUPP);
	SVT_EQ(ibv_set_ece(a->qp, &(struct ibv_ece){ 0 }), EOPNOTSUPP);
	errno = 0;
	SVT_CHECK(!ibv_create_srq(a->pd, &(struct ibv_srq_init_attr){ 0 }) && errno == EINVAL);	/* max_wr 0 */
	SVT_EQ(ibv_req_notify_cq(a->cq, 0), EINVAL);	/* no channel */
	memset(&at, 0, sizeof(at));
	SVT_CHECK(!strcmp(ibv_wc_status_str(IBV_WC_RETRY_EXC_ERR),
			  "transport retry counter exceeded"));
}

/* QPs on port 2 of a two-port RoCE device, connected to each other. */
static void loopback_port2(const char *dev)
{
	struct svt_ep a, b;
	struct svt_info ai, bi;
	struct ibv_wc wc;

	svt_ep_init(&a, dev, 16, 16, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	svt_ep_init(&b, dev, 16, 16, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	a.port = b.port = 2;
	SVT_EQ(ibv_query_port(a.ctx, 2, &a.pattr), 0);
	b.pattr = a.pattr;
	ai = svt_ep_info(&a);
	bi = svt_ep_info(&b);
	SVT_EQ(ibv_query_gid(a.ctx, 2, a.gid_index, &ai.gid), 0);
	bi.gid = ai.gid;
	svt_connect(&a, &bi, 14, 7);
	svt_connect(&b, &ai, 14, 7);
	memset(a.buf, 7, 64);
	SVT_EQ(svt_post_write(&a, IBV_WR_RDMA_WRITE, (uintptr_t)a.buf, 64, a.mr->lkey, bi.addr,
			      bi.rkey, 0, IBV_SEND_SIGNALED, 1), 0);
	wc = svt_poll1(a.cq, 20000);
	SVT_EQ(wc.status, IBV_WC_SUCCESS);
	SVT_EQ(b.buf[63], 7);
	svt_ep_fini(&a);
	svt_ep_fini(&b);
}

/* In a child with its own fabric: SIMVERBS_DEVICES / SIMVERBS_CONFIG. */
static void config_child(bool use_file)
{
	char fab[200], path[] = "/tmp/svt-cfg-XXXXXX";
	struct ibv_device **l;
	struct ibv_context *c;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	struct svt_ep e;
	struct ibv_qp_init_attr qa;
	int n;

	snprintf(fab, sizeof(fab), "%s-cfg", getenv("SIMVERBS_FABRIC") ?
		 getenv("SIMVERBS_FABRIC") : "svt");
	setenv("SIMVERBS_FABRIC", fab, 1);
	if (use_file) {
		int fd = mkstemp(path);
		const char *txt = "# two devices\ncfg0 ll=ib mtu=1024 max_qp_wr=8 max_sge=4\n"
				  "cfg1 ll=eth ports=2\n";

		SVT_CHECK(fd >= 0);
		SVT_EQ(write(fd, txt, strlen(txt)), (ssize_t)strlen(txt));
		close(fd);
		unsetenv("SIMVERBS_DEVICES");
		setenv("SIMVERBS_CONFIG", path, 1);
	} else {
		setenv("SIMVERBS_DEVICES", "cfg0:ll=ib,mtu=1024,max_qp_wr=8;cfg1:ll=eth,ports=2", 1);
		setenv("SIMVERBS_LIMITS", "max_sge=4", 1);
	}
	l = ibv_get_device_list(&n);
	SVT_CHECK(l);
	SVT_EQ(n, 2);
	SVT_CHECK(!strcmp(ibv_get_device_name(l[0]), "cfg0"));
	c = ibv_open_device(l[1]);
	SVT_CHECK(c);
	SVT_EQ(ibv_query_device(c, &da), 0);
	SVT_EQ(da.phys_port_cnt, 2);
	SVT_EQ(ibv_query_port(c, 2, &pa), 0);
	SVT_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
	SVT_EQ(ibv_close_device(c), 0);
	ibv_free_device_list(l);
	svt_ep_init(&e, "cfg0", 16, 8, 4096, IBV_ACCESS_LOCAL_WRITE);
	SVT_EQ(ibv_query_device(e.ctx, &da), 0);
	SVT_EQ(da.max_qp_wr, 8);
	SVT_EQ(da.max_sge, 4);
	SVT_EQ(e.pattr.active_mtu, IBV_MTU_1024);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = e.cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 9;
	errno = 0;
	SVT_CHECK(!ibv_create_qp(e.pd, &qa) && errno == EINVAL);
	svt_ep_fini(&e);
	if (!use_file)
		loopback_port2("cfg1");
	if (use_file)
		unlink(path);
	exit(0);
}

static void check_config(void)
{
	for (int f = 0; f < 2; f++) {
		pid_t pid;

		fflush(stdout);
		pid = fork();
		SVT_CHECK(pid >= 0);
		if (!pid)
			config_child(f);
		SVT_EQ(svt_wait_child(pid), 0);
	}
	printf("SIMVERBS_DEVICES, SIMVERBS_CONFIG, SIMVERBS_LIMITS: ok\n");
}

/* Drops CAP_IPC_LOCK from the effective set (so RLIMIT_MEMLOCK applies);
 * returns whether the process had it. */
static bool drop_ipc_lock(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];
	bool had;

	memset(d, 0, sizeof(d));
	SVT_EQ(syscall(SYS_capget, &h, d), 0);
	had = (d[0].effective >> CAP_IPC_LOCK) & 1;
	d[0].effective &= ~(1u << CAP_IPC_LOCK);
	SVT_EQ(syscall(SYS_capset, &h, d), 0);
	return had;
}

/* RLIMIT_MEMLOCK as the kernel applies it: registrations beyond the soft limit
 * fail with ENOMEM, counted in whole pages, given back by dereg, unless the
 * process has CAP_IPC_LOCK; SIMVERBS_MEMLOCK=0 turns it off, =1 forces it. */
static void memlock_child(void)
{
	struct rlimit rl = { .rlim_cur = 1 << 20, .rlim_max = 1 << 20 };
	struct ibv_context *c = svt_open("simib0");
	struct ibv_pd *pd = ibv_alloc_pd(c);
	char *buf = aligned_alloc(4096, 4 << 20);
	struct ibv_mr *m1, *m2, *m3;
	bool had_cap;

	SVT_CHECK(pd && buf);
	SVT_EQ(setrlimit(RLIMIT_MEMLOCK, &rl), 0);
	unsetenv("SIMVERBS_MEMLOCK");
	m1 = ibv_reg_mr(pd, buf, 4 << 20, IBV_ACCESS_LOCAL_WRITE);
	had_cap = drop_ipc_lock();
	SVT_CHECK(!had_cap || m1);	/* CAP_IPC_LOCK: the limit does not apply */
	if (m1)
		SVT_EQ(ibv_dereg_mr(m1), 0);
	errno = 0;	/* without CAP_IPC_LOCK it applies by default */
	SVT_CHECK(!ibv_reg_mr(pd, buf, 4 << 20, IBV_ACCESS_LOCAL_WRITE) && errno == ENOMEM);
	setenv("SIMVERBS_MEMLOCK", "0", 1);
	m1 = ibv_reg_mr(pd, buf, 4 << 20, IBV_ACCESS_LOCAL_WRITE);
	SVT_CHECK(m1);	/* turned off */
	SVT_EQ(ibv_dereg_mr(m1), 0);
	setenv("SIMVERBS_MEMLOCK", "1", 1);
	errno = 0;
	SVT_CHECK(!ibv_reg_mr(pd, buf, 4 << 20, IBV_ACCESS_LOCAL_WRITE) && errno == ENOMEM);
	/* 1 byte across a page boundary pins two pages */
	m1 = ibv_reg_mr(pd, buf + 4095, 2, IBV_ACCESS_LOCAL_WRITE);
	SVT_CHECK(m1);
	m2 = ibv_reg_mr(pd, buf + 8192, (1 << 20) - 8192, IBV_ACCESS_LOCAL_WRITE);
	SVT_CHECK(m2);	/* exactly at the limit */
	errno = 0;
	SVT_CHECK(!ibv_reg_mr(pd, buf + (2 << 20), 1, IBV_ACCESS_LOCAL_WRITE) && errno == ENOMEM);
	SVT_EQ(ibv_dereg_mr(m1), 0);
	m3 = ibv_reg_mr(pd, buf + (2 << 20), 1, IBV_ACCESS_LOCAL_WRITE);
	SVT_CHECK(m3);	/* dereg gave the pages back */
	SVT_EQ(ibv_dereg_mr(m2), 0);
	SVT_EQ(ibv_dereg_mr(m3), 0);
	rl.rlim_cur = 0;	/* no locking at all: can_do_mlock() says EPERM */
	SVT_EQ(setrlimit(RLIMIT_MEMLOCK, &rl), 0);
	errno = 0;
	SVT_CHECK(!ibv_reg_mr(pd, buf, 1, IBV_ACCESS_LOCAL_WRITE) && errno == EPERM);
	SVT_EQ(ibv_dealloc_pd(pd), 0);
	SVT_EQ(ibv_close_device(c), 0);
	free(buf);
	exit(0);
}

/* Pinning needs the pages mapped with the rights the MR implies (EFAULT
 * otherwise), and a range that wraps is EINVAL, as ib_umem_get decides. */
static void check_reg_access(struct svt_ep *a)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, 4 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	struct ibv_mr *mr;

	SVT_CHECK(m != MAP_FAILED);
	SVT_EQ(mprotect(m + pg, (size_t)pg, PROT_NONE), 0);
	SVT_EQ(mprotect(m + 2 * pg, (size_t)pg, PROT_READ), 0);
	SVT_EQ(munmap(m + 3 * pg, (size_t)pg), 0);
	errno = 0;	/* PROT_NONE page inside the range */
	SVT_CHECK(!ibv_reg_mr(a->pd, m, 2 * (size_t)pg, 0) && errno == EFAULT);
	errno = 0;	/* only the PROT_NONE page */
	SVT_CHECK(!ibv_reg_mr(a->pd, m + pg + 8, 8, 0) && errno == EFAULT);
	errno = 0;	/* read-only page, writable MR */
	SVT_CHECK(!ibv_reg_mr(a->pd, m + 2 * pg, 64, IBV_ACCESS_LOCAL_WRITE) && errno == EFAULT);
	mr = ibv_reg_mr(a->pd, m + 2 * pg, 64, 0);	/* read-only MR on it: fine */
	SVT_CHECK(mr);
	SVT_EQ(ibv_dereg_mr(mr), 0);
	errno = 0;	/* runs into the unmapped page */
	SVT_CHECK(!ibv_reg_mr(a->pd, m + 2 * pg, 2 * (size_t)pg, 0) && errno == EFAULT);
	mr = ibv_reg_mr(a->pd, m, 64, IBV_ACCESS_LOCAL_WRITE);
	SVT_CHECK(mr);
	SVT_EQ(ibv_dereg_mr(mr), 0);
	errno = 0;	/* the end wraps (by less than a page) */
	SVT_CHECK(!ibv_reg_mr(a->pd, m, SIZE_MAX - 100, 0) && errno == EINVAL);
	errno = 0;
	SVT_CHECK(!ibv_reg_mr(a->pd, (void *)(UINTPTR_MAX - 100), 50, 0) && errno == EINVAL);
	SVT_EQ(munmap(m, 3 * (size_t)pg), 0);
	printf("registration of inaccessible or wrapping memory: EFAULT / EINVAL: ok\n");
}

/* Registration answers as the kernel (6.1) and rxe do: the iova keeps the address's offset in
 * its page, access bits the kernel does not know and ON_DEMAND (no ODP) are EINVAL, the
 * optional range is accepted; MW_BIND pins for writing; rereg_mr is refused after
 * libibverbs' own argument checks; every page is faulted in at registration (for writing
 * when the MR may be written), as pinning does. */
static void check_reg_rules(struct svt_ep *a)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t npg = 64, i, resident = 0;
	char *m = mmap(NULL, npg * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	unsigned char vec[64];
	struct rusage r0, r1;
	struct ibv_mr *mr;
	int lw = IBV_ACCESS_LOCAL_WRITE;

	SVT_CHECK(m != MAP_FAILED);
	errno = 0;	/* another offset in the page */
	SVT_CHECK(!ibv_reg_mr_iova(a->pd, m + 8, 64, 0x10000, lw) && errno == EINVAL);
	mr = ibv_reg_mr_iova(a->pd, m + 8, 64, 0x10008, lw);	/* same offset: fine */
	SVT_CHECK(mr);
	SVT_EQ(ibv_dereg_mr(mr), 0);
	errno = 0;
	SVT_CHECK(!ibv_reg_mr_iova2(a->pd, m, 64, 0x123, lw) && errno == EINVAL);
	errno = 0;	/* bits the kernel does not know */
	SVT_CHECK(!ibv_reg_mr(a->pd, m, 64, lw | (1 << 8)) && errno == EINVAL);
	errno = 0;
	SVT_CHECK(!ibv_reg_mr(a->pd, m, 64, lw | (1 << 19)) && errno == EINVAL);
	errno = 0;
	SVT_CHECK(!ibv_reg_mr(a->pd, m, 64, lw | (int)(1u << 30)) && errno == EINVAL);
	errno = 0;	/* no on-demand paging */
	SVT_CHECK(!ibv_reg_mr(a->pd, m, 64, lw | IBV_ACCESS_ON_DEMAND) && errno == EINVAL);
	mr = ibv_reg_mr(a->pd, m, 64, lw | IBV_ACCESS_RELAXED_ORDERING | IBV_ACCESS_HUGETLB);
	SVT_CHECK(mr);	/* the optional range and HUGETLB are accepted */
	/* rereg: libibverbs' argument checks, then the provider's EOPNOTSUPP */
	errno = 0;
	SVT_EQ(ibv_rereg_mr(mr, 8, NULL, NULL, 0, 0), IBV_REREG_MR_ERR_INPUT);
	SVT_EQ(errno, EINVAL);
	errno = 0;
	SVT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, a->pd, NULL, 0, lw),
	       IBV_REREG_MR_ERR_INPUT);
	SVT_EQ(errno, EINVAL);
	errno = 0;
	SVT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, NULL, 64, 0),
	       IBV_REREG_MR_ERR_INPUT);
	SVT_EQ(errno, EINVAL);
	errno = 0;
	SVT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, lw),
	       IBV_REREG_MR_ERR_CMD);
	SVT_EQ(errno, EOPNOTSUPP);
	SVT_EQ(ibv_dereg_mr(mr), 0);
	/* MW_BIND pins for writing: a read-only page fails */
	SVT_EQ(mprotect(m + (npg - 1) * (size_t)pg, (size_t)pg, PROT_READ), 0);
	errno = 0;
	SVT_CHECK(!ibv_reg_mr(a->pd, m + (npg - 1) * (size_t)pg, 64, IBV_ACCESS_MW_BIND) &&
		  errno == EFAULT);
	SVT_EQ(munmap(m + (npg - 1) * (size_t)pg, (size_t)pg), 0);
	npg--;
	/* never-touched pages are resident after a registration ... */
	SVT_EQ(mincore(m, npg * (size_t)pg, vec), 0);
	for (i = 1; i < npg; i++)	/* (page 0 was registered above) */
		resident += vec[i] & 1;
	SVT_EQ(resident, 0);
	mr = ibv_reg_mr(a->pd, m, npg * (size_t)pg, lw);
	SVT_CHECK(mr);
	SVT_EQ(mincore(m, npg * (size_t)pg, vec), 0);
	for (i = 0, resident = 0; i < npg; i++)
		resident += vec[i] & 1;
	SVT_EQ(resident, npg);
	/* ... faulted in for writing: writing them now faults no page in */
	SVT_EQ(getrusage(RUSAGE_SELF, &r0), 0);
	for (i = 0; i < npg; i++)
		m[i * (size_t)pg] = 1;
	SVT_EQ(getrusage(RUSAGE_SELF, &r1), 0);
	SVT_CHECK(r1.ru_minflt - r0.ru_minflt < (long)npg / 2);
	SVT_EQ(ibv_dereg_mr(mr), 0);
	SVT_EQ(munmap(m, npg * (size_t)pg), 0);
	/* a read-only MR faults its pages in too */
	m = mmap(NULL, npg * (size_t)pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	SVT_CHECK(m != MAP_FAILED);
	mr = ibv_reg_mr(a->pd, m, npg * (size_t)pg, 0);
	SVT_CHECK(mr);
	SVT_EQ(mincore(m, npg * (size_t)pg, vec), 0);
	for (i = 0, resident = 0; i < npg; i++)
		resident += vec[i] & 1;
	SVT_EQ(resident, npg);
	SVT_EQ(ibv_dereg_mr(mr), 0);
	SVT_EQ(munmap(m, npg * (size_t)pg), 0);
	printf("registration: iova offset, access bits, ODP, rereg refused as rxe; pages "
	       "faulted in: ok\n");
}

static void check_memlock(void)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	SVT_CHECK(pid >= 0);
	if (!pid)
		memlock_child();
	SVT_EQ(svt_wait_child(pid), 0);
	printf("RLIMIT_MEMLOCK: ENOMEM beyond it without CAP_IPC_LOCK: ok\n");
}

int main(void)
{
	struct svt_ep a, b;
	struct ibv_context *roce;

	svt_control_fn_get();
	svt_ep_init(&a, "simib0", 16, 16, 65536, IBV_ACCESS_LOCAL_WRITE);
	svt_ep_init(&b, "simib0", 16, 16, 65536, IBV_ACCESS_LOCAL_WRITE);
	check_state_machine(&a, &b);
	check_objects(&a);
	check_reg_access(&a);
	check_reg_rules(&a);
	svt_ep_fini(&a);
	svt_ep_fini(&b);
	check_roce_rtr();
	roce = svt_open("simroce0");
	check_gids_and_sysfs(roce);
	SVT_EQ(ibv_close_device(roce), 0);
	check_sysfs_rebuild();
	check_config();
	check_memlock();
	printf("state machine, masks, RTR/RTS checks, limits, EBUSY, dmabuf, GIDs, sysfs: ok\n");
	return 0;
}
