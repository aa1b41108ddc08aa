/*
 * admit.c - admission of connectors at a listener (see admit.h for the
 * fairness contract): pending hellos, the authenticated backlog and the
 * listener's rate-limited warnings.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admit.h"
#include "os.h"
#include "param.h"

static const char *const nv_refusal_names[NV_RF_N] = {
	[NV_RF_TIMEOUT] = "no hello in time",
	[NV_RF_CLOSED] = "closed before the hello",
	[NV_RF_BAD_HELLO] = "not a valid hello",
	[NV_RF_BAD_SECRET] = "wrong secret",
	[NV_RF_EVICTED] = "silent, dropped for room",
	[NV_RF_BUSY] = "refused, every pending hello still arriving",
	[NV_RF_BACKLOG] = "refused, backlog full",
};

/* ---- rate-limited warnings ------------------------------------------------ */

/* Writes the summary of the suppressed lines of the interval, if any, and starts a new one. */
static void nv_admit_log_flush(struct nv_admit *a, uint64_t now)
{
	struct nv_admit_log *l = &a->log;
	char reasons[320] = "", srcs[NV_ADMIT_SRC_MAX * NV_SOCK_ADDR_STRLEN + 16] = "";
	size_t off = 0;
	int i;

	if (l->total) {
		for (i = 0; i < NV_RF_N; i++) {
			if (l->count[i] && off < sizeof(reasons))
				off += (size_t)snprintf(reasons + off, sizeof(reasons) - off, "%s%s: %lu",
							off ? ", " : "", nv_refusal_names[i],
							l->count[i]);
		}
		for (i = 0, off = 0; i < l->nsrc && off < sizeof(srcs); i++)
			off += (size_t)snprintf(srcs + off, sizeof(srcs) - off, "%s%s", i ? ", " : "",
						l->src[i]);
		NV_WARN("listener %s: %lu more connection(s) refused or dropped in the last %.1f s "
			"from %d%s source(s) (%s%s): %s", a->addr, l->total,
			(double)(now - l->start_ns) / 1e9, l->nsrc, l->more_src ? "+" : "", srcs,
			l->more_src ? ", ..." : "", reasons);
	}
	memset(l, 0, sizeof(*l));
	l->start_ns = now;
}

static void nv_admit_log_source(struct nv_admit_log *l, const struct nv_sock_addr *peer)
{
	char s[NV_SOCK_ADDR_STRLEN], *colon;
	int i;

	nv_sock_addr_str(peer, s, sizeof(s));
	colon = strrchr(s, ':'); /* the host, without the port */
	if (colon)
		*colon = '\0';
	for (i = 0; i < l->nsrc; i++)
		if (!strcmp(l->src[i], s))
			return;
	if (l->nsrc == NV_ADMIT_SRC_MAX) {
		l->more_src = 1;
		return;
	}
	snprintf(l->src[l->nsrc++], sizeof(l->src[0]), "%s", s);
}

static void nv_admit_warn(struct nv_admit *a, enum nv_refusal r, const struct nv_sock_addr *peer,
			  const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* One refusal: a full line while the interval's burst lasts, else counted for the summary. */
static void nv_admit_warn(struct nv_admit *a, enum nv_refusal r, const struct nv_sock_addr *peer,
			  const char *fmt, ...)
{
	uint64_t now = nv_now_ns();
	char msg[512];
	va_list ap;

	if (now - a->log.start_ns >= NV_ADMIT_WARN_INTERVAL_NS)
		nv_admit_log_flush(a, now);
	if (a->log.logged < NV_ADMIT_WARN_BURST) {
		a->log.logged++;
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		NV_WARN("listener %s: %s%s", a->addr, msg,
			a->log.logged == NV_ADMIT_WARN_BURST ? " (more such lines this second are "
							       "summarised)" : "");
		return;
	}
	a->log.count[r]++;
	a->log.total++;
	nv_admit_log_source(&a->log, peer);
}

/* ---- pending connections -------------------------------------------------- */

nv_status_t nv_admit_init(struct nv_admit *a, int lfd, const char *addr, const uint8_t *secret)
{
	memset(a, 0, sizeof(*a));
	a->lfd = lfd;
	a->addr = addr;
	a->secret = secret;
	a->max_pend = (int)nv_param_int(NV_PARAM_VERBS_LISTEN_PENDING);
	a->max_back = (int)nv_param_int(NV_PARAM_VERBS_LISTEN_BACKLOG);
	a->pend = calloc((size_t)a->max_pend, sizeof(*a->pend));
	a->log.start_ns = nv_now_ns();
	if (!a->pend) {
		NV_WARN("listen on %s: out of memory", addr);
		return NV_ERR_SYSTEM;
	}
	return NV_OK;
}

/* Tells a connector why it is turned away, reading what it sent first so the
 * close is a FIN (an RST could destroy our status before it reads it). */
static void nv_admit_refuse(int *fd, uint32_t code)
{
	uint8_t junk[4096];
	size_t off = 0;

	while (nv_sock_recv(*fd, junk, sizeof(junk), &off) == 1)
		off = 0;
	nv_hs_send_failure(*fd, code);
	nv_sock_close(fd);
}

static void nv_pending_remove(struct nv_admit *a, int i)
{
	nv_sock_close(&a->pend[i].fd);
	a->npend--;
	memmove(&a->pend[i], &a->pend[i + 1], sizeof(a->pend[0]) * (size_t)(a->npend - i));
}

/* Queues an authenticated connection (the fd moves there), or refuses it. */
static void nv_backlog_push(struct nv_admit *a, struct nv_pending *p, uint64_t conn_id)
{
	char s[NV_SOCK_ADDR_STRLEN];

	if (a->nback == a->cap_back && a->cap_back < a->max_back) {
		int cap = a->cap_back ? a->cap_back * 2 : 16;
		struct nv_admitted *b;

		cap = cap > a->max_back ? a->max_back : cap;
		b = realloc(a->back, (size_t)cap * sizeof(*b));
		if (b) {
			a->back = b;
			a->cap_back = cap;
		}
	}
	if (a->nback == a->cap_back) {
		nv_admit_warn(a, NV_RF_BACKLOG, &p->peer, "refused connection from %s: %d "
			      "authenticated connections already wait for accept "
			      "(NCCL_VERBS_LISTEN_BACKLOG=%d); is the caller accepting?",
			      nv_sock_addr_str(&p->peer, s, sizeof(s)), a->nback, a->max_back);
		nv_admit_refuse(&p->fd, NV_WST_BACKLOG);
		return;
	}
	a->back[a->nback++] = (struct nv_admitted){ .fd = p->fd, .peer = p->peer,
						   .conn_id = conn_id };
	p->fd = -1;
}

/* 1: authenticated (*conn_id); 0: not yet; -1: refused (logged, the caller drops it). */
static int nv_pending_step(struct nv_admit *a, struct nv_pending *p, uint64_t *conn_id)
{
	char s[NV_SOCK_ADDR_STRLEN], why[NV_WIRE_WHY_LEN];
	struct nv_msg_hdr hdr;
	struct nv_hello hello;
	int rc = nv_sock_recv(p->fd, p->buf, sizeof(p->buf), &p->off);

	if (rc == 0 && nv_now_ns() < p->deadline_ns)
		return 0;
	nv_sock_addr_str(&p->peer, s, sizeof(s));
	if (rc == 0) {
		nv_admit_warn(a, NV_RF_TIMEOUT, &p->peer, "dropped connection from %s: no valid "
			      "hello within NCCL_VERBS_CONNECT_TIMEOUT_MS=%d (%zu of %zu bytes)", s,
			      nv_connect_timeout_ms(), p->off, sizeof(p->buf));
		return -1;
	}
	if (rc < 0) {
		nv_admit_warn(a, NV_RF_CLOSED, &p->peer, "connection from %s closed before its "
			      "hello (%zu of %zu bytes): %s", s, p->off, sizeof(p->buf),
			      strerror(-rc));
		return -1;
	}
	if (nv_wire_hdr_decode(p->buf, NV_WIRE_HDR_SIZE, &hdr, why, sizeof(why)) != NV_OK ||
	    (hdr.type != NV_MSG_HELLO && snprintf(why, sizeof(why), "first message is type %u, "
						   "not a hello", hdr.type)) ||
	    nv_wire_hello_decode(p->buf + NV_WIRE_HDR_SIZE, hdr.len, &hello, why,
				 sizeof(why)) != NV_OK) {
		nv_admit_warn(a, NV_RF_BAD_HELLO, &p->peer, "refused connection from %s: %s", s, why);
		return -1;
	}
	if (!nv_wire_secret_equal(hello.secret, a->secret)) {
		nv_admit_warn(a, NV_RF_BAD_SECRET, &p->peer, "refused connection from %s: wrong "
			      "secret (the connector used a stale or foreign handle)", s);
		nv_hs_send_failure(p->fd, NV_WST_BAD_SECRET);
		return -1;
	}
	*conn_id = hello.conn_id;
	return 1;
}

/* Steps pending connection i: authenticated ones move to the backlog; 1 if it left. */
static int nv_pending_advance(struct nv_admit *a, int i)
{
	uint64_t conn_id = 0;
	int r = nv_pending_step(a, &a->pend[i], &conn_id);

	if (r == 1)
		nv_backlog_push(a, &a->pend[i], conn_id);
	if (r != 0)
		nv_pending_remove(a, i);
	return r != 0;
}

/* Room for one more pending connection: drops the oldest that has sent nothing. 0 ok. */
static int nv_pending_room(struct nv_admit *a)
{
	char s[NV_SOCK_ADDR_STRLEN];
	int i;

	for (i = 0; i < a->npend && a->npend == a->max_pend; i++) {
		if (a->pend[i].off)
			continue; /* its hello is arriving: never dropped for room */
		if (nv_pending_advance(a, i)) {
			i--; /* it authenticated or failed just now: room made */
			continue;
		}
		if (a->pend[i].off)
			continue; /* bytes arrived just now */
		nv_admit_warn(a, NV_RF_EVICTED, &a->pend[i].peer, "%d connections have not "
			      "authenticated (NCCL_VERBS_LISTEN_PENDING=%d); dropping the oldest "
			      "silent one, from %s", a->npend, a->max_pend,
			      nv_sock_addr_str(&a->pend[i].peer, s, sizeof(s)));
		nv_admit_refuse(&a->pend[i].fd, NV_WST_BUSY);
		nv_pending_remove(a, i);
	}
	return a->npend < a->max_pend ? 0 : -1;
}

/* Takes queued TCP connections (bounded per call) and reads the hellos already sent. */
static void nv_admit_take(struct nv_admit *a)
{
	char s[NV_SOCK_ADDR_STRLEN];
	struct nv_pending p;
	uint64_t conn_id;
	int rc, n;

	for (n = 0; n < NV_ADMIT_TAKE_MAX; n++) {
		memset(&p, 0, sizeof(p));
		rc = nv_sock_accept(a->lfd, &p.fd, &p.peer);
		if (rc < 0 || p.fd < 0) {
			if (rc < 0)
				NV_WARN("accept on %s: %s", a->addr, strerror(-rc));
			return;
		}
		p.deadline_ns = nv_deadline();
		rc = nv_pending_step(a, &p, &conn_id);
		if (rc == 1)
			nv_backlog_push(a, &p, conn_id);
		if (rc != 0) {
			nv_sock_close(&p.fd);
			continue;
		}
		if (nv_pending_room(a) < 0) {
			nv_admit_warn(a, NV_RF_BUSY, &p.peer, "refused connection from %s: all %d "
				      "pending connections are sending their hello "
				      "(NCCL_VERBS_LISTEN_PENDING)", nv_sock_addr_str(&p.peer, s,
										  sizeof(s)),
				      a->max_pend);
			nv_admit_refuse(&p.fd, NV_WST_BUSY);
			continue;
		}
		a->pend[a->npend++] = p;
	}
}

void nv_admit_poll(struct nv_admit *a)
{
	uint64_t now;
	int i;

	nv_admit_take(a);
	for (i = 0; i < a->npend; i++)
		if (nv_pending_advance(a, i))
			i--;
	now = nv_now_ns();
	if (now - a->log.start_ns >= NV_ADMIT_WARN_INTERVAL_NS)
		nv_admit_log_flush(a, now);
}

int nv_admit_pop(struct nv_admit *a, struct nv_admitted *out)
{
	if (!a->nback)
		return 0;
	*out = a->back[0];
	a->nback--;
	memmove(&a->back[0], &a->back[1], sizeof(a->back[0]) * (size_t)a->nback);
	return 1;
}

void nv_admit_drop_all(struct nv_admit *a)
{
	while (a->npend > 0)
		nv_pending_remove(a, a->npend - 1);
	while (a->nback > 0) /* they wait for an accept that will not come */
		nv_admit_refuse(&a->back[--a->nback].fd, NV_WST_TIMEOUT);
}

void nv_admit_fini(struct nv_admit *a)
{
	nv_admit_drop_all(a);
	if (a->log.total)
		nv_admit_log_flush(a, nv_now_ns());
	free(a->pend);
	free(a->back);
	a->pend = NULL;
	a->back = NULL;
	a->cap_back = 0;
}
