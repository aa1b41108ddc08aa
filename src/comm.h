/*
 * comm.h - listen/send/recv comms, requests and the RDMA-shared control
 * structures of the connection and data-path layer (connect.c, qp.c, engine.c, recv.c, send.c).
 *
 * Protocol (see docs/design.md, "Moving data"):
 *  - The receiver RDMA-writes clear-to-send (CTS) entries into the sender's
 *    FIFO: one slot per irecv, one 64-byte entry per grouped receive.
 *  - The sender matches isends to the entries of the current slot by tag,
 *    then RDMA-writes the data and ends each used QP's chain with a signalled
 *    WRITE_WITH_IMM (imm = total size; grouped sizes go into the receiver's
 *    records as that WR's payload).
 *  - Slots are used strictly in sequence order on both sides. A message with
 *    sequence s uses QPs (s * nq + i) % nqps, i < nq, so both sides agree on
 *    where completions arrive without exchanging anything; its CTS goes on
 *    QP s % nqps. Each used QP carries a 128-byte-aligned chunk of every
 *    request of the slot (nq = 1 unless split or several devices).
 *  - A slot (and its shadow entries and size records) is reused for sequence
 *    s + NV_FIFO_SLOTS only after the data of s (or a later sequence) arrived, which
 *    the request pool of NV_MAX_REQUESTS receives guarantees; the sender
 *    reuses its slot state only after the old chain's completions were polled.
 *    The data of s came after the sender read CTS s, so the CTS write (not
 *    inline unless NCCL_IB_USE_INLINE) no longer reads its shadow entries.
 *    Eager comms use two shadow banks instead (nv_recv_ctrl).
 *  - With adaptive routing (IB default) a message longer than NCCL_IB_AR_THRESHOLD
 *    bytes (as NCCL) ends with a separate 0-byte WRITE_WITH_IMM; otherwise a single
 *    receive's last data WR carries the immediate itself.
 *  - Send and receive queues never overflow: every post checks the QP's
 *    outstanding count (retired by signalled completions) and waits (NULL
 *    request) when full. Nor do CQs: each holds an entry for every WR its
 *    QPs may have outstanding under those limits (nv_cq_plan, cq_plan.c).
 *
 * Threads: a comm is driven by one progress thread (isend/irecv/test/iflush)
 * while the service thread may register memory on it; registration touches
 * only the MR cache (own lock) and never the fields below, so the data path
 * takes no lock. Connect/accept run on one thread per comm.
 *
 * Errors are sticky: the first completion error, fatal async event or dead
 * peer sets comm->error and comm->why; every later call returns comm->error
 * and repeats comm->why. A dead peer that owes us nothing in flight is found
 * through the handshake socket, kept open for that (with TCP keepalive, for a
 * host that vanishes without closing): while a caller waits without
 * progress, it is checked at most every NV_LIVENESS_NS.
 */
#ifndef NV_COMM_H
#define NV_COMM_H

#include <stdint.h>
#include <infiniband/verbs.h>
#include "cts.h"
#include "device.h"
#include "mr.h"
#include "os.h"
#include "nv_common.h"
#include "sock.h"
#include "wire.h"
#include "wqelat.h"

#define NV_COMM_MAX_DEVS NV_MAX_DEVS_PER_VDEV	/* 8 */
#define NV_MAX_REQUESTS 32			/* NCCL_NET_MAX_REQUESTS */
#define NV_FIFO_SLOTS NV_MAX_REQUESTS		/* one slot per outstanding irecv */
#define NV_SEND_REQS (NV_MAX_REQUESTS * NV_MAX_RECVS)
#define NV_SEND_QP_WR 512			/* send queue depth, sender QPs */
#define NV_RECV_QP_SEND_WR 256			/* send queue depth, receiver QPs (CTS) */
#define NV_RECV_QP_RECV_WR (2 * NV_MAX_REQUESTS) /* >= one RECV per outstanding irecv */
#define NV_CTS_SIGNAL_EVERY 16			/* receiver signals every Nth CTS per QP */
#define NV_MIN_QP_WR (2 * (NV_MAX_RECVS + 1))	/* send queue a device must allow per QP */
/* Smallest send queues that still progress, when a small max_cqe forces them down: */
#define NV_MIN_SEND_QP_WR (NV_MAX_RECVS + 1)	/* sender: one whole grouped chain */
#define NV_MIN_CTS_QP_WR 2			/* receiver: CTS, every other one signalled */
#define NV_CQ_POLL_BATCH 16
#define NV_CHUNK_ALIGN NV_WR_ALIGN		/* multi-QP split granularity */
/* One QP's chain for a slot: up to NV_MAX_WR_PER_MSG writes per request (each
 * at most the port's max_msg_sz) and the closing WRITE_WITH_IMM. */
#define NV_SEND_CHAIN_MAX (NV_MAX_RECVS * NV_MAX_WR_PER_MSG + 1)
#define NV_LIVENESS_POLLS 64			/* most idle polls per clock read */
#define NV_LIVENESS_STRIDE_NS 1000000ull	/* busy pollers: about one clock read per ms */
#define NV_KEEPALIVE_IDLE_S 10			/* a vanished peer host: found in ~25 s */
#define NV_KEEPALIVE_INTVL_S 5
#define NV_KEEPALIVE_CNT 3
#define NV_COMM_WHY_LEN 640
_Static_assert(NV_CTS_MAX_DEVS == NV_COMM_MAX_DEVS && NV_CTS_MAX_RECVS == NV_MAX_RECVS,
	       "cts.h limits follow the comm's");

/* struct nv_cts_entry: see cts.h (shared with the validators and fuzzers). */

/* Sender's control region: the peer writes fifo[], probe_in and eager_grant only. */
struct nv_send_ctrl {
	struct nv_cts_entry fifo[NV_FIFO_SLOTS][NV_MAX_RECVS];	/* written by the receiver */
	uint64_t probe_in;	/* written by the receiver's connect-time path probe */
	uint64_t eager_grant;	/* written by the receiver: eager messages < this may go */
	uint64_t eager_cts;	/* never written: in the region, it says we read CTS grants */
	/* written by the receiver (NCCL_IB_EVENT_BASED_LB_REMOTE, wire.h): its speeds */
	uint8_t lb_in[NV_WIRE_LB_SIZE] __attribute__((aligned(8)));
	uint64_t probe_src;	/* local source of our own probe */
	uint32_t sizes[NV_FIFO_SLOTS][NV_MAX_RECVS];	/* local: grouped sizes to send */
	struct nv_eager_trailer eager_trl[NV_EAGER_SLOTS]; /* local: sources of the trailers */
} __attribute__((aligned(4096)));
/* What a sender tells as its writable region: up to probe_in (version 3), or
 * one word longer, up to eager_grant, when it can send eager (wire.h). */
#define NV_SEND_CTRL_REMOTE_LEN (offsetof(struct nv_send_ctrl, probe_in) + sizeof(uint64_t))
#define NV_SEND_CTRL_REMOTE_LEN_EAGER (offsetof(struct nv_send_ctrl, eager_grant) + sizeof(uint64_t))
/* Two words longer: it also takes the grant in clear-to-send entries (cts.h
 * NV_CTS_GRANT_MAX), so the receiver writes the credit word less often. */
#define NV_SEND_CTRL_REMOTE_LEN_EAGER_CTS (offsetof(struct nv_send_ctrl, eager_cts) + sizeof(uint64_t))
_Static_assert(offsetof(struct nv_send_ctrl, eager_grant) == NV_SEND_CTRL_REMOTE_LEN,
	       "the credit word directly follows the version-3 region");
_Static_assert(offsetof(struct nv_send_ctrl, eager_cts) == NV_SEND_CTRL_REMOTE_LEN_EAGER,
	       "the announcement word directly follows the credit word");
_Static_assert(NV_CTS_GRANT_MAX == NV_EAGER_SLOTS, "a CTS grant spans at most the ring");
/* A sender of several QPs with NCCL_IB_EVENT_BASED_LB and _REMOTE on says it reads
 * the receiver's speeds: its region runs to the end of lb_in (never eager, which
 * needs one QP, so the length is told apart from the eager ones). */
#define NV_SEND_CTRL_REMOTE_LEN_LB (offsetof(struct nv_send_ctrl, lb_in) + NV_WIRE_LB_SIZE)
_Static_assert(offsetof(struct nv_send_ctrl, lb_in) == NV_SEND_CTRL_REMOTE_LEN_EAGER_CTS,
	       "the speed buffer directly follows the announcement word");

/*
 * Receiver's control region: the peer writes records[] and probe_in only.
 * shadow[] holds the entries CTS writes send (inline only for one entry
 * with NCCL_IB_USE_INLINE, else the NIC reads them by DMA some time after
 * the post). A plain comm uses shadow[s %
 * NV_FIFO_SLOTS] (comm.h, top). On an eager comm message s may come eager
 * while CTS s still waits in the send queue, so the receiver can pass s +
 * NV_FIFO_SLOTS before CTS s executed: it uses shadow[s % NV_SHADOW_SLOTS]
 * (nv_eager_shadow), two banks. That slot is rewritten for s +
 * NV_SHADOW_SLOTS only once the window holds it, i.e. once message s +
 * NV_FIFO_SLOTS arrived. That message came by a CTS, or eager by a grant
 * (credit write or carried by a CTS), posted after CTS s: receives are
 * posted in sequence order and the window keeps s + NV_FIFO_SLOTS out while
 * s is open; a grant that lets s + NV_FIFO_SLOTS go needs s done. On the one
 * QP of an eager comm CTS s had therefore executed before that message came.
 */
#define NV_SHADOW_SLOTS (2 * NV_FIFO_SLOTS)
struct nv_recv_ctrl {
	uint32_t records[NV_FIFO_SLOTS][NV_MAX_RECVS];	/* sender writes grouped sizes */
	uint64_t probe_in;	/* written by the sender's path probe */
	uint64_t rsvd;
	/* Below: local only (the peer is never told about these addresses). */
	struct nv_cts_entry shadow[NV_SHADOW_SLOTS][NV_MAX_RECVS]; /* source of CTS writes */
	uint64_t probe_src;
	uint64_t flush_word;	/* destination of iflush's 1-byte RDMA READ */
	/* sources of the speed writes (lb.c), used in turn */
	uint8_t lb_src[2][NV_WIRE_LB_SIZE] __attribute__((aligned(8)));
} __attribute__((aligned(4096)));
#define NV_RECV_CTRL_REMOTE_LEN (offsetof(struct nv_recv_ctrl, rsvd) + sizeof(uint64_t))

/*
 * wr_id: kind (4 bits) | WRs covered by this signalled WR (12) | QP (16) |
 * index (32: request index or slot). Error completions are decoded from
 * wr_id alone (their opcode is undefined).
 */
enum nv_wr_kind {
	NV_WR_DATA = 1,		/* sender: data chain ending in WRITE_WITH_IMM */
	NV_WR_RECV = 2,		/* receiver: RECV consumed by a WRITE_WITH_IMM */
	NV_WR_CTS = 3,		/* receiver: CTS RDMA WRITE */
	NV_WR_FLUSH = 4,	/* receiver: iflush RDMA READ */
	NV_WR_PROBE = 5,	/* both: connect-time path probe */
	NV_WR_EAGER = 6,	/* sender: eager message into the peer's ring (idx: request) */
	NV_WR_ECOPY = 7,	/* receiver: loopback copy of an eager message to GPU memory
				 * (idx: sequence slot) */
};
#define NV_WRID(kind, nwr, qp, idx) \
	(((uint64_t)(kind) << 60) | ((uint64_t)(nwr) << 48) | ((uint64_t)(qp) << 32) | (uint32_t)(idx))
#define NV_WRID_KIND(w) ((unsigned)((w) >> 60))
#define NV_WRID_NWR(w) ((unsigned)(((w) >> 48) & 0xfff))
#define NV_WRID_QP(w) ((unsigned)(((w) >> 32) & 0xffff))
#define NV_WRID_IDX(w) ((uint32_t)(w))
_Static_assert(NV_WIRE_MAX_QPS <= 0xffff, "QP index must fit 16 bits of wr_id");
_Static_assert(NV_SEND_QP_WR <= 0xfff && NV_RECV_QP_SEND_WR <= 0xfff, "WR count fits 12 bits");
_Static_assert(NV_SEND_REQS <= 0xffff, "request index fits");

/* Registration handle given to NCCL: one MR per comm device. */
struct nv_mhandle {
	int kind;				/* NV_MEM_HOST / _CUDA / _DMABUF */
	int ndevs;
	struct nv_hca *hca[NV_COMM_MAX_DEVS];
	struct ibv_mr *mr[NV_COMM_MAX_DEVS];
	uint32_t lkey[NV_COMM_MAX_DEVS];
	uint32_t rkey[NV_COMM_MAX_DEVS];
};

enum nv_req_type { NV_REQ_FREE = 0, NV_REQ_SEND, NV_REQ_RECV, NV_REQ_FLUSH };

struct nv_comm;

struct nv_request {
	struct nv_comm *comm;
	uint8_t type;		/* enum nv_req_type */
	uint8_t nreqs;		/* grouped receives (recv) */
	uint8_t done;
	uint8_t mem_kind;	/* buffer kind, for error messages */
	uint16_t idx;		/* position in the pool */
	int16_t next_free;
	int pending;		/* completions still expected */
	uint64_t seq;		/* slot sequence (send/recv) */
	/* Age for stall reports and state lines, stamped off the fast path: test()
	 * stamps a request the first time it finds it not done (NCCL tests each
	 * request right after posting it), iflush at the post. t_post is valid for
	 * this use of the request only when t_seq == seq (sequences only grow on a
	 * comm); t_seq starts at UINT64_MAX. */
	uint64_t t_post;	/* nv_coarse_ns then (0: no event thread yet) */
	uint64_t t_seq;		/* seq when t_post was taken */
	uint32_t sizes[NV_MAX_RECVS];	/* recv: posted capacity, then bytes received */
	/* send only */
	void *data;
	uint64_t size;		/* bytes to send (clipped to the receive) */
	struct nv_mhandle *mh;
	int entry;		/* which entry of the slot it matched */
	/* recv on an eager comm: entries still open, in the order of the cursor's CTS */
	uint8_t eager_left;
	uint8_t eager_map[NV_MAX_RECVS];	/* CTS entry -> receive entry */
	uint8_t eager_kind[NV_MAX_RECVS];	/* memory kind per receive entry */
	/* network profiler (prof.h): NCCL's handles and the events started */
	void *phandle[NV_MAX_RECVS];	/* send: [0] */
	uint8_t prof_nev;
	void *prof_ev[16];		/* NV_PROF_MAX_EV */
};

/*
 * Queue budget of one comm device (nv_cq_plan): every completion its CQ can
 * hold stands for a WR that a QP on it has posted and the plugin has not
 * yet retired, so depth covers the worst case, all of them at once (e.g.
 * every posted WR flushed after an error), not just the signalled ones.
 */
struct nv_cq_plan {
	int depth;		/* CQ entries: nqp * (send_wr + recv_wr + 1 probe) + flush_wr */
	int send_wr;		/* per QP send queue = q->max_wr, the outstanding limit */
	int recv_wr;		/* per QP receive queue = q->max_recv */
	int flush_wr;		/* receiver: GDR flush QP send queue (0 for senders) */
	int reduced;		/* limits lowered to fit the device's max_cqe */
};

struct nv_comm_dev {
	struct nv_dev *dev;
	struct nv_hca *hca;
	struct ibv_pd *pd;		/* reference held (nv_hca_pd_get) */
	struct ibv_cq *cq;
	struct nv_cq_plan plan;		/* queue depths of this device's QPs and CQ */
	struct ibv_mr *ctrl_mr;		/* control region on this device */
	struct nv_gid_info gid;		/* local GID used on this device */
	struct nv_sink_link sink_link;	/* comm's sink on the HCA's list (DEVICE_FATAL) */
	struct ibv_qp *flush_qp;	/* receiver: GDR flush and eager copies to GPU; made
					 * at the first (nv_comm_flush_qps) */
	int flush_max;			/* its send queue depth */
	int flush_outstanding;		/* flush READs posted, not yet completed */
};

struct nv_comm_qp {
	struct ibv_qp *qp;
	uint8_t dev;			/* local comm device index */
	uint8_t rdev;			/* remote device index */
	uint32_t rqpn;
	enum ibv_mtu mtu;		/* negotiated for this connection */
	int max_wr;			/* send queue depth */
	int outstanding;		/* WRs posted and not yet retired by a signalled CQE */
	int unsignalled;		/* receiver: CTS since the last signalled one */
	int max_recv;			/* receive queue depth (receiver) */
	int max_inline;			/* inline bytes granted (NCCL_IB_USE_INLINE) */
	int recv_outstanding;		/* RECVs posted and not yet completed */
	bool ece;			/* the peer's ECE was set before RTR (reduced) */
};

enum nv_comm_type { NV_COMM_LISTEN = 1, NV_COMM_SEND, NV_COMM_RECV };

/*
 * A comm's counters: written by its progress thread only, with plain stores
 * (no lock, no atomic), and read only by that thread (state lines, stall
 * reports; state.c). `done` is the progress count the idle path stores into
 * the sink's `waiting` word for the stall check (event.h); the messages
 * completed are derived from it: done - flushes + grouped (nv_comm_msgs).
 */
struct nv_comm_stats {
	uint64_t done;		/* requests test() returned done (flushes included) */
	uint64_t grouped;	/* messages of grouped receives beyond the first of each */
	uint64_t bytes;		/* their bytes (received: what arrived) */
	uint64_t flushes;	/* GPU flushes completed */
	uint64_t eager;		/* messages that went eager (sent, or taken from the ring) */
	uint64_t cts_waits;	/* sends that waited for their clear-to-send (or eager credit) */
	uint64_t wc_errors;	/* error completions */
	uint64_t failovers;	/* failover rounds completed */
	uint64_t wait_seq;	/* send: the sequence + 1 the last counted wait was for */
	uint64_t wait_size;	/* send: the bytes of the isend that waited */
	int wait_tag;		/* send: its tag */
	int stall_reports;	/* stall reports logged */
};

/* Common part of send and recv comms (first member of both). */
struct nv_comm {
	int type;			/* enum nv_comm_type */
	int ndevs;
	struct nv_comm_dev dev[NV_COMM_MAX_DEVS];
	int nqps;
	struct nv_comm_qp *qps;
	int nq;				/* QPs used per message */
	int fd;				/* handshake socket, kept for liveness */
	char peer[NV_SOCK_ADDR_STRLEN];
	struct nv_meta *rmeta;		/* peer's metadata */
	struct nv_async_sink sink;	/* qp_context / cq_context of our QPs and CQs */
	void *ctrl;			/* nv_send_ctrl or nv_recv_ctrl */
	uint64_t rctrl_addr;		/* peer: FIFO (we receive) or records (we send) */
	uint64_t last_alive_ns;		/* last socket liveness check */
	uint64_t last_clock_ns;		/* last clock read by the liveness check */
	uint32_t idle_polls;		/* waits without progress since the last clock read */
	uint32_t live_stride;		/* idle polls per clock read (nv_liveness_stride) */
	uint64_t live_done;		/* st.done the liveness check last saw */
	int probe_pending;		/* connect-time probes not yet completed */
	uint64_t probe_out;		/* what our probe writes into the peer's probe word */
	uint64_t probe_want;		/* what the peer's probe must leave in ours */
	int nreq;
	struct nv_request *reqs;
	int free_head;			/* -1: pool empty */
	nv_status_t error;		/* sticky */
	struct nv_fo *fo;		/* failover state (failover.c); NULL: off */
	struct nv_wqe_mon *wqe;		/* send: WR latency monitor (wqelat.h); NULL: off */
	struct nv_lb *lb;		/* NCCL_IB_EVENT_BASED_LB state (lb.h); NULL: off */
	struct nv_comm_stats st;	/* counters (above) */
	char why[NV_COMM_WHY_LEN];
	uint8_t sl, tc;
};

/* The comm's control block in its role: c->ctrl is the one of c->type. */
static inline struct nv_send_ctrl *nv_send_ctrl_of(const struct nv_comm *c)
{
	return (struct nv_send_ctrl *)c->ctrl;
}

static inline struct nv_recv_ctrl *nv_recv_ctrl_of(const struct nv_comm *c)
{
	return (struct nv_recv_ctrl *)c->ctrl;
}

/* The eager path's state of a comm; the protocol is described in eager.h. */
_Static_assert(NV_EAGER_SLOTS == NV_FIFO_SLOTS, "the ring window is the sequence window");

struct nv_eager_send {
	uint32_t max;			/* negotiated limit in bytes; 0: eager off */
	uint32_t entry;			/* ring entry bytes (the receiver's geometry) */
	uint64_t ring_addr;
	uint32_t rkey;
	uint64_t grant;			/* sequences below this may go eager (checked) */
	uint64_t cts_seq;		/* last sequence whose CTS isend found (its grant) */
	uint64_t cts_took;		/* cts_seq when its grant was last taken */
};

enum nv_eseq_state {
	NV_ESEQ_FREE = 0,
	NV_ESEQ_GROUP,		/* owned by a receive whose cursor has not reached it */
	NV_ESEQ_PEND,		/* cursor; its CTS not posted yet (no room, or just moved) */
	NV_ESEQ_WAIT,		/* cursor; RECV + CTS out, ring entry not seen */
	NV_ESEQ_COPYQ,		/* ring entry taken; its loopback copy still to be posted */
	NV_ESEQ_COPY,		/* loopback copy posted */
	NV_ESEQ_DONE,
};

struct nv_eager_seq {
	uint16_t req;			/* request index */
	uint8_t state;			/* enum nv_eseq_state */
	uint8_t i;			/* eager: the CTS entry of this sequence it took */
};

struct nv_eager_recv {
	uint32_t max;			/* our NCCL_VERBS_EAGER_MAX offered; 0: eager off */
	uint32_t entry;			/* NV_EAGER_ENTRY(max) */
	uint8_t *ring;			/* NV_EAGER_SLOTS entries, then the grant sources */
	struct ibv_mr *mr;		/* ring, on the comm's one device (NV_MR_CTRL) */
	uint64_t tail;			/* oldest sequence not finished */
	uint64_t granted;		/* last grant written to the sender */
	uint32_t surplus;		/* RECVs posted for sequences that went eager */
	uint32_t ngrant;		/* grant writes posted (source index) */
	uint32_t dirty;			/* a PEND or COPYQ sequence may wait for a pass */
	uint32_t cts_grant;		/* the sender reads grants in our CTS entries (cts.h) */
	uint64_t cts_done;		/* last sequence whose message came through its CTS */
	struct nv_eager_seq seqs[NV_EAGER_SLOTS];
};
#define NV_EAGER_RING_BYTES(entry) ((size_t)NV_EAGER_SLOTS * (entry) + NV_EAGER_SLOTS * 8)

struct nv_send_slot {
	uint64_t seq;			/* sequence this slot state belongs to */
	uint8_t nreqs, matched, posted;
	int pending;			/* signalled completions outstanding */
	uint16_t req[NV_MAX_RECVS];	/* per entry; 0xffff unmatched */
};

struct nv_send_comm {
	struct nv_comm base;
	uint64_t head;			/* sequence of the slot isend looks at */
	uint64_t ar_threshold;		/* adaptive routing: from this size, data and imm
					 * go as separate WRs (UINT64_MAX: AR off) */
	struct nv_send_slot slots[NV_FIFO_SLOTS];
	uint64_t max_bytes;		/* longest message (maxP2pBytes of its devices) */
	uint32_t wr_bytes;		/* longest RDMA write (max_msg_sz of its devices) */
	uint32_t one_bytes;		/* the longest message of the one-write fast path:
					 * wr_bytes; 0 with NCCL_VERBS_FAST_PATHS=0, so
					 * every message takes the general path */
	struct ibv_send_wr wr[NV_SEND_CHAIN_MAX];
	struct ibv_sge sge[NV_SEND_CHAIN_MAX];
	/* Templates of the one-write chains (nv_send_post_one): constant fields set
	 * once (nv_send_comm_ready), the post fills in the rest; posting copies them.
	 * one_wr: the WRITE_WITH_IMM carrying the data; split_wr: the data WRITE,
	 * then the 0-byte WRITE_WITH_IMM (adaptive routing). Both read one_sge. */
	struct ibv_send_wr one_wr, split_wr[2];
	struct ibv_sge one_sge;
	struct nv_eager_send eager;
	/* Work the general paths did that a one-buffer one-QP fast path also does,
	 * counted there only (the progress thread's plain stores, as st): with
	 * NCCL_VERBS_FAST_PATHS=0 every message counts, and with the fast paths on,
	 * traffic they serve counts nothing (test/unit/test_fast_paths). */
	uint32_t gen_isend;		/* send requests the general isend handed out */
	uint32_t gen_chain;		/* data chains it built per QP (nv_send_post_qp) */
	int lb_on;			/* NCCL_IB_EVENT_BASED_LB: messages are cut by the
					 * speed weights (base.lb->cum, lb.h), not equally */
};

struct nv_recv_comm {
	struct nv_comm base;
	uint64_t head;			/* sequence of the next irecv */
	int gdr_flush;			/* iflush reads GPU buffers (QPs made at the first) */
	int one_recvs;			/* receives of this many buffers may take the fast
					 * paths (irecv, eager completion): 1; 0 with
					 * NCCL_VERBS_FAST_PATHS=0 (n >= 1: none does) */
	/* Templates of irecv's WRs: constant fields set once (nv_recv_comm_ready),
	 * irecv fills in the rest; posting copies them, so reuse is immediate. */
	struct ibv_send_wr cts_wr;
	struct ibv_sge cts_sge;
	struct ibv_recv_wr recv_wr;
	struct nv_eager_recv eager;
	/* as the send comm's gen_isend: receive requests the general irecv (plain or
	 * eager) handed out, and eager comms' RECV completions of the general path */
	uint32_t gen_irecv;
	uint32_t gen_cqe;
};

/* ---- comm lifetime (qp.c) --------------------------------------------- */
/* Opens PD/CQ/control MR on every device of vdev; QPs come later. */
nv_status_t nv_comm_init(struct nv_comm *c, int type, int vdev, int nreq);
/*
 * Queue depths for nqp QPs of a comm of `type` sharing one CQ on a device
 * with the given limits; pure (unit-tested). 0 ok; -1 the limits cannot
 * give the smallest working queues (reason in why).
 */
int nv_cq_plan(int type, int nqp, int max_cqe, int max_qp_wr, struct nv_cq_plan *p, char *why,
	       size_t len);
nv_status_t nv_comm_create_qps(struct nv_comm *c, int nqps);
/* INIT -> RTR -> RTS of every QP against c->rmeta; sets ECE when given. */
nv_status_t nv_comm_qps_ready(struct nv_comm *c, int tc);
/*
 * Failover (failover.c): QP i (an index of c->qps, which must be the
 * handshake's array) back through RESET -> INIT -> RTR -> RTS against the
 * peer's QP i with both PSNs = psn and c->tc, without ECE; its counters 0.
 * The caller made sure nothing is outstanding on it.
 */
nv_status_t nv_comm_qp_restart(struct nv_comm *c, int i, uint32_t psn);
/* Recovery: device dev's GDR flush QP back to RTS (nothing when it has none or
 * flushes are still outstanding on it). */
nv_status_t nv_comm_flush_qp_restart(struct nv_comm *c, int dev);
void nv_comm_fill_meta(struct nv_comm *c, int role, struct nv_meta *m);
nv_status_t nv_comm_probe_post(struct nv_comm *c);
/* 1 all probes succeeded, 0 not yet, < 0 failed (logged, c->error set). */
int nv_comm_probe_poll(struct nv_comm *c);
/* 1 once the peer's probe left c->probe_want in our probe word, else 0. */
int nv_comm_probe_landed(const struct nv_comm *c);
/*
 * Records (sticky, logged) a path check that completed on the wire but did
 * not prove the path: `what` says which write went missing. The message
 * names both NICs, GIDs/LIDs and QPNs (diag.c).
 */
void nv_comm_probe_lost(struct nv_comm *c, const char *what);
/* The flush QPs of every device that has none yet (iflush and the eager copy
 * into GPU memory make them at first use). */
nv_status_t nv_comm_flush_qps(struct nv_comm *c);
nv_status_t nv_comm_destroy(struct nv_comm *c);
/* ---- eager ring lifetime (eager_ring.c) ------------------------------------ */
/*
 * Receiver, at accept once the QPs exist: sets up the ring when eager is on
 * (NCCL_VERBS_EAGER_MAX > 0), the comm has one device and one QP, and the
 * sender announced it can send eager (nv_meta.region_len); else leaves eager
 * off (NV_OK). The caller adds the loopback (flush) QP that copies eager
 * messages into GPU buffers when the device can register GPU memory.
 */
nv_status_t nv_eager_ring_setup(struct nv_recv_comm *rc);
void nv_eager_ring_free(struct nv_recv_comm *rc);
/* 1 when this sender comm offers eager in its META (one device, one QP, knob on). */
int nv_eager_send_offer(const struct nv_comm *c);
/* Sender, once the receiver's META is in: eager on when it offered a ring (version 4). */
void nv_eager_send_setup(struct nv_send_comm *sc);

/* Called once the handshake completed, before the comm is returned. */
void nv_send_comm_ready(struct nv_send_comm *sc);
/* NCCL_IB_AR_THRESHOLD (messages longer than it are split; -2: the auto value,
 * -1: all) as the first size split, which nv_send_comm.ar_threshold holds. */
#define NV_AR_THRESHOLD_AUTO 8192
uint64_t nv_ar_first_split(int64_t knob);
void nv_recv_comm_ready(struct nv_recv_comm *rc);

/* ---- comm identity and sticky errors (comm.c, diag.c) -------------------- */
/* "dev:port QPN 0x.. -> peer addr rdev QPN 0x.." for messages. */
const char *nv_comm_ident(const struct nv_comm *c, char *buf, size_t len);
/*
 * For handshake failures: " <word> dev:port GID g QPN 0x.. (peer dev GID g QPN
 * 0x..)" once our QPs exist (the peer's part once its metadata was applied),
 * else "".
 */
const char *nv_comm_hs_ident(const struct nv_comm *c, const char *word, char *buf, size_t len);
/* Records the sticky error once (logs it); later calls are no-ops. */
void nv_comm_fail(struct nv_comm *c, nv_status_t st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* ---- state lines and stall reports (state.c) ------------------------------ */
/* Messages completed (test() done), sent or received: from the counters above. */
static inline uint64_t nv_comm_msgs(const struct nv_comm *c)
{
	return c->st.done - c->st.flushes + c->st.grouped;
}
/*
 * One grep-able line of the comm's state: "<type> <ident>: head .., N
 * outstanding [seq S age A ms B bytes tag T ...], cts ..., last progress ..,
 * msgs= bytes= eager= cts_waits= wc_errors= failovers= flushes=, error ..".
 * since_ms: time since the stall check last saw progress (0: unknown).
 */
void nv_comm_state(const struct nv_comm *c, uint64_t since_ms, char *buf, size_t len);
/* Logs the state line with `why` ("at its error", ...): WARN, or INFO (NET) when !warn. */
void nv_comm_dump(const struct nv_comm *c, int warn, const char *why);
/* Takes the report the event thread asked for (stall, dump) and logs it. */
void nv_comm_take_report(struct nv_comm *c);
/* Requests handed out and not yet returned by test(). */
int nv_comm_outstanding(const struct nv_comm *c);
/* Sets the sink's ident and port for reports (once the QPs are connected). */
void nv_comm_set_ident(struct nv_comm *c);
/* Send comms, once connected and before the sink is watched: the WR latency
 * monitor (c->wqe, wqelat.h) when NCCL_IB_WQE_LATENCY_THRESHOLD_NS > 0. */
void nv_comm_wqe_start(struct nv_comm *c);

/* Logs and formats one error completion into c (sticky). diag.c */
void nv_comm_wc_error(struct nv_comm *c, int dev, const struct ibv_wc *wc);

/*
 * Idle polls until the next clock read, given the current stride and the
 * time that stride of polls took: doubles (to NV_LIVENESS_POLLS) while it
 * took under NV_LIVENESS_STRIDE_NS, back to 1 otherwise; the check sets it
 * to 1 when a request completed since its last call (st.done moved), so
 * every wait starts at 1. A busy poller
 * thus reads the clock about once per NV_LIVENESS_STRIDE_NS; one that polls
 * slowly reads it on every poll, so skipping never delays its check by more
 * than about NV_LIVENESS_STRIDE_NS (only a caller that slows down from busy
 * polling in the middle of one wait can see up to NV_LIVENESS_POLLS more
 * polls before the next clock read).
 */
static inline uint32_t nv_liveness_stride(uint32_t stride, uint64_t elapsed_ns)
{
	if (elapsed_ns >= NV_LIVENESS_STRIDE_NS || stride == 0)
		return 1;
	return stride * 2 > NV_LIVENESS_POLLS ? NV_LIVENESS_POLLS : stride * 2;
}

/* ---- shared helpers (handshake.c) -------------------------------------- */
int nv_connect_timeout_ms(void);

#endif /* NV_COMM_H */
