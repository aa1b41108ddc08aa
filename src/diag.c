/*
 * diag.c - error completions turned into messages people can act on.
 *
 * Contract: only fields defined for an error completion are printed
 * (status, vendor_err, wr_id, qp_num); the operation is taken from our own
 * wr_id encoding, never from wc->opcode. Each message carries exactly one
 * hint chosen by status (and buffer kind), and names the local device:port,
 * local and remote GID/LID and QPN, the peer's address and the buffer kind.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "ibv.h"
#include "mr.h"

static const char *nv_wr_kind_str(unsigned kind)
{
	switch (kind) {
	case NV_WR_DATA:
		return "RDMA write of data";
	case NV_WR_RECV:
		return "receive of incoming data";
	case NV_WR_CTS:
		return "RDMA write of a clear-to-send entry";
	case NV_WR_FLUSH:
		return "GPU flush (RDMA read)";
	case NV_WR_PROBE:
		return "connect-time path check (RDMA write)";
	case NV_WR_EAGER:
		return "RDMA write of an eager message";
	case NV_WR_ECOPY:
		return "loopback copy of an eager message into a GPU buffer";
	default:
		return "unknown work request";
	}
}

static const char *nv_wc_hint(enum ibv_wc_status st, int gpu, unsigned kind)
{
	switch (st) {
	case IBV_WC_RETRY_EXC_ERR:
		if (kind == NV_WR_PROBE)
			return "the two NICs cannot reach each other: check the GIDs (NCCL_IB_GID_INDEX, "
			       "NCCL_IB_ADDR_FAMILY), VLAN and routing between them";
		return "the peer stopped acknowledging: its process died or the path broke; on a "
		       "congested fabric raise NCCL_IB_TIMEOUT";
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return "the peer had no receive posted: it is not following the protocol "
		       "(mixed plugin versions?)";
	case IBV_WC_REM_ACCESS_ERR:
		return "the peer rejected the remote address or key: it deregistered the buffer, or "
		       "its clear-to-send was bad";
	case IBV_WC_LOC_PROT_ERR:
		if (gpu)
			return "the NIC cannot access GPU memory: PCI ACS or the IOMMU blocks peer-to-"
			       "peer; disable ACS or set NCCL_NET_GDR_LEVEL=LOC";
		return "the local buffer is not covered by its registration (deregistered while in "
		       "use?)";
	case IBV_WC_WR_FLUSH_ERR:
		return "the QP was already in the error state; an earlier failure or a fatal event "
		       "is the cause";
	case IBV_WC_LOC_LEN_ERR:
	case IBV_WC_REM_INV_REQ_ERR:
		return "a message did not fit the posted buffer: the peers disagree on the protocol";
	default:
		return "check the port state (ibv_devinfo) and the fabric's error counters";
	}
}

static int nv_wc_qp_index(const struct nv_comm *c, const struct ibv_wc *wc)
{
	int i;

	for (i = 0; i < c->nqps; i++)
		if (c->qps[i].qp && c->qps[i].qp->qp_num == wc->qp_num)
			return i;
	return -1;
}

static int nv_wc_mem_kind(const struct nv_comm *c, const struct ibv_wc *wc)
{
	unsigned kind = NV_WRID_KIND(wc->wr_id);

	if (kind == NV_WR_RECV || kind == NV_WR_FLUSH || kind == NV_WR_EAGER)
		return c->reqs[NV_WRID_IDX(wc->wr_id) % (uint32_t)c->nreq].mem_kind;
	if (kind == NV_WR_ECOPY)
		return NV_MEM_CUDA;
	if (kind == NV_WR_DATA) {
		const struct nv_send_comm *s = (const struct nv_send_comm *)c;
		const struct nv_send_slot *sl = &s->slots[NV_WRID_IDX(wc->wr_id) % NV_FIFO_SLOTS];

		return sl->req[0] < c->nreq ? c->reqs[sl->req[0]].mem_kind : NV_MEM_HOST;
	}
	return 0; /* control region */
}

/* A down local port explains any error; asked only on this error path. */
static const char *nv_port_hint(const struct nv_comm_dev *d, char *buf, size_t len)
{
	struct ibv_port_attr pa;

	if (nv_ibv_query_port(d->hca->ctx, d->dev->port, &pa) != NV_OK ||
	    pa.state == IBV_PORT_ACTIVE)
		return NULL;
	snprintf(buf, len, "our port %s:%u is %s: check its cable and switch port (ibv_devinfo)",
		 d->hca->name, d->dev->port, nv_ibv_port_state_str(pa.state));
	return buf;
}

void nv_comm_wc_error(struct nv_comm *c, int dev, const struct ibv_wc *wc)
{
	const struct nv_comm_dev *d = &c->dev[dev];
	unsigned kind = NV_WRID_KIND(wc->wr_id);
	int qi = nv_wc_qp_index(c, wc), mem = nv_wc_mem_kind(c, wc);
	char lg[64], rg[64], remote[192], ph[160];
	const char *port_hint;

	if (wc->status == IBV_WC_WR_FLUSH_ERR &&
	    (nv_async_sink_failed(&c->sink) || nv_hca_failed(d->hca))) {
		/* The flush is a consequence; the fatal event is the cause. */
		nv_comm_fail(c, NV_ERR_SYSTEM, "connection %s: fatal asynchronous event: %s (pending "
			     "work flushed); hint: check the port and link state (ibv_devinfo)",
			     nv_comm_ident(c, remote, sizeof(remote)),
			     nv_async_sink_failed(&c->sink) ? c->sink.what : d->hca->sink.what);
		return;
	}
	port_hint = nv_port_hint(d, ph, sizeof(ph));
	nv_ibv_gid_str(&d->gid.gid, lg, sizeof(lg));
	if (qi >= 0 && c->rmeta) {
		const struct nv_meta_dev *r = &c->rmeta->dev[c->qps[qi].rdev];

		snprintf(remote, sizeof(remote), "%s port %u LID 0x%x GID %s QPN 0x%x", r->name,
			 r->port, r->lid,
			 nv_ibv_gid_str((const union ibv_gid *)r->gid, rg, sizeof(rg)),
			 c->qps[qi].rqpn);
	} else {
		snprintf(remote, sizeof(remote), "(local flush QP)");
	}
	nv_comm_fail(c, wc->status == IBV_WC_RETRY_EXC_ERR || wc->status == IBV_WC_REM_ACCESS_ERR
				? NV_ERR_REMOTE : NV_ERR_SYSTEM,
		     "%s failed: status %s (%d), vendor_err 0x%x; local %s:%u LID 0x%x GID %s "
		     "QPN 0x%x; remote %s; peer %s; buffer %s; hint: %s",
		     nv_wr_kind_str(kind), nv_ibv_wc_status_str(wc->status), (int)wc->status,
		     wc->vendor_err, d->hca->name, d->dev->port, d->dev->lid, lg, wc->qp_num, remote,
		     c->peer, mem ? nv_mem_kind_str(mem) : "host (control region)",
		     port_hint ? port_hint
			       : nv_wc_hint(wc->status, mem & (NV_MEM_CUDA | NV_MEM_DMABUF), kind));
	nv_comm_dump(c, 1, "at its error"); /* the state behind the error (state.c) */
}

void nv_comm_probe_lost(struct nv_comm *c, const char *what)
{
	const struct nv_comm_qp *q = c->qps && c->nqps > 0 ? &c->qps[0] : NULL;
	const struct nv_comm_dev *d = q ? &c->dev[q->dev] : &c->dev[0];
	const struct nv_meta_dev *r = c->rmeta && q ? &c->rmeta->dev[q->rdev] : NULL;
	char lg[64], rg[64];

	nv_ibv_gid_str(&d->gid.gid, lg, sizeof(lg));
	if (r)
		nv_ibv_gid_str((const union ibv_gid *)r->gid, rg, sizeof(rg));
	nv_comm_fail(c, NV_ERR_REMOTE,
		     "connect-time path check failed: %s; local %s:%u LID 0x%x GID %s QPN 0x%x; "
		     "remote %.32s port %u LID 0x%x GID %s QPN 0x%x; peer %s; hint: our QPs reached "
		     "some QP with the peer's number, but not the peer: the two sides are on "
		     "different fabrics (a handle taken to another cluster?) or the peer's LID/GID "
		     "leads to another host",
		     what, d->hca ? d->hca->name : "?", d->dev ? d->dev->port : 0,
		     d->dev ? d->dev->lid : 0, lg, q && q->qp ? q->qp->qp_num : 0,
		     r ? r->name : "?", r ? r->port : 0, r ? r->lid : 0, r ? rg : "?",
		     q ? q->rqpn : 0, c->peer);
}
