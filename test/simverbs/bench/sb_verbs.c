#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include "sb_verbs.h"
#include "sb_common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SB_ERR(fmt, ...) fprintf(stderr, "sv-rawbench: " fmt "\n", ##__VA_ARGS__)

static struct ibv_context *open_device(const char *name)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx = NULL;

	if (!list) {
		SB_ERR("ibv_get_device_list: %s", strerror(errno));
		return NULL;
	}
	for (int i = 0; i < n; i++) {
		if (name && strcmp(ibv_get_device_name(list[i]), name))
			continue;
		ctx = ibv_open_device(list[i]);
		if (!ctx)
			SB_ERR("ibv_open_device(%s): %s", ibv_get_device_name(list[i]),
			       strerror(errno));
		break;
	}
	if (!ctx && n >= 0)
		SB_ERR("device %s not opened (%d devices listed)", name ? name : "(any)", n);
	ibv_free_device_list(list);
	return ctx;
}

static int gid_is_v4mapped(const union ibv_gid *g)
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return !memcmp(g->raw, pfx, sizeof(pfx));
}

/* RoCE: prefer a RoCE v2 IPv4-mapped GID (what loopback TCP peers resolve to), then any RoCE v2,
 * then the first non-zero entry. */
static int pick_gid(struct ibv_context *ctx, uint8_t port, int tbl_len)
{
	int best = -1, best_rank = 0;

	for (int i = 0; i < tbl_len; i++) {
		struct ibv_gid_entry e;
		int rank;

		if (ibv_query_gid_ex(ctx, port, (uint32_t)i, &e, 0))
			continue;
		if (!memcmp(e.gid.raw, (uint8_t[16]){ 0 }, 16))
			continue;
		rank = 1 + (e.gid_type == IBV_GID_TYPE_ROCE_V2) + 2 * gid_is_v4mapped(&e.gid);
		if (rank > best_rank) {
			best = i;
			best_rank = rank;
		}
	}
	return best;
}

static int setup_port(struct sb_ctx *c, const struct sb_cfg *cfg)
{
	int ret = ibv_query_port(c->ctx, cfg->port, &c->port_attr);

	if (ret) {
		SB_ERR("ibv_query_port(%u): %s", cfg->port, strerror(ret));
		return -1;
	}
	if (c->port_attr.state != IBV_PORT_ACTIVE)
		SB_ERR("warning: port %u is not ACTIVE (state %d)", cfg->port, c->port_attr.state);
	c->is_eth = c->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;
	c->gid_index = cfg->gid_index;
	if (c->gid_index < 0 && c->is_eth) {
		c->gid_index = pick_gid(c->ctx, cfg->port, c->port_attr.gid_tbl_len);
		if (c->gid_index < 0) {
			SB_ERR("RoCE port %u has no usable GID", cfg->port);
			return -1;
		}
	}
	c->local.lid = c->port_attr.lid;
	if (c->gid_index >= 0) {
		union ibv_gid g;

		ret = ibv_query_gid(c->ctx, cfg->port, c->gid_index, &g);
		if (ret) {
			SB_ERR("ibv_query_gid(%d): %s", c->gid_index, strerror(errno));
			return -1;
		}
		memcpy(c->local.gid, g.raw, 16);
	}
	return 0;
}

static int create_objects(struct sb_ctx *c, const struct sb_cfg *cfg)
{
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = cfg->sq_depth, .max_recv_wr = cfg->rq_depth,
			 .max_send_sge = 1, .max_recv_sge = 1,
			 .max_inline_data = cfg->want_inline ? 64 : 0 },
	};

	c->pd = ibv_alloc_pd(c->ctx);
	if (!c->pd) {
		SB_ERR("ibv_alloc_pd: %s", strerror(errno));
		return -1;
	}
	c->cq = ibv_create_cq(c->ctx, (int)cfg->cq_depth, NULL, NULL, 0);
	if (!c->cq) {
		SB_ERR("ibv_create_cq(%u): %s", cfg->cq_depth, strerror(errno));
		return -1;
	}
	qa.send_cq = qa.recv_cq = c->cq;
	c->qp = ibv_create_qp(c->pd, &qa);
	if (!c->qp && cfg->want_inline) {
		qa.cap.max_inline_data = 0;
		c->qp = ibv_create_qp(c->pd, &qa);
	}
	if (!c->qp) {
		SB_ERR("ibv_create_qp: %s", strerror(errno));
		return -1;
	}
	c->max_inline = qa.cap.max_inline_data;
	if (posix_memalign((void **)&c->buf, 4096, cfg->buf_size)) {
		SB_ERR("out of memory (%zu bytes)", cfg->buf_size);
		return -1;
	}
	memset(c->buf, 0, cfg->buf_size);
	c->buf_size = cfg->buf_size;
	c->mr = ibv_reg_mr(c->pd, c->buf, cfg->buf_size, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!c->mr) {
		SB_ERR("ibv_reg_mr(%zu bytes): %s", cfg->buf_size, strerror(errno));
		return -1;
	}
	return 0;
}

static int to_init(struct sb_ctx *c, uint8_t port)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = port,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ,
	};
	int ret = ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				IBV_QP_ACCESS_FLAGS);

	if (ret)
		SB_ERR("modify_qp(INIT): %s", strerror(ret));
	return ret ? -1 : 0;
}

static int to_rtr_rts(struct sb_ctx *c, uint8_t port)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = c->port_attr.active_mtu,
		.dest_qp_num = c->remote.qpn, .rq_psn = c->remote.psn,
		.max_dest_rd_atomic = 1, .min_rnr_timer = 12,
		.ah_attr = { .dlid = c->remote.lid, .sl = 0, .port_num = port },
	};
	int ret;

	if (c->gid_index >= 0) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, c->remote.gid, 16);
		a.ah_attr.grh.sgid_index = (uint8_t)c->gid_index;
		a.ah_attr.grh.hop_limit = 64;
	}
	ret = ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			    IBV_QP_MIN_RNR_TIMER);
	if (ret) {
		SB_ERR("modify_qp(RTR): %s", strerror(ret));
		return -1;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = c->local.psn;
	a.max_rd_atomic = 1;
	ret = ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			    IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	if (ret)
		SB_ERR("modify_qp(RTS): %s", strerror(ret));
	return ret ? -1 : 0;
}

int sb_setup(struct sb_ctx *c, const struct sb_cfg *cfg, int fd, int side)
{
	memset(c, 0, sizeof(*c));
	c->ctx = open_device(cfg->dev_name);
	if (!c->ctx)
		return -1;
	if (setup_port(c, cfg) || create_objects(c, cfg) || to_init(c, cfg->port))
		goto err;
	c->local.qpn = c->qp->qp_num;
	c->local.psn = (uint32_t)(0x1000 * (side + 1) + 7) & 0xffffff;
	c->local.addr = (uint64_t)(uintptr_t)c->buf;
	c->local.rkey = c->mr->rkey;
	if (sb_send_all(fd, &c->local, sizeof(c->local)) ||
	    sb_recv_all(fd, &c->remote, sizeof(c->remote)))
		goto err;
	if (to_rtr_rts(c, cfg->port) || sb_barrier(fd))
		goto err;
	return 0;
err:
	sb_teardown(c);
	return -1;
}

/* Reverse order of creation; keeps going on errors so nothing leaks. */
void sb_teardown(struct sb_ctx *c)
{
	int ret;

	if (c->qp && (ret = ibv_destroy_qp(c->qp)))
		SB_ERR("ibv_destroy_qp: %s", strerror(ret));
	c->qp = NULL;
	if (c->mr && (ret = ibv_dereg_mr(c->mr)))
		SB_ERR("ibv_dereg_mr: %s", strerror(ret));
	c->mr = NULL;
	if (c->cq && (ret = ibv_destroy_cq(c->cq)))
		SB_ERR("ibv_destroy_cq: %s", strerror(ret));
	c->cq = NULL;
	if (c->pd && (ret = ibv_dealloc_pd(c->pd)))
		SB_ERR("ibv_dealloc_pd: %s", strerror(ret));
	c->pd = NULL;
	if (c->ctx && (ret = ibv_close_device(c->ctx)))
		SB_ERR("ibv_close_device: %s", strerror(ret));
	c->ctx = NULL;
	free(c->buf);
	c->buf = NULL;
}

void sb_describe(const struct sb_ctx *c, char *out, size_t len)
{
	char gid[INET6_ADDRSTRLEN] = "-";

	if (c->gid_index >= 0)
		inet_ntop(AF_INET6, c->local.gid, gid, sizeof(gid));
	snprintf(out, len, "device=%s link=%s lid=%u mtu=%d gid_index=%d gid=%s inline=%u",
		 ibv_get_device_name(c->ctx->device), c->is_eth ? "Ethernet" : "InfiniBand",
		 c->local.lid, 128 << c->port_attr.active_mtu, c->gid_index, gid, c->max_inline);
}
