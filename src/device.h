/*
 * device.h - the device layer: discovery of HCAs and ports, NCCL_IB_HCA
 * filtering, properties, virtual NICs, RoCE GID selection, PD refcounting,
 * GPUDirect detection (gdr.c) and the per-HCA async-event thread.
 *
 * Ownership: the global device table is created by the first nv_devices_init()
 * and destroyed by the matching last nv_devices_fini() (devset.h; refcounted, so
 * per-communicator init/finalize and library reload work). Between those calls
 * struct nv_hca / nv_dev / nv_vdev pointers stay valid and their descriptive
 * fields are read-only; the fields marked "locked" or "atomic" are not.
 *
 * Indices: NCCL's `dev` argument is a VIRTUAL device index (nv_vdev_get).
 * At init every physical device i gets virtual device i = {1, {i}};
 * makeVDevice appends more.
 *
 * Async events (contract with the comm layer): every QP and CQ the plugin
 * creates must have qp_context / cq_context pointing at a struct
 * nv_async_sink that outlives the QP/CQ (or NULL). A fatal QP/CQ event is
 * recorded there; a fatal device event is recorded on the HCA and on the
 * sink of every comm attached to it (nv_hca_sink_attach), so a comm's health
 * is one word, its sink's `fatal`, which the comm's own sticky error also
 * sets: data-path calls load it once and take the slow path when non-zero.
 */
#ifndef NV_DEVICE_H
#define NV_DEVICE_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <infiniband/verbs.h>
#include "nccl/net.h"
#include "hwcnt.h"
#include "nv_common.h"

#define NV_MAX_DEVS 32           /* kept ports (NCCL's MAX_IB_DEVS) */
#define NV_MAX_VDEVS 256         /* physical + merged */
#define NV_MAX_DEVS_PER_VDEV NCCL_NET_MAX_DEVS_PER_NIC_V12 /* 8 */
/* A message is split into at most this many RDMA writes per QP, each at most
 * the port's max_msg_sz (rounded down to NV_WR_ALIGN); with the 32-bit size
 * of the immediate and of the grouped-size records this sets maxP2pBytes
 * (nv_dev_max_msg_bytes). */
#define NV_MAX_WR_PER_MSG 4
#define NV_WR_ALIGN 128
#define NV_PLANE_MAX_INDEX 14    /* NCCL's: plane indexes 0..12 (0 = no plane) */
#define NV_PLANE_VIRT_BIT (1 << NV_PLANE_MAX_INDEX) /* planeId of a fused NIC */
#define NV_MAX_RECVS 8           /* maxRecvs reported to NCCL */
#define NV_NAME_MAX 64           /* select.c's NCCL_IB_HCA message says 64 */
#define NV_WHY_MAX 256

/*
 * Where a fatal asynchronous event lands. Event threads write `what` and the
 * event bits (under event.c's lock); the comm owning the sink sets
 * NV_SINK_STICKY when it records a sticky error. 0 = healthy.
 */
#define NV_SINK_EVENT_MASK 0xffff	/* enum ibv_event_type + 1 of the first fatal event */
#define NV_SINK_DEVICE 0x10000		/* ... which was device-wide (fanned out by the HCA) */
#define NV_SINK_STICKY 0x20000		/* the owning comm has a sticky error */
#define NV_SINK_FAILOVER 0x40000	/* the comm has a failover round to run (failover.c) */
#define NV_SINK_REPORT 0x80000		/* the event thread asks the comm for a report (below) */
#define NV_SINK_LB 0x100000		/* a speed changed on a device of the comm (lb.c) */
#define NV_REPORT_STALL 1		/* report_kind: no progress for NCCL_VERBS_STALL_MS */
#define NV_REPORT_DUMP 2		/* report_kind: a state dump was asked for */
#define NV_SINK_IDENT_LEN 192
struct nv_wqe_mon;
struct nv_async_sink {
	atomic_int fatal;      /* bits above */
	char what[NV_WHY_MAX]; /* text of the event; complete before the event bits are set */
	/*
	 * Peer liveness, off the data path (nv_hca_sink_watch): while `watched`,
	 * the event thread of watch_hca checks watch_fd (the comm's handshake
	 * socket) every NV_LIVENESS_NS if `waiting` was set since its last check
	 * (the data path sets it on each call that found nothing to do), and sets
	 * peer_gone when the peer closed or reset it. The fd stays open while
	 * the sink is attached to watch_hca (the comm detaches before closing).
	 */
	atomic_int watched;
	atomic_int waiting;
	atomic_int peer_gone;
	int peer_state;		/* nv_fd_peer_state's answer when peer_gone was set */
	atomic_int fo_wake;	/* failover.c: bytes on watch_fd set NV_SINK_FAILOVER (a round) */
	atomic_int lb_wake;	/* lb.c: a DEVICE_SPEED_CHANGE on the HCA sets NV_SINK_LB */
	int watch_fd;
	const struct nv_hca *watch_hca;
	/*
	 * Stall detection and state dumps (event.c, contract in event.h). The
	 * data path stores its progress count into `waiting` (odd, so never 0)
	 * each time it finds nothing to do; the event thread sees a count that
	 * did not move while the comm kept waiting. All fields below are guarded
	 * by event.c's lock: the event thread fills the report_* fields and then
	 * sets NV_SINK_REPORT; the comm, on its next call (the health word's slow
	 * path), takes them under the lock and clears the bit. ident and
	 * stall_port are set by the comm before nv_hca_sink_watch.
	 */
	char ident[NV_SINK_IDENT_LEN];	/* "send mlx5_0:1 QPN 0x.. -> peer ..." */
	int stall_port;			/* port of watch_hca whose counters reports carry */
	uint64_t stall_val;		/* progress value last seen */
	uint64_t stall_since;		/* when it was first seen (0: not waiting) */
	uint64_t stall_seen;		/* last sweep that found the comm waiting */
	uint64_t stall_next;		/* earliest next stall report */
	uint64_t report_due;		/* a report not taken by then is dropped */
	int report_kind;		/* NV_REPORT_* */
	uint64_t report_stall_ms;	/* how long without progress (stall) */
	uint64_t report_since_ms;	/* last progress seen this many ms ago (0: unknown) */
	char report_cnt[512];		/* the port's counter deltas (stall) */
	/* NCCL_IB_WQE_LATENCY_THRESHOLD_NS (wqelat.h): the comm's monitor, whose stall
	 * lines the sweep logs; set before the sink is watched, freed after it detached */
	struct nv_wqe_mon *wqe;
};
/* A clock the event threads advance every sweep (ns, 0 until one runs); the data
 * path reads it to stamp requests, for their age in stall reports and dumps. */
extern _Atomic uint64_t nv_coarse_ns __attribute__((visibility("hidden")));
/* How often a waiting comm's peer is checked (and the fallback's interval). */
#define NV_LIVENESS_NS 100000000ull

/* A comm's sink on one HCA's list (event.c's lock guards the lists). */
struct nv_sink_link {
	struct nv_async_sink *sink;	/* NULL: not attached */
	struct nv_sink_link *prev, *next;
	uint8_t port;			/* the comm's port on the HCA (set before attach; 0: any) */
};

static inline bool nv_async_sink_failed(struct nv_async_sink *s)
{
	return s && nv_unlikely((atomic_load_explicit(&s->fatal, memory_order_acquire) &
				 NV_SINK_EVENT_MASK) != 0);
}

/* GPUDirect status of one HCA (gdr.c). */
struct nv_gdr_info {
	int ptr_support;        /* NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF */
	bool peermem;           /* a peer-memory module marker was found */
	bool dmabuf;            /* ibv_reg_dmabuf_mr probe says supported */
	char peermem_marker[128]; /* which file proved it, or "" */
	char why[NV_WHY_MAX];   /* human explanation: on, or why not */
};

/* One opened verbs device; shared by its kept ports. */
struct nv_hca {
	char name[NV_NAME_MAX];          /* ibv device name, e.g. mlx5_0 */
	char pci_path[PATH_MAX];         /* realpath(<ibdev_path>/device), "" if unknown */
	int64_t pci_busid;               /* its last component before merging, as one hex
					  * number (domain bus device function); -1 if unknown */
	int order;                       /* position in the verbs device list */
	struct ibv_context *ctx;
	struct ibv_device_attr attr;
	struct nv_gdr_info gdr;
	bool relaxed_ordering;           /* data MRs may use IBV_ACCESS_RELAXED_ORDERING */

	pthread_mutex_t lock;            /* guards pd, pd_refs */
	struct ibv_pd *pd;               /* locked */
	int pd_refs;                     /* locked */
	struct nv_mr_cache *mr_cache;    /* mr.c; has its own lock */

	struct nv_async_sink sink;       /* DEVICE_FATAL and unattributed fatal events */
	struct nv_sink_link *sinks;      /* comms to tell of a DEVICE_FATAL (event.c's lock) */
	pthread_t event_thread;
	bool event_thread_running;
	bool event_watching;             /* the thread checks watched sinks (event.c's lock) */
	int event_stop_fd;               /* write end wakes the thread for shutdown */
	int event_wake_fd;
	/* The ports' counters, read by the event thread while stall checks are on,
	 * for the deltas in stall reports (event.c; that thread and the sweep's lock). */
	struct nv_cnt_ring *cnt;         /* one ring per port; NULL: none */
	int cnt_ports;
	uint64_t cnt_next_ns;            /* next reading */
};
/* Readings of one port, every NCCL_VERBS_STALL_MS / 4 (at least 100 ms). */
#define NV_CNT_RING 8
struct nv_cnt_ring {
	int n, head;                     /* readings kept, the newest */
	struct nv_hwcnt e[NV_CNT_RING];
};

/* What the GID auto-selection picked for one port, with the reason. */
struct nv_gid_info {
	int index;              /* -1: none usable */
	union ibv_gid gid;
	int type;               /* IBV_GID_TYPE_IB / _ROCE_V1 / _ROCE_V2, -1 unknown */
	bool valid;             /* not zero, not link-local */
	char why[NV_WHY_MAX];
};

/* One ACTIVE port = one physical NCCL device. */
struct nv_dev {
	int index;                       /* physical index */
	char name[NV_NAME_MAX + 8];      /* name reported to NCCL; unique */
	struct nv_hca *hca;
	uint8_t port;
	uint8_t link_layer;              /* IBV_LINK_LAYER_INFINIBAND or _ETHERNET */
	uint16_t lid;
	uint8_t sm_sl;
	enum ibv_mtu active_mtu;
	bool grh_required;               /* IB port demands a GRH */
	int speed_mbps;
	uint32_t active_speed;           /* raw, for diagnostics */
	uint8_t active_width;
	int gid_tbl_len;
	uint32_t max_msg_sz;             /* the port's longest message (one WR) */
	uint64_t guid;                   /* sys_image_guid (ASIC identity) */
	int16_t rail, plane;             /* from NCCL_IB_HCA, -1 if not given */
	int16_t plane_idx;               /* index of `plane` among all devices' planes (0: -1) */
	int nccl_port;                   /* props.port: port + functions sharing the PCI node */

	pthread_mutex_t gid_lock;        /* guards gid */
	struct nv_gid_info gid;          /* locked; cached selection */
	atomic_int gid_stale;            /* set by GID_CHANGE; next nv_dev_gid() recomputes */
};

/* A virtual NIC: 1..8 physical devices used together. */
struct nv_vdev {
	int ndevs;
	int devs[NV_MAX_DEVS_PER_VDEV];
	char name[NV_MAX_DEVS_PER_VDEV * (NV_NAME_MAX + 9)];
};

/* Per-init (per-communicator for v11/v12) context handed to nv_net_listen/connect. */
struct nv_ctx {
	uint64_t comm_id;
	int traffic_class;      /* NCCL_NET_TRAFFIC_CLASS_UNDEF (-1) or 0..255 */
};

/* ---- global table (device.c; set up and torn down by devset.c) ------------ */
/* The steps of nv_devices_init/fini (devset.c), under nv_devices_lock: */
void nv_devices_lock(void);         /* serializes init, fini and makeVDevice */
void nv_devices_unlock(void);
/* Opens every device with a usable port (NCCL_IB_HCA): the HCAs and their ports. */
nv_status_t nv_devices_scan(void);
/* Once the HCAs are started: drops GID-less ports, orders the table, one vNIC per port. */
nv_status_t nv_devices_finish(void);
/* Frees the table and closes the HCAs (their event threads and caches stopped). */
void nv_devices_free(void);
int nv_hca_count(void);
struct nv_hca *nv_hca_get(int index);          /* NULL if out of range */
bool nv_devices_busy(void);         /* a PD or registration is still held */
/* IBV_EVENT_DEVICE_SPEED_CHANGE (rdma-core 56+; 20, newer than some verbs.h): the speed of the
 * HCA's devices on port (all ports when port <= 0) queried again, one INFO line each. */
#define NV_IBV_EVENT_DEVICE_SPEED_CHANGE 20
void nv_dev_speed_refresh(struct nv_hca *h, int port);
int nv_dev_count(void);
struct nv_dev *nv_dev_get(int index);          /* NULL if out of range */
int nv_vdev_count(void);
const struct nv_vdev *nv_vdev_get(int index);  /* NULL if out of range */
/* makeVDevice: merge physical devices. max_devs is 4 for ABI <= v11, 8 for v12. */
nv_status_t nv_vdev_make(const int *devs, int ndevs, int max_devs, int *vdev);
/* ---- properties (props.c) ------------------------------------------------ */
/* Fills every field of the v12 shape for virtual device `vdev`. */
nv_status_t nv_vdev_properties(int vdev, ncclNetProperties_v12_t *props);
/* Longest RDMA write the data path posts on d: max_msg_sz rounded down to NV_WR_ALIGN. */
uint32_t nv_dev_wr_bytes(const struct nv_dev *d);
/* Longest message through d (maxP2pBytes): NV_MAX_WR_PER_MSG writes, <= 4 GiB - 1. */
uint64_t nv_dev_max_msg_bytes(const struct nv_dev *d);

/* GID of a port: cached auto-selection (recomputed after GID_CHANGE).
 * For IB ports without GRH this is index 0 and only informative. */
nv_status_t nv_dev_gid(struct nv_dev *dev, struct nv_gid_info *out);
/* Fresh snapshot of the port's GID table (IB: entry 0 only); free() it. */
struct nv_gid_entry;
nv_status_t nv_dev_gid_table(struct nv_dev *dev, struct nv_gid_entry **table, int *count);

/* PD shared by all users of an HCA; refcounted. */
nv_status_t nv_hca_pd_get(struct nv_hca *hca, struct ibv_pd **pd);
void nv_hca_pd_put(struct nv_hca *hca);

static inline bool nv_hca_failed(struct nv_hca *hca)
{
	return nv_async_sink_failed(&hca->sink);
}

/* ---- routing (route.c) --------------------------------------------------- */
/* NCCL_IB_SUBNET_AWARE_ROUTING: the vNIC to connect from to reach a listener
 * with these RoCE GIDs (all-zero entries ignored): dflt when each of its RoCE
 * ports shares a subnet with one of them (or none is given), else the first
 * vNIC for which that holds, else dflt. */
int nv_vdev_by_subnet(const uint8_t (*gids)[16], int n, int dflt);
/* Fills up to n RoCE GIDs of vNIC dev (the ones its ports use); returns how many. */
int nv_vdev_roce_gids(int dev, uint8_t (*gids)[16], int n);

/* ---- GPUDirect (gdr.c) ---------------------------------------------------- */
/* Looks for nv_peer_mem / nv_mem_nc / nvidia_peermem markers below `root`
 * ("/" normally). Returns true and the marker path when one exists. */
bool nv_gdr_peermem_present(const char *root, char *marker, size_t len);
/* Fills hca->gdr (peer memory + dma-buf probe on a temporary PD), logs it. */
nv_status_t nv_gdr_detect(struct nv_hca *hca);

#endif /* NV_DEVICE_H */
