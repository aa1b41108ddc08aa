/*
 * log.h - plumbing for nv_log() (declared in nv_common.h).
 * plugin.c hands NCCL's logger over at init; without one, WARN goes to stderr
 * and INFO/TRACE follow NCCL_DEBUG (so tools and tests can see them).
 */
#ifndef NV_LOG_H
#define NV_LOG_H

#include "nccl/common.h"

void nv_log_set_logger(ncclDebugLogger_t logger); /* NULL: back to stderr */

#endif /* NV_LOG_H */
