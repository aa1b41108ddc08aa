/*
 * connect.c - the connect side of the handshake, an explicit non-blocking
 * state machine over the out-of-band TCP socket (accept.c has the listen and
 * accept side, handshake.c what both share).
 *
 * Handshake (every message: 16-byte header + fixed-size payload, wire.h):
 *   connector                                listener
 *   HELLO(secret, nonce) + META(send, QPs in INIT) ->
 *                                           <- META(recv, QPs at RTS, reduced ECE)
 *   RTR/RTS, probe RDMA write on every QP
 *   STATUS(ok | failure code)               ->
 *                                              our probe word holds the connector's value?
 *                                              probe RDMA write on every QP
 *                                           <- STATUS(ok | failure code)
 *   our probe word holds the listener's value?
 *   STATUS(ok | PROBE_LOST)                 ->
 *   comm returned                              comm returned
 * The path check proves both directions: each side's probe writes a value
 * keyed by the listener's secret and the connector's nonce
 * (nv_wire_probe_value) into the peer's probe word, and each side returns a
 * comm only after it saw the PEER's value land in its own word; a write
 * that completed but went elsewhere (another fabric where the QPNs happen to
 * exist) fails both sides within the deadline, naming both NICs and GIDs.
 * A side that fails sends a STATUS with a failure code when it can, so the
 * other side's error names the real cause. Every state has a deadline of
 * NCCL_VERBS_CONNECT_TIMEOUT_MS; a silent or dead peer is reported by name.
 *
 * Connect state between calls lives in the plugin's table (stage.h); the
 * tail of NCCL's 128-byte handle buffer (our handle uses the first
 * NV_WIRE_HANDLE_SIZE bytes) holds only its slot and generation, tagged with a per-process
 * token so a handle from another process is never mistaken for one of ours.
 * Connects abandoned mid-way are reclaimed at finalize (nv_net_reclaim).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "handshake.h"
#include "ibv.h"
#include "mr.h"
#include "nv_api.h"
#include "param.h"
#include "stage.h"

#define NV_STAGE_MAGIC 0x4e56535447453031ull /* "NVSTGE01" */
#define NV_RETRY_NS 50000000ull
#define NV_REFUSED_RETRY_NS 2000000ull	/* listener busy: first retry after 2 ms, then more */

struct nv_connect_state {
	struct nv_hs hs;
	struct nv_send_comm *sc;
	struct nv_sock_addr addr;
	int vdev;
	int traffic_class;
	int rndevs;		/* listener's device count, from the handle */
	uint8_t secret[NV_WIRE_SECRET_LEN];	/* the listener's, from the handle */
	uint64_t conn_id;	/* our random nonce, sent in the hello */
	uint64_t next_try_ns;
	int tries;
	uint64_t give_up_ns;	/* refused by a busy listener: retries end here */
	int refusals;		/* times the listener turned us away before the handshake */
	uint32_t refused_code;	/* the last refusal's status, while why still holds its text */
	int refused_last;	/* why is the last refusal's, its retry not yet answered */
};

/* Lives after the handle (bytes NV_WIRE_HANDLE_SIZE..127) in NCCL's handle buffer while a connect is in progress. */
struct nv_stage {
	uint64_t magic;
	uint64_t token;
	struct nv_stage_ref ref;	/* entry of the connect table */
};
_Static_assert(NV_WIRE_HANDLE_SIZE + sizeof(struct nv_stage) <= 128, "stage fits the handle");

/* ---- the connect state machine ------------------------------------------ */

enum nv_con_state {
	NV_CON_TCP,		/* TCP connect to the listener (retried until the deadline) */
	NV_CON_SEND_META,	/* HELLO + our META going out */
	NV_CON_RECV_META,	/* waiting for the receiver's META */
	NV_CON_PROBE,		/* our path-proving RDMA writes in flight */
	NV_CON_SEND_READY,	/* STATUS(ok) going out */
	NV_CON_RECV_DONE,	/* waiting for the receiver's probe result */
	NV_CON_PEER_PROBE,	/* waiting for the receiver's probe value in our word */
	NV_CON_SEND_PROVEN,	/* STATUS(ok): both directions proven */
	NV_CON_DONE,
	NV_CON_NSTATES
};

static const char *const nv_con_state_names[NV_CON_NSTATES] = {
	[NV_CON_TCP] = "TCP connect",
	[NV_CON_SEND_META] = "sending hello and metadata",
	[NV_CON_RECV_META] = "waiting for the receiver's metadata",
	[NV_CON_PROBE] = "path check (RDMA write to the receiver)",
	[NV_CON_SEND_READY] = "sending ready",
	[NV_CON_RECV_DONE] = "waiting for the receiver's path check",
	[NV_CON_PEER_PROBE] = "path check (the receiver's RDMA write to us)",
	[NV_CON_SEND_PROVEN] = "sending path proven",
	[NV_CON_DONE] = "connected",
};

static int nv_con_fail(struct nv_connect_state *cs, uint32_t code)
{
	cs->hs.local_code = code;
	nv_hs_send_failure(cs->sc->base.fd, code);
	return NV_STEP_FAIL;
}

/* As NCCL: QPS_PER_CONNECTION x the larger device count of the two sides, capped. */
static int nv_con_nqps(int ndevs, int rndevs)
{
	int n = (int)nv_param_int(NV_PARAM_IB_QPS_PER_CONNECTION) * (ndevs > rndevs ? ndevs : rndevs);

	return n > NV_WIRE_MAX_QPS ? NV_WIRE_MAX_QPS : n;
}

static int nv_con_resources(struct nv_connect_state *cs)
{
	struct nv_comm *c = &cs->sc->base;
	struct nv_meta *m;
	struct nv_hello hello;
	int64_t sl = nv_param_int(NV_PARAM_IB_SL), tc = nv_param_int(NV_PARAM_IB_TC);
	size_t off;

	cs->hs.local_st = nv_comm_init(c, NV_COMM_SEND, cs->vdev, NV_SEND_REQS);
	if (cs->hs.local_st == NV_OK)
		cs->hs.local_st = nv_comm_create_qps(c, nv_con_nqps(c->ndevs, cs->rndevs));
	if (cs->hs.local_st != NV_OK) {
		nv_hs_set_why(&cs->hs, "local verbs resources (see above)");
		return nv_con_fail(cs, NV_WST_RESOURCES);
	}
	/* As NCCL: the knob, else the communicator's trafficClass, else 0 (SL only 0..15). */
	c->tc = (uint8_t)(tc >= 0 ? tc : cs->traffic_class >= 0 ? cs->traffic_class : 0);
	c->sl = (uint8_t)(sl >= 0 ? sl : cs->traffic_class >= 0 && cs->traffic_class <= 15
					     ? cs->traffic_class : 0);
	m = malloc(sizeof(*m));
	if (!m) {
		snprintf(cs->hs.why, sizeof(cs->hs.why), "out of memory");
		return nv_con_fail(cs, NV_WST_RESOURCES);
	}
	nv_comm_fill_meta(c, NV_META_ROLE_SEND, m);
	m->split = (uint8_t)nv_param_int(NV_PARAM_IB_SPLIT_DATA_ON_QPS);
	memcpy(hello.secret, cs->secret, NV_WIRE_SECRET_LEN);
	hello.conn_id = cs->conn_id;
	c->probe_out = nv_wire_probe_value(cs->secret, cs->conn_id, NV_META_ROLE_SEND);
	c->probe_want = nv_wire_probe_value(cs->secret, cs->conn_id, NV_META_ROLE_RECV);
	off = nv_hs_put(cs->hs.out, NV_MSG_HELLO, &hello);
	cs->hs.out_len = off + nv_hs_put(cs->hs.out + off, NV_MSG_META, m);
	cs->hs.out_off = 0;
	free(m);
	return NV_STEP_NEXT;
}

/*
 * why for a connect that ends after n refusals: the listener's last reason
 * (its status code; else the socket error that why holds).
 */
static void nv_con_refused_why(struct nv_connect_state *cs, int n, uint32_t code)
{
	char last[NV_WIRE_WHY_LEN];

	snprintf(last, sizeof(last), "%s", cs->hs.why);
	snprintf(cs->hs.why, sizeof(cs->hs.why), "the listener turned us away %d time(s) "
		 "within NCCL_VERBS_CONNECT_TIMEOUT_MS=%d; last: %.150s", n,
		 nv_connect_timeout_ms(), code != NV_WST_OK ? nv_wire_status_str(code) : last);
}

static int nv_con_tcp(struct nv_connect_state *cs)
{
	struct nv_comm *c = &cs->sc->base;
	int rc;

	if (c->fd < 0) {
		if (nv_now_ns() < cs->next_try_ns && nv_now_ns() < cs->hs.deadline_ns)
			return NV_STEP_WAIT;
		if (nv_now_ns() >= cs->hs.deadline_ns) {
			/* keep the last TCP error in why: "Connection refused" says it all;
			 * a refusal's retry that came too late says what nv_con_refused says */
			if (cs->refused_last)
				nv_con_refused_why(cs, cs->refusals, cs->refused_code);
			return NV_STEP_FAIL;
		}
		rc = nv_sock_connect_start(&cs->addr, &c->fd);
		if (rc < 0) {
			snprintf(cs->hs.why, sizeof(cs->hs.why), "socket: %s", strerror(-rc));
			return NV_STEP_FAIL;
		}
	}
	rc = nv_sock_connect_check(c->fd);
	if (rc == 1) {
		cs->refused_last = 0;
		cs->hs.state = NV_CON_SEND_META;
		if (!c->qps)
			return nv_con_resources(cs);
		cs->hs.out_off = 0; /* a retry after a refusal: same hello and metadata */
		return NV_STEP_NEXT;
	}
	if (rc < 0 && rc != -ECONNREFUSED && rc != -ETIMEDOUT && rc != -EHOSTUNREACH &&
	    rc != -ENETUNREACH && rc != -ECONNRESET) {
		snprintf(cs->hs.why, sizeof(cs->hs.why), "TCP connect: %s", strerror(-rc));
		return NV_STEP_FAIL;
	}
	if (rc < 0) {
		snprintf(cs->hs.why, sizeof(cs->hs.why), "TCP connect still failing after %d "
			 "attempt(s) within NCCL_VERBS_CONNECT_TIMEOUT_MS=%d: %s (listener gone?)",
			 cs->tries + 1, nv_connect_timeout_ms(), strerror(-rc));
		cs->refused_last = 0;
		nv_sock_close(&c->fd);
		cs->tries++;
		cs->next_try_ns = nv_now_ns() + NV_RETRY_NS * (uint64_t)(cs->tries < 10 ? cs->tries : 10);
	}
	if (nv_now_ns() >= cs->hs.deadline_ns) {
		if (rc == 0)
			nv_hs_expired(&cs->hs, "the TCP connection to be accepted");
		return NV_STEP_FAIL;
	}
	return NV_STEP_WAIT;
}

/*
 * The listener turned us away before the handshake began: it said it is
 * busy (NV_WST_BUSY: too many pending hellos; NV_WST_BACKLOG: too many
 * connectors wait for accept), or closed the connection without a word (an
 * eviction racing our hello). Connect again, with a growing pause, until
 * the connect's deadline; then fail, printing the listener's reason.
 */
static int nv_con_refused(struct nv_connect_state *cs)
{
	uint32_t code = cs->hs.peer_code;
	uint64_t next = nv_now_ns() +
			NV_REFUSED_RETRY_NS * (uint64_t)(cs->refusals < 50 ? cs->refusals + 1 : 50);

	if (code != NV_WST_BUSY && code != NV_WST_BACKLOG && (code != NV_WST_OK || !cs->hs.sock_err))
		return NV_STEP_FAIL;

	if (next >= cs->give_up_ns) { /* no time left for another try */
		nv_con_refused_why(cs, cs->refusals + 1, code);
		return NV_STEP_FAIL;
	}
	cs->refusals++;
	cs->refused_code = code;
	cs->refused_last = 1;
	nv_sock_close(&cs->sc->base.fd);
	cs->hs.state = NV_CON_TCP;
	cs->hs.deadline_ns = cs->give_up_ns;
	cs->hs.in_off = 0;
	cs->hs.have_hdr = 0;
	cs->hs.peer_code = NV_WST_OK;
	cs->hs.sock_err = 0;
	cs->next_try_ns = next;
	return NV_STEP_WAIT;
}

static int nv_con_send(struct nv_connect_state *cs, int next, const char *what)
{
	int rc = nv_hs_flush_out(&cs->hs, cs->sc->base.fd);

	if (rc < 0)
		return cs->hs.state == NV_CON_SEND_META ? nv_con_refused(cs) : NV_STEP_FAIL;
	if (rc == 0)
		return nv_hs_expired(&cs->hs, what) ? NV_STEP_FAIL : NV_STEP_WAIT;
	cs->hs.state = next;
	cs->hs.deadline_ns = nv_deadline();
	return NV_STEP_NEXT;
}

static int nv_con_recv_meta(struct nv_connect_state *cs)
{
	struct nv_comm *c = &cs->sc->base;
	uint32_t code;
	int rc = nv_hs_recv(&cs->hs, c->fd, NV_MSG_META);

	if (rc < 0)
		return nv_con_refused(cs);
	if (rc == 0)
		return nv_hs_expired(&cs->hs, "the receiver's metadata (is the peer calling accept?)")
			       ? nv_con_fail(cs, NV_WST_TIMEOUT) : NV_STEP_WAIT;
	if (nv_hs_meta(&cs->hs, c, NV_META_ROLE_RECV, &code) < 0) {
		if (cs->hs.peer_code == NV_WST_BUSY || cs->hs.peer_code == NV_WST_BACKLOG)
			return nv_con_refused(cs);
		return nv_con_fail(cs, code);
	}
	if (c->rmeta->nqps != c->nqps) {
		snprintf(cs->hs.why, sizeof(cs->hs.why), "the receiver has %u QPs, we have %d",
			 c->rmeta->nqps, c->nqps);
		return nv_con_fail(cs, NV_WST_BAD_META);
	}
	c->rctrl_addr = c->rmeta->addr;
	c->nq = nv_comm_data_qps(c, (int)nv_param_int(NV_PARAM_IB_SPLIT_DATA_ON_QPS));
	if (nv_comm_qps_ready(c, c->tc) != NV_OK) {
		nv_hs_set_why(&cs->hs, "QP bring-up (see above)");
		return nv_con_fail(cs, NV_WST_QP_FAILED);
	}
	if (nv_comm_probe_post(c) != NV_OK) {
		nv_hs_set_why(&cs->hs, "posting the path check (see above)");
		return nv_con_fail(cs, NV_WST_PROBE_FAILED);
	}
	cs->hs.state = NV_CON_PROBE;
	cs->hs.deadline_ns = nv_deadline();
	return NV_STEP_NEXT;
}

static int nv_con_probe(struct nv_connect_state *cs)
{
	int rc = nv_comm_probe_poll(&cs->sc->base);

	if (rc < 0) {
		snprintf(cs->hs.why, sizeof(cs->hs.why), "the path check failed (see the error above)");
		return nv_con_fail(cs, NV_WST_PROBE_FAILED);
	}
	if (rc == 0)
		return nv_hs_expired(&cs->hs, "the path-check RDMA write to complete")
			       ? nv_con_fail(cs, NV_WST_PROBE_FAILED) : NV_STEP_WAIT;
	nv_hs_queue_status(&cs->hs, NV_WST_OK);
	cs->hs.state = NV_CON_SEND_READY;
	return NV_STEP_NEXT;
}

static int nv_con_recv_done(struct nv_connect_state *cs)
{
	int rc = nv_hs_recv(&cs->hs, cs->sc->base.fd, NV_MSG_STATUS);

	if (rc < 0)
		return NV_STEP_FAIL;
	if (rc == 0)
		return nv_hs_expired(&cs->hs, "the receiver's path check") ? NV_STEP_FAIL
									   : NV_STEP_WAIT;
	if (nv_hs_status(&cs->hs) < 0) {
		nv_hs_peer_failed(&cs->hs, &cs->sc->base);
		return NV_STEP_FAIL;
	}
	cs->hs.state = NV_CON_PEER_PROBE;
	cs->hs.deadline_ns = nv_probe_deadline();
	return NV_STEP_NEXT;
}

static int nv_con_peer_probe(struct nv_connect_state *cs)
{
	int rc = nv_hs_peer_probe(&cs->hs, &cs->sc->base);

	if (rc == NV_STEP_FAIL)
		return nv_con_fail(cs, NV_WST_PROBE_LOST);
	if (rc == NV_STEP_NEXT) {
		nv_hs_queue_status(&cs->hs, NV_WST_OK);
		cs->hs.state = NV_CON_SEND_PROVEN;
	}
	return rc;
}

static int nv_con_step(struct nv_connect_state *cs)
{
	switch (cs->hs.state) {
	case NV_CON_TCP:
		return nv_con_tcp(cs);
	case NV_CON_SEND_META:
		return nv_con_send(cs, NV_CON_RECV_META, "the listener to read our metadata");
	case NV_CON_RECV_META:
		return nv_con_recv_meta(cs);
	case NV_CON_PROBE:
		return nv_con_probe(cs);
	case NV_CON_SEND_READY:
		return nv_con_send(cs, NV_CON_RECV_DONE, "the listener to read our status");
	case NV_CON_RECV_DONE:
		return nv_con_recv_done(cs);
	case NV_CON_PEER_PROBE:
		return nv_con_peer_probe(cs);
	case NV_CON_SEND_PROVEN:
		return nv_con_send(cs, NV_CON_DONE, "the listener to read our path-proven status");
	default:
		return NV_STEP_WAIT;
	}
}

static nv_status_t nv_con_start(int dev, const void *handle, int traffic_class,
				struct nv_connect_state **out)
{
	struct nv_connect_state *cs;
	struct nv_handle h;
	char why[NV_WIRE_WHY_LEN];

	if (nv_wire_handle_decode(handle, NV_WIRE_HANDLE_SIZE, &h, why, sizeof(why)) != NV_OK) {
		NV_WARN("connect on device %d: the handle is unusable: %s", dev, why);
		return NV_ERR_INVALID;
	}
	if (nv_param_int(NV_PARAM_IB_SUBNET_AWARE_ROUTING) && nv_vdev_get(dev)) {
		int sub = nv_vdev_by_subnet((const uint8_t (*)[16])h.gids, NV_WIRE_HANDLE_GIDS, dev);

		if (sub != dev)
			NV_INFO(NV_SUB_NET, "subnet-aware routing: connecting from device %d (%s) "
				"instead of %d, which is not on the listener's subnet", sub,
				nv_vdev_get(sub)->name, dev);
		dev = sub;
	}
	if (!nv_vdev_get(dev)) {
		NV_WARN("connect: network device %d does not exist (%d devices)", dev,
			nv_vdev_count());
		return NV_ERR_INVALID;
	}
	cs = calloc(1, sizeof(*cs));
	if (cs)
		cs->sc = calloc(1, sizeof(*cs->sc));
	if (!cs || !cs->sc) {
		free(cs);
		NV_WARN("connect: out of memory");
		return NV_ERR_SYSTEM;
	}
	cs->sc->base.fd = -1;
	cs->sc->base.type = NV_COMM_SEND;
	cs->vdev = dev;
	cs->traffic_class = traffic_class;
	cs->rndevs = h.ndevs;
	nv_sock_addr_from_handle(&h, &cs->addr);
	nv_sock_addr_str(&cs->addr, cs->sc->base.peer, sizeof(cs->sc->base.peer));
	memcpy(cs->secret, h.secret, NV_WIRE_SECRET_LEN);
	if (nv_random(&cs->conn_id, sizeof(cs->conn_id)) != NV_OK) {
		free(cs->sc);
		free(cs);
		return NV_ERR_SYSTEM;
	}
	cs->hs.state = NV_CON_TCP;
	cs->hs.deadline_ns = nv_deadline();
	cs->give_up_ns = cs->hs.deadline_ns;
	*out = cs;
	return NV_OK;
}

static void nv_con_free(struct nv_connect_state *cs)
{
	nv_comm_destroy(&cs->sc->base);
	free(cs->sc);
	free(cs);
}

/* A connect its caller stopped calling (nv_net_reclaim): give everything back. */
static void nv_con_reclaim(void *p)
{
	struct nv_connect_state *cs = p;

	NV_INFO(NV_SUB_NET, "reclaiming an abandoned connect to %s (it stopped while %s)",
		cs->sc->base.peer, nv_con_state_names[cs->hs.state]);
	nv_hs_send_failure(cs->sc->base.fd, NV_WST_TIMEOUT);
	nv_con_free(cs);
}

int nv_connect_reclaim(const struct nv_ctx *ctx)
{
	return nv_stage_reclaim(ctx, nv_con_reclaim);
}

/* The connect state of this handle buffer: resumed from the table, or a new one. */
static nv_status_t nv_con_get(struct nv_ctx *ctx, int dev, void *handle, int traffic_class,
			      struct nv_stage *stage, struct nv_connect_state **cs)
{
	char why[NV_WIRE_WHY_LEN];
	nv_status_t st;

	memcpy(stage, (char *)handle + NV_WIRE_HANDLE_SIZE, sizeof(*stage));
	if (stage->magic == NV_STAGE_MAGIC && stage->token == nv_process_token_get()) {
		*cs = nv_stage_take(stage->ref, why, sizeof(why));
		if (*cs)
			return NV_OK;
		NV_WARN("connect on device %d: the handle buffer %p is not usable: %s", dev, handle,
			why);
		return NV_ERR_INVALID;
	}
	st = nv_con_start(dev, handle, traffic_class, cs);
	if (st != NV_OK)
		return st;
	st = nv_stage_add(*cs, ctx, &stage->ref);
	if (st != NV_OK) {
		nv_con_free(*cs);
		return st;
	}
	stage->magic = NV_STAGE_MAGIC;
	stage->token = nv_process_token_get();
	memcpy((char *)handle + NV_WIRE_HANDLE_SIZE, stage, sizeof(*stage));
	return NV_OK;
}

nv_status_t nv_net_connect(struct nv_ctx *ctx, int dev, void *handle, int traffic_class,
			   void **send_comm)
{
	struct nv_stage stage;
	struct nv_connect_state *cs = NULL;
	nv_status_t st;
	int rc;

	*send_comm = NULL;
	st = nv_con_get(ctx, dev, handle, traffic_class, &stage, &cs);
	if (st != NV_OK)
		return st;
	do
		rc = nv_con_step(cs);
	while (rc == NV_STEP_NEXT && cs->hs.state != NV_CON_DONE);
	if (rc == NV_STEP_WAIT) {
		nv_stage_untake(stage.ref);
		return NV_OK;
	}
	nv_stage_remove(stage.ref);
	memset((char *)handle + NV_WIRE_HANDLE_SIZE, 0, sizeof(stage));
	if (rc == NV_STEP_FAIL) {
		char id[256];

		NV_WARN("connect to %s%s failed while %s: %s", cs->sc->base.peer,
			nv_comm_hs_ident(&cs->sc->base, "from", id, sizeof(id)),
			nv_con_state_names[cs->hs.state], cs->hs.why);
		st = nv_hs_status_of(&cs->hs);
		nv_con_free(cs);
		return st;
	}
	nv_send_comm_ready(cs->sc);
	NV_INFO(NV_SUB_NET, "connected to %s: %d QP(s), %d per message, first QPN 0x%x -> 0x%x",
		cs->sc->base.peer, cs->sc->base.nqps, cs->sc->base.nq, cs->sc->base.qps[0].qp->qp_num,
		cs->sc->base.qps[0].rqpn);
	*send_comm = cs->sc;
	free(cs);
	return NV_OK;
}
