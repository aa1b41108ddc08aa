/*
 * props.c - the properties NCCL sees of a (virtual) device (getProperties):
 * name, PCI path, speed, pointer support, comm capacity, message limits,
 * rail and plane. Devices layer; reads only the published device table.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "device.h"
#include "param.h"

/* Plane of a vNIC as NCCL's built-in IB (2.30) reports it: the member's plane
 * for one device; for several, bit 14 ("virtual") | 1 << plane_idx of each
 * member, the indexes being assigned once over all devices (nv_planes_index). */
static int16_t nv_vdev_plane(const struct nv_vdev *v)
{
	int mask = NV_PLANE_VIRT_BIT;

	if (v->ndevs == 1)
		return nv_dev_get(v->devs[0])->plane;
	for (int i = 0; i < v->ndevs; i++)
		mask |= 1 << nv_dev_get(v->devs[i])->plane_idx;
	return (int16_t)mask;
}

/*
 * How many comms the vNIC's devices can hold. One comm takes, on each member
 * device, its share of the data QPs (NCCL_IB_QPS_PER_CONNECTION, assuming the
 * peer's vNIC has as many devices, as NCCL fuses alike on every node), one CQ
 * and, on a receive comm when GPUDirect flushes are on, one flush QP (as NCCL,
 * a flush QP per comm and device). Members on one HCA share its max_qp and
 * max_cq. The receive comm is the larger, so it sets the bound.
 */
static int nv_vdev_max_comms(const struct nv_vdev *v)
{
	int q = (int)nv_param_int(NV_PARAM_IB_QPS_PER_CONNECTION), flush = 1, best = INT32_MAX;

	if (nv_param_int(NV_PARAM_GDR_FLUSH_DISABLE))
		flush = 0;
	for (int i = 0; i < v->ndevs; i++)
		if (!(nv_dev_get(v->devs[i])->hca->gdr.ptr_support & (NCCL_PTR_CUDA | NCCL_PTR_DMABUF)))
			flush = 0;
	for (int i = 0; i < v->ndevs; i++) {
		const struct nv_hca *h = nv_dev_get(v->devs[i])->hca;
		int qps = 0, cqs = 0, n;

		for (int j = 0; j < v->ndevs; j++) /* every member on this HCA */
			if (nv_dev_get(v->devs[j])->hca == h) {
				qps += q + flush;
				cqs++;
			}
		n = h->attr.max_qp / qps < h->attr.max_cq / cqs ? h->attr.max_qp / qps
								 : h->attr.max_cq / cqs;
		if (n < best)
			best = n;
	}
	return best;
}

uint32_t nv_dev_wr_bytes(const struct nv_dev *d)
{
	return d->max_msg_sz & ~(uint32_t)(NV_WR_ALIGN - 1);
}

uint64_t nv_dev_max_msg_bytes(const struct nv_dev *d)
{
	uint64_t n = (uint64_t)nv_dev_wr_bytes(d) * NV_MAX_WR_PER_MSG;

	return n < UINT32_MAX ? n : UINT32_MAX;
}

static int16_t nv_vdev_rail(const struct nv_vdev *v)
{
	int16_t r = nv_dev_get(v->devs[0])->rail;

	for (int i = 1; i < v->ndevs; i++)
		if (nv_dev_get(v->devs[i])->rail != r)
			return -1;
	return r;
}

nv_status_t nv_vdev_properties(int vdev, ncclNetProperties_v12_t *p)
{
	const struct nv_vdev *v = nv_vdev_get(vdev);
	const struct nv_dev *d0;

	if (!v) {
		NV_WARN("getProperties: device %d does not exist (%d devices)", vdev,
			nv_vdev_count());
		return NV_ERR_INTERNAL;
	}
	d0 = nv_dev_get(v->devs[0]);
	memset(p, 0, sizeof(*p));
	p->name = (char *)v->name;
	p->pciPath = d0->hca->pci_path[0] ? (char *)d0->hca->pci_path : NULL;
	p->guid = d0->guid;
	p->ptrSupport = NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF;
	p->maxComms = nv_vdev_max_comms(v);
	for (int i = 0; i < v->ndevs; i++) {
		const struct nv_dev *d = nv_dev_get(v->devs[i]);

		p->ptrSupport &= d->hca->gdr.ptr_support | NCCL_PTR_HOST;
		p->speed += d->speed_mbps > 0 ? d->speed_mbps : 10000; /* NCCL's own fallback */
		p->vProps.devs[i] = v->devs[i];
	}
	p->vProps.ndevs = v->ndevs;
	p->regIsGlobal = 1;
	p->forceFlush = 0;
	p->port = d0->nccl_port;
	p->latency = (float)nv_param_int(NV_PARAM_VERBS_LATENCY_US);
	p->maxRecvs = NV_MAX_RECVS;
	p->netDeviceType = NCCL_NET_DEVICE_HOST;
	p->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
	p->maxP2pBytes = UINT32_MAX; /* lowered per member below */
	for (int i = 0; i < v->ndevs; i++)
		if (nv_dev_max_msg_bytes(nv_dev_get(v->devs[i])) < p->maxP2pBytes)
			p->maxP2pBytes = nv_dev_max_msg_bytes(nv_dev_get(v->devs[i]));
	p->maxCollBytes = MAX_COLLNET_SIZE;
	p->maxMultiRequestSize = 1;
	p->railId = nv_vdev_rail(v);
	p->planeId = nv_vdev_plane(v);
	return NV_OK;
}
