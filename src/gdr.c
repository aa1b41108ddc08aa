/*
 * gdr.c - GPUDirect RDMA detection per HCA.
 *  - peer memory (NCCL_PTR_CUDA, plain ibv_reg_mr of GPU pointers): a marker
 *    of nv_peer_mem, nv_mem_nc or nvidia_peermem exists below the root;
 *  - dma-buf (NCCL_PTR_DMABUF): ibv_reg_dmabuf_mr(fd = -1) fails with EBADF
 *    (kernel and driver understand dma-buf) rather than EOPNOTSUPP /
 *    EPROTONOSUPPORT.
 * The root (NCCL_VERBS_GDR_SYSFS_ROOT, default "/") exists so tests can build
 * a fake tree.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "device.h"
#include "ibv.h"
#include "param.h"

static const char *const nv_peermem_markers[] = {
	"sys/kernel/mm/memory_peers/nv_mem/version",    /* nv_peer_mem (MLNX_OFED) */
	"sys/kernel/mm/memory_peers/nv_mem_nc/version", /* nv_mem_nc */
	"sys/module/nvidia_peermem/version",            /* nvidia_peermem (driver >= 465) */
};

bool nv_gdr_peermem_present(const char *root, char *marker, size_t len)
{
	char path[PATH_MAX];
	size_t rl;

	if (!root || !root[0])
		root = "/";
	rl = strlen(root);
	for (size_t i = 0; i < NV_ARRAY_SIZE(nv_peermem_markers); i++) {
		snprintf(path, sizeof(path), "%s%s%s", root, root[rl - 1] == '/' ? "" : "/",
			 nv_peermem_markers[i]);
		if (access(path, F_OK) == 0) {
			if (marker)
				snprintf(marker, len, "%s", path);
			return true;
		}
	}
	if (marker && len)
		marker[0] = '\0';
	return false;
}

/* 0: supported; else the errno that says why not. Uses a temporary PD ref. */
static int nv_gdr_dmabuf_probe(struct nv_hca *hca)
{
	struct ibv_pd *pd;
	int err;

	if (nv_hca_pd_get(hca, &pd) != NV_OK)
		return errno ? errno : EIO;
	err = nv_ibv_reg_dmabuf_mr_probe(pd);
	nv_hca_pd_put(hca);
	if (err == EOPNOTSUPP || err == EPROTONOSUPPORT || err == ENOSYS)
		return err ? err : EOPNOTSUPP;
	return 0; /* EBADF (or anything else): the verb understood the request */
}

nv_status_t nv_gdr_detect(struct nv_hca *hca)
{
	struct nv_gdr_info *g = &hca->gdr;
	const char *root = nv_param_str(NV_PARAM_VERBS_GDR_SYSFS_ROOT);
	int derr;

	memset(g, 0, sizeof(*g));
	g->ptr_support = NCCL_PTR_HOST;
	g->peermem = nv_gdr_peermem_present(root, g->peermem_marker, sizeof(g->peermem_marker));
	derr = nv_gdr_dmabuf_probe(hca);
	g->dmabuf = derr == 0;
	if (g->peermem)
		g->ptr_support |= NCCL_PTR_CUDA;
	if (g->dmabuf) /* as NCCL's net_ib: DMABUF alone already marks the NIC GDR-capable */
		g->ptr_support |= NCCL_PTR_DMABUF;

	if (g->peermem && g->dmabuf)
		snprintf(g->why, sizeof(g->why), "GPUDirect on (peer memory %s; dma-buf)",
			 g->peermem_marker);
	else if (g->peermem)
		snprintf(g->why, sizeof(g->why), "GPUDirect on (peer memory %s; no dma-buf: %s)",
			 g->peermem_marker, strerror(derr));
	else if (g->dmabuf)
		snprintf(g->why, sizeof(g->why), "GPUDirect on (dma-buf; no peer-memory module)");
	else
		snprintf(g->why, sizeof(g->why),
			 "GPUDirect off: no nv_peer_mem/nv_mem_nc/nvidia_peermem module under %s, "
			 "ibv_reg_dmabuf_mr: %s", root ? root : "/", strerror(derr));
	NV_INFO(NV_SUB_INIT | NV_SUB_NET, "%s: %s", hca->name, g->why);
	return NV_OK;
}
