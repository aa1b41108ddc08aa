/*
 * param.c - the one parameter table (see param.h for the contract).
 * Defaults follow NCCL 2.30's net_ib where the knob is NCCL's (docs/knobs.md lists them);
 * NCCL_VERBS_* knobs are ours.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "param.h"
#include "select.h"

static const char *nv_check_family(const char *v);
static const char *nv_check_range(const char *v);
static const char *nv_check_hca(const char *v);

#define INT_ROW(id_, env_, def_, min_, max_, help_) \
	[id_] = { id_, env_, NV_PARAM_INT, def_, min_, max_, NULL, NULL, help_ }
#define STR_ROW(id_, env_, def_, check_, help_) \
	[id_] = { id_, env_, NV_PARAM_STR, 0, 0, 0, def_, check_, help_ }

static const struct nv_param_def nv_params[NV_PARAM_COUNT] = {
	INT_ROW(NV_PARAM_IB_DISABLE, "NCCL_IB_DISABLE", 0, 0, 1,
		"1: do not use the plugin (init fails, NCCL falls back)"),
	STR_ROW(NV_PARAM_IB_HCA, "NCCL_IB_HCA", NULL, nv_check_hca,
		"HCA/port filter: [^][=]name[:port[:rail[:plane]]],... (prefix match unless =; "
		"at most 32 entries, names < 64 characters)"),
	INT_ROW(NV_PARAM_IB_GID_INDEX, "NCCL_IB_GID_INDEX", -1, -1, 65535,
		"RoCE GID index; -1: auto-select (family, range, RoCE version)"),
	INT_ROW(NV_PARAM_IB_ROCE_VERSION_NUM, "NCCL_IB_ROCE_VERSION_NUM", 2, 1, 2,
		"RoCE version preferred by GID auto-selection"),
	STR_ROW(NV_PARAM_IB_ADDR_FAMILY, "NCCL_IB_ADDR_FAMILY", "AF_INET", nv_check_family,
		"address family preferred by GID auto-selection: AF_INET or AF_INET6"),
	STR_ROW(NV_PARAM_IB_ADDR_RANGE, "NCCL_IB_ADDR_RANGE", NULL, nv_check_range,
		"CIDR the auto-selected RoCE GID must lie in, e.g. 10.0.0.0/8 (unset: any)"),
	INT_ROW(NV_PARAM_IB_TIMEOUT, "NCCL_IB_TIMEOUT", 20, 1, 31,
		"QP local ACK timeout exponent: 4.096us * 2^t per try"),
	INT_ROW(NV_PARAM_IB_RETRY_CNT, "NCCL_IB_RETRY_CNT", 7, 0, 7,
		"QP transport retry count"),
	INT_ROW(NV_PARAM_IB_SL, "NCCL_IB_SL", -1, -1, 15,
		"InfiniBand service level; -1: communicator traffic class, else 0"),
	INT_ROW(NV_PARAM_IB_TC, "NCCL_IB_TC", -1, -1, 255,
		"traffic class (GRH); -1: communicator traffic class, else 0"),
	INT_ROW(NV_PARAM_IB_FIFO_TC, "NCCL_IB_FIFO_TC", -1, -1, 255,
		"traffic class of the clear-to-send FIFO QP traffic; -1: same as NCCL_IB_TC"),
	INT_ROW(NV_PARAM_IB_PKEY, "NCCL_IB_PKEY", 0, 0, 65535,
		"P_Key INDEX used by the QPs; checked against each port's P_Key table at init"),
	INT_ROW(NV_PARAM_IB_QPS_PER_CONNECTION, "NCCL_IB_QPS_PER_CONNECTION", 1, 1, 128,
		"data QPs per connection and device"),
	INT_ROW(NV_PARAM_IB_SPLIT_DATA_ON_QPS, "NCCL_IB_SPLIT_DATA_ON_QPS", 0, 0, 1,
		"1: split each message over all QPs; 0: one QP per message, round robin"),
	INT_ROW(NV_PARAM_IB_PCI_RELAXED_ORDERING, "NCCL_IB_PCI_RELAXED_ORDERING", 2, 0, 2,
		"relaxed ordering on data MRs: 0 off, 1 on, 2 auto (when supported)"),
	INT_ROW(NV_PARAM_IB_ECE_ENABLE, "NCCL_IB_ECE_ENABLE", 1, 0, 1,
		"exchange Enhanced Connection Establishment options when supported"),
	INT_ROW(NV_PARAM_IB_AR_THRESHOLD, "NCCL_IB_AR_THRESHOLD", -2, -2, INT64_MAX,
		"with adaptive routing, messages longer than this many bytes use WRITE + 0-byte "
		"WRITE_IMM; -2: 8192, -1: every message"),
	INT_ROW(NV_PARAM_IB_ADAPTIVE_ROUTING, "NCCL_IB_ADAPTIVE_ROUTING", -2, -2, 1,
		"adaptive routing mode: 1 on, 0 off, -2 auto (on for InfiniBand, off for RoCE)"),
	INT_ROW(NV_PARAM_IB_USE_INLINE, "NCCL_IB_USE_INLINE", 0, 0, 1,
		"1: send clear-to-send entries inline"),
	INT_ROW(NV_PARAM_IB_MERGE_NICS, "NCCL_IB_MERGE_NICS", 1, 0, 1,
		"0: refuse makeVDevice (NIC fusion)"),
	INT_ROW(NV_PARAM_IB_RETURN_ASYNC_EVENTS, "NCCL_IB_RETURN_ASYNC_EVENTS", 1, 0, 1,
		"1: fatal asynchronous events fail the affected comms at their next call"),
	STR_ROW(NV_PARAM_IBVERBS_LIB, "NCCL_IBVERBS_LIB", NULL, NULL,
		"libibverbs to dlopen first (path or soname); then libibverbs.so, libibverbs.so.1"),
	INT_ROW(NV_PARAM_IB_QUERY_PORT_SPEED, "NCCL_IB_QUERY_PORT_SPEED", 1, 0, 1,
		"1: port speed from ibv_query_port_speed when libibverbs has it (rdma-core 56+)"),
	INT_ROW(NV_PARAM_IB_ROUTABLE_FLID_GID_INDEX, "NCCL_IB_ROUTABLE_FLID_GID_INDEX", 1, 0, 255,
		"InfiniBand GID index used when it holds a routable FLID (IB routers), else 0"),
	INT_ROW(NV_PARAM_IB_SUBNET_AWARE_ROUTING, "NCCL_IB_SUBNET_AWARE_ROUTING", 0, 0, 1,
		"1: connect from the local NIC on the listener's RoCE subnet (one subnet per rail)"),
	INT_ROW(NV_PARAM_IB_SUBNET_PREFIX_LEN, "NCCL_IB_SUBNET_PREFIX_LEN", 24, 1, 32,
		"IPv4 prefix length that defines a RoCE subnet for subnet-aware routing"),
	INT_ROW(NV_PARAM_IB_MERGE_VFS, "NCCL_IB_MERGE_VFS", 1, 0, 1,
		"1: SR-IOV virtual functions of one NIC share its PCI path (port numbering)"),
	INT_ROW(NV_PARAM_IB_DEVICE_PCI_ORDER, "NCCL_IB_DEVICE_PCI_ORDER", 1, 0, 1,
		"1: number devices by PCI address (alike on every node); 0: in the verbs "
		"device list's order"),
	INT_ROW(NV_PARAM_IB_WARN_RAIL_LOCAL, "NCCL_IB_WARN_RAIL_LOCAL", 0, 0, 1,
		"1: INFO when a connection's two sides use different physical devices"),
	INT_ROW(NV_PARAM_IB_WQE_LATENCY_THRESHOLD_NS, "NCCL_IB_WQE_LATENCY_THRESHOLD_NS", 0, 0,
		3600000000000,
		"ns: each QP of a send comm times one data WR at a time, post to completion; "
		"above this, an INFO (NET) 'WQE slow' line, and 'WQE stall (no CQE)' for a WR "
		"older than this with no completion (each at most once a second per QP); 0: off"),
	INT_ROW(NV_PARAM_IB_WQE_LATENCY_REPORT, "NCCL_IB_WQE_LATENCY_REPORT", 1, 0, 1,
		"with NCCL_IB_WQE_LATENCY_THRESHOLD_NS > 0, 1: an INFO (NET) line per QP at close "
		"with the count, slow count, mean, stddev, p50/p90/p99/p99.9 and max"),
	INT_ROW(NV_PARAM_IB_EVENT_BASED_LB, "NCCL_IB_EVENT_BASED_LB", 0, 0, 1,
		"1: a comm over fused NICs cuts each message in proportion to each device's "
		"speed, min(local, remote), taken again on IBV_EVENT_DEVICE_SPEED_CHANGE; 0: "
		"equal chunks"),
	INT_ROW(NV_PARAM_IB_EVENT_BASED_LB_REMOTE, "NCCL_IB_EVENT_BASED_LB_REMOTE", 1, 0, 1,
		"with NCCL_IB_EVENT_BASED_LB=1, 1: the sender asks the receiver for its port "
		"speeds (an RDMA write at the start and after each change); 0: local speeds only"),
	INT_ROW(NV_PARAM_IB_MQP_RETRY_ALL, "NCCL_IB_MQP_RETRY_ALL", 0, 0, 1,
		"1: retry a failed ibv_modify_qp whatever the error; 0: only on ETIMEDOUT"),
	INT_ROW(NV_PARAM_IB_MQP_RETRY_CNT, "NCCL_IB_MQP_RETRY_CNT", 34, 0, 1000,
		"retries of a timed-out ibv_modify_qp (RoCE address resolution)"),
	INT_ROW(NV_PARAM_IB_MQP_RETRY_SLEEP_MSEC, "NCCL_IB_MQP_RETRY_SLEEP_MSEC", 100, 0, 60000,
		"ms before modify_qp retry n, times n"),
	INT_ROW(NV_PARAM_IB_RESILIENCY_PORT_FAILOVER, "NCCL_IB_RESILIENCY_PORT_FAILOVER", 0, 0, 1,
		"1: a comm over several devices (fused NIC) survives the failure of some of them: "
		"unfinished messages are sent again on the surviving devices (both sides must agree)"),
	INT_ROW(NV_PARAM_IB_RESILIENCY_PORT_FAILOVER_MAX_ATTEMPTS,
		"NCCL_IB_RESILIENCY_PORT_FAILOVER_MAX_ATTEMPTS", 1, 0, 1000,
		"failovers one message may go through; one more fails the comm"),
	INT_ROW(NV_PARAM_IB_RESILIENCY_PORT_FAILOVER_PROBE_DELAY,
		"NCCL_IB_RESILIENCY_PORT_FAILOVER_PROBE_DELAY", 10, 0, 60000,
		"ms the side that saw the failure waits before asking the peer what landed"),
	INT_ROW(NV_PARAM_IB_RESILIENCY_PORT_RECOVERY, "NCCL_IB_RESILIENCY_PORT_RECOVERY", 0, 0, 1,
		"1: bring a failed device back into its comms when its port is ACTIVE again "
		"(with NCCL_IB_RESILIENCY_PORT_FAILOVER=1, on both sides)"),
	INT_ROW(NV_PARAM_IB_RESILIENCY_PORT_RECOVERY_START_DELAY,
		"NCCL_IB_RESILIENCY_PORT_RECOVERY_START_DELAY", 200, 0, 600000,
		"ms after the failover before a recovery may start"),
	INT_ROW(NV_PARAM_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_BATCH_INTERVAL,
		"NCCL_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_BATCH_INTERVAL", 500, 0, 600000,
		"NCCL's alive-message protocol: ms between batches (accepted, unused: see "
		"docs/knobs.md)"),
	INT_ROW(NV_PARAM_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_BATCH_SIZE,
		"NCCL_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_BATCH_SIZE", 5, 1, 10,
		"NCCL's alive-message protocol: messages per batch (accepted, unused: see "
		"docs/knobs.md)"),
	INT_ROW(NV_PARAM_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_SEQUENCE_SIZE,
		"NCCL_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_SEQUENCE_SIZE", 5, 1, 1000,
		"NCCL's alive-message protocol: in-order messages that prove the port (accepted, "
		"unused: see docs/knobs.md)"),
	INT_ROW(NV_PARAM_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_TIMEOUT,
		"NCCL_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_TIMEOUT", 4000, 0, 600000,
		"NCCL's alive-message protocol: ms without one before an attempt fails (accepted, "
		"unused: see docs/knobs.md)"),
	INT_ROW(NV_PARAM_IB_RESILIENCY_PORT_RECOVERY_ACK_TIMEOUT,
		"NCCL_IB_RESILIENCY_PORT_RECOVERY_ACK_TIMEOUT", 5000, 0, 600000,
		"NCCL's recovery ack timeout (accepted, unused: a round has NCCL_VERBS_CONNECT_TIMEOUT_MS)"),
	INT_ROW(NV_PARAM_VERBS_LINK_HOLD_MS, "NCCL_VERBS_LINK_HOLD_MS", 0, 0, 3600000,
		"ms a comm whose ports all went down holds its requests for them to come back "
		"(then its QPs restart, the GID is chosen again, unfinished messages are sent "
		"again); 0: it fails at once (both sides must agree)"),
	INT_ROW(NV_PARAM_IB_RESILIENCY_PORT_RECOVERY_ATTEMPTS_MAX,
		"NCCL_IB_RESILIENCY_PORT_RECOVERY_ATTEMPTS_MAX", 5, 0, 1000,
		"recovery attempts per failed device before it stays failed"),
	INT_ROW(NV_PARAM_GDR_FLUSH_DISABLE, "NCCL_GDR_FLUSH_DISABLE", 0, 0, 1,
		"1: iflush does nothing (no RDMA READ after GPU receives)"),
	STR_ROW(NV_PARAM_SOCKET_IFNAME, "NCCL_SOCKET_IFNAME", NULL, NULL,
		"interfaces for the out-of-band TCP handshake: [^][=]prefix,... (unset: auto)"),
	STR_ROW(NV_PARAM_SOCKET_FAMILY, "NCCL_SOCKET_FAMILY", NULL, nv_check_family,
		"address family of the handshake interface: AF_INET or AF_INET6 (unset: any)"),
	INT_ROW(NV_PARAM_VERBS_CONNECT_TIMEOUT_MS, "NCCL_VERBS_CONNECT_TIMEOUT_MS", 30000, 100,
		3600000, "ms a connect/accept may wait for a silent peer before failing"),
	INT_ROW(NV_PARAM_VERBS_LISTEN_PENDING, "NCCL_VERBS_LISTEN_PENDING", 64, 1, 65536,
		"connections a listener keeps while their hello is due (oldest silent one "
		"dropped for a newcomer)"),
	INT_ROW(NV_PARAM_VERBS_LISTEN_BACKLOG, "NCCL_VERBS_LISTEN_BACKLOG", 1024, 1, 65536,
		"authenticated connections that may wait at a listener for accept calls"),
	INT_ROW(NV_PARAM_VERBS_LATENCY_US, "NCCL_VERBS_LATENCY_US", 0, 0, 1000000,
		"latency (us) reported to NCCL's tuner in the device properties"),
	STR_ROW(NV_PARAM_VERBS_GDR_SYSFS_ROOT, "NCCL_VERBS_GDR_SYSFS_ROOT", "/", NULL,
		"root under which GPUDirect peer-memory markers are looked up (testing)"),
	INT_ROW(NV_PARAM_VERBS_EAGER_MAX, "NCCL_VERBS_EAGER_MAX", 4096, 0, 65536,
		"eager path: messages up to this many bytes go without waiting for the clear-"
		"to-send (one-device one-QP comms, both peers on); 0: off"),
	INT_ROW(NV_PARAM_VERBS_STALL_MS, "NCCL_VERBS_STALL_MS", 10000, 0, 3600000,
		"ms a comm may wait without progress before one WARN says which side waits for "
		"what (then a summary at most every 30 s); 10 s: past one ACK timeout at "
		"NCCL_IB_TIMEOUT=20 (4.3 s), well before the NIC gives up (8 of them, 34 s) "
		"and before job watchdogs (minutes); 0: off"),
	INT_ROW(NV_PARAM_VERBS_DUMP_SIGNAL, "NCCL_VERBS_DUMP_SIGNAL", 0, 0, 64,
		"signal number (e.g. 10 = SIGUSR1) on which every open comm logs its state in "
		"one line; 0: none"),
	STR_ROW(NV_PARAM_VERBS_DUMP_FILE, "NCCL_VERBS_DUMP_FILE", NULL, NULL,
		"path checked every 100 ms: when it appears or is touched, every open comm logs "
		"its state in one line (unset: none)"),
	INT_ROW(NV_PARAM_VERBS_FAST_PATHS, "NCCL_VERBS_FAST_PATHS", 1, 0, 1,
		"0: every isend, irecv and completion takes the general path, none its one-buffer "
		"one-QP fast path (testing: the fast paths must behave as it)"),
};

struct nv_param_val {
	bool set;
	int64_t i;
	char *s;
};

static pthread_mutex_t nv_param_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nv_param_val nv_vals[NV_PARAM_COUNT];
static bool nv_loaded;

static const char *nv_check_family(const char *v)
{
	if (!strcasecmp(v, "AF_INET") || !strcasecmp(v, "AF_INET6"))
		return NULL;
	return "expected AF_INET or AF_INET6";
}

static const char *nv_check_range(const char *v)
{
	struct nv_gid_policy pol;

	return nv_gid_parse_range(v, &pol) == NV_OK ? NULL : "expected an address/prefix CIDR";
}

static const char *nv_check_hca(const char *v)
{
	struct nv_hca_filter f;

	return nv_hca_filter_parse(v, &f) == NV_OK ? NULL : f.why;
}

nv_status_t nv_param_parse_int(const char *s, int64_t *out)
{
	char *end;
	long long v;

	while (*s == ' ' || *s == '\t')
		s++;
	if (!*s)
		return NV_ERR_USAGE;
	errno = 0;
	v = strtoll(s, &end, 0);
	if (errno == ERANGE || end == s)
		return NV_ERR_USAGE;
	while (*end == ' ' || *end == '\t' || *end == '\n')
		end++;
	if (*end)
		return NV_ERR_USAGE;
	*out = v;
	return NV_OK;
}

static void nv_vals_clear(struct nv_param_val *vals)
{
	for (int i = 0; i < NV_PARAM_COUNT; i++) {
		free(vals[i].s);
		vals[i] = (struct nv_param_val){ 0 };
	}
}

static nv_status_t nv_param_read_one(const struct nv_param_def *d, const char *raw,
				     struct nv_param_val *v)
{
	const char *why;

	if (d->type == NV_PARAM_INT) {
		if (nv_param_parse_int(raw, &v->i) != NV_OK) {
			NV_WARN("%s='%s' is not an integer (expected %" PRId64 "..%" PRId64
				", default %" PRId64 ")", d->env, raw, d->min, d->max, d->def);
			return NV_ERR_USAGE;
		}
		if (v->i < d->min || v->i > d->max) {
			NV_WARN("%s=%s is out of range %" PRId64 "..%" PRId64 " (default %" PRId64
				"): %s", d->env, raw, d->min, d->max, d->def, d->help);
			return NV_ERR_USAGE;
		}
	} else {
		why = d->validate ? d->validate(raw) : NULL;
		if (why) {
			NV_WARN("%s='%s' is invalid: %s", d->env, raw, why);
			return NV_ERR_USAGE;
		}
		v->s = strdup(raw);
		if (!v->s) {
			NV_WARN("out of memory reading %s", d->env);
			return NV_ERR_SYSTEM;
		}
	}
	v->set = true;
	NV_INFO(NV_SUB_INIT | NV_SUB_ENV, "%s set by environment to %s", d->env, raw);
	return NV_OK;
}

nv_status_t nv_param_load_from(nv_param_getenv_fn fn, void *arg)
{
	struct nv_param_val vals[NV_PARAM_COUNT] = { { 0 } };
	nv_status_t st = NV_OK, first = NV_OK;

	/* Read everything (reporting every bad knob), publish only if all are valid. */
	for (int i = 0; i < NV_PARAM_COUNT; i++) {
		const char *raw = fn(nv_params[i].env, arg);

		if (!raw || !raw[0]) /* empty means unset, as in NCCL's own loader */
			continue;
		st = nv_param_read_one(&nv_params[i], raw, &vals[i]);
		if (st != NV_OK && first == NV_OK)
			first = st;
	}
	if (first != NV_OK) {
		nv_vals_clear(vals);
		return first;
	}
	pthread_mutex_lock(&nv_param_lock);
	nv_vals_clear(nv_vals);
	memcpy(nv_vals, vals, sizeof(vals));
	nv_loaded = true;
	pthread_mutex_unlock(&nv_param_lock);
	return NV_OK;
}

static const char *nv_getenv(const char *name, void *arg)
{
	(void)arg;
	return getenv(name);
}

nv_status_t nv_param_load(void)
{
	return nv_param_load_from(nv_getenv, NULL);
}

void nv_param_reset(void)
{
	pthread_mutex_lock(&nv_param_lock);
	nv_vals_clear(nv_vals);
	nv_loaded = false;
	pthread_mutex_unlock(&nv_param_lock);
}

const struct nv_param_def *nv_param_def(enum nv_param_id id)
{
	if ((int)id < 0 || id >= NV_PARAM_COUNT)
		return NULL;
	return &nv_params[id];
}

const struct nv_param_def *nv_param_find(const char *env)
{
	for (int i = 0; i < NV_PARAM_COUNT; i++)
		if (!strcmp(nv_params[i].env, env))
			return &nv_params[i];
	return NULL;
}

int64_t nv_param_int(enum nv_param_id id)
{
	const struct nv_param_def *d = nv_param_def(id);

	if (!d || d->type != NV_PARAM_INT)
		return 0;
	return nv_vals[id].set ? nv_vals[id].i : d->def;
}

const char *nv_param_str(enum nv_param_id id)
{
	const struct nv_param_def *d = nv_param_def(id);

	if (!d || d->type != NV_PARAM_STR)
		return NULL;
	return nv_vals[id].set ? nv_vals[id].s : d->def_str;
}

bool nv_param_is_set(enum nv_param_id id)
{
	return nv_param_def(id) && nv_vals[id].set;
}

static void nv_param_value_str(enum nv_param_id id, char *buf, size_t len)
{
	const char *s;

	if (nv_params[id].type == NV_PARAM_INT) {
		snprintf(buf, len, "%" PRId64, nv_param_int(id));
		return;
	}
	s = nv_param_str(id);
	snprintf(buf, len, "%s", s ? s : "(unset)");
}

void nv_param_dump(FILE *out)
{
	char val[256];

	for (int i = 0; i < NV_PARAM_COUNT; i++) {
		nv_param_value_str(i, val, sizeof(val));
		fprintf(out, "  %-31s %-12s %-8s %s\n", nv_params[i].env, val,
			nv_vals[i].set ? "(set)" : "(default)", nv_params[i].help);
	}
}

void nv_param_log(void)
{
	char val[256];

	for (int i = 0; i < NV_PARAM_COUNT; i++) {
		nv_param_value_str(i, val, sizeof(val));
		NV_TRACE(NV_SUB_ENV, "param %s = %s%s", nv_params[i].env, val,
			nv_vals[i].set ? " (set)" : "");
	}
}
