/*
 * route.c - which local NIC reaches a peer: NCCL_IB_SUBNET_AWARE_ROUTING
 * (one RoCE subnet per rail: connect from the vNIC whose RoCE ports are all
 * on one of the listener's subnets, as NCCL 2.30). Devices layer.
 */
#include "config.h"

#include <string.h>

#include "device.h"
#include "param.h"
#include "select.h"

int nv_vdev_roce_gids(int dev, uint8_t (*gids)[16], int n)
{
	const struct nv_vdev *v = nv_vdev_get(dev);
	int k = 0;

	for (int i = 0; v && i < v->ndevs && k < n; i++) {
		struct nv_dev *d = nv_dev_get(v->devs[i]);
		struct nv_gid_info g;

		if (d && d->link_layer == IBV_LINK_LAYER_ETHERNET && nv_dev_gid(d, &g) == NV_OK)
			memcpy(gids[k++], g.gid.raw, 16);
	}
	return k;
}

/* Every RoCE port of vNIC dev shares a subnet with one of gids (and it has one). */
static bool nv_vdev_reaches(int dev, const uint8_t (*gids)[16], int n, int plen)
{
	uint8_t mine[NV_MAX_DEVS_PER_VDEV][16];
	int k = nv_vdev_roce_gids(dev, mine, NV_MAX_DEVS_PER_VDEV), matched = 0;

	for (int i = 0; i < k; i++)
		for (int j = 0; j < n; j++)
			if (nv_gid_is_valid((const union ibv_gid *)gids[j]) &&
			    nv_gid_same_subnet(mine[i], gids[j], plen)) {
				matched++;
				break;
			}
	return k > 0 && matched == k;
}

int nv_vdev_by_subnet(const uint8_t (*gids)[16], int n, int dflt)
{
	int plen = (int)nv_param_int(NV_PARAM_IB_SUBNET_PREFIX_LEN), any = 0;

	for (int j = 0; j < n; j++)
		any |= nv_gid_is_valid((const union ibv_gid *)gids[j]);
	if (!any || nv_vdev_reaches(dflt, gids, n, plen))
		return dflt; /* IB, one subnet, or the default reaches the listener */
	for (int v = 0; v < nv_vdev_count(); v++)
		if (v != dflt && nv_vdev_reaches(v, gids, n, plen))
			return v;
	return dflt;
}
