/*
 * connect.c - listen / connect / accept as explicit non-blocking state
 * machines over the out-of-band TCP socket.
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
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

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
};

/* Lives after the handle (bytes NV_WIRE_HANDLE_SIZE..127) in NCCL's handle buffer while a connect is in progress. */
struct nv_stage {
	uint64_t magic;
	uint64_t token;
	struct nv_stage_ref ref;	/* entry of the connect table */
};
_Static_assert(NV_WIRE_HANDLE_SIZE + sizeof(struct nv_stage) <= 128, "stage fits the handle");

/* Handshake interface: chosen on first use, chosen again when the knobs change
 * (a later init after finalize may bring another environment). */
static pthread_mutex_t nv_if_lock = PTHREAD_MUTEX_INITIALIZER;
static int nv_if_valid;			/* locked */
static char nv_if_spec[2][256];		/* locked: IFNAME, FAMILY used for the choice */
static nv_status_t nv_if_status;	/* locked */
static struct nv_sock_addr nv_if_addr;	/* locked */
static char nv_if_name[NV_SOCK_IFNAME_LEN];
static pthread_once_t nv_token_once = PTHREAD_ONCE_INIT;
static uint64_t nv_process_token;

int nv_connect_timeout_ms(void)
{
	return (int)nv_param_int(NV_PARAM_VERBS_CONNECT_TIMEOUT_MS);
}

uint64_t nv_deadline(void)
{
	return nv_now_ns() + (uint64_t)nv_connect_timeout_ms() * 1000000ull;
}

nv_status_t nv_random(void *buf, size_t len)
{
	size_t off = 0;

	while (off < len) {
		ssize_t n = getrandom((char *)buf + off, len - off, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			NV_WARN("getrandom failed: %s; cannot make a listener secret",
				strerror(errno));
			return NV_ERR_SYSTEM;
		}
		off += (size_t)n;
	}
	return NV_OK;
}

/* Caller holds nv_if_lock. */
static void nv_if_pick(const char *ifname, const char *family)
{
	char s[NV_SOCK_ADDR_STRLEN];

	nv_if_status = nv_sock_pick_if(ifname, family, &nv_if_addr, nv_if_name,
				       sizeof(nv_if_name));
	if (nv_if_status == NV_OK)
		NV_INFO(NV_SUB_INIT | NV_SUB_NET, "handshake interface %s, address %s", nv_if_name,
			nv_sock_addr_str(&nv_if_addr, s, sizeof(s)));
	snprintf(nv_if_spec[0], sizeof(nv_if_spec[0]), "%s", ifname ? ifname : "");
	snprintf(nv_if_spec[1], sizeof(nv_if_spec[1]), "%s", family ? family : "");
	nv_if_valid = 1;
}

static void nv_token_make(void)
{
	if (nv_random(&nv_process_token, sizeof(nv_process_token)) != NV_OK)
		nv_process_token = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ nv_now_ns();
}

/* ---- message helpers ----------------------------------------------------- */

size_t nv_hs_put(uint8_t *buf, uint16_t type, const void *payload_src)
{
	struct nv_msg_hdr h = { .type = type, .len = nv_wire_payload_size(type) };

	nv_wire_hdr_encode(&h, buf);
	if (type == NV_MSG_HELLO)
		nv_wire_hello_encode(payload_src, buf + NV_WIRE_HDR_SIZE);
	else if (type == NV_MSG_META)
		nv_wire_meta_encode(payload_src, buf + NV_WIRE_HDR_SIZE);
	else
		nv_wire_status_encode(*(const uint32_t *)payload_src, buf + NV_WIRE_HDR_SIZE);
	return NV_WIRE_HDR_SIZE + h.len;
}

void nv_hs_queue_status(struct nv_hs *hs, uint32_t code)
{
	hs->out_len = nv_hs_put(hs->out, NV_MSG_STATUS, &code);
	hs->out_off = 0;
}

/* Best effort, never blocks: tell the peer why we give up. */
void nv_hs_send_failure(int fd, uint32_t code)
{
	uint8_t buf[NV_STATUS_MSG_SIZE];
	size_t off = 0;

	if (fd < 0)
		return;
	nv_hs_put(buf, NV_MSG_STATUS, &code);
	(void)nv_sock_send(fd, buf, sizeof(buf), &off);
}

/*
 * Receives one message of type `want` (or a STATUS, which a failing peer may
 * send instead). 1: complete in hs->in; 0: not yet; -1: error text in hs->why.
 */
int nv_hs_recv(struct nv_hs *hs, int fd, uint16_t want)
{
	size_t len = hs->have_hdr ? NV_WIRE_HDR_SIZE + hs->hdr.len : NV_WIRE_HDR_SIZE;
	int rc = nv_sock_recv(fd, hs->in, len, &hs->in_off);

	if (rc < 0) {
		hs->sock_err = 1;
		snprintf(hs->why, sizeof(hs->why), "%s",
			 rc == -ECONNRESET ? "the peer closed the connection (process exited, "
					     "aborted, or refused us)"
					   : strerror(-rc));
		return -1;
	}
	if (rc == 0)
		return 0;
	if (!hs->have_hdr) {
		if (nv_wire_hdr_decode(hs->in, NV_WIRE_HDR_SIZE, &hs->hdr, hs->why,
				       sizeof(hs->why)) != NV_OK)
			return -1;
		if (hs->hdr.type != want && hs->hdr.type != NV_MSG_STATUS) {
			snprintf(hs->why, sizeof(hs->why), "unexpected message type %u (wanted %u)",
				 hs->hdr.type, want);
			return -1;
		}
		hs->have_hdr = 1;
		return nv_hs_recv(hs, fd, want);
	}
	hs->have_hdr = 0;
	hs->in_off = 0;
	return 1;
}

/* After nv_hs_recv() == 1 for a STATUS: 0 when it says OK, else -1 with why. */
int nv_hs_status(struct nv_hs *hs)
{
	uint32_t code;

	if (nv_wire_status_decode(hs->in + NV_WIRE_HDR_SIZE, hs->hdr.len, &code, hs->why,
				  sizeof(hs->why)) != NV_OK)
		return -1;
	if (code == NV_WST_OK)
		return 0;
	hs->peer_code = code;
	snprintf(hs->why, sizeof(hs->why), "the peer gave up: %s", nv_wire_status_str(code));
	return -1;
}

void nv_hs_peer_failed(struct nv_hs *hs, struct nv_comm *c)
{
	if (hs->peer_code != NV_WST_PROBE_LOST)
		return;
	nv_comm_probe_lost(c, "our path-check RDMA writes completed, but the peer says they "
			      "never reached it");
	snprintf(hs->why, sizeof(hs->why), "the path check failed (see the error above)");
}

uint64_t nv_probe_deadline(void)
{
	return nv_now_ns() + (uint64_t)nv_connect_timeout_ms() * 500000ull;
}

int nv_hs_peer_probe(struct nv_hs *hs, struct nv_comm *c)
{
	char what[192];

	if (nv_comm_probe_landed(c))
		return NV_STEP_NEXT;
	if (nv_now_ns() < hs->deadline_ns)
		return NV_STEP_WAIT;
	snprintf(what, sizeof(what), "the peer's path-check RDMA writes completed on its side, "
		 "but none reached us within half of NCCL_VERBS_CONNECT_TIMEOUT_MS=%d",
		 nv_connect_timeout_ms());
	nv_comm_probe_lost(c, what);
	snprintf(hs->why, sizeof(hs->why), "the path check failed (see the error above)");
	return NV_STEP_FAIL;
}

/* Decodes the peer's META into c->rmeta and checks it against us. */
int nv_hs_meta(struct nv_hs *hs, struct nv_comm *c, int role, uint32_t *code)
{
	struct nv_meta *m;
	int i;

	*code = NV_WST_BAD_META;
	if (hs->hdr.type == NV_MSG_STATUS) {
		*code = NV_WST_OK; /* nothing to tell a peer that already gave up */
		if (nv_hs_status(hs) == 0)
			snprintf(hs->why, sizeof(hs->why), "protocol error: status instead of metadata");
		return -1;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		snprintf(hs->why, sizeof(hs->why), "out of memory");
		*code = NV_WST_RESOURCES;
		return -1;
	}
	free(c->rmeta);
	c->rmeta = m;
	if (nv_wire_meta_decode(hs->in + NV_WIRE_HDR_SIZE, hs->hdr.len, m, hs->why,
				sizeof(hs->why)) != NV_OK)
		return -1;
	if (m->role != role) {
		snprintf(hs->why, sizeof(hs->why), "metadata role %u, expected %d", m->role, role);
		return -1;
	}
	for (i = 0; i < c->ndevs; i++) {
		if (m->dev[0].link_layer != c->dev[i].dev->link_layer) {
			snprintf(hs->why, sizeof(hs->why),
				 "link layers differ: %.32s is %s, the peer's %.31s is %s; restrict "
				 "NCCL_IB_HCA to one link type", c->dev[i].dev->name,
				 c->dev[i].dev->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "IB",
				 m->dev[0].name,
				 m->dev[0].link_layer == NV_WIRE_LL_ETH ? "RoCE" : "IB");
			*code = NV_WST_LINK_MISMATCH;
			return -1;
		}
	}
	*code = NV_WST_OK;
	return 0;
}

int nv_hs_expired(struct nv_hs *hs, const char *waiting_for)
{
	if (nv_now_ns() < hs->deadline_ns)
		return 0;
	snprintf(hs->why, sizeof(hs->why),
		 "no progress within NCCL_VERBS_CONNECT_TIMEOUT_MS=%d while waiting for %s",
		 nv_connect_timeout_ms(), waiting_for);
	return 1;
}

/* QPs per message: all when the sender splits, else one per device. */
int nv_comm_data_qps(const struct nv_comm *c, int split)
{
	int n = c->ndevs > c->rmeta->ndevs ? c->ndevs : c->rmeta->ndevs;

	if (split || n > c->nqps)
		n = c->nqps;
	return n;
}


nv_status_t nv_if_get(struct nv_sock_addr *addr)
{
	const char *ifname = nv_param_str(NV_PARAM_SOCKET_IFNAME);
	const char *family = nv_param_str(NV_PARAM_SOCKET_FAMILY);
	nv_status_t st;

	pthread_mutex_lock(&nv_if_lock);
	if (!nv_if_valid || strcmp(nv_if_spec[0], ifname ? ifname : "") ||
	    strcmp(nv_if_spec[1], family ? family : ""))
		nv_if_pick(ifname, family);
	if (addr)
		*addr = nv_if_addr;
	st = nv_if_status;
	pthread_mutex_unlock(&nv_if_lock);
	return st;
}

uint64_t nv_process_token_get(void)
{
	pthread_once(&nv_token_once, nv_token_make);
	return nv_process_token;
}

/* 1 when hs->out is fully sent, 0 not yet, -1 error (why). */
int nv_hs_flush_out(struct nv_hs *hs, int fd)
{
	int rc = nv_sock_send(fd, hs->out, hs->out_len, &hs->out_off);

	if (rc < 0) {
		hs->sock_err = 1;
		snprintf(hs->why, sizeof(hs->why), "sending failed: %s (the peer went away)",
			 strerror(-rc));
		/* A peer that refused us usually said why before closing: prefer its reason. */
		hs->in_off = 0;
		hs->have_hdr = 0;
		if (nv_hs_recv(hs, fd, NV_MSG_STATUS) == 1 && hs->hdr.type == NV_MSG_STATUS)
			(void)nv_hs_status(hs);
		return -1;
	}
	return rc;
}

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

nv_status_t nv_hs_status_of(const struct nv_hs *hs)
{
	if (hs->local_st != NV_OK)
		return hs->local_st; /* e.g. NV_ERR_USAGE from a bad NCCL_IB_GID_INDEX */
	switch (hs->local_code) {
	case NV_WST_RESOURCES:
	case NV_WST_QP_FAILED:
		return NV_ERR_SYSTEM;
	case NV_WST_LINK_MISMATCH:
		return NV_ERR_USAGE;
	default:
		return NV_ERR_REMOTE;
	}
}

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
		snprintf(cs->hs.why, sizeof(cs->hs.why), "local verbs resources (see above)");
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

static int nv_con_tcp(struct nv_connect_state *cs)
{
	struct nv_comm *c = &cs->sc->base;
	int rc;

	if (c->fd < 0) {
		if (nv_now_ns() < cs->next_try_ns && nv_now_ns() < cs->hs.deadline_ns)
			return NV_STEP_WAIT;
		if (nv_now_ns() >= cs->hs.deadline_ns) {
			/* keep the last TCP error in why: "Connection refused" says it all */
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
	char last[NV_WIRE_WHY_LEN];
	uint64_t next = nv_now_ns() +
			NV_REFUSED_RETRY_NS * (uint64_t)(cs->refusals < 50 ? cs->refusals + 1 : 50);

	if (code != NV_WST_BUSY && code != NV_WST_BACKLOG && (code != NV_WST_OK || !cs->hs.sock_err))
		return NV_STEP_FAIL;

	if (next >= cs->give_up_ns) { /* no time left for another try */
		snprintf(last, sizeof(last), "%s", cs->hs.why);
		snprintf(cs->hs.why, sizeof(cs->hs.why), "the listener turned us away %d time(s) "
			 "within NCCL_VERBS_CONNECT_TIMEOUT_MS=%d; last: %.150s", cs->refusals + 1,
			 nv_connect_timeout_ms(), code != NV_WST_OK ? nv_wire_status_str(code) : last);
		return NV_STEP_FAIL;
	}
	cs->refusals++;
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
		snprintf(cs->hs.why, sizeof(cs->hs.why), "QP bring-up (see above)");
		return nv_con_fail(cs, NV_WST_QP_FAILED);
	}
	if (nv_comm_probe_post(c) != NV_OK) {
		snprintf(cs->hs.why, sizeof(cs->hs.why), "posting the path check (see above)");
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
		char id[160];

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
