/*
 * nv_common.h - what every layer of the plugin shares: the one internal
 * status type, its mapping to ncclResult_t, and the logging macros.
 *
 * Contract:
 *  - Every internal function that can fail returns nv_status_t. The first
 *    function that detects an error logs it (NV_WARN, with device, peer and
 *    cause); callers only propagate it.
 *  - Only the vtable (plugin.c) converts to ncclResult_t, via nv_to_nccl().
 *  - Logging goes through NCCL's logger once init() has received it, else to
 *    stderr for WARN only. The macros keep errno intact.
 *  - Every message starts with NV_LOG_PREFIX so one grep finds them all.
 */
#ifndef NV_COMMON_H
#define NV_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* Numerically equal to the ncclResult_t each maps to (checked in plugin.c),
 * so the vtable's conversion costs nothing on the data path. */
typedef enum nv_status {
	NV_OK = 0,
	NV_ERR_SYSTEM = 2,   /* OS, verbs, socket or hardware failure  -> ncclSystemError   */
	NV_ERR_INTERNAL = 3, /* the caller (NCCL core) misused the API -> ncclInternalError */
	NV_ERR_INVALID = 4,  /* bad argument from the caller            -> ncclInvalidArgument */
	NV_ERR_USAGE = 5,    /* user configuration is wrong             -> ncclInvalidUsage  */
	NV_ERR_REMOTE = 6,   /* the peer reported or caused the failure -> ncclRemoteError   */
} nv_status_t;

/* Log levels and subsystem bits, numerically equal to NCCL's. */
enum nv_log_level {
	NV_LOG_NONE = 0,
	NV_LOG_VERSION = 1,
	NV_LOG_WARN = 2,
	NV_LOG_INFO = 3,
	NV_LOG_ABORT = 4,
	NV_LOG_TRACE = 5,
};

#define NV_SUB_INIT 0x1UL
#define NV_SUB_NET 0x10UL
#define NV_SUB_ENV 0x80UL
#define NV_SUB_REG 0x2000UL
#define NV_SUB_ALL (~0UL)

#define NV_LOG_PREFIX "NET/Verbs"

/* Implemented in log.c. Keeps errno. Safe to call from any thread. */
void nv_log(enum nv_log_level level, unsigned long subsys, const char *file, int line,
	    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#define NV_WARN(fmt, ...) \
	nv_log(NV_LOG_WARN, NV_SUB_ALL, __FILE__, __LINE__, NV_LOG_PREFIX " : " fmt, ##__VA_ARGS__)
#define NV_INFO(sub, fmt, ...) \
	nv_log(NV_LOG_INFO, (sub), __func__, __LINE__, NV_LOG_PREFIX " : " fmt, ##__VA_ARGS__)
#define NV_TRACE(sub, fmt, ...) \
	nv_log(NV_LOG_TRACE, (sub), __func__, __LINE__, NV_LOG_PREFIX " : " fmt, ##__VA_ARGS__)

/* The one visible check-and-goto helper docs/style.md allows: never returns or loops. */
#define NV_CHECK_GOTO(call, st, label) \
	do { \
		(st) = (call); \
		if ((st) != NV_OK) \
			goto label; \
	} while (0)

#define NV_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define NV_ALIGN_UP(x, a) (((x) + ((a) - 1)) & ~((__typeof__(x))(a) - 1))
#define nv_likely(x) __builtin_expect(!!(x), 1)
#define nv_unlikely(x) __builtin_expect(!!(x), 0)
#define NV_HIDDEN __attribute__((visibility("hidden")))

#endif /* NV_COMMON_H */
