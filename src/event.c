/*
 * event.c - per-HCA async event thread (contract in event.h and device.h).
 * The thread sleeps in poll() on the context's async fd (made non-blocking)
 * and on a pipe used only to stop it, waking at least every NV_LIVENESS_NS
 * to check the peers of watched comms that are waiting.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "event.h"
#include "ibv.h"
#include "os.h"
#include "param.h"

static pthread_mutex_t nv_sink_lock = PTHREAD_MUTEX_INITIALIZER; /* sinks, HCA lists */

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

void nv_hca_sink_sweep(struct nv_hca *h)
{
	struct nv_sink_link *l;

	pthread_mutex_lock(&nv_sink_lock);
	for (l = h->sinks; l; l = l->next) {
		struct nv_async_sink *s = l->sink;

		if (!atomic_load_explicit(&s->watched, memory_order_relaxed) || s->watch_hca != h ||
		    atomic_load_explicit(&s->peer_gone, memory_order_relaxed) ||
		    !atomic_exchange_explicit(&s->waiting, 0, memory_order_relaxed))
			continue;
		if (atomic_load_explicit(&s->fo_wake, memory_order_relaxed) &&
		    nv_fd_pending(s->watch_fd) == 1) { /* the peer started a failover round */
			atomic_fetch_or_explicit(&s->fatal, NV_SINK_FAILOVER, memory_order_release);
			continue;
		}
		if (!nv_fd_peer_alive(s->watch_fd))
			atomic_store_explicit(&s->peer_gone, 1, memory_order_release);
	}
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

	for (;;) {
		struct ibv_async_event ev;
		uint64_t now;
		int err, n;

		n = poll(fds, 2, (int)(NV_LIVENESS_NS / 1000000));
		now = nv_now_ns();
		if (now - swept >= NV_LIVENESS_NS) {
			nv_hca_sink_sweep(h);
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
	if (h->event_wake_fd >= 0)
		close(h->event_wake_fd);
	if (h->event_stop_fd >= 0)
		close(h->event_stop_fd);
	h->event_wake_fd = h->event_stop_fd = -1;
}
