/*
 * event.h - the per-HCA asynchronous event thread (event.c).
 * Started once per opened HCA at discovery, stopped at the last fini. It
 * records fatal events into the struct nv_async_sink named by the QP/CQ
 * context (or the HCA's own sink for device-wide events), records a
 * PORT_ERR into the sink of every attached comm with failover state (port
 * failover or a link hold) that uses the port (it starts a round at its
 * next call), marks GID caches stale on
 * GID_CHANGE, and logs everything else. Every NV_LIVENESS_NS it
 * also checks the handshake socket of each watched comm that has been
 * waiting (nv_hca_sink_watch), so the data path's idle polls cost a store
 * and a load instead of clock reads and a system call.
 */
#ifndef NV_EVENT_H
#define NV_EVENT_H

#include "device.h"

nv_status_t nv_event_start(struct nv_hca *hca); /* no-op (INFO) when the fd cannot be polled */
void nv_event_stop(struct nv_hca *hca);         /* idempotent */
/* What the thread does with one event (exposed for tests). */
void nv_event_handle(struct nv_hca *hca, struct ibv_async_event *ev);
/* Records `what` into sink unless it already holds an earlier fatal event. */
void nv_async_sink_record(struct nv_async_sink *sink, int event_type, const char *what);
/* Clears `bits` of sink->fatal (failover.c, after it handled them). */
void nv_async_sink_clear(struct nv_async_sink *sink, int bits);
/*
 * Puts sink on hca's list: a later DEVICE_FATAL on hca is recorded into it
 * too (NV_SINK_DEVICE), and one that already happened is recorded at once;
 * with sink->fo_wake set, so is a PORT_ERR on port l->port (set by the caller).
 * detach is idempotent; a comm detaches before its sink goes away.
 */
void nv_hca_sink_attach(struct nv_hca *hca, struct nv_sink_link *l, struct nv_async_sink *sink);
void nv_hca_sink_detach(struct nv_hca *hca, struct nv_sink_link *l);
/*
 * Hands the liveness check of an attached sink's peer (connected socket fd,
 * open until the sink detaches from hca) to hca's event thread; returns 1
 * when that thread watches it (sink->watched), 0 when hca has no running
 * event thread (the caller then checks the socket itself).
 */
int nv_hca_sink_watch(struct nv_hca *hca, struct nv_async_sink *sink, int fd);
/* One pass of the thread's check over hca's watched, waiting sinks (exposed for tests). */
void nv_hca_sink_sweep(struct nv_hca *hca);
/*
 * The same at time now; dump: ask every watched sink for a state dump. Each
 * pass also runs the stall check (NCCL_VERBS_STALL_MS): a watched comm whose
 * waiting word (its progress count, stored by each call that found nothing
 * to do) stayed the same over that time is asked for a stall report, with
 * its port's counter deltas; the next one no sooner than 30 s later (or the
 * knob's time). A report its comm does not take within 1 s is logged here
 * from the sink's ident. It also logs the "WQE stall (no CQE)" lines of the
 * comms with a WR latency monitor (sink->wqe, wqelat.h).
 */
void nv_hca_sink_sweep_at(struct nv_hca *hca, uint64_t now, int dump);

/* What a comm takes from its sink when NV_SINK_REPORT is set. */
struct nv_sink_report {
	uint64_t stall_ms;	/* NV_REPORT_STALL: time without progress */
	uint64_t since_ms;	/* time since the progress count last moved (0: unknown) */
	char cnt[512];		/* NV_REPORT_STALL: the port's counter deltas */
};
/* Takes and clears the sink's pending report; returns its NV_REPORT_* bits (0: none). */
int nv_sink_take_report(struct nv_async_sink *sink, struct nv_sink_report *r);
/* Sets what reports name the comm by and the port whose counters they carry. */
void nv_sink_set_ident(struct nv_async_sink *sink, int port, const char *ident);
/* A state dump of every watched comm, as on NCCL_VERBS_DUMP_SIGNAL (tests, tools). */
void nv_event_dump_request(void);
/* Installs the NCCL_VERBS_DUMP_SIGNAL handler once (nothing when the knob is 0). */
void nv_event_dump_signal_setup(void);

#endif /* NV_EVENT_H */
