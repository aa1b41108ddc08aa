/*
 * qp.c - verbs resources of a send/recv comm: PD references, CQs, control
 * region MRs, RC QPs and their INIT -> RTR -> RTS bring-up, the GDR flush
 * loopback QPs, the connect-time path probe, the request pool, the last
 * step of set-up (nv_*_comm_ready) and close.
 *
 * Ownership: everything here belongs to one comm and is released by
 * nv_comm_destroy() in reverse order (QPs -> MRs -> CQs -> PD reference),
 * which tolerates a half-built comm and can be called twice.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "census.h"
#include "comm.h"
#include "event.h"
#include "ibv.h"
#include "mr.h"
#include "nv_api.h"
#include "param.h"
#include "select.h"

static size_t nv_comm_ctrl_size(int type)
{
	return type == NV_COMM_SEND ? sizeof(struct nv_send_ctrl) : sizeof(struct nv_recv_ctrl);
}

static nv_status_t nv_comm_dev_open(struct nv_comm *c, int i, int phys)
{
	struct nv_comm_dev *d = &c->dev[i];
	nv_status_t st;

	d->dev = nv_dev_get(phys);
	if (!d->dev) {
		NV_WARN("device %d does not exist (%d devices)", phys, nv_dev_count());
		return NV_ERR_INVALID;
	}
	d->hca = d->dev->hca;
	st = nv_dev_gid(d->dev, &d->gid);
	if (st != NV_OK)
		return st;
	if (d->dev->link_layer == IBV_LINK_LAYER_ETHERNET && d->gid.index < 0) {
		NV_WARN("%s:%u has no usable RoCE GID (%s); check NCCL_IB_GID_INDEX, "
			"NCCL_IB_ADDR_FAMILY and NCCL_IB_ADDR_RANGE", d->hca->name, d->dev->port,
			d->gid.why);
		return NV_ERR_USAGE;
	}
	d->sink_link.port = (uint8_t)d->dev->port;
	nv_hca_sink_attach(d->hca, &d->sink_link, &c->sink);
	st = nv_hca_pd_get(d->hca, &d->pd);
	if (st != NV_OK)
		return st;
	return nv_mr_acquire(d->hca, c->ctrl, nv_comm_ctrl_size(c->type), NV_MEM_HOST, 0, -1,
			     NV_MR_CTRL, &d->ctrl_mr);
}

static void nv_comm_reqs_init(struct nv_comm *c)
{
	int i;

	for (i = 0; i < c->nreq; i++) {
		c->reqs[i].comm = c;
		c->reqs[i].idx = (uint16_t)i;
		c->reqs[i].type = NV_REQ_FREE;
		c->reqs[i].t_seq = UINT64_MAX; /* not stamped (comm.h) */
		c->reqs[i].next_free = (int16_t)(i + 1 < c->nreq ? i + 1 : -1);
	}
	c->free_head = c->nreq > 0 ? 0 : -1;
}

nv_status_t nv_comm_init(struct nv_comm *c, int type, int vdev, int nreq)
{
	const struct nv_vdev *vd = nv_vdev_get(vdev);
	nv_status_t st;
	int i;

	c->type = type;
	c->error = NV_OK;
	if (!vd) {
		NV_WARN("network device %d does not exist (%d devices)", vdev, nv_vdev_count());
		return NV_ERR_INVALID;
	}
	if (posix_memalign(&c->ctrl, 4096, nv_comm_ctrl_size(type))) {
		c->ctrl = NULL;
		NV_WARN("cannot allocate the %zu-byte control region of a comm on %s",
			nv_comm_ctrl_size(type), vd->name);
		return NV_ERR_SYSTEM;
	}
	memset(c->ctrl, 0, nv_comm_ctrl_size(type));
	c->nreq = nreq;
	c->reqs = calloc((size_t)nreq, sizeof(*c->reqs));
	if (!c->reqs) {
		NV_WARN("cannot allocate %d requests for a comm on %s", nreq, vd->name);
		return NV_ERR_SYSTEM;
	}
	nv_comm_reqs_init(c);
	for (i = 0; i < vd->ndevs; i++) {
		c->ndevs = i + 1;
		st = nv_comm_dev_open(c, i, vd->devs[i]);
		if (st != NV_OK)
			return st; /* caller runs nv_comm_destroy() */
	}
	return NV_OK;
}

static nv_status_t nv_comm_create_cqs(struct nv_comm *c, int nqps)
{
	char why[256];
	nv_status_t st;
	int i;

	for (i = 0; i < c->ndevs; i++) {
		struct nv_comm_dev *d = &c->dev[i];
		int nqp = nqps / c->ndevs + (i < nqps % c->ndevs); /* QP j is on device j % ndevs */

		if (nv_cq_plan(c->type, nqp, d->hca->attr.max_cqe, d->hca->attr.max_qp_wr, &d->plan,
			       why, sizeof(why))) {
			NV_WARN("%s:%u: %s", d->hca->name, d->dev->port, why);
			return NV_ERR_SYSTEM;
		}
		if (d->plan.reduced)
			NV_INFO(NV_SUB_INIT | NV_SUB_NET, "%s:%u: max_cqe %d: %d QP(s) get %d "
				"send / %d receive WRs (flush %d) so that their %d-entry CQ "
				"cannot overrun",
				d->hca->name, d->dev->port, d->hca->attr.max_cqe, nqp,
				d->plan.send_wr, d->plan.recv_wr, d->plan.flush_wr, d->plan.depth);
		st = nv_ibv_create_cq(d->hca->ctx, d->plan.depth, &c->sink, &d->cq);
		if (st != NV_OK) {
			nv_census_explain(d->hca, NV_CEN_CQ, errno);
			return st;
		}
		nv_census_add(NV_CEN_CQ, 1);
		if (i == 0)
			nv_census_add(c->type == NV_COMM_SEND ? NV_CEN_SEND : NV_CEN_RECV, 1);
	}
	return NV_OK;
}

/* RESET -> INIT on the device's port with the given remote access rights. */
static nv_status_t nv_comm_qp_init(struct nv_comm_dev *d, struct ibv_qp *qp, int access)
{
	struct ibv_qp_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_INIT;
	attr.pkey_index = (uint16_t)nv_param_int(NV_PARAM_IB_PKEY);
	attr.port_num = d->dev->port;
	attr.qp_access_flags = access;
	return nv_ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
						   IBV_QP_ACCESS_FLAGS);
}

static int nv_comm_data_access(const struct nv_comm *c)
{
	return c->type == NV_COMM_SEND ? IBV_ACCESS_REMOTE_WRITE
				       : IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
}

/* max_inline: bytes of inline data wanted (0 none); *got_inline: what the device granted.
 * send_sge: scatter entries per send WR (2: an eager sender's data + trailer). */
static nv_status_t nv_comm_qp_create(struct nv_comm *c, struct nv_comm_dev *d, int send_wr,
				     int recv_wr, int access, int max_inline, int *got_inline,
				     int send_sge, struct ibv_qp **qp)
{
	struct ibv_qp_init_attr init;
	nv_status_t st;

	memset(&init, 0, sizeof(init));
	init.qp_context = &c->sink;
	init.send_cq = d->cq;
	init.recv_cq = d->cq;
	init.qp_type = IBV_QPT_RC;
	init.cap.max_send_wr = (uint32_t)send_wr;
	init.cap.max_recv_wr = (uint32_t)recv_wr;
	init.cap.max_send_sge = (uint32_t)send_sge;
	init.cap.max_recv_sge = 1;
	init.cap.max_inline_data = (uint32_t)max_inline;
	st = nv_ibv_create_qp(d->pd, &init, qp);
	if (st != NV_OK) {
		nv_census_explain(d->hca, NV_CEN_QP, errno);
		return st;
	}
	nv_census_add(NV_CEN_QP, 1);
	if (got_inline)
		*got_inline = (int)init.cap.max_inline_data;
	return nv_comm_qp_init(d, *qp, access);
}

nv_status_t nv_comm_create_qps(struct nv_comm *c, int nqps)
{
	int send = c->type == NV_COMM_SEND;
	int use_inline = (int)nv_param_int(NV_PARAM_IB_USE_INLINE);
	nv_status_t st;
	int i;

	st = nv_comm_create_cqs(c, nqps);
	if (st != NV_OK)
		return st;
	c->qps = calloc((size_t)nqps, sizeof(*c->qps));
	if (!c->qps) {
		NV_WARN("cannot allocate %d QP records", nqps);
		return NV_ERR_SYSTEM;
	}
	c->nqps = nqps;
	for (i = 0; i < nqps; i++) {
		struct nv_comm_qp *q = &c->qps[i];
		struct nv_comm_dev *d = &c->dev[i % c->ndevs];

		/* The posts keep within these, so the device's CQ cannot overrun (nv_cq_plan). */
		q->dev = (uint8_t)(i % c->ndevs);
		q->max_wr = d->plan.send_wr;
		q->max_recv = d->plan.recv_wr;
		/* NCCL_IB_USE_INLINE: receivers send single clear-to-send entries inline */
		st = nv_comm_qp_create(c, d, q->max_wr, q->max_recv, nv_comm_data_access(c),
				       !send && use_inline ? (int)sizeof(struct nv_cts_entry) : 0,
				       &q->max_inline, send && nv_eager_send_offer(c) ? 2 : 1, &q->qp);
		if (st != NV_OK)
			return st;
	}
	return NV_OK;
}

/* NCCL_IB_EVENT_BASED_LB and _REMOTE on a sender of several QPs: it reads the
 * receiver's speeds (lb.h), which it says with its region's length. */
static int nv_comm_lb_remote(const struct nv_comm *c)
{
	return c->nqps > 1 && nv_param_int(NV_PARAM_IB_EVENT_BASED_LB) &&
	       nv_param_int(NV_PARAM_IB_EVENT_BASED_LB_REMOTE);
}

void nv_comm_fill_meta(struct nv_comm *c, int role, struct nv_meta *m)
{
	int ece = (int)nv_param_int(NV_PARAM_IB_ECE_ENABLE);
	int i;

	memset(m, 0, sizeof(*m));
	m->role = (uint8_t)role;
	m->ndevs = (uint8_t)c->ndevs;
	m->nqps = (uint16_t)c->nqps;
	m->sl = c->sl;
	m->tc = c->tc;
	m->little_endian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
	m->addr = (uint64_t)(uintptr_t)c->ctrl;
	if (c->type == NV_COMM_SEND) {
		struct nv_send_ctrl *s = nv_send_ctrl_of(c);

		m->region_len = (uint32_t)(nv_eager_send_offer(c) ? NV_SEND_CTRL_REMOTE_LEN_EAGER_CTS
					   : nv_comm_lb_remote(c) ? NV_SEND_CTRL_REMOTE_LEN_LB
								  : NV_SEND_CTRL_REMOTE_LEN);
		m->probe_addr = (uint64_t)(uintptr_t)&s->probe_in;
	} else {
		struct nv_recv_ctrl *r = nv_recv_ctrl_of(c);

		const struct nv_eager_recv *E = &((const struct nv_recv_comm *)c)->eager;

		m->region_len = (uint32_t)NV_RECV_CTRL_REMOTE_LEN;
		m->probe_addr = (uint64_t)(uintptr_t)&r->probe_in;
		if (E->max) { /* the sender announced eager and we set up the ring */
			m->version = 4;
			m->eager.ring_addr = (uint64_t)(uintptr_t)E->ring;
			m->eager.ring_rkey = E->mr->rkey;
			m->eager.max = E->max;
			m->eager.entry = E->entry;
			m->eager.slots = NV_EAGER_SLOTS;
		}
	}
	for (i = 0; i < c->ndevs; i++) {
		struct nv_comm_dev *d = &c->dev[i];

		m->dev[i].lid = d->dev->lid;
		m->dev[i].port = d->dev->port;
		m->dev[i].mtu = (uint8_t)d->dev->active_mtu;
		m->dev[i].link_layer = d->dev->link_layer;
		m->dev[i].gid_index = (uint8_t)(d->gid.index < 0 ? 0 : d->gid.index);
		memcpy(m->dev[i].gid, d->gid.gid.raw, 16);
		m->dev[i].rkey = d->ctrl_mr->rkey;
		snprintf(m->dev[i].name, sizeof(m->dev[i].name), "%.31s", d->dev->name);
	}
	for (i = 0; i < c->nqps; i++) {
		m->qp[i].qpn = c->qps[i].qp->qp_num;
		m->qp[i].dev = c->qps[i].dev;
		/* the connector offers its options; the acceptor answers, after RTS,
		 * with the reduced ones only when it took the connector's (as NCCL) */
		if (role == NV_META_ROLE_RECV && !c->qps[i].ece)
			continue;
		if (ece && nv_ibv_query_ece(c->qps[i].qp, &m->qp[i].ece_vendor_id,
					    &m->qp[i].ece_options, &m->qp[i].ece_comp_mask) == 0)
			m->qp[i].ece_valid = 1;
	}
}

/*
 * Gives QP i the peer's ECE before RTR. Skipped (INFO) when the peer sent
 * none, ECE is off here (NCCL_IB_ECE_ENABLE=0) or unsupported, or the vendors
 * differ (a vendor's options mean nothing to another's NIC, and mlx5 refuses
 * them with EINVAL). Any other set_ece failure fails the connection (logged
 * by the seam), as in NCCL.
 */
static nv_status_t nv_comm_qp_ece(struct nv_comm *c, int i, const struct nv_meta_qp *r)
{
	struct nv_comm_qp *q = &c->qps[i];
	uint32_t vendor, options, mask;
	int err;

	q->ece = false;
	if (!r->ece_valid || !nv_param_int(NV_PARAM_IB_ECE_ENABLE))
		return NV_OK;
	err = nv_ibv_query_ece(q->qp, &vendor, &options, &mask);
	if (err)
		return err == EOPNOTSUPP ? NV_OK : NV_ERR_SYSTEM; /* logged */
	if (vendor != r->ece_vendor_id) {
		NV_INFO(NV_SUB_NET, "qpn 0x%x: no ECE: peer's vendor 0x%x, ours 0x%x", q->qp->qp_num,
			r->ece_vendor_id, vendor);
		return NV_OK;
	}
	err = nv_ibv_set_ece(q->qp, r->ece_vendor_id, r->ece_options, r->ece_comp_mask);
	if (err)
		return err == EOPNOTSUPP ? NV_OK : NV_ERR_SYSTEM; /* logged */
	q->ece = true;
	return NV_OK;
}

/* INFO: what ECE a QP runs with after RTS. */
static void nv_comm_qp_ece_log(struct nv_comm *c, int i, const struct nv_meta_qp *r)
{
	uint32_t vendor, options, mask;

	if (!c->qps[i].ece || nv_ibv_query_ece(c->qps[i].qp, &vendor, &options, &mask))
		return;
	NV_INFO(NV_SUB_NET, "qpn 0x%x: ECE vendor 0x%x options 0x%x (peer gave 0x%x)",
		c->qps[i].qp->qp_num, vendor, options, r->ece_options);
}

/*
 * Addressing of a QP towards the peer's device, as NCCL: RoCE always with a
 * GRH; InfiniBand by LID within a subnet (the low 16 bits of the subnet
 * prefixes match, or the peer sent no GID) unless the port requires a GRH,
 * and across subnets (an IB router) with a GRH and DLID = the peer's FLID.
 * Returns whether a GRH is used; *dlid and why[] say the rest.
 */
static bool nv_comm_route(const struct nv_comm_dev *d, const struct nv_meta_dev *r,
			  uint16_t *dlid, char *why, size_t len)
{
	uint16_t ls = nv_gid_ib_subnet(d->gid.gid.raw), rs = nv_gid_ib_subnet(r->gid);
	uint16_t flid = nv_gid_flid(r->gid);
	static const uint8_t zero[16];

	*dlid = r->lid;
	if (d->dev->link_layer == IBV_LINK_LAYER_ETHERNET) {
		/* say whether an IP router is on the path (NCCL_IB_SUBNET_AWARE_ROUTING) */
		int v4 = nv_gid_family(&d->gid.gid) == AF_INET;
		int plen = v4 ? (int)nv_param_int(NV_PARAM_IB_SUBNET_PREFIX_LEN) : 64;
		bool same = nv_gid_same_subnet(d->gid.gid.raw, r->gid, plen);
		char lg[INET6_ADDRSTRLEN], rg[INET6_ADDRSTRLEN];

		snprintf(why, len, "RoCE: GRH always; GID %s -> %s, %s subnet (/%d)%s",
			 nv_ibv_gid_str(&d->gid.gid, lg, sizeof(lg)),
			 nv_ibv_gid_str((const union ibv_gid *)r->gid, rg, sizeof(rg)),
			 same ? "same" : "another", plen, same ? "" : ": routed");
		return true;
	}
	if (ls == rs || !memcmp(r->gid, zero, 16)) {
		snprintf(why, len, "same IB subnet 0x%04x: %s", ls,
			 d->dev->grh_required ? "GRH (the port requires it), DLID = LID"
					      : "LID routing, no GRH");
		return d->dev->grh_required;
	}
	if (flid) {
		*dlid = flid;
		snprintf(why, len, "peer on IB subnet 0x%04x, ours 0x%04x: GRH, DLID = its FLID 0x%x "
			 "(IB router)", rs, ls, flid);
	} else {
		NV_WARN("peer device %s is on IB subnet 0x%04x, ours (%s) on 0x%04x, and its GID has "
			"no FLID: using its LID 0x%x, which a router cannot forward (configure FLIDs, "
			"NCCL_IB_ROUTABLE_FLID_GID_INDEX)", r->name, rs, d->dev->name, ls, r->lid);
		snprintf(why, len, "peer on IB subnet 0x%04x, ours 0x%04x: GRH, no FLID: DLID = LID",
			 rs, ls);
	}
	return true;
}

static const char *nv_rtr_hint(int err, const struct nv_comm_dev *d)
{
	if (err == ETIMEDOUT)
		return "address resolution timed out: the two NICs may not be on the same rail; "
		       "try NCCL_CROSS_NIC=0 or check the routes";
	if (err == EINVAL && d->dev->link_layer == IBV_LINK_LAYER_ETHERNET &&
	    nv_param_is_set(NV_PARAM_IB_GID_INDEX))
		return "NCCL_IB_GID_INDEX forces a GID this port cannot use; unset it to let the "
		       "plugin choose";
	return "check that both ports are ACTIVE and on the same fabric";
}

static nv_status_t nv_comm_qp_rtr(struct nv_comm *c, int i, int tc, uint32_t psn)
{
	struct nv_comm_qp *q = &c->qps[i];
	struct nv_comm_dev *d = &c->dev[q->dev];
	const struct nv_meta_dev *r = &c->rmeta->dev[c->rmeta->qp[i].dev];
	struct ibv_qp_attr a;
	char lg[64], rg[64], why[200];
	nv_status_t st;
	bool grh;

	memset(&a, 0, sizeof(a));
	q->rdev = c->rmeta->qp[i].dev;
	q->rqpn = c->rmeta->qp[i].qpn;
	q->mtu = d->dev->active_mtu < (enum ibv_mtu)r->mtu ? d->dev->active_mtu
							    : (enum ibv_mtu)r->mtu;
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = q->mtu;
	a.dest_qp_num = q->rqpn;
	a.rq_psn = psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.sl = c->sl;
	a.ah_attr.port_num = d->dev->port;
	grh = nv_comm_route(d, r, &a.ah_attr.dlid, why, sizeof(why));
	if (i < c->ndevs) /* one line per device pair */
		NV_INFO(NV_SUB_NET, "QP 0x%x %s:%u -> %s %s: %s", q->qp->qp_num, d->hca->name,
			d->dev->port, c->peer, r->name, why);
	if (grh) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, r->gid, 16);
		a.ah_attr.grh.sgid_index = (uint8_t)(d->gid.index < 0 ? 0 : d->gid.index);
		a.ah_attr.grh.hop_limit = 255;
		a.ah_attr.grh.traffic_class = (uint8_t)tc;
	}
	st = nv_ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
						 IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
						 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (st != NV_OK)
		NV_WARN("RTR of QP 0x%x on %s:%u (GID index %d %s) towards peer %s %s QPN 0x%x "
			"(LID 0x%x GID %s) failed: %s", q->qp->qp_num, d->hca->name, d->dev->port,
			d->gid.index, nv_ibv_gid_str(&d->gid.gid, lg, sizeof(lg)), c->peer, r->name,
			q->rqpn, r->lid, nv_ibv_gid_str((const union ibv_gid *)r->gid, rg, sizeof(rg)),
			nv_rtr_hint(errno, d));
	return st;
}

static nv_status_t nv_comm_qp_rts(struct nv_comm *c, int i, uint32_t psn)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = (uint8_t)nv_param_int(NV_PARAM_IB_TIMEOUT);
	a.retry_cnt = (uint8_t)nv_param_int(NV_PARAM_IB_RETRY_CNT);
	a.rnr_retry = 7;
	a.sq_psn = psn;
	a.max_rd_atomic = 1;
	return nv_ibv_modify_qp(c->qps[i].qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
							  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
							  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* NCCL_IB_WARN_RAIL_LOCAL: say when the two sides' physical devices differ
 * (by name: a rail-local fabric joins mlx5_0 to mlx5_0), e.g. a fused NIC
 * talking to a single one. INFO, as NCCL. */
static void nv_comm_rail_check(struct nv_comm *c)
{
	char local[128] = "", remote[128] = "";
	int common = 0, i, j;

	if (!nv_param_int(NV_PARAM_IB_WARN_RAIL_LOCAL))
		return;
	for (i = 0; i < c->ndevs; i++) {
		snprintf(local + strlen(local), sizeof(local) - strlen(local), "%s%s", i ? "," : "",
			 c->dev[i].dev->name);
		for (j = 0; j < c->rmeta->ndevs; j++)
			if (!strncmp(c->dev[i].dev->name, c->rmeta->dev[j].name,
				     sizeof(c->rmeta->dev[j].name))) {
				common++;
				break;
			}
	}
	for (j = 0; j < c->rmeta->ndevs; j++)
		snprintf(remote + strlen(remote), sizeof(remote) - strlen(remote), "%s%.31s",
			 j ? "," : "", c->rmeta->dev[j].name);
	if (common < (c->ndevs > c->rmeta->ndevs ? c->ndevs : c->rmeta->ndevs))
		NV_INFO(NV_SUB_NET, "mismatched physical devices between local (%s) and remote %s "
			"(%s); to silence this, set NCCL_IB_WARN_RAIL_LOCAL=0", local, c->peer, remote);
}

nv_status_t nv_comm_qps_ready(struct nv_comm *c, int tc)
{
	nv_status_t st;
	int i;

	nv_comm_rail_check(c);
	for (i = 0; i < c->nqps; i++) {
		const struct nv_meta_qp *r = &c->rmeta->qp[i];

		st = nv_comm_qp_ece(c, i, r);
		if (st != NV_OK)
			return st;
		st = nv_comm_qp_rtr(c, i, tc, 0);
		if (st != NV_OK)
			return st;
		st = nv_comm_qp_rts(c, i, 0);
		if (st != NV_OK)
			return st;
		nv_comm_qp_ece_log(c, i, r);
	}
	return NV_OK;
}

nv_status_t nv_comm_qp_restart(struct nv_comm *c, int i, uint32_t psn)
{
	struct nv_comm_qp *q = &c->qps[i];
	struct ibv_qp_attr a;
	nv_status_t st;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RESET;
	st = nv_ibv_modify_qp(q->qp, &a, IBV_QP_STATE);
	if (st == NV_OK)
		st = nv_comm_qp_init(&c->dev[q->dev], q->qp, nv_comm_data_access(c));
	if (st == NV_OK)
		st = nv_comm_qp_rtr(c, i, c->tc, psn);
	if (st == NV_OK)
		st = nv_comm_qp_rts(c, i, psn);
	q->outstanding = q->unsignalled = q->recv_outstanding = 0;
	nv_wqe_reset(c->wqe, i);
	return st;
}

nv_status_t nv_comm_probe_post(struct nv_comm *c)
{
	uint64_t *src = c->type == NV_COMM_SEND ? &nv_send_ctrl_of(c)->probe_src
						 : &nv_recv_ctrl_of(c)->probe_src;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	nv_status_t st;
	int i;

	*src = c->probe_out;
	for (i = 0; i < c->nqps; i++) {
		struct nv_comm_qp *q = &c->qps[i];

		memset(&wr, 0, sizeof(wr));
		sge.addr = (uintptr_t)src;
		sge.length = sizeof(*src);
		sge.lkey = c->dev[q->dev].ctrl_mr->lkey;
		wr.wr_id = NV_WRID(NV_WR_PROBE, 1, i, 0);
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = c->rmeta->probe_addr;
		wr.wr.rdma.rkey = c->rmeta->dev[q->rdev].rkey;
		st = nv_ibv_post_send(q->qp, &wr, &bad);
		if (st != NV_OK)
			return st;
		c->probe_pending++;
	}
	return NV_OK;
}

int nv_comm_probe_poll(struct nv_comm *c)
{
	struct ibv_wc wc[NV_CQ_POLL_BATCH];
	int d, k, n;

	for (d = 0; d < c->ndevs && c->probe_pending > 0; d++) {
		if (nv_ibv_poll_cq(c->dev[d].cq, NV_CQ_POLL_BATCH, wc, &n) != NV_OK) {
			nv_comm_fail(c, NV_ERR_SYSTEM, "polling the CQ of %s failed",
				     c->dev[d].hca->name);
			return -1;
		}
		for (k = 0; k < n; k++) {
			if (wc[k].status != IBV_WC_SUCCESS) {
				nv_comm_wc_error(c, d, &wc[k]);
				return -1;
			}
			if (NV_WRID_KIND(wc[k].wr_id) == NV_WR_PROBE)
				c->probe_pending--;
		}
	}
	return c->probe_pending == 0;
}

int nv_comm_probe_landed(const struct nv_comm *c)
{
	const uint64_t *w = c->type == NV_COMM_SEND ? &nv_send_ctrl_of(c)->probe_in
						    : &nv_recv_ctrl_of(c)->probe_in;

	/* Written by the peer's NIC: read it fresh each time. */
	return c->ctrl && __atomic_load_n(w, __ATOMIC_ACQUIRE) == c->probe_want;
}

/* INIT -> RTR -> RTS of device d's flush QP, connected to itself. */
static nv_status_t nv_comm_flush_qp_connect(struct nv_comm_dev *d)
{
	struct ibv_qp_attr a;
	nv_status_t st;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = d->dev->active_mtu;
	a.dest_qp_num = d->flush_qp->qp_num;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = d->dev->lid;
	a.ah_attr.port_num = d->dev->port;
	if (d->dev->link_layer == IBV_LINK_LAYER_ETHERNET || d->dev->grh_required) {
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = d->gid.gid;
		a.ah_attr.grh.sgid_index = (uint8_t)(d->gid.index < 0 ? 0 : d->gid.index);
		a.ah_attr.grh.hop_limit = 255;
	}
	st = nv_ibv_modify_qp(d->flush_qp, &a,
			      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (st != NV_OK)
		return st;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = (uint8_t)nv_param_int(NV_PARAM_IB_TIMEOUT);
	a.retry_cnt = (uint8_t)nv_param_int(NV_PARAM_IB_RETRY_CNT);
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return nv_ibv_modify_qp(d->flush_qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
							 IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
							 IBV_QP_MAX_QP_RD_ATOMIC);
}

/* GDR flush: one RC QP per device connected to itself (INIT with REMOTE_READ). */
nv_status_t nv_comm_flush_qps(struct nv_comm *c)
{
	nv_status_t st;
	int i;

	for (i = 0; i < c->ndevs; i++) {
		struct nv_comm_dev *d = &c->dev[i];

		if (d->flush_qp)
			continue;
		d->flush_max = d->plan.flush_wr; /* counted in the CQ's depth */
		st = nv_comm_qp_create(c, d, d->flush_max, 1,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
					       IBV_ACCESS_REMOTE_WRITE, /* eager copies to GPU */
				       0, NULL, 1, &d->flush_qp);
		if (st != NV_OK)
			return st;
		st = nv_comm_flush_qp_connect(d);
		if (st != NV_OK)
			return st;
	}
	return NV_OK;
}

nv_status_t nv_comm_flush_qp_restart(struct nv_comm *c, int dev)
{
	struct nv_comm_dev *d = &c->dev[dev];
	struct ibv_qp_attr a;
	nv_status_t st;

	if (!d->flush_qp || d->flush_outstanding)
		return NV_OK;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RESET;
	st = nv_ibv_modify_qp(d->flush_qp, &a, IBV_QP_STATE);
	if (st == NV_OK)
		st = nv_comm_qp_init(d, d->flush_qp, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	return st == NV_OK ? nv_comm_flush_qp_connect(d) : st;
}

static nv_status_t nv_comm_qp_destroy(struct ibv_qp *qp)
{
	nv_status_t st = nv_ibv_destroy_qp(qp);

	if (st == NV_OK)
		nv_census_add(NV_CEN_QP, -1);
	return st;
}

static void nv_keep_first(nv_status_t *first, nv_status_t st)
{
	if (*first == NV_OK)
		*first = st;
}

nv_status_t nv_comm_destroy(struct nv_comm *c)
{
	nv_status_t first = NV_OK;
	int i;

	for (i = 0; c->qps && i < c->nqps; i++) {
		if (c->qps[i].qp)
			nv_keep_first(&first, nv_comm_qp_destroy(c->qps[i].qp));
		c->qps[i].qp = NULL;
	}
	if (c->type == NV_COMM_RECV)
		nv_eager_ring_free((struct nv_recv_comm *)c);
	for (i = 0; i < c->ndevs; i++) {
		struct nv_comm_dev *d = &c->dev[i];

		if (d->flush_qp)
			nv_keep_first(&first, nv_comm_qp_destroy(d->flush_qp));
		d->flush_qp = NULL;
		if (d->ctrl_mr)
			nv_keep_first(&first, nv_mr_release(d->hca, d->ctrl_mr));
		d->ctrl_mr = NULL;
		if (d->cq && nv_ibv_destroy_cq(d->cq) == NV_OK) {
			nv_census_add(NV_CEN_CQ, -1);
			if (i == 0)
				nv_census_add(c->type == NV_COMM_SEND ? NV_CEN_SEND : NV_CEN_RECV, -1);
		} else if (d->cq) {
			nv_keep_first(&first, NV_ERR_SYSTEM);
		}
		d->cq = NULL;
		if (d->pd)
			nv_hca_pd_put(d->hca);
		d->pd = NULL;
		if (d->hca)
			nv_hca_sink_detach(d->hca, &d->sink_link);
	}
	c->sink.wqe = NULL; /* detached from every HCA: no sweep reaches it any more */
	free(c->wqe);
	c->wqe = NULL;
	free(c->lb);
	c->lb = NULL;
	free(c->qps);
	c->qps = NULL;
	c->nqps = 0;
	free(c->ctrl);
	c->ctrl = NULL;
	free(c->reqs);
	c->reqs = NULL;
	free(c->rmeta);
	c->rmeta = NULL;
	nv_sock_close(&c->fd);
	return first;
}

/* ---- ready (handshake done) and close (closeSend / closeRecv) ----------------- */

uint64_t nv_ar_first_split(int64_t knob)
{
	if (knob == -2)
		knob = NV_AR_THRESHOLD_AUTO;
	return knob < 0 ? 0 : (uint64_t)knob + 1;
}

void nv_send_comm_ready(struct nv_send_comm *sc)
{
	int64_t ar = nv_param_int(NV_PARAM_IB_ADAPTIVE_ROUTING);
	int i;

	/* AR can place packets of one message out of order; a separate final
	 * WRITE_WITH_IMM guarantees the data WRs before it have landed. As NCCL,
	 * for messages longer than NCCL_IB_AR_THRESHOLD bytes (-2: 8192; -1:
	 * every message), so ar_threshold (the first size split) is one more. */
	if (ar == 1 || (ar == -2 && sc->base.dev[0].dev->link_layer == IBV_LINK_LAYER_INFINIBAND))
		sc->ar_threshold = nv_ar_first_split(nv_param_int(NV_PARAM_IB_AR_THRESHOLD));
	else
		sc->ar_threshold = UINT64_MAX;
	/* message and write limits: the smallest of the comm's devices (the peer's
	 * ports are assumed alike: NCCL pairs like NICs) */
	sc->max_bytes = UINT32_MAX;
	sc->wr_bytes = UINT32_MAX;
	for (i = 0; i < sc->base.ndevs; i++) {
		const struct nv_dev *d = sc->base.dev[i].dev;

		if (nv_dev_max_msg_bytes(d) < sc->max_bytes)
			sc->max_bytes = nv_dev_max_msg_bytes(d);
		if (nv_dev_wr_bytes(d) < sc->wr_bytes)
			sc->wr_bytes = nv_dev_wr_bytes(d);
	}
	/* NCCL_VERBS_FAST_PATHS=0: no message is short enough for the one-write fast
	 * paths (isend's and the chain's), so the general ones serve every message */
	sc->one_bytes = nv_param_int(NV_PARAM_VERBS_FAST_PATHS) ? sc->wr_bytes : 0;
	for (i = 0; i < NV_FIFO_SLOTS; i++)
		sc->slots[i].seq = UINT64_MAX;
	/* the one-write chains' constant fields (comm.h) */
	sc->one_wr.sg_list = &sc->one_sge;
	sc->one_wr.num_sge = 1;
	sc->one_wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	sc->one_wr.send_flags = IBV_SEND_SIGNALED;
	sc->one_wr.next = NULL;
	sc->split_wr[0].sg_list = &sc->one_sge;
	sc->split_wr[0].num_sge = 1;
	sc->split_wr[0].opcode = IBV_WR_RDMA_WRITE;
	sc->split_wr[0].send_flags = 0;
	sc->split_wr[0].next = &sc->split_wr[1];
	sc->split_wr[1].sg_list = NULL;
	sc->split_wr[1].num_sge = 0;
	sc->split_wr[1].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	sc->split_wr[1].send_flags = IBV_SEND_SIGNALED;
	sc->split_wr[1].next = NULL;
	nv_eager_send_setup(sc);
	sc->base.last_alive_ns = nv_now_ns();
	nv_sock_keepalive(sc->base.fd, NV_KEEPALIVE_IDLE_S, NV_KEEPALIVE_INTVL_S, NV_KEEPALIVE_CNT);
	nv_comm_set_ident(&sc->base);
	nv_comm_wqe_start(&sc->base);
	nv_hca_sink_watch(sc->base.dev[0].hca, &sc->base.sink, sc->base.fd);
}

void nv_recv_comm_ready(struct nv_recv_comm *rc)
{
	/* NCCL_VERBS_FAST_PATHS=0: no receive has the buffer count of the fast paths */
	rc->one_recvs = nv_param_int(NV_PARAM_VERBS_FAST_PATHS) ? 1 : 0;
	memset(&rc->cts_wr, 0, sizeof(rc->cts_wr));
	rc->cts_wr.sg_list = &rc->cts_sge;
	rc->cts_wr.num_sge = 1;
	rc->cts_wr.opcode = IBV_WR_RDMA_WRITE;
	memset(&rc->recv_wr, 0, sizeof(rc->recv_wr));
	rc->base.last_alive_ns = nv_now_ns();
	nv_sock_keepalive(rc->base.fd, NV_KEEPALIVE_IDLE_S, NV_KEEPALIVE_INTVL_S, NV_KEEPALIVE_CNT);
	nv_comm_set_ident(&rc->base);
	nv_hca_sink_watch(rc->base.dev[0].hca, &rc->base.sink, rc->base.fd);
}

static nv_status_t nv_comm_close(void *comm, int type, const char *fn)
{
	struct nv_comm *c = comm;
	nv_status_t st;

	if (!c)
		return NV_OK;
	if (c->type != type) {
		NV_WARN("%s: %p is not the right kind of comm", fn, comm);
		return NV_ERR_INTERNAL;
	}
	if (nv_comm_outstanding(c))
		nv_comm_dump(c, 0, "closed with requests outstanding");
	nv_wqe_summary(c->wqe); /* NCCL_IB_WQE_LATENCY_REPORT */
	st = nv_comm_destroy(c); /* requests still outstanding die with the QPs */
	c->type = 0;
	free(c);
	return st;
}

nv_status_t nv_net_close_send(void *send_comm)
{
	return nv_comm_close(send_comm, NV_COMM_SEND, "closeSend");
}

nv_status_t nv_net_close_recv(void *recv_comm)
{
	return nv_comm_close(recv_comm, NV_COMM_RECV, "closeRecv");
}
