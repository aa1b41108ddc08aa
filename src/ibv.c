/*
 * ibv.c - the verbs seam (see ibv.h). Each wrapper logs once on failure with
 * the verb, the device (port / QPN when known) and the errno text from the
 * right source: int verbs return it (some older ones return -1 and set errno),
 * pointer verbs return NULL and set errno.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ibv.h"
#include "os.h"
#include "ibv_syms.h"

/* Error code of an int verb: positive return value, else errno, else EIO. */
static int nv_int_err(int ret)
{
	if (ret > 0)
		return ret;
	return errno > 0 ? errno : EIO;
}

/* Error code of a pointer verb that returned NULL. */
static int nv_ptr_err(void)
{
	return errno > 0 ? errno : EIO;
}

static const char *nv_ctx_name(struct ibv_context *ctx)
{
	return ctx && ctx->device ? nv_ibv_device_name(ctx->device) : "?";
}

static nv_status_t nv_fail(const char *verb, struct ibv_context *ctx, int port, int err,
			   const char *extra)
{
	if (port > 0)
		NV_WARN("%s failed on %s:%d: %s (errno %d)%s", verb, nv_ctx_name(ctx), port,
			strerror(err), err, extra ? extra : "");
	else
		NV_WARN("%s failed on %s: %s (errno %d)%s", verb, nv_ctx_name(ctx), strerror(err),
			err, extra ? extra : "");
	errno = err;
	return NV_ERR_SYSTEM;
}

static nv_status_t nv_qp_fail(const char *verb, struct ibv_qp *qp, int err, const char *extra)
{
	NV_WARN("%s failed on %s qpn 0x%x: %s (errno %d)%s", verb, nv_ctx_name(qp->context),
		qp->qp_num, strerror(err), err, extra ? extra : "");
	errno = err;
	return NV_ERR_SYSTEM;
}

nv_status_t nv_ibv_get_device_list(struct ibv_device ***list, int *n)
{
	int num = 0;
	struct ibv_device **l;

	errno = 0;
	if (!nv_ibv_loaded()) {
		NV_WARN("ibv_get_device_list called before libibverbs was loaded (plugin bug)");
		return NV_ERR_INTERNAL;
	}
	l = nv_ibv_sym.get_device_list(&num);
	if (!l) {
		int err = nv_ptr_err();

		NV_WARN("ibv_get_device_list failed: %s (errno %d)%s", strerror(err), err,
			err == ENOSYS ? " - is the kernel's ib_uverbs module loaded?" : "");
		errno = err;
		return NV_ERR_SYSTEM;
	}
	*list = l;
	*n = num;
	return NV_OK;
}

void nv_ibv_free_device_list(struct ibv_device **list)
{
	if (list)
		nv_ibv_sym.free_device_list(list);
}

const char *nv_ibv_device_name(struct ibv_device *dev)
{
	const char *n = dev && nv_ibv_sym.get_device_name ? nv_ibv_sym.get_device_name(dev) : NULL;

	return n ? n : "?";
}

nv_status_t nv_ibv_open_device(struct ibv_device *dev, struct ibv_context **ctx)
{
	struct ibv_context *c;

	errno = 0;
	c = nv_ibv_sym.open_device(dev);
	if (!c) {
		int err = nv_ptr_err();

		NV_WARN("ibv_open_device failed on %s: %s (errno %d)", nv_ibv_device_name(dev),
			strerror(err), err);
		errno = err;
		return NV_ERR_SYSTEM;
	}
	*ctx = c;
	return NV_OK;
}

nv_status_t nv_ibv_close_device(struct ibv_context *ctx)
{
	const char *name = nv_ctx_name(ctx);
	char namebuf[64];
	int ret;

	snprintf(namebuf, sizeof(namebuf), "%s", name);
	errno = 0;
	ret = nv_ibv_sym.close_device(ctx);
	if (ret) {
		int err = nv_int_err(ret);

		NV_WARN("ibv_close_device failed on %s: %s (errno %d)", namebuf, strerror(err), err);
		errno = err;
		return NV_ERR_SYSTEM;
	}
	return NV_OK;
}

nv_status_t nv_ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	int ret;

	errno = 0;
	ret = nv_ibv_sym.query_device(ctx, attr);
	return ret ? nv_fail("ibv_query_device", ctx, 0, nv_int_err(ret), NULL) : NV_OK;
}

/* As verbs.h's inline: the context's extended op when the provider has one
 * (fills the whole struct), else the IBVERBS_1.1 entry point on a zeroed one. */
static int nv_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr)
{
	struct verbs_context *vctx = verbs_get_ctx_op(ctx, query_port);

	if (vctx)
		return vctx->query_port(ctx, port, attr, sizeof(*attr));
	memset(attr, 0, sizeof(*attr));
	return nv_ibv_sym.query_port(ctx, port, (struct _compat_ibv_port_attr *)attr);
}

nv_status_t nv_ibv_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr)
{
	int ret;

	errno = 0;
	ret = nv_query_port(ctx, port, attr);
	return ret ? nv_fail("ibv_query_port", ctx, port, nv_int_err(ret), NULL) : NV_OK;
}

int nv_ibv_query_port_speed_probe(struct ibv_context *ctx, uint8_t port, uint64_t *mbps)
{
	uint64_t speed = 0;
	int ret;

	if (!nv_ibv_sym.query_port_speed)
		return EOPNOTSUPP;
	errno = 0;
	ret = nv_ibv_sym.query_port_speed(ctx, port, &speed);
	if (ret) {
		ret = nv_int_err(ret);
		NV_TRACE(NV_SUB_INIT, "ibv_query_port_speed %s:%d: %s", nv_ctx_name(ctx), port,
			 strerror(ret));
		return ret;
	}
	*mbps = speed * 100; /* the verb counts in 100 Mb/s */
	return 0;
}

int nv_ibv_query_gid_ex_probe(struct ibv_context *ctx, uint8_t port, int index,
			      struct ibv_gid_entry *entry)
{
#if HAVE_DECL_IBV_QUERY_GID_EX
	int ret;

	if (!nv_ibv_sym.query_gid_ex)
		return EOPNOTSUPP;
	errno = 0;
	ret = nv_ibv_sym.query_gid_ex(ctx, port, (uint32_t)index, entry, 0, sizeof(*entry));
	if (!ret)
		return 0;
	ret = nv_int_err(ret);
	NV_TRACE(NV_SUB_INIT, "ibv_query_gid_ex %s:%d index %d: %s", nv_ctx_name(ctx), port, index,
		 strerror(ret));
	return ret;
#else
	(void)ctx;
	(void)port;
	(void)index;
	(void)entry;
	return EOPNOTSUPP;
#endif
}

int nv_ibv_query_gid_probe(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
	int ret;

	errno = 0;
	ret = nv_ibv_sym.query_gid(ctx, port, index, gid);
	return ret ? nv_int_err(ret) : 0;
}

nv_status_t nv_ibv_query_pkey(struct ibv_context *ctx, uint8_t port, int index, uint16_t *pkey)
{
	char extra[48];
	int ret;

	errno = 0;
	ret = nv_ibv_sym.query_pkey(ctx, port, index, (__be16 *)pkey);
	if (!ret)
		return NV_OK;
	snprintf(extra, sizeof(extra), " (P_Key index %d, NCCL_IB_PKEY)", index);
	return nv_fail("ibv_query_pkey", ctx, port, nv_int_err(ret), extra);
}

nv_status_t nv_ibv_alloc_pd(struct ibv_context *ctx, struct ibv_pd **pd)
{
	struct ibv_pd *p;

	errno = 0;
	p = nv_ibv_sym.alloc_pd(ctx);
	if (!p)
		return nv_fail("ibv_alloc_pd", ctx, 0, nv_ptr_err(), NULL);
	*pd = p;
	return NV_OK;
}

nv_status_t nv_ibv_dealloc_pd(struct ibv_pd *pd)
{
	int ret;

	errno = 0;
	ret = nv_ibv_sym.dealloc_pd(pd);
	return ret ? nv_fail("ibv_dealloc_pd", pd->context, 0, nv_int_err(ret), NULL) : NV_OK;
}

static nv_status_t nv_reg_fail(const char *verb, struct ibv_pd *pd, void *addr, size_t len,
			       const char *what, int err)
{
	char extra[256], lim[32];

	if (err == ENOMEM || err == EAGAIN)
		snprintf(extra, sizeof(extra),
			 " registering %s %p+%zu; RLIMIT_MEMLOCK is %s - raise it (ulimit -l "
			 "unlimited, or the container's memlock limit)",
			 what, addr, len, nv_memlock_str(lim, sizeof(lim)));
	else if (err == EFAULT || err == EINVAL)
		snprintf(extra, sizeof(extra), " registering %s %p+%zu%s", what, addr, len,
			 strstr(what, "GPU") ? " - is a GPUDirect peer-memory module loaded?" : "");
	else
		snprintf(extra, sizeof(extra), " registering %s %p+%zu", what, addr, len);
	return nv_fail(verb, pd->context, 0, err, extra);
}

nv_status_t nv_ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access,
			  const char *what, struct ibv_mr **mr)
{
	struct ibv_mr *m;

	errno = 0;
	m = nv_ibv_sym.reg_mr(pd, addr, len, access);
	if (!m)
		return nv_reg_fail("ibv_reg_mr", pd, addr, len, what, nv_ptr_err());
	*mr = m;
	return NV_OK;
}

bool nv_ibv_have_iova2(void)
{
#if HAVE_DECL_IBV_REG_MR_IOVA2 && HAVE_DECL_IBV_ACCESS_RELAXED_ORDERING
	return nv_ibv_sym.reg_mr_iova2 != NULL;
#else
	return false;
#endif
}

nv_status_t nv_ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
				int access, const char *what, struct ibv_mr **mr)
{
#if HAVE_DECL_IBV_REG_MR_IOVA2
	struct ibv_mr *m;

	if (!nv_ibv_sym.reg_mr_iova2) /* relaxed ordering was turned off at init */
		return nv_ibv_reg_mr(pd, addr, len, access & ~IBV_ACCESS_OPTIONAL_RANGE, what, mr);
	errno = 0;
	m = nv_ibv_sym.reg_mr_iova2(pd, addr, len, iova, (unsigned int)access);
	if (!m)
		return nv_reg_fail("ibv_reg_mr_iova2", pd, addr, len, what, nv_ptr_err());
	*mr = m;
	return NV_OK;
#else
	(void)iova;
	return nv_ibv_reg_mr(pd, addr, len, access, what, mr);
#endif
}

nv_status_t nv_ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t len, uint64_t iova,
				 int fd, int access, const char *what, struct ibv_mr **mr)
{
#if HAVE_DECL_IBV_REG_DMABUF_MR
	struct ibv_mr *m;

	if (!nv_ibv_sym.reg_dmabuf_mr)
		return nv_fail("ibv_reg_dmabuf_mr", pd->context, 0, EOPNOTSUPP,
			       " (the loaded libibverbs has no IBVERBS_1.12)");
	errno = 0;
	m = nv_ibv_sym.reg_dmabuf_mr(pd, offset, len, iova, fd, access);
	if (!m)
		return nv_reg_fail("ibv_reg_dmabuf_mr", pd, (void *)(uintptr_t)iova, len, what,
				   nv_ptr_err());
	*mr = m;
	return NV_OK;
#else
	(void)offset;
	(void)len;
	(void)iova;
	(void)fd;
	(void)access;
	(void)what;
	(void)mr;
	return nv_fail("ibv_reg_dmabuf_mr", pd->context, 0, EOPNOTSUPP,
		       " (rdma-core too old at build time)");
#endif
}

int nv_ibv_reg_dmabuf_mr_probe(struct ibv_pd *pd)
{
#if HAVE_DECL_IBV_REG_DMABUF_MR
	struct ibv_mr *m;
	int err;

	if (!nv_ibv_sym.reg_dmabuf_mr)
		return EOPNOTSUPP;
	errno = 0;
	m = nv_ibv_sym.reg_dmabuf_mr(pd, 0, 0, 0, -1, 0);
	if (m) { /* cannot happen with fd -1; be tidy anyway */
		nv_ibv_sym.dereg_mr(m);
		return 0;
	}
	err = nv_ptr_err();
	NV_TRACE(NV_SUB_INIT, "ibv_reg_dmabuf_mr probe on %s: %s", nv_ctx_name(pd->context),
		 strerror(err));
	return err;
#else
	(void)pd;
	return EOPNOTSUPP;
#endif
}

nv_status_t nv_ibv_dereg_mr(struct ibv_mr *mr)
{
	struct ibv_context *ctx = mr->context;
	int ret;

	errno = 0;
	ret = nv_ibv_sym.dereg_mr(mr);
	return ret ? nv_fail("ibv_dereg_mr", ctx, 0, nv_int_err(ret), NULL) : NV_OK;
}

nv_status_t nv_ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context, struct ibv_cq **cq)
{
	char extra[48];
	struct ibv_cq *c;

	errno = 0;
	c = nv_ibv_sym.create_cq(ctx, cqe, cq_context, NULL, 0);
	if (!c) {
		snprintf(extra, sizeof(extra), " (%d entries)", cqe);
		return nv_fail("ibv_create_cq", ctx, 0, nv_ptr_err(), extra);
	}
	*cq = c;
	return NV_OK;
}

nv_status_t nv_ibv_destroy_cq(struct ibv_cq *cq)
{
	struct ibv_context *ctx = cq->context;
	int ret;

	errno = 0;
	ret = nv_ibv_sym.destroy_cq(cq);
	return ret ? nv_fail("ibv_destroy_cq", ctx, 0, nv_int_err(ret), NULL) : NV_OK;
}

nv_status_t nv_ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init, struct ibv_qp **qp)
{
	char extra[128];
	struct ibv_qp *q;

	errno = 0;
	q = nv_ibv_sym.create_qp(pd, init);
	if (!q) {
		snprintf(extra, sizeof(extra), " (type %d, send_wr %u, recv_wr %u, inline %u)",
			 (int)init->qp_type, init->cap.max_send_wr, init->cap.max_recv_wr,
			 init->cap.max_inline_data);
		return nv_fail("ibv_create_qp", pd->context, 0, nv_ptr_err(), extra);
	}
	*qp = q;
	return NV_OK;
}

/* NCCL_IB_MQP_RETRY_ALL / _CNT / _SLEEP_MSEC, NCCL's defaults until set. */
static struct {
	bool all;
	int cnt, sleep_ms;
} nv_mqp_retry = { false, 34, 100 };

void nv_ibv_set_mqp_retry(bool all, int cnt, int sleep_ms)
{
	nv_mqp_retry.all = all;
	nv_mqp_retry.cnt = cnt < 0 ? 0 : cnt;
	nv_mqp_retry.sleep_ms = sleep_ms < 0 ? 0 : sleep_ms;
}

nv_status_t nv_ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	const char *to = (mask & IBV_QP_STATE) ? nv_ibv_qp_state_str(attr->qp_state) : "same state";
	char extra[160];
	int ret, err = 0, tries = 0;

	for (;;) {
		errno = 0;
		ret = nv_ibv_sym.modify_qp(qp, attr, mask);
		tries++;
		if (!ret)
			return NV_OK;
		err = nv_int_err(ret);
		if ((err != ETIMEDOUT && !nv_mqp_retry.all) || tries > nv_mqp_retry.cnt)
			break;
		/* RoCE address resolution (ARP/ND behind the GID) can time out once in a
		 * while: wait longer each time and try again, as NCCL */
		NV_INFO(NV_SUB_NET, "ibv_modify_qp on %s qpn 0x%x moving to %s: %s; retry %d/%d in "
			"%d ms", nv_ctx_name(qp->context), qp->qp_num, to, strerror(err), tries,
			nv_mqp_retry.cnt, nv_mqp_retry.sleep_ms * tries);
		nv_sleep_ms((uint64_t)nv_mqp_retry.sleep_ms * (uint64_t)tries);
	}
	snprintf(extra, sizeof(extra), " moving to %s (mask 0x%x)%s", to, mask,
		 tries > 1 ? " after retries (NCCL_IB_MQP_RETRY_CNT)" : "");
	return nv_qp_fail("ibv_modify_qp", qp, err, extra);
}

nv_status_t nv_ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
			    struct ibv_qp_init_attr *init)
{
	int ret;

	errno = 0;
	ret = nv_ibv_sym.query_qp(qp, attr, mask, init);
	return ret ? nv_qp_fail("ibv_query_qp", qp, nv_int_err(ret), NULL) : NV_OK;
}

nv_status_t nv_ibv_destroy_qp(struct ibv_qp *qp)
{
	int ret;

	errno = 0;
	ret = nv_ibv_sym.destroy_qp(qp);
	return ret ? nv_qp_fail("ibv_destroy_qp", qp, nv_int_err(ret), NULL) : NV_OK;
}

int nv_ibv_query_ece(struct ibv_qp *qp, uint32_t *vendor_id, uint32_t *options, uint32_t *comp_mask)
{
#if HAVE_DECL_IBV_QUERY_ECE
	struct ibv_ece ece;
	int ret;

	if (!nv_ibv_sym.query_ece)
		return EOPNOTSUPP;
	memset(&ece, 0, sizeof(ece));
	errno = 0;
	ret = nv_ibv_sym.query_ece(qp, &ece);
	if (ret) {
		ret = nv_int_err(ret);
		if (ret != EOPNOTSUPP)
			nv_qp_fail("ibv_query_ece", qp, ret, NULL);
		return ret;
	}
	*vendor_id = ece.vendor_id;
	*options = ece.options;
	*comp_mask = ece.comp_mask;
	return 0;
#else
	(void)qp;
	(void)vendor_id;
	(void)options;
	(void)comp_mask;
	return EOPNOTSUPP;
#endif
}

int nv_ibv_set_ece(struct ibv_qp *qp, uint32_t vendor_id, uint32_t options, uint32_t comp_mask)
{
#if HAVE_DECL_IBV_QUERY_ECE
	struct ibv_ece ece = { .vendor_id = vendor_id, .options = options, .comp_mask = comp_mask };
	int ret;

	if (!nv_ibv_sym.set_ece)
		return EOPNOTSUPP;
	errno = 0;
	ret = nv_ibv_sym.set_ece(qp, &ece);
	if (ret) {
		ret = nv_int_err(ret);
		if (ret != EOPNOTSUPP)
			nv_qp_fail("ibv_set_ece", qp, ret, NULL);
		return ret;
	}
	return 0;
#else
	(void)qp;
	(void)vendor_id;
	(void)options;
	(void)comp_mask;
	return EOPNOTSUPP;
#endif
}

int nv_ibv_get_async_event(struct ibv_context *ctx, struct ibv_async_event *ev)
{
	errno = 0;
	if (nv_ibv_sym.get_async_event(ctx, ev) == 0)
		return 0;
	return nv_ptr_err();
}

void nv_ibv_ack_async_event(struct ibv_async_event *ev)
{
	nv_ibv_sym.ack_async_event(ev);
}

const char *nv_ibv_wc_status_str(enum ibv_wc_status st)
{
	return nv_ibv_sym.wc_status_str ? nv_ibv_sym.wc_status_str(st) : "unknown status";
}

const char *nv_ibv_event_str(enum ibv_event_type ev)
{
	return nv_ibv_sym.event_type_str ? nv_ibv_sym.event_type_str(ev) : "unknown event";
}

const char *nv_ibv_port_state_str(enum ibv_port_state st)
{
	return nv_ibv_sym.port_state_str ? nv_ibv_sym.port_state_str(st) : "unknown state";
}

const char *nv_ibv_qp_state_str(enum ibv_qp_state st)
{
	static const char *const names[] = {
		[IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT", [IBV_QPS_RTR] = "RTR",
		[IBV_QPS_RTS] = "RTS",     [IBV_QPS_SQD] = "SQD",   [IBV_QPS_SQE] = "SQE",
		[IBV_QPS_ERR] = "ERR",
	};

	if ((unsigned)st < NV_ARRAY_SIZE(names) && names[st])
		return names[st];
	return "UNKNOWN";
}

char *nv_ibv_gid_str(const union ibv_gid *gid, char *buf, size_t len)
{
	if (!inet_ntop(AF_INET6, gid->raw, buf, (socklen_t)len))
		snprintf(buf, len, "?");
	return buf;
}

void nv_ibv_log_datapath_error(const char *verb, struct ibv_context *ctx, uint32_t qpn, int err)
{
	if (err > 0)
		NV_WARN("%s failed on %s qpn 0x%x: %s (errno %d)%s", verb, nv_ctx_name(ctx), qpn,
			strerror(err), err,
			err == ENOMEM ? " - send/receive queue full (plugin bug: queue accounting)"
				      : "");
	else
		NV_WARN("%s failed on %s: returned %d (CQ error or overrun)", verb, nv_ctx_name(ctx),
			err);
}
