/*
 * test_device - device discovery over simverbs (simib0: InfiniBand, simroce0:
 * RoCE): ports, sorting, unique names, PCI path from ibdev_path, speed,
 * NCCL_IB_HCA filtering, GID choice, properties of every field, vNICs,
 * PD refcounts, MR cache on a real PD, GPUDirect markers under a fake root,
 * the async event thread. Skips (77) when no simverbs device is visible.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nvtest.h"
#include "device.h"
#include "devset.h"
#include "event.h"
#include "mr.h"
#include "param.h"
#include "select.h"

static int init_with(const char *const *env)
{
	nv_param_reset();
	if (nv_param_load_from(nvt_env, (void *)env) != NV_OK)
		return -1;
	return nv_devices_init() == NV_OK ? nv_dev_count() : -1;
}

static int find_dev(const char *name)
{
	for (int i = 0; i < nv_dev_count(); i++)
		if (!strcmp(nv_dev_get(i)->hca->name, name))
			return i;
	return -1;
}

static void test_discovery(void)
{
	const char *env[] = { NULL };
	int n = init_with(env), ib, roce;
	struct nv_gid_info g;
	struct stat sb;

	CHECK(n >= 2);
	ib = find_dev("simib0");
	roce = find_dev("simroce0");
	CHECK(ib >= 0 && roce >= 0);
	if (ib < 0 || roce < 0)
		return;
	CHECK(nv_dev_get(ib)->link_layer == IBV_LINK_LAYER_INFINIBAND && nv_dev_get(ib)->lid != 0);
	CHECK(nv_dev_get(roce)->link_layer == IBV_LINK_LAYER_ETHERNET);
	for (int i = 0; i < n; i++) {
		struct nv_dev *d = nv_dev_get(i);

		CHECK(d->index == i && d->speed_mbps > 0 && d->port >= 1);
		CHECK(d->hca->pci_path[0] == '/' && stat(d->hca->pci_path, &sb) == 0);
		CHECK(strncmp(d->hca->pci_path, "/sys/class/infiniband", 21) != 0);
		for (int j = 0; j < i; j++) {
			CHECK(strcmp(nv_dev_get(j)->name, d->name) != 0);
			CHECK(strcmp(nv_dev_get(j)->hca->pci_path, d->hca->pci_path) <= 0);
		}
	}
	CHECK(nv_dev_gid(nv_dev_get(roce), &g) == NV_OK && g.valid && g.index > 0);
	CHECK(nv_gid_family(&g.gid) == AF_INET && g.type == IBV_GID_TYPE_ROCE_V2);
	CHECK(nv_dev_gid(nv_dev_get(ib), &g) == NV_OK && g.index == 0);
	CHECK(nv_dev_get(99) == NULL && nv_vdev_get(-1) == NULL);
	nv_devices_fini();
	CHECK(nv_dev_count() == 0 && nv_vdev_count() == 0);
}

static void test_filter(void)
{
	const char *exact[] = { "NCCL_IB_HCA==simroce0", NULL };
	const char *excl[] = { "NCCL_IB_HCA=^simib", NULL };
	const char *port2[] = { "NCCL_IB_HCA=simib0:2,simroce0:2", NULL };
	const char *rail[] = { "NCCL_IB_HCA=simib0:1:3:1", NULL };
	const char *gid[] = { "NCCL_IB_GID_INDEX=1000", NULL };
	const char *empty[] = { "NCCL_IB_GID_INDEX=30", NULL };
	const char *roce_gid[] = { "NCCL_IB_GID_INDEX=30", "NCCL_IB_HCA==simroce0", NULL };
	ncclNetProperties_v12_t p;
	struct nv_gid_info g;

	CHECK(init_with(exact) == 1 && !strcmp(nv_dev_get(0)->name, "simroce0"));
	nv_devices_fini();
	CHECK(init_with(excl) >= 1 && find_dev("simib0") < 0 && find_dev("simroce0") >= 0);
	nv_devices_fini();
	nvt_log_clear();
	CHECK(init_with(port2) == -1); /* no port 2 anywhere: init fails, says why */
	CHECK(strstr(nvt_warns, "NCCL_IB_HCA=simib0:2,simroce0:2") != NULL);
	CHECK(init_with(rail) == 1 && nv_vdev_properties(0, &p) == NV_OK);
	CHECK(p.railId == 3 && p.planeId == 1);
	nv_devices_fini();
	/* a forced GID index beyond the table or on an empty entry: the RoCE port is
	 * skipped at init with the reason; IB ports ignore NCCL_IB_GID_INDEX */
	nvt_log_clear();
	CHECK(init_with(gid) >= 1 && find_dev("simroce0") < 0 && find_dev("simib0") >= 0);
	CHECK(strstr(nvt_warns, "simroce0:1 has no usable GID: NCCL_IB_GID_INDEX=1000 is beyond"));
	CHECK(nv_dev_gid(nv_dev_get(find_dev("simib0")), &g) == NV_OK && g.index == 0);
	nv_devices_fini();
	nvt_log_clear();
	CHECK(init_with(empty) >= 1 && find_dev("simroce0") < 0);
	CHECK(strstr(nvt_warns, "NCCL_IB_GID_INDEX=30 is an empty GID entry") != NULL);
	nv_devices_fini();
	nvt_log_clear();
	CHECK(init_with(roce_gid) == -1); /* nothing left: init fails */
	CHECK(strstr(nvt_warns, "lacks a usable GID") != NULL);
}

static void test_properties_and_vdevs(void)
{
	const char *env[] = { "NCCL_VERBS_LATENCY_US=7", NULL };
	ncclNetProperties_v12_t p;
	int n = init_with(env), v, pair[2] = { 0, 1 }, one[1] = { 1 }, dup[2] = { 1, 1 };

	CHECK(n >= 2);
	for (int i = 0; i < n; i++) {
		memset(&p, 0xa5, sizeof(p));
		CHECK(nv_vdev_properties(i, &p) == NV_OK);
		CHECK(!strcmp(p.name, nv_dev_get(i)->name) && p.pciPath && p.pciPath[0] == '/');
		CHECK(p.guid == nv_dev_get(i)->guid && p.guid != 0xa5a5a5a5a5a5a5a5ULL);
		CHECK((p.ptrSupport & NCCL_PTR_HOST) && !(p.ptrSupport & ~7));
		CHECK(p.regIsGlobal == 1 && p.forceFlush == 0 && p.speed == nv_dev_get(i)->speed_mbps);
		CHECK(p.port == nv_dev_get(i)->port && p.latency == 7.0f && p.maxComms > 0);
		CHECK(p.maxRecvs == 8 && p.netDeviceType == NCCL_NET_DEVICE_HOST);
		CHECK(p.netDeviceVersion == NCCL_NET_DEVICE_INVALID_VERSION);
		CHECK(p.vProps.ndevs == 1 && p.vProps.devs[0] == i);
		CHECK(p.maxP2pBytes == UINT32_MAX && p.maxCollBytes == (512ULL << 20));
		CHECK(p.maxMultiRequestSize == 1 && p.railId == -1 && p.planeId == -1);
	}
	CHECK(nv_vdev_properties(n, &p) == NV_ERR_INTERNAL);
	/* IB + RoCE never merge; limits and duplicates are checked */
	CHECK(nv_vdev_make(pair, 2, 8, &v) == NV_ERR_INVALID);
	CHECK(nv_vdev_make(dup, 2, 8, &v) == NV_ERR_INVALID);
	CHECK(nv_vdev_make(pair, 9, 8, &v) == NV_ERR_INVALID);
	CHECK(nv_vdev_make(one, 1, 4, &v) == NV_OK && v == n && nv_vdev_count() == n + 1);
	CHECK(nv_vdev_properties(v, &p) == NV_OK && p.vProps.ndevs == 1 && p.vProps.devs[0] == 1);
	nv_devices_fini();
	/* the merged entry comes back after a teardown (NCCL keeps its indices) */
	CHECK(init_with(env) == n && nv_vdev_count() == n + 1);
	CHECK(nv_vdev_properties(n, &p) == NV_OK && p.vProps.devs[0] == 1);
	nv_devices_fini();
	/* ... but not when the physical devices differ */
	{
		const char *ib_only[] = { "NCCL_IB_HCA==simib0", NULL };

		CHECK(init_with(ib_only) == 1 && nv_vdev_count() == 1);
		nv_devices_fini();
	}
}

static void test_pd_mr(void)
{
	const char *env[] = { NULL };
	struct nv_hca *h;
	struct ibv_pd *pd1, *pd2;
	struct ibv_mr *a, *b, *c;
	static char buf[3 * 65536] __attribute__((aligned(4096)));

	CHECK(init_with(env) >= 1);
	h = nv_dev_get(0)->hca;
	CHECK(nv_hca_pd_get(h, &pd1) == NV_OK && nv_hca_pd_get(h, &pd2) == NV_OK && pd1 == pd2);
	CHECK(h->pd_refs == 2);
	CHECK(nv_mr_acquire(h, buf + 100, 1000, NV_MEM_HOST, 0, -1, NV_MR_DATA, &a) == NV_OK);
	CHECK(a->addr == (void *)buf && a->length == 4096 && a->pd == pd1);
	CHECK(nv_mr_acquire(h, buf + 200, 100, NV_MEM_HOST, 0, -1, NV_MR_DATA, &b) == NV_OK && b == a);
	CHECK(nv_mr_acquire(h, buf + 200, 100, NV_MEM_HOST, 0, -1, NV_MR_CTRL, &c) == NV_OK && c != a);
	CHECK(nv_mr_release(h, a) == NV_OK && nv_mr_release(h, b) == NV_OK);
	CHECK(nv_mr_release(h, c) == NV_OK && nv_mr_release(h, c) == NV_ERR_INTERNAL);
	CHECK(nv_mr_acquire(h, buf, 10, (enum nv_mem_kind)9, 0, -1, NV_MR_DATA, &a) == NV_ERR_INVALID);
	nv_hca_pd_put(h);
	nv_hca_pd_put(h);
	CHECK(h->pd == NULL && h->pd_refs == 0);
	nv_devices_fini();
}

static void test_gdr_markers(void)
{
	char root[] = "/tmp/nvt-gdr-XXXXXX", path[512], marker[256];
	const char *env[] = { path, NULL };
	FILE *f;

	CHECK(mkdtemp(root) != NULL);
	CHECK(!nv_gdr_peermem_present(root, marker, sizeof(marker)) && marker[0] == '\0');
	/* no marker: simverbs answers the dma-buf probe with EBADF -> DMABUF only */
	snprintf(path, sizeof(path), "NCCL_VERBS_GDR_SYSFS_ROOT=%s", root);
	CHECK(init_with(env) >= 1);
	CHECK(nv_dev_get(0)->hca->gdr.ptr_support == (NCCL_PTR_HOST | NCCL_PTR_DMABUF));
	CHECK(strstr(nv_dev_get(0)->hca->gdr.why, "dma-buf") != NULL);
	nv_devices_fini();
	snprintf(path, sizeof(path), "mkdir -p %s/sys/module/nvidia_peermem", root);
	CHECK(system(path) == 0);
	snprintf(path, sizeof(path), "%s/sys/module/nvidia_peermem/version", root);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (f)
		fclose(f);
	CHECK(nv_gdr_peermem_present(root, marker, sizeof(marker)) && !strcmp(marker, path));
	snprintf(path, sizeof(path), "NCCL_VERBS_GDR_SYSFS_ROOT=%s/", root);
	CHECK(init_with(env) >= 1);
	CHECK(nv_dev_get(0)->hca->gdr.peermem && (nv_dev_get(0)->hca->gdr.ptr_support & NCCL_PTR_CUDA));
	CHECK(strstr(nv_dev_get(0)->hca->gdr.why, "nvidia_peermem") != NULL);
	nv_devices_fini();
	snprintf(path, sizeof(path), "rm -rf %s", root);
	CHECK(system(path) == 0);
}

/* A port going down reaches the event thread (WARN), a recorded sink stays first. */
static void test_async(void)
{
	const char *env[] = { NULL };
	int (*ctl)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "simverbs_control");
	struct nv_async_sink s = { 0 };

	nv_async_sink_record(&s, IBV_EVENT_QP_FATAL, "first");
	nv_async_sink_record(&s, IBV_EVENT_CQ_ERR, "second");
	CHECK(nv_async_sink_failed(&s) && !strcmp(s.what, "first"));
	CHECK(atomic_load(&s.fatal) == IBV_EVENT_QP_FATAL + 1);
	if (!ctl)
		return;
	CHECK(init_with(env) >= 1);
	nvt_log_clear();
	CHECK(ctl("port-down simroce0:1") == 0);
	for (int i = 0; i < 200 && !strstr(nvt_warns, "simroce0"); i++)
		usleep(10000);
	CHECK(strstr(nvt_warns, "simroce0") != NULL);
	CHECK(ctl("port-up simroce0:1") == 0);
	nv_devices_fini();
}

/* IBV_EVENT_DEVICE_SPEED_CHANGE: the device's speed is queried again (simverbs port-speed). */
static void test_speed_change(void)
{
	const char *env[] = { NULL };
	int (*ctl)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "simverbs_control");
	struct ibv_async_event ev;
	struct nv_dev *d = NULL;
	int before;

	if (!ctl)
		return;
	CHECK(init_with(env) >= 1);
	for (int i = 0; i < nv_dev_count() && !d; i++)
		if (!strcmp(nv_dev_get(i)->hca->name, "simroce0"))
			d = nv_dev_get(i);
	CHECK(d != NULL);
	before = d->speed_mbps;
	CHECK(ctl("port-speed simroce0:1 25000") == 0);
	ev = (struct ibv_async_event){ .event_type = (enum ibv_event_type)NV_IBV_EVENT_DEVICE_SPEED_CHANGE };
	ev.element.port_num = 1;
	nv_event_handle(d->hca, &ev);
	CHECK(d->speed_mbps == 25000);
	CHECK(ctl("port-speed simroce0:1 0") == 0);
	nv_event_handle(d->hca, &ev);
	CHECK(d->speed_mbps == before);
	nv_devices_fini();
}

/* The dispatch rules: QP/CQ events land in their owner's sink, DEVICE_FATAL
 * on the HCA, GID_CHANGE marks the port's GID cache stale, others only log. */
static void test_event_dispatch(void)
{
	const char *env[] = { NULL };
	const char *off[] = { "NCCL_IB_RETURN_ASYNC_EVENTS=0", NULL };
	struct nv_async_sink qs = { 0 }, cs = { 0 }, s1 = { 0 }, s2 = { 0 };
	struct nv_sink_link l1 = { 0 }, l2 = { 0 };
	struct ibv_qp qp = { .qp_context = &qs, .qp_num = 0x1234 };
	struct ibv_cq cq = { .cq_context = &cs };
	struct ibv_async_event ev;
	struct nv_gid_info g;
	struct nv_dev *d;

	CHECK(init_with(env) >= 1);
	d = nv_dev_get(0);
	CHECK(nv_dev_gid(d, &g) == NV_OK && atomic_load(&d->gid_stale) == 0);
	ev = (struct ibv_async_event){ .event_type = IBV_EVENT_GID_CHANGE };
	ev.element.port_num = d->port;
	nv_event_handle(d->hca, &ev);
	CHECK(atomic_load(&d->gid_stale) == 1 && nv_dev_gid(d, &g) == NV_OK);
	CHECK(atomic_load(&d->gid_stale) == 0);
	ev = (struct ibv_async_event){ .event_type = IBV_EVENT_COMM_EST };
	ev.element.qp = &qp;
	nv_event_handle(d->hca, &ev);
	CHECK(!nv_async_sink_failed(&qs)); /* not fatal */
	ev.event_type = IBV_EVENT_QP_FATAL;
	nvt_log_clear();
	nv_event_handle(d->hca, &ev);
	CHECK(nv_async_sink_failed(&qs) && strstr(qs.what, "qpn 0x1234") && !nv_hca_failed(d->hca));
	CHECK(strstr(nvt_warns, "qpn 0x1234") != NULL);
	ev = (struct ibv_async_event){ .event_type = IBV_EVENT_CQ_ERR };
	ev.element.cq = &cq;
	nv_event_handle(d->hca, &ev);
	CHECK(nv_async_sink_failed(&cs));
	ev = (struct ibv_async_event){ .event_type = IBV_EVENT_DEVICE_FATAL };
	nv_hca_sink_attach(d->hca, &l1, &s1);	/* attached: told */
	nv_hca_sink_attach(d->hca, &l2, &s2);	/* detached before the event: not told */
	nv_hca_sink_detach(d->hca, &l2);
	nv_hca_sink_detach(d->hca, &l2);	/* idempotent */
	nv_event_handle(d->hca, &ev);
	CHECK(nv_hca_failed(d->hca) && strstr(d->hca->sink.what, d->hca->name));
	CHECK(nv_async_sink_failed(&s1) && (atomic_load(&s1.fatal) & NV_SINK_DEVICE));
	CHECK(strstr(s1.what, d->hca->name) && !nv_async_sink_failed(&s2));
	nv_hca_sink_attach(d->hca, &l2, &s2);	/* attached after the event: told at once */
	CHECK(nv_async_sink_failed(&s2) && (atomic_load(&s2.fatal) & NV_SINK_DEVICE));
	nv_hca_sink_detach(d->hca, &l1);
	nv_hca_sink_detach(d->hca, &l2);
	CHECK(d->hca->sinks == NULL);
	nv_devices_fini();
	/* NCCL_IB_RETURN_ASYNC_EVENTS=0: logged, not recorded */
	memset(&qs, 0, sizeof(qs));
	CHECK(init_with(off) >= 1);
	ev = (struct ibv_async_event){ .event_type = IBV_EVENT_QP_REQ_ERR };
	ev.element.qp = &qp;
	nv_event_handle(nv_dev_get(0)->hca, &ev);
	CHECK(!nv_async_sink_failed(&qs));
	nv_devices_fini();
}

/* PORT_ERR with NCCL_IB_RESILIENCY_PORT_FAILOVER=1: recorded into the attached
 * failover comms (fo_wake) on that port, not into others; off: only logged. */
static void test_event_port_err(void)
{
	const char *on[] = { "NCCL_IB_RESILIENCY_PORT_FAILOVER=1", NULL };
	const char *no_return[] = { "NCCL_IB_RESILIENCY_PORT_FAILOVER=1",
				    "NCCL_IB_RETURN_ASYNC_EVENTS=0", NULL };
	const char *off[] = { NULL };
	const char *const *envs[] = { on, no_return, off };
	struct ibv_async_event ev;

	for (int k = 0; k < 3; k++) {
		struct nv_async_sink fo = { 0 }, other_port = { 0 }, plain = { 0 };
		struct nv_sink_link lf = { 0 }, lo = { 0 }, lp = { 0 };
		struct nv_dev *d;

		CHECK(init_with(envs[k]) >= 1);
		d = nv_dev_get(0);
		atomic_store(&fo.fo_wake, 1);
		atomic_store(&other_port.fo_wake, 1);
		lf.port = lp.port = d->port;
		lo.port = (uint8_t)(d->port + 1);
		nv_hca_sink_attach(d->hca, &lf, &fo);
		nv_hca_sink_attach(d->hca, &lo, &other_port);
		nv_hca_sink_attach(d->hca, &lp, &plain);
		ev = (struct ibv_async_event){ .event_type = IBV_EVENT_PORT_ERR };
		ev.element.port_num = d->port;
		nv_event_handle(d->hca, &ev);
		CHECK(nv_async_sink_failed(&fo) == (k == 0));
		CHECK(k != 0 || ((atomic_load(&fo.fatal) & NV_SINK_EVENT_MASK) ==
				 IBV_EVENT_PORT_ERR + 1 && strstr(fo.what, "port error") &&
				 strstr(fo.what, d->hca->name)));
		CHECK(!nv_async_sink_failed(&other_port) && !nv_async_sink_failed(&plain));
		CHECK(!nv_hca_failed(d->hca));
		nv_hca_sink_detach(d->hca, &lf);
		nv_hca_sink_detach(d->hca, &lo);
		nv_hca_sink_detach(d->hca, &lp);
		nv_devices_fini();
	}
}

/* A TCP connection over loopback whose client end is reset (SO_LINGER 0):
 * returns the accepted end, on which the reset is pending. */
static int tcp_reset_end(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	struct linger lg = { 1, 0 };
	int l = socket(AF_INET, SOCK_STREAM, 0), c = socket(AF_INET, SOCK_STREAM, 0), s;

	CHECK(l >= 0 && c >= 0 && bind(l, (struct sockaddr *)&a, sizeof(a)) == 0);
	CHECK(listen(l, 1) == 0 && getsockname(l, (struct sockaddr *)&a, &al) == 0);
	CHECK(connect(c, (struct sockaddr *)&a, sizeof(a)) == 0);
	s = accept(l, NULL, NULL);
	CHECK(s >= 0 && setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) == 0);
	close(c);
	close(l);
	usleep(20000); /* the RST crosses loopback */
	return s;
}

/* The event thread's peer check: only watched, waiting sinks of its HCA are
 * checked; peer_gone once the peer closed its socket; none after the thread stops. */
static void test_peer_watch(void)
{
	const char *env[] = { NULL };
	struct nv_async_sink s = { 0 }, other = { 0 };
	struct nv_sink_link l = { 0 }, lo = { 0 };
	struct nv_hca *h;
	int sv[2], i;
	char c;

	CHECK(init_with(env) >= 1);
	h = nv_dev_get(0)->hca;
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	CHECK(write(sv[1], "x", 1) == 1); /* unread data: still alive */
	nv_hca_sink_attach(h, &l, &s);
	nv_hca_sink_attach(h, &lo, &other); /* attached, never watched */
	CHECK(nv_hca_sink_watch(h, &s, sv[0]) == 1 && atomic_load(&s.watched) == 1);
	CHECK(nv_hca_sink_watch(h, &s, -1) == 0 && atomic_load(&s.watched) == 0);
	CHECK(nv_hca_sink_watch(h, &s, sv[0]) == 1);
	atomic_store(&s.waiting, 1);
	nv_hca_sink_sweep(h);
	CHECK(atomic_load(&s.waiting) == 0 && atomic_load(&s.peer_gone) == 0);
	CHECK(read(sv[0], &c, 1) == 1);
	close(sv[1]);
	nv_hca_sink_sweep(h); /* not waiting since the last check: not checked */
	CHECK(atomic_load(&s.peer_gone) == 0);
	atomic_store(&s.waiting, 1);
	atomic_store(&other.waiting, 1);
	nv_hca_sink_sweep(h);
	CHECK(atomic_load(&s.peer_gone) == 1 && atomic_load(&other.peer_gone) == 0);
	CHECK(s.peer_state == 0); /* closed (EOF), not reset */
	close(sv[0]);
	sv[0] = tcp_reset_end(); /* reset: the sweep keeps why */
	CHECK(nv_hca_sink_watch(h, &s, sv[0]) == 1 && atomic_load(&s.peer_gone) == 0);
	atomic_store(&s.waiting, 1);
	nv_hca_sink_sweep(h);
	CHECK(atomic_load(&s.peer_gone) == 1 && s.peer_state == -ECONNRESET);
	/* the thread itself: finds a closed peer within about NV_LIVENESS_NS */
	close(sv[0]);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	close(sv[1]);
	CHECK(nv_hca_sink_watch(h, &s, sv[0]) == 1 && atomic_load(&s.peer_gone) == 0);
	for (i = 0; i < 100 && !atomic_load(&s.peer_gone); i++) {
		atomic_store(&s.waiting, 1);
		usleep(10000);
	}
	CHECK(atomic_load(&s.peer_gone) == 1 && i <= 30);
	nv_event_stop(h); /* the thread stops: its sinks are no longer watched */
	CHECK(atomic_load(&s.watched) == 0 && nv_hca_sink_watch(h, &s, sv[0]) == 0);
	nv_hca_sink_detach(h, &lo);
	nv_hca_sink_detach(h, &l);
	close(sv[0]);
	nv_devices_fini();
}

int main(void)
{
	struct ibv_device **l;
	int n = 0;

	nvt_log_capture();
	l = ibv_get_device_list(&n);
	if (!l || n == 0) {
		printf("test_device: no verbs device (simverbs not on the library path): skipped\n");
		return 77;
	}
	ibv_free_device_list(l);
	test_discovery();
	test_filter();
	test_properties_and_vdevs();
	test_pd_mr();
	test_gdr_markers();
	test_async();
	test_event_dispatch();
	test_speed_change();
	test_event_port_err();
	test_peer_watch();
	return nvt_exit("test_device");
}
