/*
 * Verbs set-up of sv-rawbench: one device context, PD, CQ, RC QP and one registered buffer per
 * process, connected to the peer process over a socketpair (QP number, PSN, LID, GID, buffer
 * address and rkey), RESET -> INIT -> RTR -> RTS as an application on real hardware would.
 */
#ifndef SB_VERBS_H
#define SB_VERBS_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

struct sb_cfg {
	const char *dev_name;	/* NULL: first device */
	uint8_t port;
	int gid_index;		/* -1: automatic (RoCE: an IPv4-mapped RoCE v2 GID, else the first) */
	size_t buf_size;	/* registered bytes */
	int want_inline;	/* request max_inline_data >= 64 */
	unsigned sq_depth;
	unsigned rq_depth;
	unsigned cq_depth;
};

/* Connection data sent to the peer; both processes run the same binary, so host order is fine. */
struct sb_peer {
	uint64_t addr;
	uint32_t rkey;
	uint32_t qpn;
	uint32_t psn;
	uint16_t lid;
	uint8_t gid[16];
	uint8_t pad[2];
};

struct sb_ctx {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t buf_size;
	uint32_t max_inline;
	int is_eth;
	int gid_index;		/* used for the GRH; -1 when no GRH (InfiniBand, none asked) */
	struct ibv_port_attr port_attr;
	struct sb_peer local;
	struct sb_peer remote;
};

/* Opens everything and connects over fd. Returns 0, or -1 with a message on stderr (objects
 * created so far are released). */
int sb_setup(struct sb_ctx *c, const struct sb_cfg *cfg, int fd, int side);
void sb_teardown(struct sb_ctx *c);
/* Describes the device/port/GID in one line (for the report header). */
void sb_describe(const struct sb_ctx *c, char *out, size_t len);

#endif
