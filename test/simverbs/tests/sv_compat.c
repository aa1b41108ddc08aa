/*
 * sv_compat: where simverbs must answer as rdma-core / rxe / the kernel do,
 * because software nobody here wrote (pyverbs' tests, UCX, librdmacm) relies
 * on it:
 *  - ibv_query_device_ex fills phys_port_cnt_ex (= phys_port_cnt); a
 *    context's cmd_fd is a valid descriptor (ibv_import_device: EOPNOTSUPP);
 *  - ibv_create_qp_ex accepts IBV_QP_INIT_ATTR_CREATE_FLAGS with
 *    create_flags = 0 and refuses every flag bit with EOPNOTSUPP, as rxe;
 *  - sysfs gid_attrs/{types,ndevs}/<i> of an empty GID entry (and ndevs of an
 *    IB GID) fail the read with EINVAL, through ibv_read_sysfs_file() and
 *    through open()+read() as UCX reads them;
 *  - identity: a software device by default (rxe's vendor id 0xffffff, part
 *    0, firmware 0.0.0, virtio-net PCI function, no hca_type); vendor=mellanox
 *    gives the ConnectX-6 look, and the stand-in libmlx5 still says "not an
 *    mlx5 device" (mlx5dv_is_supported false, mlx5dv_query_device EOPNOTSUPP);
 *  - atomics: IBV_ATOMIC_HCA by default; on a device configured atomics=none
 *    (atomic_cap NONE) ibv_post_send of an atomic fails with EINVAL and
 *    *bad_wr = the WR, as siw (a software device without atomics) does, and
 *    nothing completes; SEND_OPS_FLAGS with atomics is EOPNOTSUPP (rxe).
 */
#include <fcntl.h>
#include <infiniband/mlx5dv.h>

#include "svt.h"

int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);

static void check_port_cnt_ex(const char *dev)
{
	struct ibv_context *c = svt_open(dev);
	struct ibv_device_attr_ex ax;

	memset(&ax, 0xa5, sizeof(ax));
	SVT_EQ(ibv_query_device_ex(c, NULL, &ax), 0);
	SVT_CHECK(ax.orig_attr.phys_port_cnt >= 1);
	SVT_EQ(ax.phys_port_cnt_ex, ax.orig_attr.phys_port_cnt);
	/* cmd_fd is a valid descriptor (pyverbs dup()s it to try ibv_import_device) */
	SVT_CHECK(fcntl(c->cmd_fd, F_GETFD) >= 0);
	errno = 0;
	SVT_CHECK(!ibv_import_device(c->cmd_fd) && errno == EOPNOTSUPP);
	SVT_EQ(ibv_close_device(c), 0);
}

static struct ibv_qp *qp_ex(struct svt_ep *e, uint64_t mask, uint32_t flags, uint64_t ops)
{
	struct ibv_qp_init_attr_ex xa;

	memset(&xa, 0, sizeof(xa));
	xa.qp_type = IBV_QPT_RC;
	xa.send_cq = xa.recv_cq = e->cq;
	xa.cap.max_send_wr = xa.cap.max_recv_wr = 4;
	xa.cap.max_send_sge = xa.cap.max_recv_sge = 1;
	xa.comp_mask = (uint32_t)(IBV_QP_INIT_ATTR_PD | mask);
	xa.pd = e->pd;
	xa.create_flags = flags;
	xa.send_ops_flags = ops;
	errno = 0;
	return ibv_create_qp_ex(e->ctx, &xa);
}

static void check_create_flags(void)
{
	struct svt_ep e;
	struct ibv_qp *q;
	static const uint32_t bad[] = { IBV_QP_CREATE_BLOCK_SELF_MCAST_LB,
		IBV_QP_CREATE_SCATTER_FCS, IBV_QP_CREATE_CVLAN_STRIPPING,
		IBV_QP_CREATE_SOURCE_QPN, IBV_QP_CREATE_PCI_WRITE_END_PADDING, 1u << 30 };

	svt_ep_init(&e, "simib0", 16, 4, 0, 0);
	q = qp_ex(&e, IBV_QP_INIT_ATTR_CREATE_FLAGS, 0, 0);
	SVT_CHECK(q);
	SVT_EQ(ibv_destroy_qp(q), 0);
	/* create_flags is ignored unless the mask says it is valid */
	q = qp_ex(&e, 0, 1u << 30, 0);
	SVT_CHECK(q);
	SVT_EQ(ibv_destroy_qp(q), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		SVT_CHECK(!qp_ex(&e, IBV_QP_INIT_ATTR_CREATE_FLAGS, bad[i], 0) &&
			  errno == EOPNOTSUPP);
	svt_ep_fini(&e);
	printf("create_qp_ex CREATE_FLAGS: 0 accepted, every flag EOPNOTSUPP: ok\n");
}

/* open()+read() as UCX does; returns the read's errno (0 = it read). */
static int direct_read_errno(const char *dir, const char *file)
{
	char path[1024], buf[64];
	int fd, e = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_RDONLY);
	SVT_CHECK(fd >= 0);
	if (read(fd, buf, sizeof(buf)) < 0)
		e = errno;
	close(fd);
	return e;
}

static void check_sysfs_einval(void)
{
	struct ibv_context *c = svt_open("simroce0"), *ib = svt_open("simib0");
	const char *dir = c->device->ibdev_path;
	struct ibv_port_attr pa;
	union ibv_gid g;
	char buf[64], f[64];
	int empty = -1, expect;
	char c1;
	int fd = open("/sys/devices/virtual/net/lo/speed", O_RDONLY);

	/* the kernel attribute simverbs links to; without it entries are directories */
	expect = fd >= 0 && read(fd, &c1, 1) < 0 && errno == EINVAL ? EINVAL : EISDIR;
	if (fd >= 0)
		close(fd);
	SVT_EQ(ibv_query_port(c, 1, &pa), 0);
	for (int i = 0; i < pa.gid_tbl_len && empty < 0; i++) {
		static const union ibv_gid zero;

		SVT_EQ(ibv_query_gid(c, 1, i, &g), 0);
		if (!memcmp(&g, &zero, sizeof(g)))
			empty = i;
	}
	SVT_CHECK(empty > 0);
	SVT_CHECK(ibv_read_sysfs_file(dir, "ports/1/gid_attrs/types/0", buf, sizeof(buf)) > 0);
	SVT_CHECK(!strcmp(buf, "IB/RoCE v1"));
	SVT_CHECK(ibv_read_sysfs_file(dir, "ports/1/gid_attrs/ndevs/0", buf, sizeof(buf)) > 0);
	for (int k = 0; k < 2; k++) {
		snprintf(f, sizeof(f), "ports/1/gid_attrs/%s/%d", k ? "ndevs" : "types", empty);
		errno = 0;
		SVT_EQ(ibv_read_sysfs_file(dir, f, buf, sizeof(buf)), -1);
		SVT_EQ(errno, EINVAL);
		SVT_EQ(direct_read_errno(dir, f), expect);
	}
	/* IB: GID 0 has a type, no netdev */
	SVT_CHECK(ibv_read_sysfs_file(ib->device->ibdev_path, "ports/1/gid_attrs/types/0", buf,
				      sizeof(buf)) > 0);
	SVT_CHECK(!strcmp(buf, "IB/RoCE v1"));
	errno = 0;
	SVT_EQ(ibv_read_sysfs_file(ib->device->ibdev_path, "ports/1/gid_attrs/ndevs/0", buf,
				   sizeof(buf)), -1);
	SVT_EQ(errno, EINVAL);
	SVT_EQ(ibv_close_device(c), 0);
	SVT_EQ(ibv_close_device(ib), 0);
	printf("sysfs gid_attrs of an empty GID entry: read fails with EINVAL (direct: %s): ok\n",
	       strerror(expect));
}

static unsigned long sysfs_hex(const char *dir, const char *file)
{
	char buf[64];

	SVT_CHECK(ibv_read_sysfs_file(dir, file, buf, sizeof(buf)) > 0);
	return strtoul(buf, NULL, 0);
}

/* mellanox: the vendor identity; otherwise the default software one. */
static void check_identity(const char *dev, bool mellanox)
{
	struct ibv_context *c = svt_open(dev);
	const char *dir = c->device->ibdev_path;
	struct ibv_device_attr a;
	char buf[64];

	SVT_EQ(ibv_query_device(c, &a), 0);
	SVT_EQ(a.vendor_id, mellanox ? 0x02c9 : 0xffffff);
	SVT_EQ(a.vendor_part_id, mellanox ? 4123 : 0);
	SVT_EQ(a.hw_ver, 0);
	SVT_CHECK(!strcmp(a.fw_ver, mellanox ? "20.99.1000" : "0.0.0"));
	SVT_EQ(sysfs_hex(dir, "device/vendor"), mellanox ? 0x15b3 : 0x1af4);
	SVT_EQ(sysfs_hex(dir, "device/device"), mellanox ? 0x101b : 0x1041);
	SVT_EQ(sysfs_hex(dir, "device/class"), mellanox ? 0x020700 : 0x020000);
	if (mellanox) {
		SVT_CHECK(ibv_read_sysfs_file(dir, "hca_type", buf, sizeof(buf)) > 0);
		SVT_CHECK(!strcmp(buf, "MT4123"));
	} else {
		SVT_EQ(ibv_read_sysfs_file(dir, "hca_type", buf, sizeof(buf)), -1);
	}
	{	/* the stand-in libmlx5 (LD_LIBRARY_PATH) in either identity */
		void *h = dlopen("libmlx5.so.1", RTLD_NOW | RTLD_LOCAL);
		__typeof__(mlx5dv_is_supported) *sup;
		__typeof__(mlx5dv_query_device) *q;
		struct mlx5dv_context dv;

		SVT_CHECK(h);
		sup = (__typeof__(sup))(uintptr_t)dlsym(h, "mlx5dv_is_supported");
		q = (__typeof__(q))(uintptr_t)dlsym(h, "mlx5dv_query_device");
		SVT_CHECK(sup && q);
		SVT_CHECK(!sup(c->device));
		memset(&dv, 0, sizeof(dv));
		SVT_EQ(q(c, &dv), EOPNOTSUPP);
		dlclose(h);
	}
	SVT_EQ(ibv_close_device(c), 0);
}

static void identity_child(void)
{
	char fab[200];

	snprintf(fab, sizeof(fab), "%s-mlx", getenv("SIMVERBS_FABRIC") ?
		 getenv("SIMVERBS_FABRIC") : "svt");
	setenv("SIMVERBS_FABRIC", fab, 1);
	setenv("SIMVERBS_DEVICES", "mlx5_0:ll=ib,vendor=mellanox;mlx5_1:ll=eth,vendor=mellanox", 1);
	check_identity("mlx5_0", true);
	check_identity("mlx5_1", true);
	exit(0);
}

static void bad_vendor_child(void)
{
	char fab[200];

	snprintf(fab, sizeof(fab), "%s-badv", getenv("SIMVERBS_FABRIC") ?
		 getenv("SIMVERBS_FABRIC") : "svt");
	setenv("SIMVERBS_FABRIC", fab, 1);
	setenv("SIMVERBS_DEVICES", "x0:vendor=acme", 1);
	errno = 0;
	SVT_CHECK(!ibv_get_device_list(NULL) && errno == EINVAL);
	exit(0);
}

static void check_identities(void)
{
	void (*kids[])(void) = { identity_child, bad_vendor_child };

	check_identity("simib0", false);
	check_identity("simroce0", false);
	for (size_t i = 0; i < sizeof(kids) / sizeof(kids[0]); i++) {
		pid_t pid;

		fflush(stdout);
		pid = fork();
		SVT_CHECK(pid >= 0);
		if (!pid)
			kids[i]();
		SVT_EQ(svt_wait_child(pid), 0);
	}
	printf("identity: software by default, vendor=mellanox on request, libmlx5 consistent: ok\n");
}

/* On a device configured atomics=none (siw's answers). */
static void no_atomics_child(void)
{
	char fab[200];
	struct svt_ep a, b;
	struct svt_info ia, ib;
	struct ibv_device_attr da;
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_wc wc;

	snprintf(fab, sizeof(fab), "%s-noat", getenv("SIMVERBS_FABRIC") ?
		 getenv("SIMVERBS_FABRIC") : "svt");
	setenv("SIMVERBS_FABRIC", fab, 1);
	setenv("SIMVERBS_DEVICES", "simib0:ll=ib,atomics=none", 1);
	svt_ep_init(&a, "simib0", 16, 4, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	svt_ep_init(&b, "simib0", 16, 4, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	SVT_EQ(ibv_query_device(a.ctx, &da), 0);
	SVT_EQ(da.atomic_cap, IBV_ATOMIC_NONE);
	SVT_CHECK(!qp_ex(&a, IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, 0,
			 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD) && errno == EOPNOTSUPP);
	ia = svt_ep_info(&a);
	ib = svt_ep_info(&b);
	svt_connect(&a, &ib, 14, 7);
	svt_connect(&b, &ia, 14, 7);
	for (int op = 0; op < 2; op++) {
		memset(&wr, 0, sizeof(wr));
		sge.addr = (uintptr_t)a.buf;
		sge.length = 8;
		sge.lkey = a.mr->lkey;
		wr.wr_id = 77;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = op ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.atomic.remote_addr = ib.addr;
		wr.wr.atomic.rkey = ib.rkey;
		wr.wr.atomic.compare_add = 1;
		bad = NULL;
		SVT_EQ(ibv_post_send(a.qp, &wr, &bad), EINVAL);
		SVT_CHECK(bad == &wr);
	}
	SVT_EQ(svt_poll_for(a.cq, &wc, 1, 50), 0);
	/* the QP is untouched: a write still works */
	SVT_EQ(svt_post_write(&a, IBV_WR_RDMA_WRITE, (uintptr_t)a.buf, 8, a.mr->lkey, ib.addr,
			      ib.rkey, 0, IBV_SEND_SIGNALED, 5), 0);
	wc = svt_poll1(a.cq, 5000);
	SVT_EQ(wc.status, IBV_WC_SUCCESS);
	SVT_EQ(wc.wr_id, 5);
	svt_ep_fini(&a);
	svt_ep_fini(&b);
	exit(0);
}

static void check_atomics(void)
{
	struct ibv_device_attr da;
	struct svt_ep e;
	struct ibv_qp *q;
	pid_t pid;

	svt_ep_init(&e, "simib0", 16, 4, 0, 0);
	SVT_EQ(ibv_query_device(e.ctx, &da), 0);
	SVT_EQ(da.atomic_cap, IBV_ATOMIC_HCA);
	q = qp_ex(&e, IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, 0, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
		  IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_RDMA_WRITE);
	SVT_CHECK(q);
	SVT_EQ(ibv_destroy_qp(q), 0);
	svt_ep_fini(&e);
	fflush(stdout);
	pid = fork();
	SVT_CHECK(pid >= 0);
	if (!pid)
		no_atomics_child();
	SVT_EQ(svt_wait_child(pid), 0);
	printf("atomics: IBV_ATOMIC_HCA by default; atomics=none: atomic_cap NONE, SEND_OPS_FLAGS "
	       "EOPNOTSUPP, post_send EINVAL, bad_wr set, nothing posted: ok\n");
}

int main(void)
{
	(void)svt_control_fn_get();
	check_port_cnt_ex("simib0");
	check_port_cnt_ex("simroce0");
	printf("phys_port_cnt_ex: ok\n");
	check_create_flags();
	check_sysfs_einval();
	check_identities();
	check_atomics();
	return 0;
}
