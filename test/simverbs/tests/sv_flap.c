/*
 * Link flaps and speed changes (fault.c's link-down / link-up / port-speed),
 * each commanded by another process of the host, as simverbs-ctl or a
 * cluster script would: link-down takes the RoCE port DOWN and its address
 * GIDs away (PORT_ERR, GID_CHANGE); link-up brings them back two slots
 * further on (GID_CHANGE, then PORT_ACTIVE, after which the new table is
 * what ibv_query_gid reads), and a second flap moves them back; port-speed
 * changes what ibv_query_port_speed reports and the link's bandwidth, with
 * IBV_EVENT_DEVICE_SPEED_CHANGE.
 */
#include <poll.h>
#include <sys/wait.h>

#include "svt.h"

#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define SPEED_CHANGE 20	/* IBV_EVENT_DEVICE_SPEED_CHANGE, rdma-core 56+ */

/* Runs cmd in a child process (another process of the host). */
static void control_from_child(const char *cmd)
{
	pid_t pid = fork();

	SVT_CHECK(pid >= 0);
	if (pid == 0)
		_exit(svt_control(cmd) ? 1 : 0);
	SVT_EQ(svt_wait_child(pid), 0);
}

/* The next async event, within 10 s. */
static enum ibv_event_type next_event(struct ibv_context *ctx, int *port)
{
	struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;
	enum ibv_event_type t;

	SVT_EQ(poll(&pfd, 1, 10000), 1);
	SVT_EQ(ibv_get_async_event(ctx, &ev), 0);
	t = ev.event_type;
	*port = ev.element.port_num;
	ibv_ack_async_event(&ev);
	return t;
}

/* Index of the first RoCE v2 GID equal to g, or -1. */
static int find_gid(struct ibv_context *ctx, const union ibv_gid *g)
{
	for (int i = 0; i < 32; i++) {
		struct ibv_gid_entry e;

		if (ibv_query_gid_ex(ctx, 1, (uint32_t)i, &e, 0) == 0 &&
		    e.gid_type == IBV_GID_TYPE_ROCE_V2 && !memcmp(e.gid.raw, g->raw, 16))
			return i;
	}
	return -1;
}

static void check_link_flap(void)
{
	struct ibv_context *ctx = svt_open("simroce0");
	struct ibv_port_attr pa;
	union ibv_gid addr;
	int idx, idx2, port;

	/* the port's first address GID (after the default pair), if it has one */
	if (ibv_query_gid(ctx, 1, 3, &addr) || !(addr.raw[0] | addr.raw[10] | addr.raw[15])) {
		printf("link flap: the RoCE port's netdev has no address: skipped\n");
		ibv_close_device(ctx);
		return;
	}
	idx = find_gid(ctx, &addr);
	SVT_EQ(idx, 3);
	control_from_child("link-down simroce0:1");
	SVT_EQ(next_event(ctx, &port), IBV_EVENT_PORT_ERR);
	SVT_EQ(port, 1);
	SVT_EQ(next_event(ctx, &port), IBV_EVENT_GID_CHANGE);
	SVT_EQ(ibv_query_port(ctx, 1, &pa), 0);
	SVT_EQ(pa.state, IBV_PORT_DOWN);
	SVT_EQ(find_gid(ctx, &addr), -1);
	control_from_child("link-up simroce0 1");
	SVT_EQ(next_event(ctx, &port), IBV_EVENT_GID_CHANGE);
	SVT_EQ(next_event(ctx, &port), IBV_EVENT_PORT_ACTIVE);
	SVT_EQ(ibv_query_port(ctx, 1, &pa), 0);
	SVT_EQ(pa.state, IBV_PORT_ACTIVE);
	idx2 = find_gid(ctx, &addr);
	SVT_EQ(idx2, idx + 2);
	{	/* the old index is an empty slot now */
		struct ibv_gid_entry e;

		SVT_EQ(ibv_query_gid_ex(ctx, 1, (uint32_t)idx, &e, 0), ENODATA);
	}
	control_from_child("link-down simroce0 1");
	control_from_child("link-up simroce0 1");
	for (int i = 0; i < 4; i++)
		next_event(ctx, &port);
	SVT_EQ(find_gid(ctx, &addr), idx);
	SVT_EQ(svt_control("link-down simib0 1"), EINVAL);	/* RoCE only */
	SVT_EQ(ibv_close_device(ctx), 0);
	printf("link flap: port down, address GID %d removed, back at %d, then at %d: ok\n", idx,
	       idx2, idx);
}

/* rdma-core 56+: not in every verbs.h, so looked up (simverbs exports it). */
static int query_speed(struct ibv_context *ctx, uint64_t *speed)
{
	int (*fn)(struct ibv_context *, uint8_t, uint64_t *) =
		(int (*)(struct ibv_context *, uint8_t, uint64_t *))(uintptr_t)
			dlsym(RTLD_DEFAULT, "ibv_query_port_speed");

	SVT_CHECK(fn);
	return fn(ctx, 1, speed);
}

static void check_port_speed(void)
{
	struct ibv_context *ctx = svt_open("simroce0");
	uint64_t speed = 0, before = 0;
	int port;

	SVT_EQ(query_speed(ctx, &before), 0);
	control_from_child("port-speed simroce0:1 50000");
	SVT_EQ(next_event(ctx, &port), SPEED_CHANGE);
	SVT_EQ(port, 1);
	SVT_EQ(query_speed(ctx, &speed), 0);
	SVT_EQ(speed, 500u);	/* units of 100 Mb/s */
	{	/* the link's bandwidth follows: 800 Mb/s = 100 MB/s, 10 MB take >= 100 ms */
		struct svt_ep a, b;
		struct svt_info ai, bi;
		uint64_t t0;

		svt_ep_init(&a, "simroce0", 16, 16, 10000000, ACC);
		svt_ep_init(&b, "simroce0", 16, 16, 10000000, ACC);
		ai = svt_ep_info(&a);
		bi = svt_ep_info(&b);
		svt_connect(&a, &bi, 14, 7);
		svt_connect(&b, &ai, 14, 7);
		control_from_child("port-speed simroce0 1 800");
		SVT_EQ(next_event(ctx, &port), SPEED_CHANGE);
		t0 = svt_now_ns();
		SVT_EQ(svt_post_write(&a, IBV_WR_RDMA_WRITE, (uintptr_t)a.buf, 10000000, a.mr->lkey,
				      bi.addr, bi.rkey, 1, IBV_SEND_SIGNALED, 1), 0);
		SVT_EQ(svt_poll1(a.cq, 20000).status, IBV_WC_SUCCESS);
		SVT_CHECK(svt_now_ns() - t0 >= 100000000ull);
		svt_ep_fini(&a);
		svt_ep_fini(&b);
	}
	control_from_child("port-speed simroce0 1 0");
	SVT_EQ(next_event(ctx, &port), SPEED_CHANGE);
	SVT_EQ(query_speed(ctx, &speed), 0);
	SVT_EQ(speed, before);
	SVT_EQ(svt_control("port-speed simroce0:1 x"), EINVAL);
	SVT_EQ(ibv_close_device(ctx), 0);
	printf("port speed: %llu -> 500 -> 8 (x 100 Mb/s, 10 MB took >= 100 ms) -> %llu, "
	       "DEVICE_SPEED_CHANGE each time: ok\n", (unsigned long long)before,
	       (unsigned long long)before);
}

int main(void)
{
	svt_control_fn_get();
	check_link_flap();
	check_port_speed();
	return 0;
}
