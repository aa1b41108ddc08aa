/*
 * simverbs internal header: shared-memory fabric layout, process-local
 * objects, and the internal functions of each file (grouped per file).
 *
 * Ownership rules for shared memory (the fabric segment and the per-object
 * CQ/RQ segments):
 *  - Table slots (procs, ctxs, cqs, qps, mrs) are allocated and freed only under
 *    the fabric's robust mutex; the data path reads them without the lock.
 *  - A CQ ring has many producers (any initiator, in any process) and one
 *    consumer (the owner process).  Producers reserve a ticket with CAS on
 *    `tail` (refusing when the ring holds `cqe` entries: overrun) and publish
 *    the entry by storing seq = ticket + 1 with release order.
 *  - A receive queue has one producer (the owner, post_recv) and consumers that
 *    claim entries with CAS on `head` after reading them (initiators, flush).
 *  - sv_shm_qp.state is written by the owner and, when an initiator detects a
 *    responder error, by that initiator; owners resynchronise when the fabric
 *    epoch changes.
 */
#ifndef SV_H
#define SV_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "fabric_param.h"
#include "gpu.h"
#include "rdma_private.h"

/* Memory that a peer writes through process_vm_writev (an RDMA WRITE into a
 * remotely writable MR, a SEND into a posted receive) is invisible to
 * valgrind's memcheck in the target process; like a NIC's DMA, it must count
 * as defined.  The client request is a no-op outside valgrind; only memory
 * that is addressable is touched (invalid SGEs stay invalid). */
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define SV_PEER_WRITABLE(addr, len) \
	((void)VALGRIND_MAKE_MEM_DEFINED_IF_ADDRESSABLE((addr), (len)))
#endif
#endif
#ifndef SV_PEER_WRITABLE
#define SV_PEER_WRITABLE(addr, len) ((void)(addr), (void)(len))
#endif

#define SV_EXPORT __attribute__((visibility("default")))
#define SV_UNUSED __attribute__((unused))
#define SV_LIKELY(x) __builtin_expect(!!(x), 1)
#define SV_UNLIKELY(x) __builtin_expect(!!(x), 0)

#define SV_MAGIC 0x53564642u	/* "SVFB" */
#define SV_VERSION 11u	/* 11: 2^16 QP and CQ slots, per-device object counts (dev_objs); 10: loss knobs, port counters; 9: atomics (atomic_lock, max_dest_rd_atomic); 8: link flaps and port speeds in sv_dev_knobs */
#define SV_STABLE_VERSION 4u

/* ---------------------------------------------------------------- shm */

struct sv_proc_ent {
	_Atomic int32_t pid;		/* 0 = free */
	uint32_t pad;
};

struct sv_ctx_ent {
	_Atomic int32_t pid;		/* 0 = free */
	uint32_t host;			/* index in sv_fabric.hosts */
	uint32_t dev_idx;
	uint32_t chan_id;		/* async FIFO "async-<pid>-<chan_id>" */
	char dev_name[SV_NAME_MAX];
};

struct sv_shm_mr {
	_Atomic uint32_t key;		/* 0 = free; lkey == rkey */
	int32_t pid;
	uint32_t pd_id;
	uint32_t access;
	uint64_t addr;			/* owner's virtual address */
	uint64_t length;
	uint64_t iova;			/* first byte's address in key space */
	uint32_t gpu;			/* GPU memory: its gpus[] slot; 0 = host memory */
	uint32_t pad;
};

struct sv_shm_cq {
	_Atomic int32_t pid;		/* 0 = free */
	uint32_t gen;
	uint32_t ring_bytes;
	uint32_t pad;
};

struct sv_shm_qp {
	_Atomic uint32_t qpn;		/* 0 = free */
	int32_t pid;
	_Atomic uint32_t state;		/* enum ibv_qp_state */
	uint32_t dev_idx;
	uint32_t port;
	uint32_t pd_id;
	_Atomic uint32_t access;	/* qp_access_flags */
	uint32_t recv_cq_slot;
	uint32_t recv_cq_gen;
	uint32_t rq_gen;
	uint32_t rq_bytes;
	uint32_t rq_kind;		/* segment kind: 'r' own RQ, 's' an SRQ */
	uint32_t rq_slot;		/* segment slot (QP slot or SRQ id) */
	uint32_t recv_pd_id;		/* PD receive SGEs are checked against */
	uint32_t qp_type;		/* IBV_QPT_RC or IBV_QPT_UD */
	_Atomic uint32_t qkey;		/* UD: the Q_Key datagrams must carry */
	uint32_t min_rnr_timer;
	uint32_t dest_qpn;
	_Atomic uint32_t cut;		/* fault: cable cut */
	_Atomic uint32_t err_after;	/* fault: error at the Nth op (0 = off) */
	_Atomic uint32_t fail_in;	/* fault: the Nth op from now fails (SV_FAIL_ACK: after it landed) */
	uint32_t async_id;		/* owner context's async FIFO */
	uint16_t lid;
	uint16_t max_dest_rd_atomic;	/* responder resources: 0 refuses READ and atomics */
	uint32_t host;			/* index in sv_fabric.hosts */
	char dev_name[SV_NAME_MAX];
};

#define SV_FAIL_ACK 0x80000000u	/* fail_in: carried out at the responder, its ack lost */

/* Runtime fault and realism knobs, changed by simverbs_control(). */
struct sv_dev_knobs {
	char name[SV_NAME_MAX];		/* "" = free */
	uint32_t host;			/* the device of this host */
	_Atomic uint32_t port_down;	/* bit p = port p down */
	_Atomic uint64_t bw_mbps;	/* 0 = unlimited, per port */
	_Atomic uint64_t latency_ns;	/* added per operation */
	_Atomic uint64_t err_after;	/* each QP of the device fails its N+1-th op */
	/* link-down / link-up (RoCE): bit p = port p's address GIDs removed, or
	 * re-added two slots further on; gid_gen bumped by each, so every process
	 * of the host rebuilds its GID table before it next reads one */
	_Atomic uint32_t addr_gone, addr_moved, gid_gen;
	_Atomic uint32_t speed_mbps[SV_MAX_PORTS];	/* port-speed; 0 = configured */
	_Atomic uint32_t loss_ppb;	/* packet loss on this device's link, per 1e9 (loss.c) */
};

struct sv_knobs {
	_Atomic uint64_t latency_ns;	/* all devices */
	_Atomic uint64_t qp_err_after;	/* 0 = off */
	_Atomic uint32_t timeout_scale_ppm;	/* scale * 1e6 */
	_Atomic uint32_t nbad_gids;
	_Atomic uint32_t loss_ppb;	/* packet loss on every link, per 1e9 (loss.c) */
	union ibv_gid bad_gids[SV_MAX_BAD_GIDS];
	struct sv_dev_knobs dev[SV_MAX_DEV_KNOBS];
};

/* ---------------------------------------------------------------- hosts */

struct sv_gid {
	union ibv_gid gid;
	uint32_t type;			/* enum ibv_gid_type */
	bool valid;
	char ndev[16];			/* netdev the address belongs to (RoCE) */
};

/* A port as the rest of the fabric sees it (published by every process of
 * its host; readers retry while seq is odd or changed). */
struct sv_shm_port {
	_Atomic uint32_t seq;		/* seqlock over everything below but state */
	_Atomic uint32_t state;		/* IBV_PORT_*: configuration and netdev carrier */
	uint32_t mtu;			/* active enum ibv_mtu */
	uint32_t ngids;
	uint16_t lid;
	uint8_t mac[6];			/* bound netdev (RoCE) */
	uint16_t subnet, flid;		/* IB: local subnet prefix (16 bits), FLID */
	struct sv_gid gids[SV_GID_TBL_LEN];
};

/* A port's traffic and error counters as the model counts them (counters.c);
 * added to by any process whose traffic crosses the port. */
enum sv_cnt {
	SV_CNT_XMIT_DATA,	/* octets sent (headers included) */
	SV_CNT_RCV_DATA,	/* octets received */
	SV_CNT_XMIT_PKTS,
	SV_CNT_RCV_PKTS,
	SV_CNT_OOS,		/* responder: out-of-sequence request packets dropped */
	SV_CNT_SEQ_NAK,		/* requester: NAK-sequence-error packets received */
	SV_CNT_ACK_TIMEOUT,	/* requester: local ACK timer expiries */
	SV_CNT_IMPLIED_NAK,	/* requester: gaps in READ responses */
	SV_CNT_DUP,		/* responder: duplicate requests received */
	SV_CNT_RNR_NAK_RCVD,	/* requester: RNR NAKs received */
	SV_CNT_RNR_NAK_SENT,	/* responder: RNR NAKs sent (no receive posted) */
	SV_CNT_RETRY_EXC,	/* requester: RETRY_EXC_ERR completions */
	SV_CNT_RNR_RETRY_EXC,	/* requester: RNR_RETRY_EXC_ERR completions */
	SV_CNT_RETRIES,		/* requester: retransmission rounds (NAK or timeout) */
	SV_CNT_N
};

struct sv_port_cnt {
	_Atomic uint64_t v[SV_CNT_N];
	uint64_t written[SV_CNT_N];	/* values in the sysfs files (host's cnt_writer) */
	uint32_t rendered;		/* the files exist */
	uint32_t pad;
};

struct sv_shm_dev {
	char name[SV_NAME_MAX];
	uint32_t link_layer;
	uint32_t nports;
	struct sv_shm_port ports[SV_MAX_PORTS];
	struct sv_port_cnt cnt[SV_MAX_PORTS];
};

/* A simulated host: the processes of one network namespace (or of one
 * SIMVERBS_HOST name).  Entries are never freed while the fabric lives. */
struct sv_shm_host {
	_Atomic uint32_t used;
	_Atomic int32_t cnt_writer;	/* pid writing the counter files (counters.c) */
	uint32_t ndevs;
	char name[64];
	struct sv_shm_dev devs[SV_MAX_DEVICES];
};

/* What one process holds per device of its host, for the device limits
 * (max_qp, max_cq, max_mr, max_pd, max_srq) that count every process's
 * objects, as a NIC's do.  Written by its process under the fabric lock
 * (obj.c); zeroed when the process registers and when it is reclaimed. */
#define SV_DEV_OBJ_KINDS 8	/* >= SV_K_NKINDS (static assert below) */
struct sv_dev_objs {
	uint32_t host;			/* index in sv_fabric.hosts */
	uint32_t pad;
	uint32_t n[SV_MAX_DEVICES][SV_DEV_OBJ_KINDS];
};

/* Every field up to and including procs keeps its offset in all versions
 * >= SV_STABLE_VERSION, so any simverbs can tell whether a fabric of another
 * version is still in use (and garbage-collect it when it is not). */
struct sv_fabric {
	uint32_t magic;
	uint32_t version;
	_Atomic uint32_t ready;
	_Atomic uint32_t dead;		/* set by the last user before unlink */
	uint64_t size;
	pthread_mutex_t lock;		/* robust, process-shared */
	_Atomic uint32_t epoch;		/* bumped: owners must resync their QPs */
	_Atomic uint32_t next_id;
	struct sv_proc_ent procs[SV_MAX_PROCS];
	/* ---- layout below may change with SV_VERSION ---- */
	uint32_t qp_hint, mr_hint, cq_hint;
	/* held around every atomic's read-modify-write (robust, process-shared):
	 * atomics are atomic with respect to each other fabric-wide (IBV_ATOMIC_HCA) */
	pthread_mutex_t atomic_lock;
	struct sv_knobs knobs;
	struct sv_ctx_ent ctxs[SV_MAX_CTX];
	struct sv_shm_cq cqs[SV_MAX_CQ_SLOTS];
	struct sv_shm_qp qps[SV_MAX_QP_SLOTS];
	struct sv_shm_mr mrs[SV_MAX_MR_SLOTS];
	struct sv_shm_gpu gpus[SV_MAX_GPU_MRS];	/* gpu.c */
	struct sv_shm_host hosts[SV_MAX_HOSTS];
	struct sv_dev_objs dev_objs[SV_MAX_PROCS];	/* by procs[] slot */
};

/* One completion queue entry in a CQ ring (one cache line). */
struct sv_cqe {
	_Atomic uint64_t seq;		/* ticket + 1 once published */
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t byte_len;
	uint32_t imm;			/* network order, as posted */
	uint32_t qp_num;
	uint32_t src_qp;
	uint32_t wc_flags;
	uint32_t sq_idx;		/* requester CQEs: SQ index freed when polled */
	uint16_t slid;
	uint16_t flags;			/* SV_CQE_* */
	uint32_t vendor_err;
	uint32_t sl;			/* UD receives: the AH's service level */
	uint32_t pad;
};
#define SV_CQE_SQ 1			/* frees send-queue slots when polled */

/* A CQ in async and completion-channel events: slot and generation (like a
 * QPN), so an event still queued for a destroyed CQ never resolves to a new
 * CQ that reuses the slot. */
#define SV_CQ_SLOT_BITS 16
#define SV_CQ_EV_ID(slot, gen) ((uint32_t)(gen) << SV_CQ_SLOT_BITS | (uint32_t)(slot))
_Static_assert(SV_MAX_CQ_SLOTS == 1 << SV_CQ_SLOT_BITS, "CQ event ids hold the slot in 16 bits");

struct sv_cq_ring {
	uint32_t magic;
	uint32_t cap;			/* power of two >= cqe */
	uint32_t cqe;
	int32_t owner_pid;
	uint32_t ev_id;			/* SV_CQ_EV_ID(): names the CQ in events */
	uint32_t chan_id;		/* 0 = no channel */
	uint32_t async_id;		/* owner context's async FIFO */
	_Atomic uint32_t overrun;
	_Atomic uint32_t armed;
	_Alignas(64) _Atomic uint64_t tail;
	_Alignas(64) _Atomic uint64_t head;
	_Alignas(64) struct sv_cqe ents[];
};

struct sv_rwqe_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

struct sv_rwqe {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t pad;
	struct sv_rwqe_sge sge[];
};

#define SV_RQ_MAGIC 0x53565251u	/* "SVRQ" */

struct sv_rq {
	uint32_t magic;
	uint32_t cap;			/* power of two >= max_wr */
	uint32_t max_wr;
	uint32_t max_sge;
	uint32_t stride;
	int32_t owner_pid;		/* SRQ: who gets its events */
	uint32_t async_id;		/* SRQ: owner context's async FIFO */
	uint32_t srq_id;		/* 0: a QP's own RQ; else the SRQ's id */
	_Atomic uint32_t limit;		/* SRQ: armed srq_limit, 0 = disarmed */
	_Alignas(64) _Atomic uint64_t tail;	/* owner publishes */
	_Alignas(64) _Atomic uint64_t head;	/* consumers claim by CAS */
	_Alignas(64) unsigned char ents[];
};

/* ---------------------------------------------------------- devices */

#define SV_LOSSLESS_SET 0x100u

struct sv_port {
	uint32_t state;			/* configured IBV_PORT_* */
	uint32_t cfg_mtu;		/* configured enum ibv_mtu */
	uint32_t mtu;			/* active: configuration and netdev MTU */
	uint8_t speed;
	uint8_t width;
	uint16_t lid;
	uint32_t speed_mbps;		/* ibv_query_port_speed; 0: from speed x width */
	/* IB subnets joined by a router: the port's 16-bit local subnet prefix
	 * (0: fe80:: link-local, else fec0:0:0:<subnet>) and its FLID (routable
	 * GID at index 1 when set), as NVIDIA's IB routers number them */
	uint16_t subnet, flid;
	char netdev[16];		/* configured binding ("" = default) */
	/* ---- runtime (sv_g.port_lock) ---- */
	_Atomic uint32_t link;		/* IBV_PORT_ACTIVE/DOWN from the netdev */
	int ifindex;			/* bound netdev, 0 = none */
	char bound[16];			/* its name */
	uint8_t mac[6];
	uint32_t ngids;
	struct sv_gid gids[SV_GID_TBL_LEN];
};

enum sv_kind { SV_K_CTX, SV_K_PD, SV_K_MR, SV_K_CQ, SV_K_QP, SV_K_CHAN, SV_K_SRQ, SV_K_AH, SV_K_NKINDS };
_Static_assert(SV_K_NKINDS <= SV_DEV_OBJ_KINDS, "sv_dev_objs holds every kind");

struct sv_device {
	struct ibv_device ibv;		/* first: apps see this */
	uint32_t idx;
	uint32_t link_layer;		/* IBV_LINK_LAYER_* */
	uint32_t nports;
	/* lossless-Ethernet state in the fake sysfs (RoCE): priority bitmask
	 * | SV_LOSSLESS_SET; 0: the files are absent (ecn_np, ecn_rp, pfc) */
	uint16_t ecn_np, ecn_rp, pfc;
	uint32_t identity;		/* SV_IDENTITY_* (vendor=...) */
	/* ECE (mlx5's model): vendor id (0: ECE unsupported, EOPNOTSUPP) and the
	 * option bits this device supports */
	uint32_t ece_vendor, ece_options;
	/* the first rtr_timeouts INIT->RTR transitions of this process on this
	 * device fail with ETIMEDOUT (RoCE address resolution timing out) */
	uint32_t rtr_timeouts;
	/* link_down=local (rdma_rxe): a port going down leaves its QPs in RTS
	 * (no QP_FATAL) and the next WR each executes fails with LOC_QP_OP_ERR
	 * (rxe's route lookup fails) and moves the QP to error; default: the
	 * QPs move to error (QP_FATAL), WRs executing fail with RETRY_EXC_ERR */
	uint8_t link_down_local;
	uint8_t err_post;		/* SV_ERR_POST_*: WRs posted to a QP in error */
	uint8_t no_atomics;		/* atomics=none: IBV_ATOMIC_NONE, atomic WRs refused (siw) */
	/* PCI address bus:dev.fn (pci=BB:DD.F, e.g. SR-IOV VFs of one NIC);
	 * pci_set 0: bus 3 + index, 00.0 */
	uint8_t pci_set, pci_bus, pci_dev, pci_fn;
	uint64_t node_guid;		/* network order */
	uint64_t sys_guid;
	struct sv_limits lim;
	struct sv_port ports[SV_MAX_PORTS];
	struct sv_shm_dev *sh;		/* this device in the fabric's host table */
	struct sv_dev_knobs *knobs;	/* in the fabric, once attached */
	const struct sv_fabric *knobs_fab;	/* the fabric knobs points into */
	uint64_t bw_busy_until[SV_MAX_PORTS];	/* process-local bw cap clock */
	_Atomic uint32_t gid_gen_seen;	/* knobs->gid_gen this process's tables follow */
	unsigned int nobjs[SV_K_NKINDS];	/* this process's objects per kind, vs lim (sv_g.lock) */
};

/* err_post=: what a WR posted to a QP in ERR gets */
enum {
	SV_ERR_POST_FLUSH = 0,	/* completes with WR_FLUSH_ERR (IB spec, mlx5, siw) */
	SV_ERR_POST_DROP,	/* accepted, never completed until the QP is reset
				 * (rdma_rxe of early 6.1, user QPs) */
};

/* ---------------------------------------------------- local objects */


struct sv_obj {
	struct sv_obj *prev, *next;
	enum sv_kind kind;
	struct sv_device *dev;		/* counted in dev->nobjs (PD, MR, CQ, QP, SRQ) */
};

struct sv_context {
	struct sv_obj obj;
	struct sv_device *dev;
	uint32_t ctx_slot;
	uint32_t chan_id;
	char fifo[256];
	struct verbs_context vctx;	/* last: ibv_context ends it */
};

struct sv_pd {
	struct ibv_pd ibv;
	struct sv_obj obj;
	uint32_t id;
	_Atomic uint32_t children;
};

/* UD address handle (ah.c). */
struct sv_ah {
	struct ibv_ah ibv;		/* first */
	struct sv_obj obj;
	struct sv_pd *pd;
	struct ibv_ah_attr attr;
};

struct sv_srq {
	struct ibv_srq ibv;		/* first */
	struct sv_obj obj;
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_rq *rq;		/* segment 's'<id>.<pid> */
	size_t rq_bytes;
	uint32_t id;			/* segment slot and async event object */
	pthread_spinlock_t lock;	/* post_srq_recv */
	_Atomic uint32_t nqps;		/* QPs bound (destroy: EBUSY) */
	uint32_t events_reported;	/* under sv_g.lock, see sv_qp */
	struct sv_srq *next;		/* process list, under sv_g.lock */
};

struct sv_mr {
	struct ibv_mr ibv;
	struct sv_obj obj;
	struct sv_pd *pd;
	uint32_t slot;
	void *map;			/* dma-buf mapping we own */
	size_t map_len;
	uint64_t pinned;		/* accounted in sv_g.pinned_bytes */
	uint32_t gpu_slot;		/* fabric GPU table slot; 0 = host memory */
	bool dmabuf;			/* from ibv_reg_dmabuf_mr (IBV_MR_TYPE_DMABUF_MR) */
};

struct sv_chan {
	struct ibv_comp_channel ibv;
	struct sv_obj obj;
	uint32_t id;
	char fifo[256];
};

struct sv_qp;

struct sv_cq {
	union {
		struct ibv_cq ibv;
		struct ibv_cq_ex ibvx;	/* same prefix; ibv_create_cq_ex */
	};
	struct ibv_wc cur;		/* ibv_start_poll/next_poll entry */
	struct sv_obj obj;
	uint32_t slot;
	uint32_t gen;
	struct sv_cq_ring *ring;
	size_t ring_bytes;
	pthread_spinlock_t lock;	/* consumer side */
	_Atomic uint32_t nqps;		/* QPs attached (destroy -> EBUSY) */
	uint32_t empty_polls;		/* consecutive empty polls */
	uint64_t idle_since;		/* ns, when this idle spell was noticed */
	int chan_fd_w;			/* own channel FIFO, write side */
	/* Events handed out for this CQ (under sv_g.lock, while in cq_by_slot);
	 * ibv_destroy_cq waits until ibv.async_events_completed and
	 * ibv.comp_events_completed (acks, under ibv.mutex) catch up. */
	uint32_t async_events_reported;
	uint32_t comp_events_reported;
};

/* One send work request as the engine keeps it. */
struct sv_swqe {
	uint64_t wr_id;
	uint64_t remote_addr;
	uint64_t not_before;		/* ns: latency / bandwidth-cap release */
	uint64_t deadline;		/* ns: retry or RNR give-up time */
	uint32_t opcode;		/* enum ibv_wr_opcode */
	uint32_t flags;			/* send_flags */
	uint32_t imm;
	uint32_t rkey;
	uint32_t num_sge;
	uint32_t length;
	uint32_t rnr_left;
	uint32_t wait;			/* SV_WAIT_* while stalled */
	uint64_t rnr_next;
	uint64_t compare_add, swap;	/* atomics (wr.atomic) */
	struct sv_ah *ah;		/* UD: destination (wr.ud) */
	uint32_t ud_qpn, ud_qkey;
	bool counted;			/* the loss model counted its packets */
};

/* SV_WAIT_LOSS: retransmissions under way until deadline; SV_WAIT_LOSS_EXC:
 * then RETRY_EXC_ERR */
enum { SV_WAIT_NONE, SV_WAIT_RNR, SV_WAIT_RETRY, SV_WAIT_LOSS, SV_WAIT_LOSS_EXC };

/* ibv_wr_* batch (extended QP API), process-local. */
struct sv_wrbatch {
	struct ibv_send_wr *wr;
	struct ibv_sge *sge;		/* max_send_sge per WR */
	unsigned char *inl;		/* max_inline_data per WR */
	uint32_t n;
	int err;
};

struct sv_qp {
	union {
		struct ibv_qp ibv;
		struct ibv_qp_ex ibvx;	/* qp_base == ibv */
	};
	struct sv_obj obj;
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_cq *scq, *rcq;
	struct sv_srq *srq;		/* bound SRQ; then rq is the SRQ's */
	uint32_t slot;
	struct sv_shm_qp *sh;
	struct ibv_qp_cap cap;
	struct ibv_qp_attr attr;	/* last applied attributes */
	bool sq_sig_all;
	pthread_spinlock_t lock;	/* send side, state changes */
	pthread_spinlock_t rlock;	/* post_recv */
	/* send queue, process-local */
	struct sv_swqe *sq;
	struct ibv_sge *sq_sge;		/* cap.max_send_sge per WQE */
	unsigned char *sq_inline;	/* max_inline_data per WQE */
	/* SIMVERBS_CHECK_SOURCES (srccheck.c): per WQE a snapshot of its source;
	 * NULL when the knob is off */
	void *snap;
	unsigned char *snap_bytes;
	uint64_t *snap_hash;
	uint32_t sq_cap;
	uint64_t sq_post, sq_exec;
	_Atomic uint64_t sq_free;
	uint64_t ops;
	/* receive queue, in its own segment */
	struct sv_rq *rq;
	size_t rq_bytes;
	/* peer, resolved at RTR from the address vector */
	struct sv_shm_qp *peer;
	struct sv_shm_port *peer_port;	/* the port the address vector leads to */
	uint32_t peer_seq;		/* its seq when the address was last checked */
	bool addr_ok;			/* the DGID still names that port */
	uint32_t sgid_type;
	uint32_t peer_qpn;
	int32_t peer_pid;
	struct sv_rq *peer_rq;
	size_t peer_rq_bytes;
	struct sv_cq_ring *peer_cq;
	size_t peer_cq_bytes;
	int peer_chan_fd;
	union ibv_gid dgid;
	bool dgid_valid;
	/* ECE: options given by ibv_set_ece (before RTR) and those the QP runs
	 * with from RTR on (the intersection with the device's) */
	bool ece_set;
	uint32_t ece_set_options, ece_options;
	uint64_t peer_checked;
	bool peer_dead;
	struct sv_dev_knobs *peer_knobs;	/* loss.c: the peer device's knobs (cached) */
	uint32_t peer_knobs_epoch;	/* fabric epoch of the last lookup that found none */
	bool stalled;
	bool flushed;			/* local flush done for current ERR */
	bool has_qpx;
	struct sv_wrbatch wb;
	/* Async events handed out for this QP (under sv_g.lock, while in
	 * qp_by_slot); ibv_destroy_qp waits until ibv.events_completed
	 * (ibv_ack_async_event, under ibv.mutex) catches up. */
	uint32_t events_reported;
};

/* ------------------------------------------------------ process state */

struct sv_global {
	pthread_mutex_t lock;		/* local object lists, attach */
	struct sv_fabric *fab;
	size_t fab_size;
	ino_t fab_ino;			/* identity of the segment we mapped */
	char fabric_name[128];
	char shm_name[160];
	char dir[256];			/* /tmp/simverbs-<uid>/<fabric> */
	pid_t pid;
	bool attached;
	bool exiting;			/* detached by the destructor */
	int proc_slot;
	int ndevs;
	struct sv_device *devs;
	struct sv_obj objs[SV_K_NKINDS];	/* list heads */
	unsigned int nobjs[SV_K_NKINDS];
	struct sv_qp *qp_by_slot[SV_MAX_QP_SLOTS];
	struct sv_cq *cq_by_slot[SV_MAX_CQ_SLOTS];
	struct sv_qp *lqp[SV_MAX_QP_SLOTS];	/* dense list of local QPs */
	uint32_t nlqp;
	_Atomic uint32_t nstalled;	/* local QPs with deferred send work */
	_Atomic uint32_t seen_epoch;
	uint64_t poll_yield_ns;		/* idle time between sched_yield()s */
	uint64_t pinned_bytes;		/* page-rounded MR bytes (sv_g.lock) */
	uint32_t cq_push_delay_us;	/* test knob: widen sv_cq_push's race window */
	bool cq_lowest_slot;		/* test knob: new CQs take the lowest free slot, so a
					 * freed one is reused at once (not after a lap of the table) */
	/* the simulated host (host.c) */
	uint32_t host;			/* index in sv_fabric.hosts */
	char host_name[64];
	pid_t host_pid;			/* host set up for this pid */
	pthread_mutex_t port_lock;	/* runtime port fields of sv_g.devs */
	pid_t monitor_pid;		/* netlink monitor thread started by this pid */
	char sysfs_root[256];		/* where this host's sysfs tree is written */
};

extern struct sv_global sv_g;

/* config.c */
int sv_devices_init(void);
struct sv_device *sv_dev_by_name(const char *name);

/* gid.c */
struct sv_nl_link;
struct sv_nl_addr;
void sv_build_gid_table(struct sv_device *dev, struct sv_port *port,
			const struct sv_nl_link *links, int nlinks,
			const struct sv_nl_addr *addrs, int naddrs);
void sv_qp_ece_rtr(struct sv_qp *qp);	/* misc.c: the ECE options from RTR on */
int sv_gid_lookup(const struct sv_port *port, const union ibv_gid *gid);
int sv_gid_find(const struct sv_gid *tbl, uint32_t n, const union ibv_gid *gid, uint32_t type);

/* nl.c */
struct sv_nl_link {
	int ifindex;
	int lower;			/* IFLA_LINK (VLAN: the real device) */
	unsigned int flags;		/* IFF_* (IFF_LOWER_UP = carrier) */
	uint32_t mtu;
	uint8_t mac[6];
	bool vlan;
	char name[16];
};
struct sv_nl_addr {
	int ifindex;
	int family;
	uint32_t flags;			/* IFA_F_* */
	uint8_t addr[16];
};
int sv_nl_monitor_open(void);
int sv_nl_links(struct sv_nl_link *v, int max);
int sv_nl_addrs(struct sv_nl_addr *v, int max);
int sv_nl_route(int family, const uint8_t *dst, int oif, bool *local, uint8_t *nexthop);
int sv_nl_resolve(int family, const uint8_t *dst, const uint8_t *nexthop, int ifindex,
		  const char *ifname, int wait_ms, uint8_t *mac);

/* host.c */
int sv_host_ready(void);
void sv_host_refresh(bool events);
void sv_host_publish(void);
void sv_host_atfork_child(void);
uint32_t sv_port_state(const struct sv_device *d, uint32_t port);
struct sv_shm_port *sv_shm_port_of(uint32_t host, uint32_t dev, uint32_t port);
void sv_shm_port_read(const struct sv_shm_port *p, struct sv_shm_port *out);

/* route.c */
struct sv_shm_qp *sv_resolve_dest(struct sv_qp *qp, const struct ibv_qp_attr *a,
				  struct sv_shm_port **port, char *why, size_t whylen);
bool sv_addr_recheck(struct sv_qp *qp);

/* sysfs.c */
int sv_sysfs_create(void);
void sv_name_fabric(void);
void sv_sysfs_ports(void);
/* Rebuilds this process's GID tables after a link-down/up of another process. */
void sv_gid_sync(struct sv_device *d);
void sv_rm_tree(const char *dir);

/* shm.c */
int sv_attach(void);
void sv_detach(void);
int sv_lock(void);
int sv_atomic_lock(void);
void sv_atomic_unlock(void);
void sv_unlock(void);
void sv_reclaim_dead(void);
bool sv_pid_alive(pid_t pid);
void *sv_seg_create(char kind, uint32_t slot, uint32_t gen, size_t bytes);
void *sv_seg_map(char kind, uint32_t slot, uint32_t gen, size_t bytes);
void sv_seg_unlink(char kind, uint32_t slot, uint32_t gen);
uint32_t sv_next_id(void);
void sv_bump_epoch(void);

/* obj.c */
void sv_obj_add(struct sv_obj *o, enum sv_kind kind);
void sv_obj_del(struct sv_obj *o);
int sv_dev_take(struct sv_device *dev, enum sv_kind kind, uint32_t limit);
void sv_dev_give(struct sv_device *dev, enum sv_kind kind);
void sv_dev_objs_clear(int proc_slot);
uint64_t sv_now_ns(void);
void sv_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
extern int sv_debug;			/* SIMVERBS_DEBUG=1: say why calls fail */
#define SV_DBG(...) do { if (SV_UNLIKELY(sv_debug)) sv_log(__VA_ARGS__); } while (0)
int sv_fifo_create(char *path, size_t len, const char *what, uint32_t *id);
ssize_t sv_write_nosig(int fd, const void *buf, size_t len);
int sv_fifo_send(int32_t pid, const char *what, uint32_t id, const void *msg, size_t len);

/* context.c */
struct sv_context *sv_ctx(struct ibv_context *ibctx);
struct sv_dev_knobs *sv_dev_knobs(struct sv_device *dev);
void sv_async_post(struct sv_context *ctx, enum ibv_event_type type, uint32_t obj);
void sv_async_post_remote(int32_t pid, uint32_t chan_id, enum ibv_event_type type,
			  uint32_t obj);
/* srq.c */
struct sv_srq *sv_srq_by_id(uint32_t id);
int sv_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
void sv_srq_claimed(struct sv_rq *rq, uint64_t h);
/* post.c: posts wr into rq (owner side); 0 or errno with *bad set */
int sv_rq_post(struct sv_rq *rq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);

void sv_events_wait(pthread_mutex_t *mu, pthread_cond_t *cond, const uint32_t *completed,
		    uint32_t reported, const uint32_t *completed2, uint32_t reported2);

/* pd_mr.c */
struct sv_shm_mr *sv_mr_lookup(uint32_t key);
int sv_mr_check(const struct sv_shm_mr *m, uint32_t key, int32_t pid, uint32_t pd_id,
		uint64_t addr, uint64_t len, uint32_t need, uint64_t *va);

/* cq.c */
int sv_cq_push(struct sv_cq_ring *ring, const struct sv_cqe *src);
void sv_cq_notify(struct sv_cq_ring *ring, int *fd_cache);
int sv_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int sv_req_notify_cq(struct ibv_cq *cq, int solicited_only);

struct sv_cq *sv_cq_by_ev_id(uint32_t id);

/* qp.c */
void sv_qp_to_error(struct sv_qp *qp, bool async);
void sv_qp_sync(struct sv_qp *qp);
void sv_peer_unmap(struct sv_qp *qp);
/* Maps d's receive queue and receive CQ as qp's peer; false (nothing mapped) if d is gone. */
bool sv_peer_map(struct sv_qp *qp, struct sv_shm_qp *d);

/* cqx.c */
struct ibv_cq_ex *sv_create_cq_ex(struct ibv_context *ibctx, struct ibv_cq_init_attr_ex *attr);

/* qpx.c */
struct ibv_qp *sv_create_qp_ex(struct ibv_context *ibctx, struct ibv_qp_init_attr_ex *attr);
void sv_qpx_free(struct sv_qp *qp);

/* engine.c */
#define SV_MAX_IOV 64
/* One side of a transfer: byte ranges and, per range, the fabric GPU-table
 * slot of its MR (0: host memory). */
struct sv_iovs {
	struct iovec v[SV_MAX_IOV];
	uint32_t gpu[SV_MAX_IOV];
	int n;
	bool any_gpu;
};
/* The local side of the WQE at idx (MRs checked); 0 or EACCES. */
int sv_local_iovs(struct sv_qp *qp, const struct sv_swqe *w, uint64_t idx, struct sv_iovs *io);

static inline bool sv_op_atomic(uint32_t op)
{
	return op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP;
}

/* WQEs that write into their local SGEs (LOCAL_WRITE needed, no inline). */
static inline bool sv_op_fills_local(uint32_t op)
{
	return op == IBV_WR_RDMA_READ || sv_op_atomic(op);
}

/* The requester completion's opcode for a send WQE's. */
static inline uint32_t sv_wc_opcode(uint32_t op)
{
	switch (op) {
	case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
	case IBV_WR_SEND: case IBV_WR_SEND_WITH_IMM: return IBV_WC_SEND;
	case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_WC_FETCH_ADD;
	case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_WC_COMP_SWAP;
	default: return IBV_WC_RDMA_WRITE;
	}
}
/* process_vm_writev/readv between our iovecs and pid's, to the last byte. */
int sv_vm_copy(int32_t pid, bool write, struct iovec *l, int nl, struct iovec *r, int nr);
int sv_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int sv_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
void sv_qp_progress(struct sv_qp *qp);
void sv_flush_sq(struct sv_qp *qp);
void sv_flush_rq(struct sv_rq *rq, struct sv_cq_ring *ring, uint32_t qpn, int *fd);
void sv_sync_all(void);

/* srccheck.c: SIMVERBS_CHECK_SOURCES */
extern bool sv_check_sources;
void sv_srccheck_from_env(void);
int sv_srccheck_alloc(struct sv_qp *qp);
void sv_srccheck_free(struct sv_qp *qp);
void sv_srccheck_post(struct sv_qp *qp, uint64_t idx);
bool sv_srccheck_exec(struct sv_qp *qp, uint64_t idx, const struct sv_iovs *lio);

/* fault.c */
void sv_knobs_from_env(void);
double sv_timeout_scale(void);
bool sv_gid_unreachable(const union ibv_gid *gid);
int sv_control(const char *cmd, char *out, size_t outlen);

/* loss.c: packet loss and RC recovery (go-back-N, ACK timeouts) */
uint32_t sv_loss_ppb(struct sv_qp *qp);
enum sv_loss_res { SV_LOSS_CLEAN, SV_LOSS_DELAY, SV_LOSS_EXCEEDED };
enum sv_loss_res sv_loss_run(struct sv_qp *qp, struct sv_swqe *w, uint32_t ppb, uint64_t *delay);
bool sv_loss_ud(struct sv_qp *qp);

/* counters.c: the ports' counters and their sysfs files */
void sv_cnt_add(uint32_t host, uint32_t dev, uint32_t port, enum sv_cnt c, uint64_t v);
void sv_cnt_op(struct sv_qp *qp, const struct sv_swqe *w);
void sv_cnt_tick(uint64_t now);
void sv_cnt_flush(void);
uint32_t sv_pkt_hdr(const struct sv_qp *qp);

/* leak.c */
void sv_leak_report(char *out, size_t outlen, unsigned int *count);
void sv_object_counts(char *out, size_t outlen);

static inline uint64_t sv_pow2(uint64_t v)
{
	uint64_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

#endif
