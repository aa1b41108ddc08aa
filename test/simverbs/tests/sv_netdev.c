/*
 * A RoCE port follows the netdev it is bound to, in a network namespace of
 * its own (skips, 77, where one cannot be made): the GID table is the
 * netdev's (EUI-64 link-local from its MAC, its IPv4 and IPv6 addresses, v1
 * and v2) and never loopback's or another interface's; an address added or
 * removed changes the table and raises IBV_EVENT_GID_CHANGE; active MTU
 * follows the netdev MTU; link down makes the port DOWN with
 * IBV_EVENT_PORT_ERR and a connected QP's write fails; link up makes it
 * ACTIVE again with IBV_EVENT_PORT_ACTIVE; the host's sysfs tree says the
 * same (state, gids, gid_attrs/ndevs).
 */
#define _GNU_SOURCE
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/wait.h>

#include "svt.h"

int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);

static void sh(const char *cmd)
{
	if (system(cmd) != 0) {
		fprintf(stderr, "'%s' failed\n", cmd);
		exit(1);
	}
}

/* index of gid (IPv4-mapped a.b.c.d) with type, or -1 */
static int find_v4(struct ibv_context *c, const char *ip, int type)
{
	struct ibv_gid_entry e;
	char buf[64];

	for (int i = 0; i < 32; i++) {
		if (ibv_query_gid_ex(c, 1, (uint32_t)i, &e, 0))
			continue;
		if (e.gid.raw[10] != 0xff || e.gid.raw[11] != 0xff)
			continue;
		snprintf(buf, sizeof(buf), "%u.%u.%u.%u", e.gid.raw[12], e.gid.raw[13],
			 e.gid.raw[14], e.gid.raw[15]);
		if (!strcmp(buf, ip) && (int)e.gid_type == type)
			return i;
	}
	return -1;
}

/* waits up to 5 s for an async event of type; acks it */
static void want_event(struct ibv_context *c, enum ibv_event_type type)
{
	struct pollfd p = { .fd = c->async_fd, .events = POLLIN };
	uint64_t end = svt_now_ns() + 5000000000ull;

	while (svt_now_ns() < end) {
		struct ibv_async_event ev;

		if (poll(&p, 1, 100) <= 0)
			continue;
		SVT_EQ(ibv_get_async_event(c, &ev), 0);
		ibv_ack_async_event(&ev);
		if (ev.event_type == type)
			return;
	}
	fprintf(stderr, "no async event %d within 5 s\n", type);
	exit(1);
}

static void check_table(struct ibv_context *c)
{
	struct ibv_gid_entry e;
	char buf[64];

	SVT_EQ(ibv_query_gid_ex(c, 1, 0, &e, 0), 0);
	/* MAC 02:5c:00:00:00:07 -> fe80::5c:ff:fe00:7 (EUI-64, U/L bit flipped) */
	SVT_EQ(e.gid.raw[0], 0xfe);
	SVT_EQ(e.gid.raw[8], 0x00);
	SVT_EQ(e.gid.raw[9], 0x5c);
	SVT_EQ(e.gid.raw[11], 0xff);
	SVT_EQ(e.gid.raw[12], 0xfe);
	SVT_EQ(e.gid.raw[15], 0x07);
	SVT_EQ(e.ndev_ifindex, if_nametoindex("sv0"));
	SVT_CHECK(find_v4(c, "10.77.0.1", IBV_GID_TYPE_ROCE_V1) == 2);
	SVT_CHECK(find_v4(c, "10.77.0.1", IBV_GID_TYPE_ROCE_V2) == 3);
	SVT_CHECK(find_v4(c, "127.0.0.1", IBV_GID_TYPE_ROCE_V2) < 0);	/* never loopback */
	SVT_CHECK(find_v4(c, "10.78.0.1", IBV_GID_TYPE_ROCE_V2) < 0);	/* never another netdev */
	SVT_CHECK(ibv_read_sysfs_file(c->device->ibdev_path, "ports/1/gid_attrs/ndevs/3", buf,
				      sizeof(buf)) > 0);
	SVT_CHECK(!strcmp(buf, "sv0"));
}

static void check_link(struct svt_ep *a, struct svt_ep *b)
{
	struct svt_info ai = svt_ep_info(a), bi = svt_ep_info(b);
	struct ibv_port_attr pa;
	struct ibv_wc wc;
	char buf[64];

	svt_connect(a, &bi, 14, 7);
	svt_connect(b, &ai, 14, 7);
	SVT_EQ(svt_post_write(a, IBV_WR_RDMA_WRITE, (uintptr_t)a->buf, 64, a->mr->lkey, bi.addr,
			      bi.rkey, 0, IBV_SEND_SIGNALED, 1), 0);
	SVT_EQ(svt_poll1(a->cq, 20000).status, IBV_WC_SUCCESS);
	sh("ip link set sv0 down");
	want_event(a->ctx, IBV_EVENT_PORT_ERR);
	SVT_EQ(ibv_query_port(a->ctx, 1, &pa), 0);
	SVT_EQ(pa.state, IBV_PORT_DOWN);
	SVT_CHECK(ibv_read_sysfs_file(a->ctx->device->ibdev_path, "ports/1/state", buf,
				      sizeof(buf)) > 0);
	SVT_CHECK(strstr(buf, "DOWN") != NULL);
	SVT_EQ(svt_post_write(a, IBV_WR_RDMA_WRITE, (uintptr_t)a->buf, 64, a->mr->lkey, bi.addr,
			      bi.rkey, 0, IBV_SEND_SIGNALED, 2), 0);
	wc = svt_poll1(a->cq, 20000);
	SVT_CHECK(wc.status != IBV_WC_SUCCESS);	/* the QP failed with its port */
	sh("ip link set sv0 up");
	want_event(a->ctx, IBV_EVENT_PORT_ACTIVE);
	SVT_EQ(ibv_query_port(a->ctx, 1, &pa), 0);
	SVT_EQ(pa.state, IBV_PORT_ACTIVE);
}

static int child(void)
{
	struct svt_ep a, b;
	struct ibv_port_attr pa;

	sh("ip link set lo up && ip link add sv0 type veth peer name sv0p && "
	   "ip link set sv0 address 02:5c:00:00:00:07 mtu 1500 && ip link set sv0p up && "
	   "ip link set sv0 up && ip addr add 10.77.0.1/24 dev sv0 && "
	   "ip link add sv1 type veth peer name sv1p && ip link set sv1 up && "
	   "ip addr add 10.78.0.1/24 dev sv1");
	setenv("SIMVERBS_DEVICES", "r0:ll=eth,netdev=sv0", 1);
	svt_control_fn_get();
	svt_ep_init(&a, "r0", 16, 16, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	svt_ep_init(&b, "r0", 16, 16, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	check_table(a.ctx);
	SVT_EQ(a.pattr.active_mtu, IBV_MTU_1024);	/* 1500 - RoCE headers */
	sh("ip addr add 10.77.1.1/24 dev sv0");
	want_event(a.ctx, IBV_EVENT_GID_CHANGE);
	SVT_CHECK(find_v4(a.ctx, "10.77.1.1", IBV_GID_TYPE_ROCE_V2) >= 0);
	sh("ip addr del 10.77.1.1/24 dev sv0");
	want_event(a.ctx, IBV_EVENT_GID_CHANGE);
	SVT_CHECK(find_v4(a.ctx, "10.77.1.1", IBV_GID_TYPE_ROCE_V2) < 0);
	sh("ip link set sv0 mtu 4200");
	for (int i = 0; i < 500; i++) {
		SVT_EQ(ibv_query_port(a.ctx, 1, &pa), 0);
		if (pa.active_mtu == IBV_MTU_4096)
			break;
		usleep(10000);
	}
	SVT_EQ(pa.active_mtu, IBV_MTU_4096);
	a.pattr = b.pattr = pa;
	check_link(&a, &b);
	svt_ep_fini(&a);
	svt_ep_fini(&b);
	printf("netdev binding: GID table, GID_CHANGE, MTU, link down/up with events: ok\n");
	return 0;
}

int main(void)
{
	if (getuid() != 0 || unshare(CLONE_NEWNET)) {
		printf("needs root and a network namespace of its own: skip\n");
		return 77;
	}
	if (system("ip link add svprobe type veth peer name svprobe2 2>/dev/null") != 0) {
		printf("no veth interfaces here: skip\n");
		return 77;
	}
	sh("ip link del svprobe");
	return child();
}
