/*
 * The rest of the libibverbs ABI: string helpers, rate conversions, fork
 * support, and the verbs simverbs does not implement (they fail cleanly with
 * EOPNOTSUPP: int verbs return it, pointer verbs return NULL with errno set).
 */
#include <errno.h>
#include <string.h>

#include "sv.h"

SV_EXPORT const char *ibv_wc_status_str(enum ibv_wc_status status);
const char *ibv_wc_status_str(enum ibv_wc_status status)
{
	static const char *const s[] = {
		[IBV_WC_SUCCESS] = "success",
		[IBV_WC_LOC_LEN_ERR] = "local length error",
		[IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
		[IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
		[IBV_WC_LOC_PROT_ERR] = "local protection error",
		[IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
		[IBV_WC_MW_BIND_ERR] = "memory management operation error",
		[IBV_WC_BAD_RESP_ERR] = "bad response error",
		[IBV_WC_LOC_ACCESS_ERR] = "local access error",
		[IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
		[IBV_WC_REM_ACCESS_ERR] = "remote access error",
		[IBV_WC_REM_OP_ERR] = "remote operation error",
		[IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
		[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
		[IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
		[IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
		[IBV_WC_REM_ABORT_ERR] = "aborted error",
		[IBV_WC_INV_EECN_ERR] = "invalid EE context number",
		[IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
		[IBV_WC_FATAL_ERR] = "fatal error",
		[IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
		[IBV_WC_GENERAL_ERR] = "general error",
		[IBV_WC_TM_ERR] = "TM error",
		[IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
	};

	if ((unsigned int)status < sizeof(s) / sizeof(s[0]) && s[status])
		return s[status];
	return "unknown";
}

SV_EXPORT const char *ibv_event_type_str(enum ibv_event_type event);
const char *ibv_event_type_str(enum ibv_event_type event)
{
	static const char *const s[] = {
		[IBV_EVENT_CQ_ERR] = "CQ error",
		[IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
		[IBV_EVENT_QP_REQ_ERR] = "invalid request local work queue error",
		[IBV_EVENT_QP_ACCESS_ERR] = "local access violation work queue error",
		[IBV_EVENT_COMM_EST] = "communication established",
		[IBV_EVENT_SQ_DRAINED] = "send queue drained",
		[IBV_EVENT_PATH_MIG] = "path migrated",
		[IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
		[IBV_EVENT_DEVICE_FATAL] = "local catastrophic error",
		[IBV_EVENT_PORT_ACTIVE] = "port active",
		[IBV_EVENT_PORT_ERR] = "port error",
		[IBV_EVENT_LID_CHANGE] = "LID change",
		[IBV_EVENT_PKEY_CHANGE] = "P_Key change",
		[IBV_EVENT_SM_CHANGE] = "SM change",
		[IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
		[IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
		[IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
		[IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
		[IBV_EVENT_GID_CHANGE] = "GID table change",
		[IBV_EVENT_WQ_FATAL] = "WQ fatal",
	};

	if ((unsigned int)event < sizeof(s) / sizeof(s[0]) && s[event])
		return s[event];
	return "unknown";
}

SV_EXPORT const char *ibv_node_type_str(enum ibv_node_type node_type);
const char *ibv_node_type_str(enum ibv_node_type node_type)
{
	switch (node_type) {
	case IBV_NODE_CA: return "InfiniBand channel adapter";
	case IBV_NODE_SWITCH: return "InfiniBand switch";
	case IBV_NODE_ROUTER: return "InfiniBand router";
	case IBV_NODE_RNIC: return "iWARP NIC";
	case IBV_NODE_USNIC: return "usNIC";
	case IBV_NODE_USNIC_UDP: return "usNIC UDP";
	default: return "unknown";
	}
}

SV_EXPORT const char *ibv_port_state_str(enum ibv_port_state port_state);
const char *ibv_port_state_str(enum ibv_port_state port_state)
{
	static const char *const s[] = { "PORT_NOP", "PORT_DOWN", "PORT_INIT", "PORT_ARMED",
					 "PORT_ACTIVE", "PORT_ACTIVE_DEFER" };

	return (unsigned int)port_state < 6 ? s[port_state] : "unknown";
}

/* Rate table: enum value, multiple of 2.5 Gb/s, Mb/s. */
static const struct {
	int rate, mult, mbps;
} sv_rates[] = {
	{ IBV_RATE_2_5_GBPS, 1, 2500 }, { IBV_RATE_5_GBPS, 2, 5000 },
	{ IBV_RATE_10_GBPS, 4, 10000 }, { IBV_RATE_20_GBPS, 8, 20000 },
	{ IBV_RATE_30_GBPS, 12, 30000 }, { IBV_RATE_40_GBPS, 16, 40000 },
	{ IBV_RATE_60_GBPS, 24, 60000 }, { IBV_RATE_80_GBPS, 32, 80000 },
	{ IBV_RATE_120_GBPS, 48, 120000 }, { IBV_RATE_14_GBPS, 5, 14062 },
	{ IBV_RATE_56_GBPS, 22, 56250 }, { IBV_RATE_112_GBPS, 45, 112500 },
	{ IBV_RATE_168_GBPS, 67, 168750 }, { IBV_RATE_25_GBPS, 10, 25781 },
	{ IBV_RATE_100_GBPS, 40, 103125 }, { IBV_RATE_200_GBPS, 80, 206250 },
	{ IBV_RATE_300_GBPS, 120, 309375 }, { IBV_RATE_28_GBPS, 11, 28125 },
	{ IBV_RATE_50_GBPS, 20, 53125 }, { IBV_RATE_400_GBPS, 160, 425000 },
	{ IBV_RATE_600_GBPS, 240, 637500 }, { IBV_RATE_800_GBPS, 320, 850000 },
	{ IBV_RATE_1200_GBPS, 480, 1275000 },
};
#define SV_NRATES (sizeof(sv_rates) / sizeof(sv_rates[0]))

SV_EXPORT int ibv_rate_to_mult(enum ibv_rate rate);
int ibv_rate_to_mult(enum ibv_rate rate)
{
	for (size_t i = 0; i < SV_NRATES; i++)
		if (sv_rates[i].rate == (int)rate)
			return sv_rates[i].mult;
	return -1;
}

SV_EXPORT enum ibv_rate mult_to_ibv_rate(int mult);
enum ibv_rate mult_to_ibv_rate(int mult)
{
	for (size_t i = 0; i < SV_NRATES; i++)
		if (sv_rates[i].mult == mult)
			return (enum ibv_rate)sv_rates[i].rate;
	return IBV_RATE_MAX;
}

SV_EXPORT int ibv_rate_to_mbps(enum ibv_rate rate);
int ibv_rate_to_mbps(enum ibv_rate rate)
{
	for (size_t i = 0; i < SV_NRATES; i++)
		if (sv_rates[i].rate == (int)rate)
			return sv_rates[i].mbps;
	return -1;
}

SV_EXPORT enum ibv_rate mbps_to_ibv_rate(int mbps);
enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	for (size_t i = 0; i < SV_NRATES; i++)
		if (sv_rates[i].mbps == mbps)
			return (enum ibv_rate)sv_rates[i].rate;
	return IBV_RATE_MAX;
}

/* Data moves by process_vm_writev into the live address space, so forked
 * children never share pinned pages: fork support is always "on". */
SV_EXPORT int ibv_fork_init(void);
int ibv_fork_init(void)
{
	return 0;
}

SV_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void);
enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}

SV_EXPORT int ibv_dontfork_range(void *base, size_t size);
int ibv_dontfork_range(void *base, size_t size)
{
	(void)base; (void)size;
	return 0;
}

SV_EXPORT int ibv_dofork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size)
{
	(void)base; (void)size;
	return 0;
}

SV_EXPORT void ibv_register_driver(const char *name, ibv_driver_init_func_1_1 init_func);
void ibv_register_driver(const char *name, ibv_driver_init_func_1_1 init_func)
{
	(void)name; (void)init_func;
}

SV_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op,
					 uint32_t flags);
int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	(void)qp; (void)op; (void)flags;
	return 0;
}

/*
 * ECE as mlx5 does it, on devices configured with ece_vendor=: a new QP
 * reports the device's options; ibv_set_ece (vendor id must match, comp_mask
 * 0, before RTR) gives the peer's; at INIT->RTR the QP takes the intersection
 * (sv_qp_ece_rtr), which query_ece reports from then on. Other devices:
 * EOPNOTSUPP both ways.
 */
SV_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece);
int ibv_query_ece(struct ibv_qp *ibqp, struct ibv_ece *ece)
{
	struct sv_qp *qp = (struct sv_qp *)ibqp;
	const struct sv_device *d;
	uint32_t st;

	if (!qp || !ece)
		return EINVAL;
	d = qp->ctx->dev;
	if (!d->ece_vendor)
		return EOPNOTSUPP;
	st = atomic_load(&qp->sh->state);
	ece->vendor_id = d->ece_vendor;
	ece->options = st == IBV_QPS_RESET || st == IBV_QPS_INIT ? d->ece_options : qp->ece_options;
	ece->comp_mask = 0;
	return 0;
}

SV_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece);
int ibv_set_ece(struct ibv_qp *ibqp, struct ibv_ece *ece)
{
	struct sv_qp *qp = (struct sv_qp *)ibqp;
	uint32_t st;

	if (!qp || !ece)
		return EINVAL;
	if (!qp->ctx->dev->ece_vendor)
		return EOPNOTSUPP;
	st = atomic_load(&qp->sh->state);
	if (ece->comp_mask || ece->vendor_id != qp->ctx->dev->ece_vendor ||
	    (st != IBV_QPS_RESET && st != IBV_QPS_INIT)) {
		SV_DBG("set_ece 0x%x: vendor 0x%x comp_mask 0x%x in state %u: EINVAL (vendor "
		       "0x%x, before RTR only)", ibqp->qp_num, ece->vendor_id, ece->comp_mask, st,
		       qp->ctx->dev->ece_vendor);
		return EINVAL;
	}
	qp->ece_set = true;
	qp->ece_set_options = ece->options;
	return 0;
}

void sv_qp_ece_rtr(struct sv_qp *qp)
{
	const struct sv_device *d = qp->ctx->dev;

	qp->ece_options = qp->ece_set ? qp->ece_set_options & d->ece_options : d->ece_options;
}

#define SV_NULL_EOPNOTSUPP do { errno = EOPNOTSUPP; return NULL; } while (0)

SV_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
					       struct ibv_grh *grh, uint8_t port_num);
struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh,
				     uint8_t port_num)
{
	(void)pd; (void)wc; (void)grh; (void)port_num;
	SV_NULL_EOPNOTSUPP;
}

SV_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num,
				  struct ibv_wc *wc, struct ibv_grh *grh,
				  struct ibv_ah_attr *ah_attr);
int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num, struct ibv_wc *wc,
			struct ibv_grh *grh, struct ibv_ah_attr *ah_attr)
{
	(void)context; (void)port_num; (void)wc; (void)grh; (void)ah_attr;
	return EOPNOTSUPP;
}

SV_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp; (void)gid; (void)lid;
	return EOPNOTSUPP;
}

SV_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp; (void)gid; (void)lid;
	return EOPNOTSUPP;
}

SV_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *context, struct ibv_ah_attr *attr,
					  uint8_t eth_mac[ETHERNET_LL_SIZE], uint16_t *vid);
int ibv_resolve_eth_l2_from_gid(struct ibv_context *context, struct ibv_ah_attr *attr,
				uint8_t eth_mac[ETHERNET_LL_SIZE], uint16_t *vid)
{
	(void)context; (void)attr; (void)eth_mac; (void)vid;
	return EOPNOTSUPP;
}

SV_EXPORT struct ibv_context *ibv_import_device(int cmd_fd);
struct ibv_context *ibv_import_device(int cmd_fd)
{
	(void)cmd_fd;
	SV_NULL_EOPNOTSUPP;
}

SV_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle);
struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	(void)context; (void)pd_handle;
	SV_NULL_EOPNOTSUPP;
}

SV_EXPORT void ibv_unimport_pd(struct ibv_pd *pd);
void ibv_unimport_pd(struct ibv_pd *pd)
{
	(void)pd;
}

SV_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle);
struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	(void)pd; (void)mr_handle;
	SV_NULL_EOPNOTSUPP;
}

SV_EXPORT void ibv_unimport_mr(struct ibv_mr *mr);
void ibv_unimport_mr(struct ibv_mr *mr)
{
	(void)mr;
}

SV_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle);
struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
	(void)context; (void)dm_handle;
	SV_NULL_EOPNOTSUPP;
}

SV_EXPORT void ibv_unimport_dm(struct ibv_dm *dm);
void ibv_unimport_dm(struct ibv_dm *dm)
{
	(void)dm;
}

/* Kernel-ABI copy helpers (librdmacm converts the kernel's replies with
 * them): field-by-field conversions between the uverbs structures and the
 * verbs ones, as rdma-core's marshall.c defines them. */
#define SV_CP(f) (dst->f = src->f)

SV_EXPORT void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src);
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src)
{
	memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof(dst->grh.dgid.raw));
	SV_CP(grh.flow_label); SV_CP(grh.sgid_index); SV_CP(grh.hop_limit);
	SV_CP(grh.traffic_class); SV_CP(dlid); SV_CP(sl); SV_CP(src_path_bits);
	SV_CP(static_rate); SV_CP(is_global); SV_CP(port_num);
}

SV_EXPORT void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src)
{
	dst->cur_qp_state = (enum ibv_qp_state)src->cur_qp_state;
	dst->path_mtu = (enum ibv_mtu)src->path_mtu;
	dst->path_mig_state = (enum ibv_mig_state)src->path_mig_state;
	SV_CP(qkey); SV_CP(rq_psn); SV_CP(sq_psn); SV_CP(dest_qp_num);
	SV_CP(qp_access_flags);
	dst->cap.max_send_wr = src->max_send_wr;
	dst->cap.max_recv_wr = src->max_recv_wr;
	dst->cap.max_send_sge = src->max_send_sge;
	dst->cap.max_recv_sge = src->max_recv_sge;
	dst->cap.max_inline_data = src->max_inline_data;
	ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
	ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
	SV_CP(pkey_index); SV_CP(alt_pkey_index); SV_CP(en_sqd_async_notify);
	SV_CP(sq_draining); SV_CP(max_rd_atomic); SV_CP(max_dest_rd_atomic);
	SV_CP(min_rnr_timer); SV_CP(port_num); SV_CP(timeout); SV_CP(retry_cnt);
	SV_CP(rnr_retry); SV_CP(alt_port_num); SV_CP(alt_timeout);
}

/* The path-record fields both structures share, in either direction. */
#define SV_CP_PATH_REC() do { \
	SV_CP(dlid); SV_CP(slid); SV_CP(raw_traffic); SV_CP(flow_label); \
	SV_CP(hop_limit); SV_CP(traffic_class); SV_CP(reversible); SV_CP(numb_path); \
	SV_CP(pkey); SV_CP(sl); SV_CP(mtu_selector); SV_CP(mtu); SV_CP(rate_selector); \
	SV_CP(rate); SV_CP(packet_life_time); SV_CP(preference); \
	SV_CP(packet_life_time_selector); \
} while (0)

SV_EXPORT void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst,
					   struct ib_user_path_rec *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src)
{
	memcpy(dst->dgid.raw, src->dgid, sizeof(dst->dgid.raw));
	memcpy(dst->sgid.raw, src->sgid, sizeof(dst->sgid.raw));
	SV_CP_PATH_REC();
}

SV_EXPORT void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst,
					 struct ibv_sa_path_rec *src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src)
{
	memcpy(dst->dgid, src->dgid.raw, sizeof(dst->dgid));
	memcpy(dst->sgid, src->sgid.raw, sizeof(dst->sgid));
	SV_CP_PATH_REC();
}
