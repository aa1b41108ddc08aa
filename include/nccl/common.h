/*
 * nccl/common.h - logger and profiler callback types NCCL hands to a plugin's
 * init (docs/net-api.md, "Logger and result codes"). Values are NCCL's.
 */
#ifndef NCCL_NV_COMMON_H
#define NCCL_NV_COMMON_H

#include <stdint.h>
#include "nccl/err.h"

typedef enum {
	NCCL_LOG_NONE = 0,
	NCCL_LOG_VERSION = 1,
	NCCL_LOG_WARN = 2,
	NCCL_LOG_INFO = 3,
	NCCL_LOG_ABORT = 4,
	NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

/* Subsystem bit flags passed as `flags` to the logger. */
typedef enum {
	NCCL_INIT = 0x1,
	NCCL_COLL = 0x2,
	NCCL_P2P = 0x4,
	NCCL_SHM = 0x8,
	NCCL_NET = 0x10,
	NCCL_GRAPH = 0x20,
	NCCL_TUNING = 0x40,
	NCCL_ENV = 0x80,
	NCCL_ALLOC = 0x100,
	NCCL_CALL = 0x200,
	NCCL_PROXY = 0x400,
	NCCL_NVLS = 0x800,
	NCCL_BOOTSTRAP = 0x1000,
	NCCL_REG = 0x2000,
	NCCL_PROFILE = 0x4000,
	NCCL_RAS = 0x8000,
	NCCL_ALL = ~0
} ncclDebugLogSubSys;

/* NCCL's logger: thread-safe, filters by NCCL_DEBUG / NCCL_DEBUG_SUBSYS. */
typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char *file,
				  int line, const char *fmt, ...);

/* Profiler hook (v10+). pHandle must be exactly the pointer NCCL gave the plugin. */
typedef ncclResult_t (*ncclProfilerCallback_t)(void **eHandle, int type, void *pHandle,
					       int64_t pluginId, void *extData);

enum {
	ncclProfilerNetEventStart = 0,
	ncclProfilerNetEventStop = 1,
	ncclProfilerNetEventUpdate = 2,
	ncclProfilerNetEventUpdateAndStop = 3
};

#define NCCL_PROFILER_NET_TYPE_IB (1U << 16)
#define NCCL_PROFILER_NET_TYPE_SOCK (2U << 16)

#endif /* NCCL_NV_COMMON_H */
