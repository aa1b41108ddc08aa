/*
 * event.c - per-HCA async event thread (contract in event.h and device.h).
 * The thread sleeps in poll() on the context's async fd (made non-blocking)
 * and on a pipe used only to stop it, waking at least every NV_LIVENESS_NS
 * to check the peers of watched comms that are waiting.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "event.h"
#include "ibv.h"
#include "os.h"
#include "param.h"
#include "wqelat.h"

static pthread_mutex_t nv_sink_lock = PTHREAD_MUTEX_INITIALIZER; /* sinks, HCA lists */

_Atomic uint64_t nv_coarse_ns;

/* Stall reports: the first when a comm waited NCCL_VERBS_STALL_MS without
 * progress, then at most every NV_STALL_REPEAT_NS while it stays so. */
#define NV_STALL_REPEAT_NS 30000000000ull
/* A sweep that finds a comm not waiting keeps its stall clock this long (a
 * thread descheduled on a loaded host); after that the clock starts again. */
#define NV_STALL_GAP_NS 1000000000ull
/* A report the comm does not take within this (its thread does not call it)
 * is logged by the event thread from what the sink knows. */
#define NV_REPORT_WAIT_NS 1000000000ull

/* Dumps asked for (signal handler, trigger file): a generation each thread follows. */
static atomic_uint nv_dump_gen;
static struct timespec nv_dump_file_mtime;	/* nv_sink_lock */
static int nv_dump_file_seen;			/* nv_sink_lock */

void nv_event_dump_request(void)
{
	atomic_fetch_add(&nv_dump_gen, 1);
}

static void nv_dump_signal(int sig)
{
	(void)sig;
	atomic_fetch_add(&nv_dump_gen, 1); /* lock-free: async-signal-safe */
}

void nv_event_dump_signal_setup(void)
{
	static atomic_int installed;
	int sig = (int)nv_param_int(NV_PARAM_VERBS_DUMP_SIGNAL);
	struct sigaction sa;

	if (sig <= 0 || atomic_exchange(&installed, 1))
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = nv_dump_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, NULL) != 0)
		NV_WARN("NCCL_VERBS_DUMP_SIGNAL=%d: sigaction failed: %s; no state dumps on a "
			"signal", sig, strerror(errno));
	else
		NV_INFO(NV_SUB_INIT, "NCCL_VERBS_DUMP_SIGNAL=%d: every open comm logs its state "
			"on that signal", sig);
}

/* The trigger file appeared or was touched since the last look: a new dump. */
static void nv_dump_file_check_locked(void)
{
	const char *path = nv_param_str(NV_PARAM_VERBS_DUMP_FILE);
	struct stat st;

	if (!path || !*path || stat(path, &st) != 0) {
		nv_dump_file_seen = 0;
		return;
	}
	if (nv_dump_file_seen && st.st_mtim.tv_sec == nv_dump_file_mtime.tv_sec &&
	    st.st_mtim.tv_nsec == nv_dump_file_mtime.tv_nsec)
		return;
	nv_dump_file_seen = 1;
	nv_dump_file_mtime = st.st_mtim;
	atomic_fetch_add(&nv_dump_gen, 1);
}

/* Caller holds nv_sink_lock. */
static void nv_sink_record_locked(struct nv_async_sink *sink, int bits, const char *what)
{
	if (atomic_load(&sink->fatal) & NV_SINK_EVENT_MASK)
		return;
	snprintf(sink->what, sizeof(sink->what), "%s", what);
	atomic_fetch_or_explicit(&sink->fatal, bits, memory_order_release);
}

void nv_async_sink_record(struct nv_async_sink *sink, int event_type, const char *what)
{
	pthread_mutex_lock(&nv_sink_lock);
	nv_sink_record_locked(sink, event_type + 1, what);
	pthread_mutex_unlock(&nv_sink_lock);
}

void nv_async_sink_clear(struct nv_async_sink *sink, int bits)
{
	pthread_mutex_lock(&nv_sink_lock);
	atomic_fetch_and_explicit(&sink->fatal, ~bits, memory_order_release);
	pthread_mutex_unlock(&nv_sink_lock);
}

/* A device-wide event: on the HCA, and on every comm attached to it. */
static void nv_hca_record(struct nv_hca *h, int event_type, const char *what)
{
	struct nv_sink_link *l;

	pthread_mutex_lock(&nv_sink_lock);
	nv_sink_record_locked(&h->sink, event_type + 1, what);
	for (l = h->sinks; l; l = l->next)
		nv_sink_record_locked(l->sink, (event_type + 1) | NV_SINK_DEVICE, h->sink.what);
	pthread_mutex_unlock(&nv_sink_lock);
}

/*
 * A port went down: every comm with failover state (port failover or a link
 * hold: fo_wake) that uses it gets the event in its sink, so its next call
 * starts a round (which tells the peer) even when nothing of it is in flight
 * and no error completion will come.
 */
static void nv_hca_record_port(struct nv_hca *h, int port, int event_type, const char *what)
{
	struct nv_sink_link *l;

	pthread_mutex_lock(&nv_sink_lock);
	for (l = h->sinks; l; l = l->next)
		if (atomic_load(&l->sink->fo_wake) && (!l->port || l->port == port))
			nv_sink_record_locked(l->sink, event_type + 1, what);
	pthread_mutex_unlock(&nv_sink_lock);
}

/* A port came back: comms with failover look at their failed devices (recovery). */
static void nv_hca_wake_failover(struct nv_hca *h)
{
	struct nv_sink_link *l;

	pthread_mutex_lock(&nv_sink_lock);
	for (l = h->sinks; l; l = l->next)
		if (atomic_load(&l->sink->fo_wake))
			atomic_fetch_or_explicit(&l->sink->fatal, NV_SINK_FAILOVER,
						 memory_order_release);
	pthread_mutex_unlock(&nv_sink_lock);
}

/* IBV_EVENT_DEVICE_SPEED_CHANGE: the comms on h that weigh by speed take it (lb.h). */
static void nv_hca_wake_lb(struct nv_hca *h)
{
	struct nv_sink_link *l;

	pthread_mutex_lock(&nv_sink_lock);
	for (l = h->sinks; l; l = l->next)
		if (atomic_load(&l->sink->lb_wake))
			atomic_fetch_or_explicit(&l->sink->fatal, NV_SINK_LB, memory_order_release);
	pthread_mutex_unlock(&nv_sink_lock);
}

void nv_hca_sink_attach(struct nv_hca *h, struct nv_sink_link *l, struct nv_async_sink *sink)
{
	int ev;

	pthread_mutex_lock(&nv_sink_lock);
	l->sink = sink;
	l->prev = NULL;
	l->next = h->sinks;
	if (h->sinks)
		h->sinks->prev = l;
	h->sinks = l;
	ev = atomic_load(&h->sink.fatal) & NV_SINK_EVENT_MASK;
	if (ev)
		nv_sink_record_locked(sink, ev | NV_SINK_DEVICE, h->sink.what);
	pthread_mutex_unlock(&nv_sink_lock);
}

void nv_hca_sink_detach(struct nv_hca *h, struct nv_sink_link *l)
{
	pthread_mutex_lock(&nv_sink_lock);
	if (l->sink) {
		if (l->prev)
			l->prev->next = l->next;
		else
			h->sinks = l->next;
		if (l->next)
			l->next->prev = l->prev;
		l->sink = NULL;
		l->prev = l->next = NULL;
	}
	pthread_mutex_unlock(&nv_sink_lock);
}

int nv_hca_sink_watch(struct nv_hca *h, struct nv_async_sink *sink, int fd)
{
	int on;

	pthread_mutex_lock(&nv_sink_lock);
	on = h->event_watching && fd >= 0;
	sink->watch_fd = fd;
	sink->watch_hca = h;
	atomic_store(&sink->waiting, 0);
	atomic_store(&sink->peer_gone, 0);
	atomic_store(&sink->watched, on);
	pthread_mutex_unlock(&nv_sink_lock);
	return on;
}

static _Atomic uint64_t nv_stall_ns;	/* NCCL_VERBS_STALL_MS, read as the threads start */

/* Asks the comm of s for a report of `kind` (its next call logs it). Lock held. */
static void nv_sink_ask_locked(struct nv_async_sink *s, int kind, uint64_t now)
{
	s->report_kind |= kind;
	s->report_due = now + NV_REPORT_WAIT_NS;
	s->report_since_ms = s->stall_since ? (now - s->stall_since) / 1000000 : 0;
	atomic_fetch_or_explicit(&s->fatal, NV_SINK_REPORT, memory_order_release);
}

/* Reads every port's counters into its ring, every NCCL_VERBS_STALL_MS / 4. Lock held. */
static void nv_hca_cnt_tick_locked(struct nv_hca *h, uint64_t now)
{
	uint64_t stall_ns = atomic_load_explicit(&nv_stall_ns, memory_order_relaxed);
	uint64_t every = stall_ns / 4 > NV_LIVENESS_NS ? stall_ns / 4 : NV_LIVENESS_NS;
	int p;

	if (!h->cnt || !stall_ns || now < h->cnt_next_ns)
		return;
	h->cnt_next_ns = now + every;
	for (p = 0; p < h->cnt_ports; p++) {
		struct nv_cnt_ring *r = &h->cnt[p];
		int i = r->n ? (r->head + 1) % NV_CNT_RING : 0;

		if (nv_hwcnt_read(h->ctx->device->ibdev_path, p + 1, &r->e[i]) <= 0)
			continue;
		r->head = i;
		if (r->n < NV_CNT_RING)
			r->n++;
	}
}

/* The newest reading of port taken at or before t (else the oldest one); NULL: none. */
static const struct nv_hwcnt *nv_hca_cnt_before(const struct nv_hca *h, int port, uint64_t t)
{
	const struct nv_cnt_ring *r;
	int k;

	if (!h->cnt || port < 1 || port > h->cnt_ports || !h->cnt[port - 1].n)
		return NULL;
	r = &h->cnt[port - 1];
	for (k = 0; k < r->n; k++) {
		const struct nv_hwcnt *e = &r->e[(r->head - k + NV_CNT_RING) % NV_CNT_RING];

		if (e->t_ns <= t || k == r->n - 1)
			return e;
	}
	return NULL;
}

/* The port's counter deltas since the stall began, into s->report_cnt. Lock held. */
static void nv_sink_stall_counters_locked(struct nv_hca *h, struct nv_async_sink *s)
{
	const struct nv_hwcnt *base = nv_hca_cnt_before(h, s->stall_port, s->stall_since);
	struct nv_hwcnt now, d;
	char list[400];

	if (!base || !nv_hwcnt_read(h->ctx->device->ibdev_path, s->stall_port, &now)) {
		snprintf(s->report_cnt, sizeof(s->report_cnt), "%s:%d counters: none readable",
			 h->name, s->stall_port);
		return;
	}
	nv_hwcnt_delta(base, &now, &d);
	snprintf(s->report_cnt, sizeof(s->report_cnt), "%s:%d counters in the last %" PRIu64
		 " ms: %s", h->name, s->stall_port, d.t_ns / 1000000,
		 nv_hwcnt_format(&d, 1, 0, list, sizeof(list)));
}

/*
 * Stall check of a watched sink: w is its waiting word since the last sweep
 * (0: the comm did not wait). A comm that kept waiting with the same
 * progress count for NCCL_VERBS_STALL_MS is asked for a report. Lock held.
 */
static void nv_sink_stall_locked(struct nv_hca *h, struct nv_async_sink *s, int w, uint64_t now)
{
	uint64_t stall_ns = atomic_load_explicit(&nv_stall_ns, memory_order_relaxed);

	if (!stall_ns)
		return;
	if (!w) {
		if (s->stall_since && now - s->stall_seen > NV_STALL_GAP_NS)
			s->stall_since = 0;
		return;
	}
	s->stall_seen = now;
	if (!s->stall_since || (uint64_t)(unsigned)w != s->stall_val) {
		s->stall_val = (unsigned)w; /* progress, or the first wait */
		s->stall_since = now;
		return;
	}
	if (now - s->stall_since < stall_ns || now < s->stall_next ||
	    (atomic_load_explicit(&s->fatal, memory_order_relaxed) & NV_SINK_REPORT))
		return;
	nv_sink_stall_counters_locked(h, s);
	s->report_stall_ms = (now - s->stall_since) / 1000000;
	s->stall_next = now + (stall_ns > NV_STALL_REPEAT_NS ? stall_ns : NV_STALL_REPEAT_NS);
	nv_sink_ask_locked(s, NV_REPORT_STALL, now);
}

/* A report its comm did not take in time (its thread stopped calling it). Lock held. */
static void nv_sink_report_expired_locked(struct nv_async_sink *s, uint64_t now)
{
	if (!(atomic_load_explicit(&s->fatal, memory_order_relaxed) & NV_SINK_REPORT) ||
	    now < s->report_due)
		return;
	atomic_fetch_and_explicit(&s->fatal, ~NV_SINK_REPORT, memory_order_relaxed);
	if (s->report_kind & NV_REPORT_STALL)
		NV_WARN("stall: %s waited %" PRIu64 " ms without progress, then its thread stopped "
			"calling it; %s", s->ident, s->report_stall_ms, s->report_cnt);
	if (s->report_kind & NV_REPORT_DUMP)
		NV_WARN("comm state: %s: not called for %" PRIu64 " ms (NCCL is not polling it), "
			"its state is not read from this thread", s->ident,
			(uint64_t)(NV_REPORT_WAIT_NS / 1000000));
	s->report_kind = 0;
}

void nv_hca_sink_sweep(struct nv_hca *h)
{
	nv_hca_sink_sweep_at(h, nv_now_ns(), 0);
}

void nv_hca_sink_sweep_at(struct nv_hca *h, uint64_t now, int dump)
{
	struct nv_sink_link *l;

	pthread_mutex_lock(&nv_sink_lock);
	nv_hca_cnt_tick_locked(h, now);
	for (l = h->sinks; l; l = l->next) {
		struct nv_async_sink *s = l->sink;
		int w;

		if (!atomic_load_explicit(&s->watched, memory_order_relaxed) || s->watch_hca != h)
			continue;
		nv_sink_report_expired_locked(s, now);
		if (dump)
			nv_sink_ask_locked(s, NV_REPORT_DUMP, now);
		if (atomic_load_explicit(&s->peer_gone, memory_order_relaxed))
			continue;
		w = atomic_exchange_explicit(&s->waiting, 0, memory_order_relaxed);
		nv_sink_stall_locked(h, s, w, now);
		if (s->wqe)
			nv_wqe_scan(s->wqe, now, w != 0); /* "WQE stall (no CQE)" lines */
		if (!w)
			continue;
		if (atomic_load_explicit(&s->fo_wake, memory_order_relaxed) &&
		    nv_fd_pending(s->watch_fd) == 1) { /* the peer started a failover round */
			atomic_fetch_or_explicit(&s->fatal, NV_SINK_FAILOVER, memory_order_release);
			continue;
		}
		w = nv_fd_peer_state(s->watch_fd);
		if (w != 1) {
			s->peer_state = w; /* read after peer_gone (acquire) */
			atomic_store_explicit(&s->peer_gone, 1, memory_order_release);
		}
	}
	pthread_mutex_unlock(&nv_sink_lock);
}

int nv_sink_take_report(struct nv_async_sink *s, struct nv_sink_report *r)
{
	int kind = 0;

	pthread_mutex_lock(&nv_sink_lock);
	if (atomic_load_explicit(&s->fatal, memory_order_acquire) & NV_SINK_REPORT) {
		kind = s->report_kind;
		r->stall_ms = s->report_stall_ms;
		r->since_ms = s->report_since_ms;
		snprintf(r->cnt, sizeof(r->cnt), "%s", s->report_cnt);
		s->report_kind = 0;
		atomic_fetch_and_explicit(&s->fatal, ~NV_SINK_REPORT, memory_order_relaxed);
	}
	pthread_mutex_unlock(&nv_sink_lock);
	return kind;
}

void nv_sink_set_ident(struct nv_async_sink *s, int port, const char *ident)
{
	pthread_mutex_lock(&nv_sink_lock);
	s->stall_port = port;
	snprintf(s->ident, sizeof(s->ident), "%s", ident);
	pthread_mutex_unlock(&nv_sink_lock);
}

/* The thread stops: the data path of its watched comms checks the socket itself again. */
static void nv_hca_unwatch_all(struct nv_hca *h)
{
	struct nv_sink_link *l;

	pthread_mutex_lock(&nv_sink_lock);
	h->event_watching = false;
	for (l = h->sinks; l; l = l->next)
		if (l->sink->watch_hca == h)
			atomic_store(&l->sink->watched, 0);
	pthread_mutex_unlock(&nv_sink_lock);
}

static bool nv_event_fatal(enum ibv_event_type t)
{
	switch (t) {
	case IBV_EVENT_DEVICE_FATAL:
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_CQ_ERR:
	case IBV_EVENT_SRQ_ERR:
		return true;
	default:
		return false;
	}
}

static void nv_event_mark_gids(struct nv_hca *h, int port)
{
	for (int i = 0; i < nv_dev_count(); i++) {
		struct nv_dev *d = nv_dev_get(i);

		if (d && d->hca == h && (port <= 0 || d->port == port))
			atomic_store(&d->gid_stale, 1);
	}
}

/* Comms take this event themselves: port failover or NCCL_VERBS_LINK_HOLD_MS. */
static bool nv_event_comm_rides(void)
{
	return nv_param_int(NV_PARAM_IB_RESILIENCY_PORT_FAILOVER) ||
	       nv_param_int(NV_PARAM_VERBS_LINK_HOLD_MS);
}

void nv_event_handle(struct nv_hca *h, struct ibv_async_event *ev)
{
	enum ibv_event_type t = ev->event_type;
	struct nv_async_sink *sink = NULL;
	char what[NV_WHY_MAX];

	switch (t) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		sink = ev->element.qp ? ev->element.qp->qp_context : NULL;
		snprintf(what, sizeof(what), "async event %s on %s qpn 0x%x", nv_ibv_event_str(t),
			 h->name, ev->element.qp ? ev->element.qp->qp_num : 0);
		break;
	case IBV_EVENT_CQ_ERR:
		sink = ev->element.cq ? ev->element.cq->cq_context : NULL;
		snprintf(what, sizeof(what), "async event %s on %s (CQ overrun or protection error)",
			 nv_ibv_event_str(t), h->name);
		break;
	case IBV_EVENT_DEVICE_FATAL:
		sink = &h->sink;
		snprintf(what, sizeof(what), "async event %s on %s: the HCA must be reset",
			 nv_ibv_event_str(t), h->name);
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		snprintf(what, sizeof(what), "async event %s on %s", nv_ibv_event_str(t), h->name);
		break;
	default:
		snprintf(what, sizeof(what), "async event %s on %s:%d", nv_ibv_event_str(t), h->name,
			 ev->element.port_num);
		break;
	}
	if (t == IBV_EVENT_GID_CHANGE)
		nv_event_mark_gids(h, ev->element.port_num);
	if ((int)t == NV_IBV_EVENT_DEVICE_SPEED_CHANGE) {
		nv_dev_speed_refresh(h, ev->element.port_num);
		nv_hca_wake_lb(h);
		return;
	}
	if (nv_event_fatal(t) && t != IBV_EVENT_DEVICE_FATAL && sink && nv_event_comm_rides()) {
		/* the comm that owns it fails over, holds or fails, with its own WARN */
		NV_INFO(NV_SUB_NET, "%s; the comm that owns it fails over to its other devices "
			"or fails", what);
		if (nv_param_int(NV_PARAM_IB_RETURN_ASYNC_EVENTS))
			nv_async_sink_record(sink, (int)t, what);
	} else if (nv_event_fatal(t)) {
		NV_WARN("%s%s", what, sink ? "; failing the comm that owns it" : "");
		if (sink == &h->sink && nv_param_int(NV_PARAM_IB_RETURN_ASYNC_EVENTS))
			nv_hca_record(h, (int)t, what);
		else if (sink && nv_param_int(NV_PARAM_IB_RETURN_ASYNC_EVENTS))
			nv_async_sink_record(sink, (int)t, what);
	} else if (t == IBV_EVENT_PORT_ACTIVE &&
		   nv_param_int(NV_PARAM_IB_RESILIENCY_PORT_FAILOVER) &&
		   nv_param_int(NV_PARAM_IB_RESILIENCY_PORT_RECOVERY)) {
		NV_INFO(NV_SUB_NET, "%s (NCCL_IB_RESILIENCY_PORT_RECOVERY: its comms take it back)", what);
		nv_hca_wake_failover(h);
	} else if (t == IBV_EVENT_PORT_ERR && nv_event_comm_rides()) {
		NV_INFO(NV_SUB_NET, "%s (its comms fail over, or hold: NCCL_VERBS_LINK_HOLD_MS)", what);
		if (nv_param_int(NV_PARAM_IB_RETURN_ASYNC_EVENTS))
			nv_hca_record_port(h, ev->element.port_num, (int)t, what);
	} else if (t == IBV_EVENT_GID_CHANGE) {
		NV_INFO(NV_SUB_NET, "%s: the port's GID is chosen again for new connections", what);
	} else if (t == IBV_EVENT_PORT_ERR) {
		NV_WARN("%s", what);
	} else {
		NV_INFO(NV_SUB_NET, "%s", what);
	}
}

static void *nv_event_main(void *arg)
{
	struct nv_hca *h = arg;
	struct pollfd fds[2] = {
		{ .fd = h->ctx->async_fd, .events = POLLIN },
		{ .fd = h->event_wake_fd, .events = POLLIN },
	};

	uint64_t swept = nv_now_ns();
	unsigned dump_gen = atomic_load(&nv_dump_gen);

	for (;;) {
		struct ibv_async_event ev;
		uint64_t now;
		unsigned gen;
		int err, n;

		n = poll(fds, 2, (int)(NV_LIVENESS_NS / 1000000));
		now = nv_now_ns();
		atomic_store_explicit(&nv_coarse_ns, now, memory_order_relaxed);
		if (now - swept >= NV_LIVENESS_NS) {
			pthread_mutex_lock(&nv_sink_lock);
			nv_dump_file_check_locked();
			pthread_mutex_unlock(&nv_sink_lock);
			gen = atomic_load(&nv_dump_gen);
			nv_hca_sink_sweep_at(h, now, gen != dump_gen);
			dump_gen = gen;
			swept = now;
		}
		if (n == 0)
			continue;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			NV_WARN("%s: async event thread: poll failed: %s; fatal events will not be "
				"reported", h->name, strerror(errno));
			break;
		}
		if (fds[1].revents)
			break;
		if (fds[0].revents & (POLLERR | POLLNVAL)) {
			NV_WARN("%s: async event fd failed; fatal events will not be reported",
				h->name);
			break;
		}
		err = nv_ibv_get_async_event(h->ctx, &ev);
		if (err == EAGAIN || err == EINTR)
			continue;
		if (err) {
			NV_INFO(NV_SUB_NET, "%s: ibv_get_async_event: %s", h->name, strerror(err));
			continue;
		}
		nv_event_handle(h, &ev);
		nv_ibv_ack_async_event(&ev);
	}
	nv_hca_unwatch_all(h);
	return NULL;
}

nv_status_t nv_event_start(struct nv_hca *h)
{
	int fds[2], flags, err;

	flags = fcntl(h->ctx->async_fd, F_GETFL);
	if (h->ctx->async_fd < 0 || flags < 0 ||
	    fcntl(h->ctx->async_fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		NV_INFO(NV_SUB_INIT, "%s: async fd %d cannot be polled; no async event thread",
			h->name, h->ctx->async_fd);
		return NV_OK;
	}
	if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0) {
		NV_WARN("%s: pipe2 for the async event thread failed: %s", h->name, strerror(errno));
		return NV_ERR_SYSTEM;
	}
	h->event_wake_fd = fds[0];
	h->event_stop_fd = fds[1];
	atomic_store(&nv_stall_ns, (uint64_t)nv_param_int(NV_PARAM_VERBS_STALL_MS) * 1000000ull);
	if (atomic_load(&nv_stall_ns) && h->attr.phys_port_cnt > 0) {
		h->cnt = calloc(h->attr.phys_port_cnt, sizeof(*h->cnt)); /* NULL: no deltas */
		h->cnt_ports = h->cnt ? h->attr.phys_port_cnt : 0;
	}
	pthread_mutex_lock(&nv_sink_lock);
	h->event_watching = true;	/* before the thread runs: it clears it when it stops */
	pthread_mutex_unlock(&nv_sink_lock);
	err = pthread_create(&h->event_thread, NULL, nv_event_main, h);
	if (err) {
		nv_hca_unwatch_all(h);
		NV_WARN("%s: cannot start the async event thread: %s", h->name, strerror(err));
		close(fds[0]);
		close(fds[1]);
		h->event_wake_fd = h->event_stop_fd = -1;
		return NV_ERR_SYSTEM;
	}
	h->event_thread_running = true;
	return NV_OK;
}

void nv_event_stop(struct nv_hca *h)
{
	if (h->event_thread_running) {
		if (write(h->event_stop_fd, "x", 1) != 1)
			NV_WARN("%s: cannot wake the async event thread: %s", h->name,
				strerror(errno));
		else
			pthread_join(h->event_thread, NULL);
		h->event_thread_running = false;
	}
	pthread_mutex_lock(&nv_sink_lock);
	free(h->cnt);
	h->cnt = NULL;
	h->cnt_ports = 0;
	pthread_mutex_unlock(&nv_sink_lock);
	if (h->event_wake_fd >= 0)
		close(h->event_wake_fd);
	if (h->event_stop_fd >= 0)
		close(h->event_stop_fd);
	h->event_wake_fd = h->event_stop_fd = -1;
}
