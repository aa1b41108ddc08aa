/*
 * nccl/net_device.h - device-offload types of the net ABI (docs/net-api.md,
 * "Device offload"). A host plugin reports NCCL_NET_DEVICE_HOST with
 * version NCCL_NET_DEVICE_INVALID_VERSION.
 */
#ifndef NCCL_NV_NET_DEVICE_H
#define NCCL_NV_NET_DEVICE_H

#include <stddef.h>

#define NCCL_NET_DEVICE_INVALID_VERSION 0x0
#define NCCL_NET_DEVICE_UNPACK_VERSION 0x7
#define NCCL_NET_MTU_SIZE 4096

typedef enum {
	NCCL_NET_DEVICE_HOST = 0,
	NCCL_NET_DEVICE_UNPACK = 1,
	NCCL_NET_DEVICE_GIN_PROXY = 2,
	NCCL_NET_DEVICE_GIN_GDAKI = 3
} ncclNetDeviceType;

/* 32 bytes on LP64; unchanged from v7 to v12. */
typedef struct {
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	void *handle;
	size_t size;
	int needsProxyProgress;
} ncclNetDeviceHandle_v7_t;

typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v8_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v9_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v10_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v11_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v12_t;
typedef ncclNetDeviceHandle_v12_t ncclNetDeviceHandle_t;

#endif /* NCCL_NV_NET_DEVICE_H */
