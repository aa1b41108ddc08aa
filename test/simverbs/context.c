/*
 * Devices and contexts: device list, open/close, queries (device, port,
 * GID, P_Key) and asynchronous events.  A context is a struct verbs_context
 * whose ibv_context is its last member (extended ABI, sz set), so verbs.h's
 * inline wrappers find our query_port / query_device_ex and our ops.
 */
#include <endian.h>
#include <net/if.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sv.h"

struct sv_async_msg {
	uint32_t type;
	uint32_t obj;
};

struct sv_context *sv_ctx(struct ibv_context *ibctx)
{
	return (struct sv_context *)((char *)ibctx - offsetof(struct sv_context, vctx.context));
}

static struct sv_device *sv_dev(struct ibv_device *d)
{
	return (struct sv_device *)d;
}

/* Knob entry for dev in the fabric, created on first use. */
struct sv_dev_knobs *sv_dev_knobs(struct sv_device *dev)
{
	struct sv_knobs *k = &sv_g.fab->knobs;
	struct sv_dev_knobs *freek = NULL;

	if (dev->knobs && dev->knobs_fab == sv_g.fab)
		return dev->knobs;
	dev->knobs = NULL;	/* first use, or a fork attached another fabric */
	dev->knobs_fab = sv_g.fab;
	if (sv_lock())
		return NULL;
	for (int i = 0; i < SV_MAX_DEV_KNOBS; i++) {
		if (k->dev[i].name[0] && k->dev[i].host == sv_g.host &&
		    !strcmp(k->dev[i].name, dev->ibv.name)) {
			dev->knobs = &k->dev[i];
			break;
		}
		if (!k->dev[i].name[0] && !freek)
			freek = &k->dev[i];
	}
	if (!dev->knobs && freek) {
		freek->host = sv_g.host;
		snprintf(freek->name, sizeof(freek->name), "%.31s", dev->ibv.name);
		dev->knobs = freek;
	}
	sv_unlock();
	return dev->knobs;
}

SV_EXPORT struct ibv_device **ibv_get_device_list(int *num_devices);
struct ibv_device **ibv_get_device_list(int *num_devices)
{
	struct ibv_device **list;
	int rc = sv_host_ready();

	if (rc) {
		errno = rc;
		return NULL;
	}
	sv_sysfs_create();	/* rebuilt if another process changed it */
	list = calloc((size_t)sv_g.ndevs + 1, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < sv_g.ndevs; i++) {
		list[i] = &sv_g.devs[i].ibv;
		sv_dev_knobs(&sv_g.devs[i]);
	}
	if (num_devices)
		*num_devices = sv_g.ndevs;
	return list;
}

SV_EXPORT void ibv_free_device_list(struct ibv_device **list);
void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

SV_EXPORT const char *ibv_get_device_name(struct ibv_device *device);
const char *ibv_get_device_name(struct ibv_device *device)
{
	return device ? device->name : NULL;
}

SV_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device);
__be64 ibv_get_device_guid(struct ibv_device *device)
{
	return sv_dev(device)->node_guid;
}

SV_EXPORT int ibv_get_device_index(struct ibv_device *device);
int ibv_get_device_index(struct ibv_device *device)
{
	return (int)sv_dev(device)->idx;
}

static int sv_query_port_ex(struct ibv_context *ibctx, uint8_t port, struct ibv_port_attr *a,
			    size_t len);
static int sv_query_device_ex(struct ibv_context *ibctx,
			      const struct ibv_query_device_ex_input *in,
			      struct ibv_device_attr_ex *attr, size_t len);

static int sv_ctx_register(struct sv_context *c)
{
	struct sv_fabric *f = sv_g.fab;
	int rc = EMFILE;

	if (sv_lock())
		return EIO;
	for (int i = 0; i < SV_MAX_CTX; i++) {
		struct sv_ctx_ent *e = &f->ctxs[i];

		if (atomic_load(&e->pid))
			continue;
		e->dev_idx = c->dev->idx;
		e->host = sv_g.host;
		e->chan_id = c->chan_id;
		snprintf(e->dev_name, sizeof(e->dev_name), "%.31s", c->dev->ibv.name);
		atomic_store(&e->pid, sv_g.pid);
		c->ctx_slot = (uint32_t)i;
		rc = 0;
		break;
	}
	sv_unlock();
	return rc;
}

static void sv_ctx_ops(struct sv_context *c)
{
	struct ibv_context_ops *ops = &c->vctx.context.ops;

	ops->poll_cq = sv_poll_cq;
	ops->req_notify_cq = sv_req_notify_cq;
	ops->post_send = sv_post_send;
	ops->post_recv = sv_post_recv;
	ops->post_srq_recv = sv_post_srq_recv;
#ifndef SV_OLD_RDMA_CORE
	c->vctx.query_port = sv_query_port_ex; /* old rdma-core: the compat verb only */
#endif
	c->vctx.query_device_ex = sv_query_device_ex;
	c->vctx.create_qp_ex = sv_create_qp_ex;
	c->vctx.create_cq_ex = sv_create_cq_ex;
	c->vctx.sz = sizeof(struct verbs_context);
}

SV_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device);
struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct sv_context *c;
	int fd, cmd_fd = -1, rc;

	if (!device || (rc = sv_host_ready())) {
		errno = device ? rc : EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->dev = sv_dev(device);
	sv_dev_knobs(c->dev);
	fd = sv_fifo_create(c->fifo, sizeof(c->fifo), "async", &c->chan_id);
	if (fd < 0) {
		rc = errno;
		goto err_free;
	}
	/* a real context's cmd_fd is its open uverbs file; programs dup() it
	 * (ibv_import_device, which answers EOPNOTSUPP here), so it is a valid
	 * descriptor for the context's life: /dev/null stands in */
	cmd_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	rc = cmd_fd < 0 ? errno : sv_ctx_register(c);
	if (rc)
		goto err_close;
	c->vctx.context.device = device;
	c->vctx.context.async_fd = fd;
	c->vctx.context.cmd_fd = cmd_fd;
	c->vctx.context.num_comp_vectors = 1;
	c->vctx.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
	pthread_mutex_init(&c->vctx.context.mutex, NULL);
	sv_ctx_ops(c);
	sv_obj_add(&c->obj, SV_K_CTX);
	return &c->vctx.context;
err_close:
	if (cmd_fd >= 0)
		close(cmd_fd);
	close(fd);
	unlink(c->fifo);
err_free:
	free(c);
	errno = rc;
	return NULL;
}

SV_EXPORT int ibv_close_device(struct ibv_context *ibctx);
int ibv_close_device(struct ibv_context *ibctx)
{
	struct sv_context *c = sv_ctx(ibctx);

	if (sv_g.fab && !sv_lock()) {
		atomic_store(&sv_g.fab->ctxs[c->ctx_slot].pid, 0);
		sv_unlock();
	}
	close(ibctx->async_fd);
	close(ibctx->cmd_fd);
	unlink(c->fifo);
	sv_obj_del(&c->obj);
	free(c);
	return 0;
}

static void sv_fill_device_attr(const struct sv_device *d, struct ibv_device_attr *a)
{
	const struct sv_limits *l = &d->lim;
	bool mlx = d->identity == SV_IDENTITY_MELLANOX;

	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "%s", mlx ? SV_MLX_FW_VER : SV_SOFT_FW_VER);
	a->node_guid = d->node_guid;
	a->sys_image_guid = d->sys_guid;
	a->max_mr_size = l->max_mr_size;
	a->page_size_cap = 0xfffff000;
	a->vendor_id = mlx ? SV_VENDOR_ID : SV_SOFT_VENDOR_ID;
	a->vendor_part_id = mlx ? SV_VENDOR_PART_ID : SV_SOFT_VENDOR_PART_ID;
	a->hw_ver = 0;
	a->max_qp = (int)l->max_qp;
	a->max_qp_wr = (int)l->max_qp_wr;
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT |
			      IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_CHANGE_PHY_PORT;
	a->max_sge = (int)l->max_sge;
	a->max_sge_rd = (int)l->max_sge;
	a->max_cq = (int)l->max_cq;
	a->max_cqe = (int)l->max_cqe;
	a->max_mr = (int)l->max_mr;
	a->max_pd = (int)l->max_pd;
	a->max_qp_rd_atom = (int)l->max_qp_rd_atom;
	a->max_qp_init_rd_atom = (int)l->max_qp_rd_atom;
	a->max_res_rd_atom = (int)l->max_res_rd_atom;
	a->atomic_cap = d->no_atomics ? IBV_ATOMIC_NONE : IBV_ATOMIC_HCA;
	a->max_pkeys = (uint16_t)l->max_pkeys;
	a->max_srq = (int)l->max_srq;
	a->max_srq_wr = (int)l->max_srq_wr;
	a->max_srq_sge = (int)l->max_srq_sge;
	a->local_ca_ack_delay = 16;
	a->phys_port_cnt = (uint8_t)d->nports;
}

SV_EXPORT int ibv_query_device(struct ibv_context *ibctx, struct ibv_device_attr *attr);
int ibv_query_device(struct ibv_context *ibctx, struct ibv_device_attr *attr)
{
	if (!ibctx || !attr)
		return EINVAL;
	sv_fill_device_attr(sv_ctx(ibctx)->dev, attr);
	return 0;
}

static int sv_query_device_ex(struct ibv_context *ibctx,
			      const struct ibv_query_device_ex_input *in,
			      struct ibv_device_attr_ex *attr, size_t len)
{
	struct ibv_device_attr_ex a;

	if (in && in->comp_mask)
		return EINVAL;
	memset(&a, 0, sizeof(a));
	sv_fill_device_attr(sv_ctx(ibctx)->dev, &a.orig_attr);
	a.max_dm_size = 0;
	a.phys_port_cnt_ex = a.orig_attr.phys_port_cnt;	/* rdma-core always fills it */
	memcpy(attr, &a, len < sizeof(a) ? len : sizeof(a));
	return 0;
}

static int sv_fill_port(struct sv_context *c, uint8_t port, struct ibv_port_attr *a)
{
	const struct sv_device *d = c->dev;
	const struct sv_port *pt;
	bool eth = d->link_layer == IBV_LINK_LAYER_ETHERNET;

	if (port < 1 || port > d->nports)
		return EINVAL;
	pt = &d->ports[port - 1];
	sv_gid_sync((struct sv_device *)d);
	memset(a, 0, sizeof(*a));
	a->state = sv_port_state(d, port);
	a->max_mtu = IBV_MTU_4096;
	pthread_mutex_lock(&sv_g.port_lock);
	a->active_mtu = pt->mtu;
	pthread_mutex_unlock(&sv_g.port_lock);
	a->gid_tbl_len = SV_GID_TBL_LEN;
	a->port_cap_flags = eth ? 0x04010000u : 0x2651e848u;
	a->max_msg_sz = (uint32_t)d->lim.max_msg_sz;
	a->pkey_tbl_len = 1;
	a->lid = pt->lid;
	a->sm_lid = eth ? 0 : 1;
	a->max_vl_num = 4;
	a->subnet_timeout = 18;
	a->active_width = pt->width;
	a->active_speed = pt->speed;
	a->phys_state = a->state == IBV_PORT_ACTIVE ? 5 : 3;
	a->link_layer = (uint8_t)d->link_layer;
	return 0;
}

static int sv_query_port_ex(struct ibv_context *ibctx, uint8_t port, struct ibv_port_attr *a,
			    size_t len)
{
	struct ibv_port_attr full;
	int rc = sv_fill_port(sv_ctx(ibctx), port, &full);

	if (!rc)
		memcpy(a, &full, len < sizeof(full) ? len : sizeof(full));
	return rc;
}

#undef ibv_query_port
SV_EXPORT int ibv_query_port(struct ibv_context *ibctx, uint8_t port,
			     struct _compat_ibv_port_attr *attr);
int ibv_query_port(struct ibv_context *ibctx, uint8_t port, struct _compat_ibv_port_attr *attr)
{
	return sv_query_port_ex(ibctx, port, (struct ibv_port_attr *)attr,
				offsetof(struct ibv_port_attr, flags));
}

/* Mb/s of one lane per IB speed code (SDR..NDR). */
static uint32_t sv_lane_mbps(uint8_t speed)
{
	switch (speed) {
	case 1: return 2500;
	case 2: return 5000;
	case 4: case 8: return 10000;
	case 16: return 14000;
	case 32: return 25000;
	case 64: return 50000;
	case 128: return 100000;
	default: return 0;
	}
}

/* rdma-core 56+ (IBVERBS_1.16): the port's speed in units of 100 Mb/s. */
SV_EXPORT int ibv_query_port_speed(struct ibv_context *ibctx, uint8_t port, uint64_t *speed);
int ibv_query_port_speed(struct ibv_context *ibctx, uint8_t port, uint64_t *speed)
{
	const struct sv_device *d = sv_ctx(ibctx)->dev;
	const struct sv_port *pt;
	uint32_t lanes[] = { [1] = 1, [2] = 4, [4] = 8, [8] = 12, [16] = 2 };
	uint64_t mbps;

	if (port < 1 || port > d->nports)
		return EINVAL;
	pt = &d->ports[port - 1];
	mbps = d->knobs ? atomic_load(&d->knobs->speed_mbps[port - 1]) : 0;
	if (!mbps)
		mbps = pt->speed_mbps;
	if (!mbps && pt->width < sizeof(lanes) / sizeof(lanes[0]))
		mbps = (uint64_t)sv_lane_mbps(pt->speed) * lanes[pt->width];
	if (!mbps)
		return EOPNOTSUPP;
	*speed = mbps / 100;
	return 0;
}

/* A copy of one GID entry (the monitor thread may rewrite the table). */
static const struct sv_gid *sv_get_gid(struct ibv_context *ibctx, uint32_t port, uint32_t idx)
{
	static _Thread_local struct sv_gid copy;
	const struct sv_device *d = sv_ctx(ibctx)->dev;

	if (port < 1 || port > d->nports || idx >= SV_GID_TBL_LEN)
		return NULL;
	sv_gid_sync((struct sv_device *)d);
	pthread_mutex_lock(&sv_g.port_lock);
	copy = d->ports[port - 1].gids[idx];
	pthread_mutex_unlock(&sv_g.port_lock);
	return &copy;
}

SV_EXPORT int ibv_query_gid(struct ibv_context *ibctx, uint8_t port, int index,
			    union ibv_gid *gid);
int ibv_query_gid(struct ibv_context *ibctx, uint8_t port, int index, union ibv_gid *gid)
{
	const struct sv_gid *g = index < 0 ? NULL : sv_get_gid(ibctx, port, (uint32_t)index);

	if (!g)
		return -1;	/* rdma-core returns -1 here, not an errno */
	*gid = g->gid;
	return 0;
}

SV_EXPORT int _ibv_query_gid_ex(struct ibv_context *ibctx, uint32_t port, uint32_t index,
				struct ibv_gid_entry *entry, uint32_t flags, size_t size);
int _ibv_query_gid_ex(struct ibv_context *ibctx, uint32_t port, uint32_t index,
		      struct ibv_gid_entry *entry, uint32_t flags, size_t size)
{
	const struct sv_gid *g = sv_get_gid(ibctx, port, index);
	struct ibv_gid_entry e;

	if (flags || size < sizeof(e))
		return EINVAL;
	if (!g)
		return EINVAL;
	if (!g->valid)
		return ENODATA;
	memset(&e, 0, sizeof(e));
	e.gid = g->gid;
	e.gid_index = index;
	e.port_num = port;
	e.gid_type = g->type;
	e.ndev_ifindex = g->ndev[0] ? if_nametoindex(g->ndev) : 0;
	memcpy(entry, &e, sizeof(e));
	return 0;
}

SV_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *ibctx, struct ibv_gid_entry *entries,
				       size_t max, uint32_t flags, size_t size);
ssize_t _ibv_query_gid_table(struct ibv_context *ibctx, struct ibv_gid_entry *entries,
			     size_t max, uint32_t flags, size_t size)
{
	const struct sv_device *d = sv_ctx(ibctx)->dev;
	size_t n = 0;

	if (flags || size < sizeof(*entries))
		return -EINVAL;
	for (uint32_t p = 1; p <= d->nports; p++) {
		for (uint32_t i = 0; i < SV_GID_TBL_LEN; i++) {
			if (!sv_get_gid(ibctx, p, i)->valid)
				continue;
			if (n >= max)
				return -EINVAL;
			_ibv_query_gid_ex(ibctx, p, i, (struct ibv_gid_entry *)
					  ((char *)entries + n * size), 0, sizeof(*entries));
			n++;
		}
	}
	return (ssize_t)n;
}

SV_EXPORT int ibv_query_gid_type(struct ibv_context *ibctx, uint8_t port, unsigned int index,
				 enum ibv_gid_type_sysfs *type);
int ibv_query_gid_type(struct ibv_context *ibctx, uint8_t port, unsigned int index,
		       enum ibv_gid_type_sysfs *type)
{
	const struct sv_gid *g = sv_get_gid(ibctx, port, index);

	if (!g || !g->valid)
		return -1;
	*type = g->type == IBV_GID_TYPE_ROCE_V2 ? IBV_GID_TYPE_SYSFS_ROCE_V2
						: IBV_GID_TYPE_SYSFS_IB_ROCE_V1;
	return 0;
}

SV_EXPORT int ibv_query_pkey(struct ibv_context *ibctx, uint8_t port, int index, __be16 *pkey);
int ibv_query_pkey(struct ibv_context *ibctx, uint8_t port, int index, __be16 *pkey)
{
	if (port < 1 || port > sv_ctx(ibctx)->dev->nports || index != 0)
		return -1;
	*pkey = htobe16(0xffff);
	return 0;
}

SV_EXPORT int ibv_get_pkey_index(struct ibv_context *ibctx, uint8_t port, __be16 pkey);
int ibv_get_pkey_index(struct ibv_context *ibctx, uint8_t port, __be16 pkey)
{
	if (port < 1 || port > sv_ctx(ibctx)->dev->nports)
		return -EINVAL;
	return (be16toh(pkey) & 0x7fff) == 0x7fff ? 0 : -ENOENT;
}

/* ------------------------------------------------------ async events */

void sv_async_post_remote(int32_t pid, uint32_t chan_id, enum ibv_event_type type, uint32_t obj)
{
	struct sv_async_msg m = { .type = (uint32_t)type, .obj = obj };

	sv_fifo_send(pid, "async", chan_id, &m, sizeof(m));
}

void sv_async_post(struct sv_context *ctx, enum ibv_event_type type, uint32_t obj)
{
	sv_async_post_remote(sv_g.pid, ctx->chan_id, type, obj);
}

/* Resolves the object of an event and counts it as reported, under sv_g.lock
 * so that a concurrent destroy either sees the count or unlinked the object
 * before (then the event is dropped, as the kernel drops events of destroyed
 * objects). */
static bool sv_async_resolve(struct ibv_async_event *ev, const struct sv_async_msg *m)
{
	bool found = true;

	pthread_mutex_lock(&sv_g.lock);
	switch (m->type) {
	case IBV_EVENT_CQ_ERR: {
		struct sv_cq *cq = sv_cq_by_ev_id(m->obj);

		ev->element.cq = cq ? &cq->ibv : NULL;
		found = cq != NULL;
		if (found)
			cq->async_events_reported++;
		break;
	}
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED: {
		struct sv_qp *qp = sv_g.qp_by_slot[m->obj & (SV_MAX_QP_SLOTS - 1)];

		found = qp && qp->ibv.qp_num == m->obj;
		ev->element.qp = found ? &qp->ibv : NULL;
		if (found)
			qp->events_reported++;
		break;
	}
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED: {
		struct sv_srq *s = sv_srq_by_id(m->obj);

		found = s != NULL;
		ev->element.srq = found ? &s->ibv : NULL;
		if (found)
			s->events_reported++;
		break;
	}
	default:
		ev->element.port_num = (int)m->obj;
		break;
	}
	pthread_mutex_unlock(&sv_g.lock);
	return found;
}

SV_EXPORT int ibv_get_async_event(struct ibv_context *ibctx, struct ibv_async_event *event);
int ibv_get_async_event(struct ibv_context *ibctx, struct ibv_async_event *event)
{
	struct sv_async_msg m;

	for (;;) {
		ssize_t n = read(ibctx->async_fd, &m, sizeof(m));

		if (n != (ssize_t)sizeof(m))
			return -1;
		memset(event, 0, sizeof(*event));
		event->event_type = (enum ibv_event_type)m.type;
		if (m.type == IBV_EVENT_GID_CHANGE || m.type == IBV_EVENT_PORT_ACTIVE ||
		    m.type == IBV_EVENT_PORT_ERR)
			sv_gid_sync(sv_ctx(ibctx)->dev); /* a link-down/up: the table first */
		if (sv_async_resolve(event, &m))
			return 0;
	}
}

static void sv_event_done(pthread_mutex_t *mu, pthread_cond_t *cond, uint32_t *completed)
{
	pthread_mutex_lock(mu);
	++*completed;
	pthread_cond_broadcast(cond);
	pthread_mutex_unlock(mu);
}

/* Releases an event from ibv_get_async_event; a destroy of its QP or CQ
 * waits for this (rdma-core semantics). */
SV_EXPORT void ibv_ack_async_event(struct ibv_async_event *event);
void ibv_ack_async_event(struct ibv_async_event *event)
{
	switch (event->event_type) {
	case IBV_EVENT_CQ_ERR: {
		struct ibv_cq *cq = event->element.cq;

		sv_event_done(&cq->mutex, &cq->cond, &cq->async_events_completed);
		return;
	}
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED: {
		struct ibv_qp *qp = event->element.qp;

		sv_event_done(&qp->mutex, &qp->cond, &qp->events_completed);
		return;
	}
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED: {
		struct ibv_srq *srq = event->element.srq;

		sv_event_done(&srq->mutex, &srq->cond, &srq->events_completed);
		return;
	}
	default:
		return;
	}
}

/* Destroy side: blocks until every event handed out for the object has been
 * acknowledged (*completed == reported, and *completed2 == reported2 when
 * completed2 is not NULL).  The object is already unlinked, so the reported
 * counts no longer move. */
void sv_events_wait(pthread_mutex_t *mu, pthread_cond_t *cond, const uint32_t *completed,
		    uint32_t reported, const uint32_t *completed2, uint32_t reported2)
{
	pthread_mutex_lock(mu);
	while (*completed != reported || (completed2 && *completed2 != reported2))
		pthread_cond_wait(cond, mu);
	pthread_mutex_unlock(mu);
}
