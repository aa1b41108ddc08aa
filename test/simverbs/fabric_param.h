/*
 * simverbs device limits and fabric table sizes: the one place for every cap
 * a simulated device reports.  Configuration (SIMVERBS_DEVICES, SIMVERBS_CONFIG)
 * may shrink the per-device limits below these defaults, never raise them above
 * the SV_MAX_* table sizes.
 */
#ifndef SV_FABRIC_PARAM_H
#define SV_FABRIC_PARAM_H

#include <stdint.h>

/* Shared-memory table sizes: what the simulation can hold in all, not a
 * device limit (a real fabric has none across devices). Each is at least the
 * matching per-device default below, so a device's own limit is what a
 * process runs into, as on hardware. */
enum {
	SV_MAX_PROCS = 256,	/* processes attached at once */
	SV_MAX_CTX = 512,	/* open device contexts, all processes */
	SV_QP_SLOT_BITS = 16,
	SV_MAX_QP_SLOTS = 1 << SV_QP_SLOT_BITS,	/* QPN = gen << 16 | slot (24 bits) */
	SV_QP_GEN_MAX = (1 << (24 - SV_QP_SLOT_BITS)) - 2,	/* gen 1..254: QPN < 0xff0000 */
	SV_MAX_CQ_SLOTS = 1 << 16,
	SV_MAX_MR_SLOTS = 65536,	/* key = slot << 8 | tag */
	SV_MAX_GPU_MRS = 4096,	/* GPU-memory MRs at once, all processes */
	SV_MAX_DEVICES = 16,
	SV_MAX_PORTS = 2,
	SV_GID_TBL_LEN = 32,
	SV_MAX_BAD_GIDS = 16,
	SV_NAME_MAX = 32,
	SV_MAX_HOSTS = 32,	/* simulated hosts (network namespaces) */
	SV_MAX_DEV_KNOBS = 128,	/* per-device knob entries, all hosts */
	SV_LIDS_PER_HOST = 32,	/* LID block of a host: SV_MAX_DEVICES * SV_MAX_PORTS */
};

/* Default device limits (kernel rxe_param.h style).  Per device, config can
 * lower each of them: max_qp, max_qp_wr, max_sge, max_inline, max_cqe,
 * max_mr_size, max_mr, max_pd, max_cq.  max_qp, max_cq, max_mr, max_pd and
 * max_srq bound what ALL processes of a simulated host hold on the device,
 * as a NIC's do (obj.c: sv_dev_take); max_qp and max_cq are rxe's. */
struct sv_limits {
	uint32_t max_qp;
	uint32_t max_qp_wr;
	uint32_t max_sge;
	uint32_t max_inline_data;
	uint32_t max_cqe;
	uint64_t max_mr_size;
	uint32_t max_mr;
	uint32_t max_pd;
	uint32_t max_cq;
	uint32_t max_qp_rd_atom;
	uint32_t max_res_rd_atom;
	uint32_t max_pkeys;
	uint32_t max_srq;
	uint32_t max_srq_wr;
	uint32_t max_srq_sge;
	uint64_t max_msg_sz;		/* port attribute: the longest message (WR) */
};

#define SV_DEFAULT_LIMITS { \
	.max_qp = 65536, \
	.max_qp_wr = 16384, \
	.max_sge = 30, \
	.max_inline_data = 256, \
	.max_cqe = 65535, \
	.max_mr_size = 1ull << 40, \
	.max_mr = 16384, \
	.max_pd = 1024, \
	.max_cq = 16384, \
	.max_qp_rd_atom = 16, \
	.max_res_rd_atom = 16 * 1024, \
	.max_pkeys = 1, \
	.max_srq = 1024, \
	.max_srq_wr = 16384, \
	.max_srq_sge = 30, \
	.max_msg_sz = 1ull << 31, \
}

/* Port defaults: 4X HDR (200 Gb/s) InfiniBand, 100 GbE-ish RoCE. */
#define SV_DEFAULT_IB_SPEED	64	/* IBV_SPEED HDR (50 Gb/s per lane) */
#define SV_DEFAULT_ETH_SPEED	32	/* EDR/25 Gb/s per lane -> 4X = 100 Gb/s */
#define SV_DEFAULT_WIDTH	2	/* 4X */
#define SV_DEFAULT_MTU		5	/* IBV_MTU_4096 */
/* Device identity (device key vendor=soft|mellanox).  Default: a software
 * RDMA device as the kernel's rxe reports itself (IBTA vendor id 0xffffff "no
 * vendor", part id 0, hw_ver 0, firmware 0.0.0) on a virtio-net PCI function
 * (Red Hat 0x1af4:0x1041, class Ethernet), as rxe over a VM's NIC shows it.
 * vendor=mellanox keeps the ConnectX-6 look for tests of vendor-keyed code;
 * the stand-in libmlx5 then still answers "not an mlx5 device", as
 * rdma-core's libmlx5 does for any device another provider drives. */
#define SV_IDENTITY_SOFT	0u
#define SV_IDENTITY_MELLANOX	1u
#define SV_SOFT_VENDOR_ID	0xffffff
#define SV_SOFT_VENDOR_PART_ID	0
#define SV_SOFT_FW_VER		"0.0.0"
#define SV_SOFT_PCI_VENDOR	0x1af4
#define SV_SOFT_PCI_DEVICE	0x1041
#define SV_SOFT_PCI_CLASS	0x020000
#define SV_VENDOR_ID		0x02c9	/* vendor=mellanox: Mellanox */
#define SV_VENDOR_PART_ID	4123	/* ConnectX-6 */
#define SV_MLX_FW_VER		"20.99.1000"
#define SV_MLX_PCI_VENDOR	0x15b3
#define SV_MLX_PCI_DEVICE	0x101b
#define SV_MLX_PCI_CLASS	0x020700

/* Retry-exceeded delay = 4.096us * 2^timeout * (retry_cnt + 1) * scale. */
#define SV_DEFAULT_TIMEOUT_SCALE 0.01
/* How often an initiator re-checks that its peer process is alive (ns). */
#define SV_PEER_CHECK_NS	2000000ull

/* An ibv_poll_cq that has found nothing for this long yields the CPU. */
#define SV_DEFAULT_POLL_YIELD_US	5

#endif
