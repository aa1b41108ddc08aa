/*
 * param.h - THE parameter table: every knob the plugin reads, with its
 * environment variable, type, default, range and help text.
 *
 * Contract:
 *  - nv_param_load() reads the environment once (at the first init, and again
 *    after the last finalize released the global state), validates every
 *    value, logs each override at INFO/ENV and fails with NV_ERR_USAGE naming
 *    the knob and the value when one is malformed or out of range.
 *  - Accessors never touch the environment; they return the loaded value, or
 *    the default when nothing was loaded yet. Thread-safe after load.
 *  - Integer knobs whose default is "auto" use a sentinel documented per row
 *    (e.g. -1, -2); string knobs are NULL when unset and have no default.
 */
#ifndef NV_PARAM_H
#define NV_PARAM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "nv_common.h"

enum nv_param_id {
	NV_PARAM_IB_DISABLE,
	NV_PARAM_IB_HCA,
	NV_PARAM_IB_GID_INDEX,
	NV_PARAM_IB_ROCE_VERSION_NUM,
	NV_PARAM_IB_ADDR_FAMILY,
	NV_PARAM_IB_ADDR_RANGE,
	NV_PARAM_IB_TIMEOUT,
	NV_PARAM_IB_RETRY_CNT,
	NV_PARAM_IB_SL,
	NV_PARAM_IB_TC,
	NV_PARAM_IB_FIFO_TC,
	NV_PARAM_IB_PKEY,
	NV_PARAM_IB_QPS_PER_CONNECTION,
	NV_PARAM_IB_SPLIT_DATA_ON_QPS,
	NV_PARAM_IB_PCI_RELAXED_ORDERING,
	NV_PARAM_IB_ECE_ENABLE,
	NV_PARAM_IB_AR_THRESHOLD,
	NV_PARAM_IB_ADAPTIVE_ROUTING,
	NV_PARAM_IB_USE_INLINE,
	NV_PARAM_IB_MERGE_NICS,
	NV_PARAM_IB_RETURN_ASYNC_EVENTS,
	NV_PARAM_IBVERBS_LIB,
	NV_PARAM_IB_QUERY_PORT_SPEED,
	NV_PARAM_IB_ROUTABLE_FLID_GID_INDEX,
	NV_PARAM_IB_SUBNET_AWARE_ROUTING,
	NV_PARAM_IB_SUBNET_PREFIX_LEN,
	NV_PARAM_IB_MERGE_VFS,
	NV_PARAM_IB_DEVICE_PCI_ORDER,
	NV_PARAM_IB_WARN_RAIL_LOCAL,
	NV_PARAM_IB_WQE_LATENCY_THRESHOLD_NS,
	NV_PARAM_IB_WQE_LATENCY_REPORT,
	NV_PARAM_IB_EVENT_BASED_LB,
	NV_PARAM_IB_EVENT_BASED_LB_REMOTE,
	NV_PARAM_IB_MQP_RETRY_ALL,
	NV_PARAM_IB_MQP_RETRY_CNT,
	NV_PARAM_IB_MQP_RETRY_SLEEP_MSEC,
	NV_PARAM_IB_RESILIENCY_PORT_FAILOVER,
	NV_PARAM_IB_RESILIENCY_PORT_FAILOVER_MAX_ATTEMPTS,
	NV_PARAM_IB_RESILIENCY_PORT_FAILOVER_PROBE_DELAY,
	NV_PARAM_IB_RESILIENCY_PORT_RECOVERY,
	NV_PARAM_IB_RESILIENCY_PORT_RECOVERY_START_DELAY,
	NV_PARAM_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_BATCH_INTERVAL,
	NV_PARAM_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_BATCH_SIZE,
	NV_PARAM_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_SEQUENCE_SIZE,
	NV_PARAM_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_TIMEOUT,
	NV_PARAM_IB_RESILIENCY_PORT_RECOVERY_ACK_TIMEOUT,
	NV_PARAM_VERBS_LINK_HOLD_MS,
	NV_PARAM_IB_RESILIENCY_PORT_RECOVERY_ATTEMPTS_MAX,
	NV_PARAM_GDR_FLUSH_DISABLE,
	NV_PARAM_SOCKET_IFNAME,
	NV_PARAM_SOCKET_FAMILY,
	NV_PARAM_VERBS_CONNECT_TIMEOUT_MS,
	NV_PARAM_VERBS_LISTEN_PENDING,
	NV_PARAM_VERBS_LISTEN_BACKLOG,
	NV_PARAM_VERBS_LATENCY_US,
	NV_PARAM_VERBS_GDR_SYSFS_ROOT,
	NV_PARAM_VERBS_EAGER_MAX,
	NV_PARAM_VERBS_STALL_MS,
	NV_PARAM_VERBS_DUMP_SIGNAL,
	NV_PARAM_VERBS_DUMP_FILE,
	NV_PARAM_VERBS_FAST_PATHS,
	NV_PARAM_COUNT
};

enum nv_param_type {
	NV_PARAM_INT, /* decimal or 0x hex integer in [min, max] */
	NV_PARAM_STR, /* free text, checked by the row's validator if any */
};

struct nv_param_def {
	enum nv_param_id id;
	const char *env;           /* environment variable, e.g. "NCCL_IB_TIMEOUT" */
	enum nv_param_type type;
	int64_t def, min, max;     /* NV_PARAM_INT */
	const char *def_str;       /* NV_PARAM_STR default (may be NULL = unset) */
	/* NV_PARAM_STR: returns NULL when valid, else a short reason. */
	const char *(*validate)(const char *value);
	const char *help;
};

/* Source of values; returns NULL when the variable is unset. */
typedef const char *(*nv_param_getenv_fn)(const char *name, void *arg);

nv_status_t nv_param_load(void);                                      /* from getenv() */
nv_status_t nv_param_load_from(nv_param_getenv_fn fn, void *arg);     /* for tests */
void nv_param_reset(void);                                            /* back to defaults */

int64_t nv_param_int(enum nv_param_id id);
const char *nv_param_str(enum nv_param_id id); /* NULL when unset and no default */
bool nv_param_is_set(enum nv_param_id id);     /* the user gave a value */

const struct nv_param_def *nv_param_def(enum nv_param_id id);
const struct nv_param_def *nv_param_find(const char *env); /* NULL if unknown */

/* One line per knob: name, value, (default|set), help. */
void nv_param_dump(FILE *out);
/* Same, through nv_log at TRACE/ENV (overrides are logged at INFO by load). */
void nv_param_log(void);

/* Parse helpers shared with tests and other modules. */
nv_status_t nv_param_parse_int(const char *s, int64_t *out); /* whole string, no junk */

#endif /* NV_PARAM_H */
