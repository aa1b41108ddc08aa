/*
 * Simulated hosts.  A host is the set of processes of one network namespace
 * (or of one SIMVERBS_HOST name).  Each host has its own instances of the
 * configured devices: GUIDs and InfiniBand LIDs offset by the host's index in
 * the fabric (unique fabric-wide, as a subnet manager assigns them), RoCE
 * ports bound to a netdev of the host (state, MTU and GID table follow it),
 * and its own sysfs tree.  The host table in the fabric publishes every port
 * (state, LID, GIDs) so that address vectors can be resolved from any host.
 *
 * A netlink monitor thread (one per process with a netdev-bound port)
 * follows address, link and MTU changes: it updates the local copy and the
 * published port, raises IBV_EVENT_GID_CHANGE / PORT_ERR / PORT_ACTIVE to
 * this process's contexts, and bumps the fabric epoch so QPs on a port that
 * went down move to error.
 */
#include <endian.h>
#include <errno.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sv.h"

#ifndef IFF_LOWER_UP
#define IFF_LOWER_UP 0x10000	/* linux/if.h: carrier */
#endif

#define SV_NL_MAX_LINKS 256
#define SV_NL_MAX_ADDRS 1024

static pthread_mutex_t sv_host_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t sv_refresh_mu = PTHREAD_MUTEX_INITIALIZER;	/* refresh's buffers */

/* fork: the child has no monitor thread, and no other thread holds these */
void sv_host_atfork_child(void)
{
	pthread_mutex_init(&sv_host_mu, NULL);
	pthread_mutex_init(&sv_refresh_mu, NULL);
}
static struct sv_device *sv_host_devs;	/* the device array the offsets went into */

static void sv_host_name(char *buf, size_t len)
{
	const char *h = getenv("SIMVERBS_HOST");
	struct stat st;

	if (h && *h)
		snprintf(buf, len, "%s", h);
	else if (!stat("/proc/self/ns/net", &st))
		snprintf(buf, len, "netns-%llu", (unsigned long long)st.st_ino);
	else
		snprintf(buf, len, "localhost");
}

/* Finds or allocates this host's entry (SIMVERBS_HOST_INDEX: that one, so a
 * host keeps its GUIDs and LIDs across fabric lifetimes).  0 or an errno. */
static int sv_host_register(void)
{
	struct sv_fabric *f = sv_g.fab;
	const char *want = getenv("SIMVERBS_HOST_INDEX");
	long wi = want && *want ? strtol(want, NULL, 0) : -1;
	int rc = ENOSPC;

	sv_host_name(sv_g.host_name, sizeof(sv_g.host_name));
	if (wi >= SV_MAX_HOSTS) {
		sv_log("SIMVERBS_HOST_INDEX=%s: at most %d hosts", want, SV_MAX_HOSTS - 1);
		return EINVAL;
	}
	if (sv_lock())
		return EIO;
	for (uint32_t i = 0; i < SV_MAX_HOSTS && rc == ENOSPC; i++) {
		struct sv_shm_host *h = &f->hosts[i];
		bool used = atomic_load(&h->used);

		if (used && !strcmp(h->name, sv_g.host_name)) {
			rc = wi < 0 || (uint32_t)wi == i ? 0 : EBUSY;
		} else if (wi >= 0 && (uint32_t)wi != i) {
			continue;
		} else if (used) {
			rc = wi >= 0 ? EBUSY : ENOSPC;	/* the wanted index is someone else's */
			continue;
		} else {
			snprintf(h->name, sizeof(h->name), "%s", sv_g.host_name);
			atomic_store(&h->used, 1);
			rc = 0;
		}
		if (!rc)
			sv_g.host = i;
	}
	sv_unlock();
	if (rc == ENOSPC)
		sv_log("fabric %s: more than %d hosts", sv_g.fabric_name, SV_MAX_HOSTS);
	if (rc == EBUSY)
		sv_log("host %s: SIMVERBS_HOST_INDEX=%ld is another host's (or %s has another index)",
		       sv_g.host_name, wi, sv_g.host_name);
	return rc;
}

/* Host h's GUIDs are the configured ones + h << 8, its LIDs the configured
 * ones + h * SV_LIDS_PER_HOST (host 0 keeps the single-host values). */
static void sv_host_offsets(void)
{
	uint64_t h = sv_g.host;

	for (int i = 0; i < sv_g.ndevs; i++) {
		struct sv_device *d = &sv_g.devs[i];

		d->node_guid = htobe64(be64toh(d->node_guid) + (h << 8));
		d->sys_guid = d->node_guid;
		for (uint32_t p = 0; p < d->nports; p++) {
			struct sv_port *pt = &d->ports[p];

			if (d->link_layer != IBV_LINK_LAYER_INFINIBAND)
				continue;
			pt->lid = (uint16_t)(pt->lid + h * SV_LIDS_PER_HOST);
			if (pt->flid)
				pt->flid = (uint16_t)(pt->flid + h * SV_LIDS_PER_HOST);
		}
		d->sh = &sv_g.fab->hosts[sv_g.host].devs[i];
	}
}

static bool sv_link_has_addr(const struct sv_nl_link *l, const struct sv_nl_addr *a, int na)
{
	for (int i = 0; i < na; i++)
		if (a[i].ifindex == l->ifindex)
			return true;
	return false;
}

/* The default binding: the first non-loopback interface that is up with an
 * address, else the first non-loopback one; only on a host that has no other
 * interface at all (a container without a network) the loopback one, so the
 * single-host default still has a RoCE port there. */
static const struct sv_nl_link *sv_default_netdev(const struct sv_nl_link *l, int n,
						  const struct sv_nl_addr *a, int na)
{
	const struct sv_nl_link *first = NULL, *lo = NULL;

	for (int i = 0; i < n; i++) {
		if (l[i].flags & IFF_LOOPBACK) {
			lo = lo ? lo : &l[i];
			continue;
		}
		if (!first)
			first = &l[i];
		if ((l[i].flags & IFF_UP) && (l[i].flags & IFF_LOWER_UP) &&
		    sv_link_has_addr(&l[i], a, na))
			return &l[i];
	}
	return first ? first : lo;
}

/* Largest IB MTU that fits the netdev's MTU with RoCE v2 headers (the
 * kernel's iboe_get_mtu). */
static uint32_t sv_iboe_mtu(uint32_t netdev_mtu)
{
	int m = (int)netdev_mtu - 96;

	for (uint32_t e = 5; e >= 1; e--)
		if (m >= (128 << e))
			return e;
	return 0;
}

struct sv_port_change {
	bool gids, state;
};

/* Recomputes one port from the namespace's links and addresses.  Caller
 * holds sv_g.port_lock. */
static struct sv_port_change sv_port_update(struct sv_device *d, struct sv_port *pt,
					    const struct sv_nl_link *l, int n,
					    const struct sv_nl_addr *a, int na)
{
	bool eth = d->link_layer == IBV_LINK_LAYER_ETHERNET;
	const struct sv_nl_link *nd = NULL;
	struct sv_port_change c = { false, false };
	struct sv_gid old[SV_GID_TBL_LEN];
	uint32_t oldn = pt->ngids, link = eth ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;

	if (pt->netdev[0]) {
		for (int i = 0; i < n; i++)
			if (!strcmp(l[i].name, pt->netdev))
				nd = &l[i];
	} else if (eth) {
		nd = sv_default_netdev(l, n, a, na);
	}
	pt->ifindex = nd ? nd->ifindex : 0;
	snprintf(pt->bound, sizeof(pt->bound), "%s", nd ? nd->name : "");
	if (nd) {
		memcpy(pt->mac, nd->mac, 6);
		link = (nd->flags & IFF_UP) && (nd->flags & IFF_LOWER_UP) ? IBV_PORT_ACTIVE
									 : IBV_PORT_DOWN;
	} else if (pt->netdev[0]) {
		link = IBV_PORT_DOWN;	/* the configured netdev does not exist */
	}
	pt->mtu = pt->cfg_mtu;
	if (eth && nd && sv_iboe_mtu(nd->mtu) < pt->mtu)
		pt->mtu = sv_iboe_mtu(nd->mtu) ? sv_iboe_mtu(nd->mtu) : IBV_MTU_256;
	memcpy(old, pt->gids, sizeof(old));
	sv_build_gid_table(d, pt, l, n, a, na);
	c.gids = oldn != pt->ngids || memcmp(old, pt->gids, sizeof(old));
	c.state = atomic_exchange(&pt->link, link) != link;
	return c;
}

static void sv_publish_port(struct sv_shm_port *s, const struct sv_device *d, uint32_t p)
{
	const struct sv_port *pt = &d->ports[p];

	atomic_fetch_add_explicit(&s->seq, 1, memory_order_acq_rel);
	s->mtu = pt->mtu;
	s->lid = pt->lid;
	memcpy(s->mac, pt->mac, 6);
	s->subnet = pt->subnet;
	s->flid = pt->flid;
	memcpy(s->gids, pt->gids, sizeof(s->gids));
	s->ngids = pt->ngids;
	atomic_fetch_add_explicit(&s->seq, 1, memory_order_release);
	atomic_store(&s->state, sv_port_state(d, p + 1));
}

/* Writes this host's devices into the fabric's host table. */
void sv_host_publish(void)
{
	struct sv_shm_host *h = &sv_g.fab->hosts[sv_g.host];

	if (sv_lock())
		return;
	pthread_mutex_lock(&sv_g.port_lock);
	h->ndevs = (uint32_t)sv_g.ndevs;
	for (int i = 0; i < sv_g.ndevs; i++) {
		const struct sv_device *d = &sv_g.devs[i];
		struct sv_shm_dev *sd = &h->devs[i];

		snprintf(sd->name, sizeof(sd->name), "%s", d->ibv.name);
		sd->link_layer = d->link_layer;
		sd->nports = d->nports;
		for (uint32_t p = 0; p < d->nports; p++)
			sv_publish_port(&sd->ports[p], d, p);
	}
	pthread_mutex_unlock(&sv_g.port_lock);
	sv_unlock();
}

static void sv_post_local(const struct sv_device *d, enum ibv_event_type type, uint32_t port)
{
	const struct sv_obj *head = &sv_g.objs[SV_K_CTX];

	pthread_mutex_lock(&sv_g.lock);
	for (const struct sv_obj *o = head->next; o && o != head; o = o->next) {
		struct sv_context *c = (struct sv_context *)((char *)o -
							     offsetof(struct sv_context, obj));

		if (c->dev == d)
			sv_async_post(c, type, port);
	}
	pthread_mutex_unlock(&sv_g.lock);
}

/* Re-reads the host's netdevs; with events, tells this process's contexts
 * what changed. */
void sv_host_refresh(bool events)
{
	/* static, not heap: the monitor thread allocating would grow the
	 * process's mappings at a time the application does not expect */
	static struct sv_nl_link l[SV_NL_MAX_LINKS];
	static struct sv_nl_addr a[SV_NL_MAX_ADDRS];
	struct sv_port_change ch[SV_MAX_DEVICES][SV_MAX_PORTS];
	bool any_state = false, any = false;
	int n, na;

	pthread_mutex_lock(&sv_refresh_mu);
	n = sv_nl_links(l, SV_NL_MAX_LINKS);
	na = sv_nl_addrs(a, SV_NL_MAX_ADDRS);
	if (n < 0)
		n = 0;
	if (na < 0)
		na = 0;
	pthread_mutex_lock(&sv_g.port_lock);
	for (int i = 0; i < sv_g.ndevs; i++) {
		for (uint32_t p = 0; p < sv_g.devs[i].nports; p++) {
			ch[i][p] = sv_port_update(&sv_g.devs[i], &sv_g.devs[i].ports[p], l, n, a, na);
			any_state |= ch[i][p].state;
			any |= ch[i][p].state || ch[i][p].gids;
		}
	}
	pthread_mutex_unlock(&sv_g.port_lock);
	pthread_mutex_unlock(&sv_refresh_mu);
	if (!events || !any)
		return;
	sv_host_publish();
	sv_sysfs_ports();
	for (int i = 0; i < sv_g.ndevs; i++) {
		for (uint32_t p = 0; p < sv_g.devs[i].nports; p++) {
			if (ch[i][p].state)
				sv_post_local(&sv_g.devs[i], atomic_load(&sv_g.devs[i].ports[p].link) ==
					      IBV_PORT_ACTIVE ? IBV_EVENT_PORT_ACTIVE
							      : IBV_EVENT_PORT_ERR, p + 1);
			if (ch[i][p].gids)
				sv_post_local(&sv_g.devs[i], IBV_EVENT_GID_CHANGE, p + 1);
		}
	}
	if (any_state)
		sv_bump_epoch();
}

void sv_gid_sync(struct sv_device *d)
{
	uint32_t gen;

	if (!d->knobs)
		return;
	gen = atomic_load(&d->knobs->gid_gen);
	if (atomic_exchange(&d->gid_gen_seen, gen) == gen)
		return;
	sv_host_refresh(false);
	sv_host_publish();
	sv_sysfs_ports();
}

static void *sv_monitor(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[8192];

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (poll(&p, 1, -1) < 0)
			continue;
		/* drain the burst, then look once */
		while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0 || errno == ENOBUFS)
			;
		if (sv_g.exiting || sv_g.monitor_pid != getpid())
			break;
		sv_host_refresh(true);
	}
	close(fd);
	return NULL;
}

static void sv_monitor_start(void)
{
	pthread_attr_t at;
	pthread_t t;
	int fd;

	if (sv_g.monitor_pid == getpid())
		return;
	fd = sv_nl_monitor_open();
	if (fd < 0)
		return;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	sv_g.monitor_pid = getpid();
	if (pthread_create(&t, &at, sv_monitor, (void *)(intptr_t)fd)) {
		sv_g.monitor_pid = 0;
		close(fd);
	}
	pthread_attr_destroy(&at);
}

static bool sv_any_netdev(void)
{
	for (int i = 0; i < sv_g.ndevs; i++)
		for (uint32_t p = 0; p < sv_g.devs[i].nports; p++)
			if (sv_g.devs[i].link_layer == IBV_LINK_LAYER_ETHERNET ||
			    sv_g.devs[i].ports[p].netdev[0])
				return true;
	return false;
}

static void sv_sysfs_root(void)
{
	const char *s = getenv("SIMVERBS_SYSFS");
	char name[64];

	if (s && *s) {
		snprintf(sv_g.sysfs_root, sizeof(sv_g.sysfs_root), "%s", s);
		return;
	}
	if (sv_g.host == 0) {
		snprintf(sv_g.sysfs_root, sizeof(sv_g.sysfs_root), "%s/sys", sv_g.dir);
		return;
	}
	snprintf(name, sizeof(name), "%s", sv_g.host_name);
	for (char *c = name; *c; c++)
		if (*c == '/' || *c == ' ')
			*c = '_';
	snprintf(sv_g.sysfs_root, sizeof(sv_g.sysfs_root), "%s/hosts/%s/sys", sv_g.dir, name);
}

/* Devices configured, fabric attached, host registered, ports bound and
 * published, sysfs written: what every verb needs before it runs.  Once per
 * process (again after fork).  0 or a positive errno. */
int sv_host_ready(void)
{
	int rc = sv_devices_init();

	if (!rc)
		rc = sv_attach();
	if (rc)
		return rc;
	pthread_mutex_lock(&sv_host_mu);
	if (sv_g.host_pid == getpid() && sv_host_devs == sv_g.devs)
		goto out;
	rc = sv_host_register();
	if (rc)
		goto out;
	if (sv_host_devs != sv_g.devs)
		sv_host_offsets();
	sv_host_devs = sv_g.devs;
	for (int i = 0; i < sv_g.ndevs; i++)
		sv_dev_knobs(&sv_g.devs[i]);
	sv_knobs_from_env();
	sv_host_refresh(false);
	sv_host_publish();
	sv_sysfs_root();
	sv_sysfs_create();
	sv_g.host_pid = getpid();
	sv_cnt_flush();	/* the counter files, zero, before any traffic */
	if (sv_any_netdev())
		sv_monitor_start();
out:
	pthread_mutex_unlock(&sv_host_mu);
	return rc;
}

uint32_t sv_port_state(const struct sv_device *d, uint32_t port)
{
	if (d->knobs && (atomic_load(&d->knobs->port_down) & (1u << port)))
		return IBV_PORT_DOWN;
	if (d->ports[port - 1].state != IBV_PORT_ACTIVE)
		return d->ports[port - 1].state;
	return atomic_load(&d->ports[port - 1].link);
}

struct sv_shm_port *sv_shm_port_of(uint32_t host, uint32_t dev, uint32_t port)
{
	if (host >= SV_MAX_HOSTS || dev >= SV_MAX_DEVICES || port < 1 || port > SV_MAX_PORTS)
		return NULL;
	return &sv_g.fab->hosts[host].devs[dev].ports[port - 1];
}

/* A consistent copy of a published port. */
void sv_shm_port_read(const struct sv_shm_port *p, struct sv_shm_port *out)
{
	for (;;) {
		uint32_t s = atomic_load_explicit(&p->seq, memory_order_acquire);

		if (s & 1)
			continue;
		memcpy((char *)out + sizeof(out->seq), (const char *)p + sizeof(p->seq),
		       sizeof(*out) - sizeof(out->seq));
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&p->seq, memory_order_relaxed) == s) {
			atomic_store_explicit(&out->seq, s, memory_order_relaxed);
			return;
		}
	}
}
