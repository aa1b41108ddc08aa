/*
 * simverbs GPU memory (gpu.c): what the rest of simverbs needs to know.
 *
 * SIMVERBS_GPUDIRECT selects what the simulated NIC can do with GPU memory:
 *   unset  host memory only; ibv_reg_mr of a CUDA device pointer fails with
 *          EFAULT (no peer-memory module), dma-buf works for CPU-mappable fds;
 *   0      as unset, and the kernel has no dma-buf support at all:
 *          ibv_reg_dmabuf_mr fails with EOPNOTSUPP (the plugin's probe says
 *          "no GPUDirect");
 *   1      GPUDirect: ibv_reg_mr on a device pointer and ibv_reg_dmabuf_mr on
 *          a CUDA dma-buf fd register GPU memory, peer-memory markers appear
 *          in the fake sysfs tree, and the engine moves GPU bytes with CUDA
 *          IPC and the driver's copy functions.
 * libcuda is never linked: it is used only when the process has already
 * loaded it (dlopen RTLD_NOLOAD of libcuda.so.1), as a CUDA program has.
 */
#ifndef SV_GPU_H
#define SV_GPU_H

#include <stdbool.h>
#include <stdint.h>

struct sv_iovs;

#define SV_IPC_HANDLE_BYTES 64	/* CU_IPC_HANDLE_SIZE */

/* One registered GPU range, as gpu.c found it at registration. */
struct sv_gpu_mem {
	uint64_t alloc_base;	/* first byte of the CUDA allocation (owner's VA) */
	uint64_t alloc_size;
	unsigned char ipc[SV_IPC_HANDLE_BYTES];	/* cuIpcGetMemHandle of the allocation */
};

/* Fabric GPU table entry (under the fabric lock): the IPC export of the
 * allocation behind one GPU MR, so initiators in other processes can map it.
 * Free when mr_key is 0 or no longer the key of MR slot mr_key >> 8. */
struct sv_shm_gpu {
	uint32_t mr_key;
	int32_t pid;
	struct sv_gpu_mem mem;
};

/* -1: SIMVERBS_GPUDIRECT unset, else 0 or 1 (read at every call; not data path). */
int sv_gpu_mode(void);

/* Registration: 0 = [addr, addr+len) is not CUDA device memory (host path);
 * 1 = it is, *g filled (IPC export done); -errno = refuse the registration. */
int sv_gpu_classify(uint64_t addr, uint64_t len, struct sv_gpu_mem *g);

/* ibv_reg_dmabuf_mr: 1 = fd is a CUDA dma-buf for GPU memory at iova (checked:
 * fd size covers offset+len, iova is device memory), 0 = not GPU memory
 * (host dma-buf path), -errno = refuse. */
int sv_gpu_dmabuf(int fd, uint64_t offset, uint64_t len, uint64_t iova);

/* Fabric GPU table slots (caller holds the fabric lock). 0 = table full. */
uint32_t sv_gpu_slot_alloc(uint32_t mr_key, const struct sv_gpu_mem *g);
void sv_gpu_slot_free(uint32_t slot);

/* Moves bytes when some iovec is GPU memory (l: ours; r: pid's, owner VAs).
 * Returns 0 or an errno (ESRCH: pid gone, EFAULT: copy failed). */
int sv_gpu_xfer(int32_t pid, bool write, struct sv_iovs *l, struct sv_iovs *r);

/* Peer-memory marker below the fake sysfs root: present iff mode 1. */
void sv_gpu_sysfs(const char *sysfs_root);

#endif
