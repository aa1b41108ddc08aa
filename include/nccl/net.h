/*
 * nccl/net.h - constants of the net plugin ABI and every table version we
 * export (v6 .. v12); the unversioned names point at v12, the shape our single
 * implementation uses. Layout checks at the end pin the LP64 offsets of NCCL's
 * headers (docs/net-api.md, "The tables", gives the sizes).
 */
#ifndef NCCL_NV_NET_H
#define NCCL_NV_NET_H

#include <stddef.h>
#include <stdint.h>
#include "nccl/err.h"
#include "nccl/common.h"
#include "nccl/net_device.h"

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4
#define NCCL_NET_MAX_REQUESTS 32
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1
#define NCCL_NET_MULTI_REQUEST 0x2
#define NCCL_MAX_NET_SIZE_BYTES (1ULL << 40) /* 1 TiB */
#define NCCL_MAX_NET_SIZE (1ULL << 30)       /* 1 GiB, cap of the v6..v8 adapters */
#define MAX_COLLNET_SIZE (512ULL << 20)
#define NCCL_NET_MAX_PLUGINS 16

#include "nccl/net_v6.h"
#include "nccl/net_v7.h"
#include "nccl/net_v8.h"
#include "nccl/net_v9.h"
#include "nccl/net_v10.h"
#include "nccl/net_v11.h"
#include "nccl/net_v12.h"

#define NCCL_NET_MAX_DEVS_PER_NIC NCCL_NET_MAX_DEVS_PER_NIC_V12

typedef ncclNet_v12_t ncclNet_t;
typedef ncclNetProperties_v12_t ncclNetProperties_t;
typedef ncclNetVDeviceProps_v12_t ncclNetVDeviceProps_t;
typedef ncclNetCommConfig_v12_t ncclNetCommConfig_t;
typedef ncclNetAttr_v12_t ncclNetAttr_t;

#if !defined(__cplusplus) && defined(__LP64__)
#define NCCL_NV_ABI_CHECK(e) _Static_assert(e, #e)
NCCL_NV_ABI_CHECK(sizeof(ncclNetDeviceHandle_v7_t) == 32);
NCCL_NV_ABI_CHECK(sizeof(ncclNetProperties_v6_t) == 48);
NCCL_NV_ABI_CHECK(sizeof(ncclNetProperties_v7_t) == 56);
NCCL_NV_ABI_CHECK(offsetof(ncclNetProperties_v7_t, netDeviceType) == 48);
NCCL_NV_ABI_CHECK(sizeof(ncclNetProperties_v8_t) == 64);
NCCL_NV_ABI_CHECK(offsetof(ncclNetProperties_v8_t, regIsGlobal) == 28);
NCCL_NV_ABI_CHECK(offsetof(ncclNetProperties_v8_t, netDeviceVersion) == 56);
NCCL_NV_ABI_CHECK(sizeof(ncclNetVDeviceProps_v9_t) == 20);
NCCL_NV_ABI_CHECK(sizeof(ncclNetProperties_v9_t) == 104);
NCCL_NV_ABI_CHECK(offsetof(ncclNetProperties_v9_t, forceFlush) == 32);
NCCL_NV_ABI_CHECK(offsetof(ncclNetProperties_v9_t, vProps) == 64);
NCCL_NV_ABI_CHECK(offsetof(ncclNetProperties_v9_t, maxP2pBytes) == 88);
NCCL_NV_ABI_CHECK(offsetof(ncclNetProperties_v9_t, maxCollBytes) == 96);
NCCL_NV_ABI_CHECK(sizeof(ncclNetProperties_v11_t) == 112);
NCCL_NV_ABI_CHECK(offsetof(ncclNetProperties_v11_t, maxMultiRequestSize) == 104);
NCCL_NV_ABI_CHECK(sizeof(ncclNetVDeviceProps_v12_t) == 36);
NCCL_NV_ABI_CHECK(sizeof(ncclNetProperties_v12_t) == 128);
NCCL_NV_ABI_CHECK(offsetof(ncclNetProperties_v12_t, maxP2pBytes) == 104);
NCCL_NV_ABI_CHECK(offsetof(ncclNetProperties_v12_t, maxCollBytes) == 112);
NCCL_NV_ABI_CHECK(offsetof(ncclNetProperties_v12_t, maxMultiRequestSize) == 120);
NCCL_NV_ABI_CHECK(offsetof(ncclNetProperties_v12_t, railId) == 124);
NCCL_NV_ABI_CHECK(offsetof(ncclNetProperties_v12_t, planeId) == 126);
NCCL_NV_ABI_CHECK(sizeof(ncclNetAttr_v11_t) == 44);
NCCL_NV_ABI_CHECK(sizeof(ncclNet_v6_t) == 136);
NCCL_NV_ABI_CHECK(sizeof(ncclNet_v7_t) == 152);
NCCL_NV_ABI_CHECK(sizeof(ncclNet_v8_t) == 152);
NCCL_NV_ABI_CHECK(sizeof(ncclNet_v9_t) == 160);
NCCL_NV_ABI_CHECK(sizeof(ncclNet_v10_t) == 160);
NCCL_NV_ABI_CHECK(sizeof(ncclNet_v11_t) == 176);
NCCL_NV_ABI_CHECK(sizeof(ncclNet_v12_t) == 176);
NCCL_NV_ABI_CHECK(offsetof(ncclNet_v11_t, finalize) == 160);
NCCL_NV_ABI_CHECK(offsetof(ncclNet_v12_t, setNetAttr) == 168);
#undef NCCL_NV_ABI_CHECK
#endif

#endif /* NCCL_NV_NET_H */
