/*
 * Fault injection and realism knobs.  All knobs live in the fabric segment,
 * so a command from any process (simverbs_control(), simverbs-ctl) acts on
 * every process of the fabric.  Commands are documented in README.md.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sv.h"

double sv_timeout_scale(void)
{
	return atomic_load_explicit(&sv_g.fab->knobs.timeout_scale_ppm, memory_order_relaxed) /
	       1e6;
}

static int sv_parse_gid(const char *s, union ibv_gid *g)
{
	struct in_addr a4;

	memset(g, 0, sizeof(*g));
	if (inet_pton(AF_INET6, s, g->raw) == 1)
		return 0;
	if (inet_pton(AF_INET, s, &a4) == 1) {
		g->raw[10] = g->raw[11] = 0xff;
		memcpy(&g->raw[12], &a4, 4);
		return 0;
	}
	return EINVAL;
}

bool sv_gid_unreachable(const union ibv_gid *gid)
{
	struct sv_knobs *k = &sv_g.fab->knobs;
	uint32_t n = atomic_load(&k->nbad_gids);

	for (uint32_t i = 0; i < n && i < SV_MAX_BAD_GIDS; i++)
		if (!memcmp(k->bad_gids[i].raw, gid->raw, 16))
			return true;
	return false;
}

static struct sv_dev_knobs *sv_knobs_dev(const char *name)
{
	struct sv_knobs *k = &sv_g.fab->knobs;
	struct sv_dev_knobs *d = NULL;

	if (!name || !sv_dev_by_name(name))
		return NULL;	/* not a configured device */
	if (sv_lock())
		return NULL;
	for (int i = 0; i < SV_MAX_DEV_KNOBS && !d; i++)
		if (k->dev[i].name[0] && k->dev[i].host == sv_g.host && !strcmp(k->dev[i].name, name))
			d = &k->dev[i];
	for (int i = 0; i < SV_MAX_DEV_KNOBS && !d; i++) {
		if (!k->dev[i].name[0]) {
			k->dev[i].host = sv_g.host;
			snprintf(k->dev[i].name, sizeof(k->dev[i].name), "%s", name);
			d = &k->dev[i];
		}
	}
	sv_unlock();
	return d;
}

/* An async event to every context on the device (of the calling host). */
static void sv_dev_event(const char *dev, enum ibv_event_type type, uint32_t port)
{
	for (int i = 0; i < SV_MAX_CTX; i++) {
		struct sv_ctx_ent *c = &sv_g.fab->ctxs[i];
		int32_t pid = atomic_load(&c->pid);

		if (pid && c->host == sv_g.host && !strcmp(c->dev_name, dev))
			sv_async_post_remote(pid, c->chan_id, type, port);
	}
}

/* Port state change: flag, event to every context on the device, resync. */
static int sv_cmd_port(const char *dev, const char *port, bool down)
{
	struct sv_dev_knobs *d = sv_knobs_dev(dev);
	uint32_t p = port ? (uint32_t)strtoul(port, NULL, 0) : 1;

	if (!d || p < 1 || p >= 32)
		return EINVAL;
	if (down)
		atomic_fetch_or(&d->port_down, 1u << p);
	else
		atomic_fetch_and(&d->port_down, ~(1u << p));
	sv_dev_event(dev, down ? IBV_EVENT_PORT_ERR : IBV_EVENT_PORT_ACTIVE, p);
	sv_host_publish();
	sv_bump_epoch();
	return 0;
}

/* This process's tables now; the others' when they next read a GID or an event. */
static void sv_gid_changed(struct sv_dev_knobs *d, const char *dev, uint32_t p)
{
	struct sv_device *sd = sv_dev_by_name(dev);

	atomic_fetch_add(&d->gid_gen, 1);
	if (sd)
		sv_gid_sync(sd);
	sv_dev_event(dev, IBV_EVENT_GID_CHANGE, p);
}

/*
 * link-down <dev>[:port]: what a netdev going down does to a RoCE port: the
 * port DOWN (as port-down) and its address GIDs removed (GID_CHANGE).
 * link-up: the addresses back, two slots further on than before the last
 * link-down or back where they were (alternately, see gid.c), GID_CHANGE,
 * then the port ACTIVE, so a consumer that looks at the GIDs on PORT_ACTIVE
 * sees the new table.
 */
static int sv_cmd_link(const char *dev, const char *port, bool down)
{
	struct sv_dev_knobs *d = sv_knobs_dev(dev);
	struct sv_device *sd = dev ? sv_dev_by_name(dev) : NULL;
	uint32_t p = port ? (uint32_t)strtoul(port, NULL, 0) : 1;

	if (!d || !sd || p < 1 || p > sd->nports || sd->link_layer != IBV_LINK_LAYER_ETHERNET)
		return EINVAL;
	if (down) {
		if (atomic_fetch_or(&d->addr_gone, 1u << p) & (1u << p))
			return 0; /* already down */
		sv_cmd_port(dev, port, true);
		sv_gid_changed(d, dev, p);
		return 0;
	}
	if (!(atomic_fetch_and(&d->addr_gone, ~(1u << p)) & (1u << p)))
		return 0; /* not down */
	atomic_fetch_xor(&d->addr_moved, 1u << p);
	sv_gid_changed(d, dev, p);
	return sv_cmd_port(dev, port, false);
}

/*
 * port-speed <dev>[:port] <Mb/s>: the speed ibv_query_port_speed reports,
 * the link's emulated bandwidth (bw-cap of Mb/s / 8 MB/s) and
 * IBV_EVENT_DEVICE_SPEED_CHANGE (rdma-core 56+; 20, newer than our headers
 * may be) to every context on the device. 0: the configured speed, no cap.
 */
#define SV_EVENT_DEVICE_SPEED_CHANGE 20
static int sv_cmd_speed(const char *dev, const char *port, const char *mbps)
{
	struct sv_dev_knobs *d = sv_knobs_dev(dev);
	struct sv_device *sd = dev ? sv_dev_by_name(dev) : NULL;
	uint32_t p = port ? (uint32_t)strtoul(port, NULL, 0) : 1;
	char *end = NULL;
	unsigned long v = mbps ? strtoul(mbps, &end, 0) : 0;

	if (!d || !sd || p < 1 || p > sd->nports || !mbps || *end || v > 10000000ul)
		return EINVAL;
	atomic_store(&d->speed_mbps[p - 1], (uint32_t)v);
	atomic_store(&d->bw_mbps, v / 8);
	sv_dev_event(dev, (enum ibv_event_type)SV_EVENT_DEVICE_SPEED_CHANGE, p);
	return 0;
}

static struct sv_shm_qp *sv_qp_by_qpn(const char *s)
{
	uint32_t qpn = s ? (uint32_t)strtoul(s, NULL, 0) : 0;
	struct sv_shm_qp *q = &sv_g.fab->qps[qpn & (SV_MAX_QP_SLOTS - 1)];

	return qpn && atomic_load(&q->qpn) == qpn ? q : NULL;
}

static int sv_cmd_qp(const char *cmd, const char *a1, const char *a2)
{
	struct sv_shm_qp *q = sv_qp_by_qpn(!strcmp(cmd, "qp-err-after") ? a2 : a1);

	if (!strcmp(cmd, "qp-err-after") && a1 && a2 && !q && sv_dev_by_name(a2)) {
		struct sv_dev_knobs *d = sv_knobs_dev(a2);	/* per device */

		if (!d)
			return EINVAL;
		atomic_store(&d->err_after, strtoull(a1, NULL, 0));
		return 0;
	}
	if (!strcmp(cmd, "qp-err-after") && !a2) {
		if (!a1)
			return EINVAL;
		atomic_store(&sv_g.fab->knobs.qp_err_after, strtoull(a1, NULL, 0));
		return 0;
	}
	if (!q)
		return ENOENT;
	if (!strcmp(cmd, "qp-err-after"))
		atomic_store(&q->err_after, (uint32_t)strtoul(a1, NULL, 0));
	else if (!strcmp(cmd, "qp-error"))
		atomic_store(&q->state, IBV_QPS_ERR);
	else if (!strcmp(cmd, "drop-qp"))
		atomic_store(&q->cut, 1);
	else
		atomic_store(&q->cut, 0);	/* heal-qp */
	sv_bump_epoch();
	return 0;
}

/* qp-fail-op <n> <qpn> [ack]: the QP's n-th operation from now fails (see README). */
static int sv_cmd_fail_op(const char *n, const char *qpn, const char *mode)
{
	struct sv_shm_qp *q = sv_qp_by_qpn(qpn);
	unsigned long v = n ? strtoul(n, NULL, 0) : 0;

	if (!q)
		return ENOENT;
	if (v < 1 || v >= SV_FAIL_ACK || (mode && strcmp(mode, "ack")))
		return EINVAL;
	atomic_store(&q->fail_in, (uint32_t)v | (mode ? SV_FAIL_ACK : 0));
	sv_bump_epoch();
	return 0;
}

static int sv_cmd_pid(const char *cmd, const char *a1)
{
	int32_t pid = a1 ? (int32_t)strtol(a1, NULL, 0) : 0;
	int n = 0;

	if (pid <= 0)
		return EINVAL;
	for (int i = 0; i < SV_MAX_QP_SLOTS; i++) {
		struct sv_shm_qp *q = &sv_g.fab->qps[i];

		if (atomic_load(&q->qpn) && q->pid == pid) {
			atomic_store(&q->cut, !strcmp(cmd, "drop-pid"));
			n++;
		}
	}
	sv_bump_epoch();
	return n ? 0 : ENOENT;
}

static int sv_cmd_gid(const char *cmd, const char *a1)
{
	struct sv_knobs *k = &sv_g.fab->knobs;
	union ibv_gid g;
	int rc = 0;

	if (!a1 || sv_parse_gid(a1, &g))
		return EINVAL;
	if (sv_lock())
		return EIO;
	if (!strcmp(cmd, "gid-unreachable")) {
		uint32_t n = atomic_load(&k->nbad_gids);

		if (n >= SV_MAX_BAD_GIDS)
			rc = ENOSPC;
		else if (!sv_gid_unreachable(&g)) {
			k->bad_gids[n] = g;
			atomic_store(&k->nbad_gids, n + 1);
		}
	} else {
		uint32_t n = atomic_load(&k->nbad_gids);

		for (uint32_t i = 0; i < n; i++) {
			if (!memcmp(k->bad_gids[i].raw, g.raw, 16)) {
				k->bad_gids[i] = k->bad_gids[n - 1];
				atomic_store(&k->nbad_gids, n - 1);
				break;
			}
		}
	}
	sv_unlock();
	return rc;
}

static int sv_cmd_knob(const char *cmd, const char *a1, const char *a2)
{
	struct sv_knobs *k = &sv_g.fab->knobs;

	if (!a1)
		return EINVAL;
	if (!strcmp(cmd, "latency")) {
		struct sv_dev_knobs *d = a2 ? sv_knobs_dev(a2) : NULL;

		if (a2 && !d)
			return EINVAL;
		atomic_store(d ? &d->latency_ns : &k->latency_ns, strtoull(a1, NULL, 0));
	} else if (!strcmp(cmd, "bw-cap")) {
		struct sv_dev_knobs *d = sv_knobs_dev(a1);

		if (!d || !a2)
			return EINVAL;
		atomic_store(&d->bw_mbps, strtoull(a2, NULL, 0));
	} else {
		double s = strtod(a1, NULL);

		if (s <= 0 || s > 1000)
			return EINVAL;
		atomic_store(&k->timeout_scale_ppm, (uint32_t)(s * 1e6));
	}
	return 0;
}

/* loss <probability> [dev]: each packet on dev's link (every link) is lost
 * with this probability (0 to 1; loss.c). */
static int sv_cmd_loss(const char *a1, const char *a2)
{
	struct sv_dev_knobs *d = a2 ? sv_knobs_dev(a2) : NULL;
	char *end = NULL;
	double p = a1 ? strtod(a1, &end) : -1;

	if (!a1 || end == a1 || *end || !(p >= 0 && p <= 1) || (a2 && !d))
		return EINVAL;
	atomic_store(d ? &d->loss_ppb : &sv_g.fab->knobs.loss_ppb, (uint32_t)(p * 1e9 + 0.5));
	sv_bump_epoch();	/* QPs look their peer's knobs up again */
	return 0;
}

static int sv_cmd_reset(void)
{
	struct sv_knobs *k = &sv_g.fab->knobs;

	atomic_store(&k->latency_ns, 0);
	atomic_store(&k->qp_err_after, 0);
	atomic_store(&k->nbad_gids, 0);
	atomic_store(&k->loss_ppb, 0);
	for (int i = 0; i < SV_MAX_DEV_KNOBS; i++) {
		atomic_store(&k->dev[i].err_after, 0);
		atomic_store(&k->dev[i].loss_ppb, 0);
	}
	atomic_store(&k->timeout_scale_ppm, (uint32_t)(SV_DEFAULT_TIMEOUT_SCALE * 1e6));
	for (int i = 0; i < SV_MAX_DEV_KNOBS; i++) {
		atomic_store(&k->dev[i].latency_ns, 0);
		atomic_store(&k->dev[i].bw_mbps, 0);
		for (int p = 0; p < SV_MAX_PORTS; p++)
			atomic_store(&k->dev[i].speed_mbps[p], 0);
	}
	return 0;
}

static int sv_cmd_status(char *out, size_t len)
{
	struct sv_fabric *f = sv_g.fab;
	size_t o = 0;

	int nmr = 0;

	for (int i = 0; i < SV_MAX_MR_SLOTS; i++)
		nmr += atomic_load(&f->mrs[i].key) != 0;
	o += (size_t)snprintf(out + o, len - o,
			      "fabric %s epoch %u mrs %d latency_ns %llu qp_err_after %llu "
			      "timeout_scale %.4f unreachable_gids %u loss %.9g\n", sv_g.fabric_name,
			      atomic_load(&f->epoch), nmr,
			      (unsigned long long)atomic_load(&f->knobs.latency_ns),
			      (unsigned long long)atomic_load(&f->knobs.qp_err_after),
			      sv_timeout_scale(), atomic_load(&f->knobs.nbad_gids),
			      atomic_load(&f->knobs.loss_ppb) / 1e9);
	for (int i = 0; i < SV_MAX_DEV_KNOBS && o < len; i++) {
		struct sv_dev_knobs *d = &f->knobs.dev[i];

		if (d->name[0])
			o += (size_t)snprintf(out + o, len - o,
					      "device %s host %u ports_down 0x%x latency_ns %llu bw_mbps %llu "
					      "err_after %llu loss %.9g\n", d->name, d->host,
					      atomic_load(&d->port_down),
					      (unsigned long long)atomic_load(&d->latency_ns),
					      (unsigned long long)atomic_load(&d->bw_mbps),
					      (unsigned long long)atomic_load(&d->err_after),
					      atomic_load(&d->loss_ppb) / 1e9);
	}
	for (int i = 0; i < SV_MAX_PROCS && o < len; i++)
		if (atomic_load(&f->procs[i].pid))
			o += (size_t)snprintf(out + o, len - o, "proc %d\n",
					      atomic_load(&f->procs[i].pid));
	for (int i = 0; i < SV_MAX_QP_SLOTS && o < len; i++) {
		struct sv_shm_qp *q = &f->qps[i];
		uint32_t qpn = atomic_load(&q->qpn);

		if (qpn)
			o += (size_t)snprintf(out + o, len - o,
					      "qp 0x%x pid %d dev %s state %u dest 0x%x%s\n", qpn,
					      q->pid, q->dev_name, atomic_load(&q->state),
					      q->dest_qpn, atomic_load(&q->cut) ? " cut" : "");
	}
	return 0;
}

/* Runs one command line; output (if any) goes to out.  0 or positive errno. */
int sv_control(const char *cmdline, char *out, size_t outlen)
{
	char buf[512], *save = NULL, *cmd, *a1, *a2, *a3, *port;
	unsigned int n = 0;

	if (!cmdline || strlen(cmdline) >= sizeof(buf))
		return EINVAL;
	snprintf(buf, sizeof(buf), "%s", cmdline);
	cmd = strtok_r(buf, " \t\n", &save);
	a1 = strtok_r(NULL, " \t\n", &save);
	a2 = strtok_r(NULL, " \t\n", &save);
	a3 = strtok_r(NULL, " \t\n", &save);
	if (out && outlen)
		out[0] = '\0';
	if (!cmd)
		return EINVAL;
	if (!strcmp(cmd, "port-down") || !strcmp(cmd, "port-up") || !strcmp(cmd, "link-down") ||
	    !strcmp(cmd, "link-up") || !strcmp(cmd, "port-speed")) {
		port = a1 ? strchr(a1, ':') : NULL;
		if (port)
			*port++ = '\0';
		if (!strcmp(cmd, "port-speed"))
			return port ? sv_cmd_speed(a1, port, a2)
				    : a3 ? sv_cmd_speed(a1, a2, a3) : sv_cmd_speed(a1, NULL, a2);
		if (!strcmp(cmd, "link-down") || !strcmp(cmd, "link-up"))
			return sv_cmd_link(a1, port ? port : a2, !strcmp(cmd, "link-down"));
		return sv_cmd_port(a1, port ? port : a2, !strcmp(cmd, "port-down"));
	}
	if (!strcmp(cmd, "qp-error") || !strcmp(cmd, "qp-err-after") ||
	    !strcmp(cmd, "drop-qp") || !strcmp(cmd, "heal-qp"))
		return sv_cmd_qp(cmd, a1, a2);
	if (!strcmp(cmd, "qp-fail-op"))
		return sv_cmd_fail_op(a1, a2, a3);
	if (!strcmp(cmd, "drop-pid") || !strcmp(cmd, "heal-pid"))
		return sv_cmd_pid(cmd, a1);
	if (!strcmp(cmd, "gid-unreachable") || !strcmp(cmd, "gid-reachable"))
		return sv_cmd_gid(cmd, a1);
	if (!strcmp(cmd, "latency") || !strcmp(cmd, "bw-cap") || !strcmp(cmd, "timeout-scale"))
		return sv_cmd_knob(cmd, a1, a2);
	if (!strcmp(cmd, "loss"))
		return sv_cmd_loss(a1, a2);
	if (!strcmp(cmd, "flush-counters")) {
		sv_cnt_flush();
		return 0;
	}
	if (!strcmp(cmd, "reset"))
		return sv_cmd_reset();
	if (!strcmp(cmd, "status"))
		return out ? sv_cmd_status(out, outlen) : 0;
	if (!strcmp(cmd, "objects")) {
		if (out)
			sv_object_counts(out, outlen);
		return 0;
	}
	if (!strcmp(cmd, "leak-report")) {
		if (out)
			sv_leak_report(out, outlen, &n);
		return 0;
	}
	return EINVAL;
}

SV_EXPORT int simverbs_control(const char *cmd);
int simverbs_control(const char *cmd)
{
	char out[16384];
	int rc = sv_host_ready();

	if (rc)
		return rc;
	rc = sv_control(cmd, out, sizeof(out));
	if (!rc && out[0])
		fputs(out, stderr);
	return rc;
}

/* Applies the SIMVERBS_* environment knobs (README.md) at attach. */
void sv_knobs_from_env(void)
{
	static const struct {
		const char *env, *cmd;
	} map[] = {
		{ "SIMVERBS_LATENCY_NS", "latency" },
		{ "SIMVERBS_QP_ERR_AFTER", "qp-err-after" },
		{ "SIMVERBS_TIMEOUT_SCALE", "timeout-scale" },
		{ "SIMVERBS_LOSS", "loss" },
	};
	const char *ctl = getenv("SIMVERBS_CONTROL");
	const char *y = getenv("SIMVERBS_POLL_YIELD");
	char buf[512];

	sv_g.poll_yield_ns = 1000ull * (y && *y ? strtoull(y, NULL, 0) : SV_DEFAULT_POLL_YIELD_US);
	y = getenv("SIMVERBS_TEST_CQ_PUSH_DELAY_US");
	sv_g.cq_push_delay_us = y && *y ? (uint32_t)strtoul(y, NULL, 0) : 0;
	y = getenv("SIMVERBS_TEST_CQ_LOWEST_SLOT");
	sv_g.cq_lowest_slot = y && *y && strcmp(y, "0");
	sv_srccheck_from_env();
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		const char *v = getenv(map[i].env);

		if (!v || !*v)
			continue;
		snprintf(buf, sizeof(buf), "%s %s", map[i].cmd, v);
		if (sv_control(buf, NULL, 0))
			sv_log("ignoring %s=%s", map[i].env, v);
	}
	if (ctl && *ctl) {
		char *copy = strdup(ctl), *save = NULL;

		for (char *c = copy ? strtok_r(copy, ";", &save) : NULL; c;
		     c = strtok_r(NULL, ";", &save))
			if (sv_control(c, NULL, 0))
				sv_log("SIMVERBS_CONTROL: command '%s' failed", c);
		free(copy);
	}
}
