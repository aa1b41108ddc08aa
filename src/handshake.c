/*
 * handshake.c - what the connect (connect.c) and accept (accept.c) state
 * machines share: the handshake interface and process token, deadlines,
 * buffered message I/O over the non-blocking socket, the checks every
 * received message goes through and the second half of the path check
 * (handshake.h has the contracts). Connection set-up layer, below both.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "comm.h"
#include "handshake.h"
#include "param.h"

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
	/* a META says its own version (4 only from a listener answering an eager-capable
	 * sender, nv_meta.version); everything else is the base version */
	uint16_t v = type == NV_MSG_META ? ((const struct nv_meta *)payload_src)->version : 0;
	struct nv_msg_hdr h = { .type = type, .version = v ? v : NV_WIRE_VERSION_BASE };

	h.len = nv_wire_payload_size_v(type, h.version);

	nv_wire_hdr_encode(&h, buf);
	if (type == NV_MSG_HELLO)
		nv_wire_hello_encode(payload_src, buf + NV_WIRE_HDR_SIZE);
	else if (type == NV_MSG_META)
		nv_wire_meta_encode(payload_src, buf + NV_WIRE_HDR_SIZE);
	else
		nv_wire_status_encode(*(const uint32_t *)payload_src, buf + NV_WIRE_HDR_SIZE);
	return NV_WIRE_HDR_SIZE + h.len;
}

void nv_hs_set_why(struct nv_hs *hs, const char *text)
{
	snprintf(hs->why, sizeof(hs->why), "%s", text);
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
