/*
 * accept.c - listen and accept: the listener's state machine (see the
 * protocol in connect.c).
 *
 * A listen comm owns its listening socket and its admission state
 * (admit.h): connections that have not presented the secret yet, and the
 * backlog of authenticated connectors waiting for accept calls. At most one
 * authenticated connection is being accepted at a time; each accept call
 * that finds none in progress takes the oldest one from the backlog.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "admit.h"
#include "comm.h"
#include "handshake.h"
#include "mr.h"
#include "nv_api.h"
#include "param.h"

struct nv_listen_comm {
	int type;			/* NV_COMM_LISTEN; first, like struct nv_comm */
	int vdev;
	const struct nv_ctx *ctx;	/* whose finalize reclaims a half-built accept */
	struct nv_listen_comm *next, *prev;	/* nv_listeners, under nv_listeners_lock */
	int lfd;
	char addr_str[NV_SOCK_ADDR_STRLEN];
	uint8_t secret[NV_WIRE_SECRET_LEN];
	struct nv_admit admit;		/* pending hellos, authenticated backlog */
	struct nv_recv_comm *rc;	/* accept in progress, or NULL */
	struct nv_hs hs;
};

static pthread_mutex_t nv_listeners_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nv_listen_comm *nv_listeners;	/* locked: every open listen comm */

static void nv_listeners_add(struct nv_listen_comm *lc)
{
	pthread_mutex_lock(&nv_listeners_lock);
	lc->next = nv_listeners;
	lc->prev = NULL;
	if (nv_listeners)
		nv_listeners->prev = lc;
	nv_listeners = lc;
	pthread_mutex_unlock(&nv_listeners_lock);
}

static void nv_listeners_del(struct nv_listen_comm *lc)
{
	pthread_mutex_lock(&nv_listeners_lock);
	if (lc->prev)
		lc->prev->next = lc->next;
	else if (nv_listeners == lc)
		nv_listeners = lc->next;
	if (lc->next)
		lc->next->prev = lc->prev;
	lc->next = lc->prev = NULL;
	pthread_mutex_unlock(&nv_listeners_lock);
}

nv_status_t nv_net_listen(struct nv_ctx *ctx, int dev, void *handle, void **listen_comm)
{
	struct nv_listen_comm *lc;
	struct nv_sock_addr addr, bound;
	struct nv_handle h;
	nv_status_t st;
	int rc;

	*listen_comm = NULL;
	if (!nv_vdev_get(dev)) {
		NV_WARN("listen: network device %d does not exist (%d devices)", dev,
			nv_vdev_count());
		return NV_ERR_INVALID;
	}
	st = nv_if_get(&addr);
	if (st != NV_OK)
		return st;
	lc = calloc(1, sizeof(*lc));
	if (!lc) {
		NV_WARN("listen: out of memory");
		return NV_ERR_SYSTEM;
	}
	lc->type = NV_COMM_LISTEN;
	lc->vdev = dev;
	lc->ctx = ctx;
	rc = nv_sock_listen(&addr, &lc->lfd, &bound);
	if (rc < 0) {
		NV_WARN("listen on %s failed: %s", nv_sock_addr_str(&addr, lc->addr_str,
								     sizeof(lc->addr_str)),
			strerror(-rc));
		free(lc);
		return NV_ERR_SYSTEM;
	}
	nv_sock_addr_str(&bound, lc->addr_str, sizeof(lc->addr_str));
	st = nv_random(lc->secret, sizeof(lc->secret));
	if (st != NV_OK) {
		nv_sock_close(&lc->lfd);
		free(lc);
		return st;
	}
	st = nv_admit_init(&lc->admit, lc->lfd, lc->addr_str, lc->secret);
	if (st != NV_OK) {
		nv_admit_fini(&lc->admit);
		nv_sock_close(&lc->lfd);
		free(lc);
		return st;
	}
	memset(&h, 0, sizeof(h));
	nv_sock_addr_to_handle(&bound, &h);
	h.ndevs = (uint8_t)nv_vdev_get(dev)->ndevs;
	if (nv_param_int(NV_PARAM_IB_SUBNET_AWARE_ROUTING)) /* connectors pick a NIC on our subnet */
		nv_vdev_roce_gids(dev, h.gids, NV_WIRE_HANDLE_GIDS);
	memcpy(h.secret, lc->secret, sizeof(h.secret));
	memset(handle, 0, 128); /* NCCL_NET_HANDLE_MAXSIZE; connect's stage area starts zeroed */
	nv_wire_handle_encode(&h, handle);
	NV_INFO(NV_SUB_NET, "listening on %s for device %d", lc->addr_str, dev);
	nv_listeners_add(lc);
	*listen_comm = lc;
	return NV_OK;
}

/* Starts an accept with the oldest authenticated connector, if any. */
static nv_status_t nv_listen_poll(struct nv_listen_comm *lc)
{
	struct nv_admitted ad;
	struct nv_recv_comm *rc;

	if (!nv_admit_pop(&lc->admit, &ad))
		return NV_OK;
	rc = calloc(1, sizeof(*rc));
	if (!rc) {
		nv_sock_close(&ad.fd);
		NV_WARN("accept: out of memory");
		return NV_ERR_SYSTEM;
	}
	rc->base.type = NV_COMM_RECV;
	rc->base.fd = ad.fd;
	rc->base.probe_out = nv_wire_probe_value(lc->secret, ad.conn_id, NV_META_ROLE_RECV);
	rc->base.probe_want = nv_wire_probe_value(lc->secret, ad.conn_id, NV_META_ROLE_SEND);
	nv_sock_addr_str(&ad.peer, rc->base.peer, sizeof(rc->base.peer));
	memset(&lc->hs, 0, sizeof(lc->hs));
	lc->hs.deadline_ns = nv_deadline();
	lc->rc = rc;
	return NV_OK;
}

/* ---- the accept state machine ------------------------------------------- */

enum nv_acc_state {
	NV_ACC_RECV_META,	/* waiting for the connector's metadata */
	NV_ACC_SEND_META,	/* our META (QPs at RTS) going out */
	NV_ACC_RECV_READY,	/* waiting for the connector's path-check result */
	NV_ACC_PEER_PROBE,	/* waiting for the connector's probe value in our word */
	NV_ACC_PROBE,		/* our path-proving RDMA writes in flight */
	NV_ACC_SEND_DONE,	/* STATUS(ok) going out */
	NV_ACC_RECV_PROVEN,	/* waiting for the connector to see our probe land */
	NV_ACC_DONE,
	NV_ACC_NSTATES
};

static const char *const nv_acc_state_names[NV_ACC_NSTATES] = {
	[NV_ACC_RECV_META] = "waiting for the connector's metadata",
	[NV_ACC_SEND_META] = "sending our metadata",
	[NV_ACC_RECV_READY] = "waiting for the connector's path check",
	[NV_ACC_PEER_PROBE] = "path check (the connector's RDMA write to us)",
	[NV_ACC_PROBE] = "path check (RDMA write to the connector)",
	[NV_ACC_SEND_DONE] = "sending done",
	[NV_ACC_RECV_PROVEN] = "waiting for the connector's check of our path",
	[NV_ACC_DONE] = "connected",
};

static int nv_acc_fail(struct nv_listen_comm *lc, uint32_t code)
{
	lc->hs.local_code = code;
	nv_hs_send_failure(lc->rc->base.fd, code);
	return NV_STEP_FAIL;
}

static int nv_acc_gdr_flush_wanted(struct nv_comm *c)
{
	int i;

	if (nv_param_int(NV_PARAM_GDR_FLUSH_DISABLE))
		return 0;
	for (i = 0; i < c->ndevs; i++)
		if (!(c->dev[i].hca->gdr.ptr_support & (NV_MEM_CUDA | NV_MEM_DMABUF)))
			return 0;
	return 1;
}

static int nv_acc_build(struct nv_listen_comm *lc)
{
	struct nv_comm *c = &lc->rc->base;
	int64_t fifo_tc = nv_param_int(NV_PARAM_IB_FIFO_TC);
	struct nv_meta *m;

	lc->hs.local_st = nv_comm_create_qps(c, c->rmeta->nqps);
	if (lc->hs.local_st != NV_OK)
		goto err_resources;
	/* The data direction follows the sender's SL/TC; CTS may get its own class. */
	c->sl = c->rmeta->sl;
	c->tc = (uint8_t)(fifo_tc >= 0 ? fifo_tc : c->rmeta->tc);
	c->rctrl_addr = c->rmeta->addr;
	c->nq = nv_comm_data_qps(c, c->rmeta->split);
	if (nv_comm_qps_ready(c, c->tc) != NV_OK) {
		nv_hs_set_why(&lc->hs, "QP bring-up (see above)");
		return nv_acc_fail(lc, NV_WST_QP_FAILED);
	}
	/* the flush QPs come with the first flush (or eager copy into GPU memory):
	 * a comm that never receives into GPU memory never holds one */
	lc->rc->gdr_flush = nv_acc_gdr_flush_wanted(c);
	if (nv_eager_ring_setup(lc->rc) != NV_OK)
		goto err_resources;
	m = malloc(sizeof(*m));
	if (!m)
		goto err_resources;
	nv_comm_fill_meta(c, NV_META_ROLE_RECV, m); /* ECE read back after RTS: reduced */
	lc->hs.out_len = nv_hs_put(lc->hs.out, NV_MSG_META, m);
	lc->hs.out_off = 0;
	free(m);
	lc->hs.state = NV_ACC_SEND_META;
	return NV_STEP_NEXT;
err_resources:
	nv_hs_set_why(&lc->hs, "local verbs resources (see above)");
	return nv_acc_fail(lc, NV_WST_RESOURCES);
}

/*
 * NCCL_IB_SUBNET_AWARE_ROUTING on the accept side, as NCCL: the vNIC whose
 * RoCE ports are on the connector's subnets (its metadata's GIDs), else the
 * listener's. An undecodable message keeps the listener's (nv_hs_meta then
 * reports it).
 */
static int nv_acc_pick_vdev(struct nv_listen_comm *lc)
{
	uint8_t gids[NV_COMM_MAX_DEVS][16];
	struct nv_meta *m;
	char why[NV_WIRE_WHY_LEN];
	int n = 0, dev = lc->vdev;

	if (!nv_param_int(NV_PARAM_IB_SUBNET_AWARE_ROUTING) || lc->hs.hdr.type != NV_MSG_META)
		return dev;
	m = calloc(1, sizeof(*m));
	if (m && nv_wire_meta_decode(lc->hs.in + NV_WIRE_HDR_SIZE, lc->hs.hdr.len, m, why,
				     sizeof(why)) == NV_OK) {
		for (int i = 0; i < m->ndevs && n < NV_COMM_MAX_DEVS; i++)
			if (m->dev[i].link_layer == NV_WIRE_LL_ETH)
				memcpy(gids[n++], m->dev[i].gid, 16);
		dev = nv_vdev_by_subnet((const uint8_t (*)[16])gids, n, lc->vdev);
	}
	free(m);
	if (dev != lc->vdev)
		NV_INFO(NV_SUB_NET, "subnet-aware routing: accepting on device %d (%s) instead of "
			"%d, which is not on the connector's subnet", dev, nv_vdev_get(dev)->name,
			lc->vdev);
	return dev;
}

static int nv_acc_recv_meta(struct nv_listen_comm *lc)
{
	struct nv_comm *c = &lc->rc->base;
	uint32_t code;
	int rc = nv_hs_recv(&lc->hs, c->fd, NV_MSG_META);

	if (rc < 0)
		return NV_STEP_FAIL;
	if (rc == 0)
		return nv_hs_expired(&lc->hs, "the connector's metadata")
			       ? nv_acc_fail(lc, NV_WST_TIMEOUT) : NV_STEP_WAIT;
	lc->hs.local_st = nv_comm_init(c, NV_COMM_RECV, nv_acc_pick_vdev(lc), NV_MAX_REQUESTS);
	if (lc->hs.local_st != NV_OK) {
		nv_hs_set_why(&lc->hs, "local verbs resources (see above)");
		return nv_acc_fail(lc, NV_WST_RESOURCES);
	}
	if (nv_hs_meta(&lc->hs, c, NV_META_ROLE_SEND, &code) < 0)
		return code == NV_WST_OK ? NV_STEP_FAIL : nv_acc_fail(lc, code);
	return nv_acc_build(lc);
}

static int nv_acc_send(struct nv_listen_comm *lc, int next, const char *what)
{
	int rc = nv_hs_flush_out(&lc->hs, lc->rc->base.fd);

	if (rc < 0)
		return NV_STEP_FAIL;
	if (rc == 0)
		return nv_hs_expired(&lc->hs, what) ? NV_STEP_FAIL : NV_STEP_WAIT;
	lc->hs.state = next;
	lc->hs.deadline_ns = nv_deadline();
	return NV_STEP_NEXT;
}

static int nv_acc_recv_ready(struct nv_listen_comm *lc)
{
	struct nv_comm *c = &lc->rc->base;
	int rc = nv_hs_recv(&lc->hs, c->fd, NV_MSG_STATUS);

	if (rc < 0)
		return NV_STEP_FAIL;
	if (rc == 0)
		return nv_hs_expired(&lc->hs, "the connector's path check")
			       ? nv_acc_fail(lc, NV_WST_TIMEOUT) : NV_STEP_WAIT;
	if (nv_hs_status(&lc->hs) < 0)
		return NV_STEP_FAIL;
	lc->hs.state = NV_ACC_PEER_PROBE;
	lc->hs.deadline_ns = nv_probe_deadline();
	return NV_STEP_NEXT;
}

static int nv_acc_peer_probe(struct nv_listen_comm *lc)
{
	struct nv_comm *c = &lc->rc->base;
	int rc = nv_hs_peer_probe(&lc->hs, c);

	if (rc == NV_STEP_FAIL)
		return nv_acc_fail(lc, NV_WST_PROBE_LOST);
	if (rc == NV_STEP_WAIT)
		return rc;
	if (nv_comm_probe_post(c) != NV_OK) {
		nv_hs_set_why(&lc->hs, "posting the path check (see above)");
		return nv_acc_fail(lc, NV_WST_PROBE_FAILED);
	}
	lc->hs.state = NV_ACC_PROBE;
	lc->hs.deadline_ns = nv_deadline();
	return NV_STEP_NEXT;
}

static int nv_acc_probe(struct nv_listen_comm *lc)
{
	int rc = nv_comm_probe_poll(&lc->rc->base);

	if (rc < 0) {
		snprintf(lc->hs.why, sizeof(lc->hs.why), "the path check failed (see the error above)");
		return nv_acc_fail(lc, NV_WST_PROBE_FAILED);
	}
	if (rc == 0)
		return nv_hs_expired(&lc->hs, "the path-check RDMA write to complete")
			       ? nv_acc_fail(lc, NV_WST_PROBE_FAILED) : NV_STEP_WAIT;
	nv_hs_queue_status(&lc->hs, NV_WST_OK);
	lc->hs.state = NV_ACC_SEND_DONE;
	return NV_STEP_NEXT;
}

static int nv_acc_recv_proven(struct nv_listen_comm *lc)
{
	int rc = nv_hs_recv(&lc->hs, lc->rc->base.fd, NV_MSG_STATUS);

	if (rc < 0)
		return NV_STEP_FAIL;
	if (rc == 0)
		return nv_hs_expired(&lc->hs, "the connector's check of our path") ? NV_STEP_FAIL
										: NV_STEP_WAIT;
	if (nv_hs_status(&lc->hs) < 0) {
		nv_hs_peer_failed(&lc->hs, &lc->rc->base);
		return NV_STEP_FAIL;
	}
	lc->hs.state = NV_ACC_DONE;
	return NV_STEP_NEXT;
}

static int nv_acc_step(struct nv_listen_comm *lc)
{
	switch (lc->hs.state) {
	case NV_ACC_RECV_META:
		return nv_acc_recv_meta(lc);
	case NV_ACC_SEND_META:
		return nv_acc_send(lc, NV_ACC_RECV_READY, "the connector to read our metadata");
	case NV_ACC_RECV_READY:
		return nv_acc_recv_ready(lc);
	case NV_ACC_PEER_PROBE:
		return nv_acc_peer_probe(lc);
	case NV_ACC_PROBE:
		return nv_acc_probe(lc);
	case NV_ACC_SEND_DONE:
		return nv_acc_send(lc, NV_ACC_RECV_PROVEN, "the connector to read our status");
	case NV_ACC_RECV_PROVEN:
		return nv_acc_recv_proven(lc);
	default:
		return NV_STEP_WAIT;
	}
}

static void nv_acc_abandon(struct nv_listen_comm *lc)
{
	if (!lc->rc)
		return;
	nv_comm_destroy(&lc->rc->base);
	free(lc->rc);
	lc->rc = NULL;
}

nv_status_t nv_net_accept(void *listen_comm, void **recv_comm)
{
	struct nv_listen_comm *lc = listen_comm;
	nv_status_t st;
	int rc;

	*recv_comm = NULL;
	if (!lc || lc->type != NV_COMM_LISTEN) {
		NV_WARN("accept: %p is not a listen comm", listen_comm);
		return NV_ERR_INTERNAL;
	}
	nv_admit_poll(&lc->admit);
	if (!lc->rc) {
		st = nv_listen_poll(lc);
		if (st != NV_OK || !lc->rc)
			return st;
	}
	do
		rc = nv_acc_step(lc);
	while (rc == NV_STEP_NEXT && lc->hs.state != NV_ACC_DONE);
	if (rc == NV_STEP_WAIT)
		return NV_OK;
	if (rc == NV_STEP_FAIL) {
		char id[256];

		NV_WARN("accept on %s from %s%s failed while %s: %s", lc->addr_str,
			lc->rc->base.peer, nv_comm_hs_ident(&lc->rc->base, "to", id, sizeof(id)),
			nv_acc_state_names[lc->hs.state], lc->hs.why);
		st = nv_hs_status_of(&lc->hs);
		nv_acc_abandon(lc);
		return st;
	}
	nv_recv_comm_ready(lc->rc);
	NV_INFO(NV_SUB_NET, "accepted %s on %s: %d QP(s), %d per message, first QPN 0x%x -> 0x%x",
		lc->rc->base.peer, lc->addr_str, lc->rc->base.nqps, lc->rc->base.nq,
		lc->rc->base.qps[0].qp->qp_num, lc->rc->base.qps[0].rqpn);
	*recv_comm = lc->rc;
	lc->rc = NULL;
	return NV_OK;
}

nv_status_t nv_net_close_listen(void *listen_comm)
{
	struct nv_listen_comm *lc = listen_comm;

	if (!lc)
		return NV_OK;
	if (lc->type != NV_COMM_LISTEN) {
		NV_WARN("closeListen: %p is not a listen comm", listen_comm);
		return NV_ERR_INTERNAL;
	}
	nv_listeners_del(lc);
	nv_acc_abandon(lc);
	nv_admit_fini(&lc->admit);
	nv_sock_close(&lc->lfd);
	lc->type = 0;
	free(lc);
	return NV_OK;
}

/* Drops the accept in progress and the pending connections of every listen
 * comm of ctx (NULL: all); the listen comms stay open. Returns how many. */
static int nv_listen_reclaim(const struct nv_ctx *ctx)
{
	struct nv_listen_comm *lc;
	int n = 0;

	pthread_mutex_lock(&nv_listeners_lock);
	for (lc = nv_listeners; lc; lc = lc->next) {
		if (ctx && lc->ctx != ctx)
			continue;
		if (lc->rc) {
			NV_INFO(NV_SUB_NET, "listener %s: reclaiming the accept from %s abandoned "
				"while %s", lc->addr_str, lc->rc->base.peer,
				nv_acc_state_names[lc->hs.state]);
			nv_hs_send_failure(lc->rc->base.fd, NV_WST_TIMEOUT);
			nv_acc_abandon(lc);
			n++;
		}
		nv_admit_drop_all(&lc->admit);
	}
	pthread_mutex_unlock(&nv_listeners_lock);
	return n;
}

void nv_net_reclaim(struct nv_ctx *ctx)
{
	int n = nv_connect_reclaim(ctx) + nv_listen_reclaim(ctx);

	if (n)
		NV_INFO(NV_SUB_INIT | NV_SUB_NET, "reclaimed %d connect(s)/accept(s) abandoned "
			"mid-handshake", n);
}
