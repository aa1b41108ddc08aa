/*
 * ibv_load.c - binds libibverbs at run time (part of the verbs seam).
 *
 * The plugin has no link-time dependency on libibverbs: a node or container
 * with an old rdma-core, or none, still loads the plugin, and init then
 * either works with the missing optional verbs switched off or fails with one
 * WARN so that NCCL falls back to another transport.
 *
 * Library: as NCCL 2.30, the first of NCCL_IBVERBS_LIB (when set),
 * libibverbs.so and libibverbs.so.1 that dlopen() opens; a NCCL_IBVERBS_LIB
 * that does not open is a WARN naming it, dlerror() and the one loaded.
 * Symbols: the core verbs by their IBVERBS_1.1 versions (the ABI every
 * rdma-core since 2004 exports); the optional ones by the version that
 * introduced them, each absence logged once at INFO with what it costs.
 */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ibv.h"
#include "ibv_syms.h"

struct nv_ibv_syms nv_ibv_sym;

static pthread_mutex_t nv_load_lock = PTHREAD_MUTEX_INITIALIZER;
static void *nv_ibv_handle; /* never closed once every required symbol bound */

#define NV_CORE_VERSION "IBVERBS_1.1"

struct nv_sym_row {
	const char *name;
	const char *version;
	void **slot;
	const char *lost; /* optional: what is lost without it; NULL: required */
};

#define CORE(member, name) { name, NV_CORE_VERSION, (void **)&nv_ibv_sym.member, NULL }
#define OPT(member, name, ver, lost) { name, ver, (void **)&nv_ibv_sym.member, lost }

static const struct nv_sym_row nv_sym_rows[] = {
	CORE(get_device_list, "ibv_get_device_list"),
	CORE(free_device_list, "ibv_free_device_list"),
	CORE(get_device_name, "ibv_get_device_name"),
	CORE(open_device, "ibv_open_device"),
	CORE(close_device, "ibv_close_device"),
	CORE(get_async_event, "ibv_get_async_event"),
	CORE(ack_async_event, "ibv_ack_async_event"),
	CORE(query_device, "ibv_query_device"),
	CORE(query_port, "ibv_query_port"),
	CORE(query_gid, "ibv_query_gid"),
	CORE(query_pkey, "ibv_query_pkey"),
	CORE(alloc_pd, "ibv_alloc_pd"),
	CORE(dealloc_pd, "ibv_dealloc_pd"),
	CORE(reg_mr, "ibv_reg_mr"),
	CORE(dereg_mr, "ibv_dereg_mr"),
	CORE(create_cq, "ibv_create_cq"),
	CORE(destroy_cq, "ibv_destroy_cq"),
	CORE(create_qp, "ibv_create_qp"),
	CORE(modify_qp, "ibv_modify_qp"),
	CORE(query_qp, "ibv_query_qp"),
	CORE(destroy_qp, "ibv_destroy_qp"),
	CORE(event_type_str, "ibv_event_type_str"),
	CORE(wc_status_str, "ibv_wc_status_str"),
	CORE(port_state_str, "ibv_port_state_str"),
	OPT(reg_mr_iova2, "ibv_reg_mr_iova2", "IBVERBS_1.8",
	    "no PCIe relaxed ordering on registrations (NCCL_IB_PCI_RELAXED_ORDERING)"),
#if HAVE_DECL_IBV_QUERY_ECE
	OPT(query_ece, "ibv_query_ece", "IBVERBS_1.10",
	    "no Enhanced Connection Establishment (NCCL_IB_ECE_ENABLE)"),
	OPT(set_ece, "ibv_set_ece", "IBVERBS_1.10",
	    "no Enhanced Connection Establishment (NCCL_IB_ECE_ENABLE)"),
#endif
#if HAVE_DECL_IBV_QUERY_GID_EX
	OPT(query_gid_ex, "_ibv_query_gid_ex", "IBVERBS_1.11",
	    "GID types unknown: RoCE v2 GIDs cannot be told from v1 (set NCCL_IB_GID_INDEX)"),
#endif
	OPT(reg_dmabuf_mr, "ibv_reg_dmabuf_mr", "IBVERBS_1.12",
	    "no dma-buf GPU memory registration (NCCL_PTR_DMABUF)"),
	OPT(query_port_speed, "ibv_query_port_speed", "IBVERBS_1.16",
	    "port speed computed from active_speed x active_width"),
};

static void nv_syms_clear(void)
{
	memset(&nv_ibv_sym, 0, sizeof(nv_ibv_sym));
}

/* Binds every row; returns the first missing required symbol, or NULL. */
static const char *nv_syms_bind(void *h, char *err, size_t errlen)
{
	for (size_t i = 0; i < NV_ARRAY_SIZE(nv_sym_rows); i++) {
		const struct nv_sym_row *r = &nv_sym_rows[i];

		dlerror();
		*r->slot = dlvsym(h, r->name, r->version);
		if (*r->slot || r->lost)
			continue;
		{
			const char *e = dlerror();

			snprintf(err, errlen, "%s", e ? e : "NULL symbol");
		}
		return r->name;
	}
	return NULL;
}

/* Calls fn once per loss: each optional row not bound (ECE's two rows once). */
static int nv_syms_missing(void (*fn)(const struct nv_sym_row *r, void *arg), void *arg)
{
	const char *prev = NULL;
	int n = 0;

	for (size_t i = 0; i < NV_ARRAY_SIZE(nv_sym_rows); i++) {
		const struct nv_sym_row *r = &nv_sym_rows[i];

		if (!r->lost || *r->slot || (prev && !strcmp(prev, r->lost)))
			continue;
		fn(r, arg);
		prev = r->lost;
		n++;
	}
	return n;
}

static void nv_sym_log(const struct nv_sym_row *r, void *lib)
{
	NV_INFO(NV_SUB_INIT, "%s has no %s@%s: %s", (const char *)lib, r->name, r->version, r->lost);
}

static void nv_sym_print(const struct nv_sym_row *r, void *out)
{
	fprintf(out, "  no %s@%s: %s\n", r->name, r->version, r->lost);
}

static void nv_syms_report(const char *lib)
{
	NV_INFO(NV_SUB_INIT, "loaded %s", lib);
	nv_syms_missing(nv_sym_log, (void *)lib);
}

/* dlopen()s the first of NCCL 2.30's candidates that opens: NCCL_IBVERBS_LIB
 * (when set), libibverbs.so, libibverbs.so.1; each one that does not is an
 * INFO, and *tried collects them for the WARN when none opens. */
static void *nv_ibv_open(const char *env, const char **lib, char *tried, size_t len)
{
	const char *cand[] = { env && *env ? env : NULL, "libibverbs.so", "libibverbs.so.1" };

	tried[0] = '\0';
	for (size_t i = 0; i < NV_ARRAY_SIZE(cand); i++) {
		const char *e;
		size_t used = strlen(tried);
		void *h;

		if (!cand[i])
			continue;
		h = dlopen(cand[i], RTLD_NOW | RTLD_LOCAL);
		if (h) {
			*lib = cand[i];
			return h;
		}
		e = dlerror();
		NV_INFO(NV_SUB_INIT, "cannot load %s%s: %s", cand[i], i ? "" : " (NCCL_IBVERBS_LIB)",
			e ? e : "unknown error");
		snprintf(tried + used, len - used, "%s%s%s: %s", used ? "; " : "",
			 i ? "" : "NCCL_IBVERBS_LIB=", cand[i], e ? e : "unknown error");
	}
	return NULL;
}

nv_status_t nv_ibv_load(const char *env)
{
	const char *lib = NULL;
	const char *missing;
	nv_status_t st = NV_OK;
	char err[256], tried[1024];
	void *h;

	pthread_mutex_lock(&nv_load_lock);
	if (nv_ibv_handle)
		goto out_unlock;
	h = nv_ibv_open(env, &lib, tried, sizeof(tried));
	if (!h) {
		NV_WARN("cannot load libibverbs (%s) - the verbs transport is disabled (install "
			"rdma-core's libibverbs1, or point NCCL_IBVERBS_LIB at it)", tried);
		st = NV_ERR_SYSTEM;
		goto out_unlock;
	}
	missing = nv_syms_bind(h, err, sizeof(err));
	if (missing) {
		NV_WARN("%s lacks %s@%s (%s): not a usable libibverbs - the verbs transport is "
			"disabled", lib, missing, NV_CORE_VERSION, err);
		nv_syms_clear();
		dlclose(h);
		st = NV_ERR_SYSTEM;
		goto out_unlock;
	}
	nv_ibv_handle = h;
	/* the user asked for another library: say which did not open, why, and what did */
	if (env && *env && lib != env)
		NV_WARN("cannot load %s - loaded %s instead", tried, lib);
	nv_syms_report(lib);
out_unlock:
	pthread_mutex_unlock(&nv_load_lock);
	return st;
}

void nv_ibv_describe(FILE *out)
{
	pthread_mutex_lock(&nv_load_lock);
	if (!nv_ibv_handle)
		fprintf(out, "  not loaded\n");
	else if (!nv_syms_missing(nv_sym_print, out))
		fprintf(out, "  every optional verb present (IBVERBS_1.8, 1.10, 1.11, 1.12, 1.16)\n");
	pthread_mutex_unlock(&nv_load_lock);
}

bool nv_ibv_loaded(void)
{
	bool ok;

	pthread_mutex_lock(&nv_load_lock);
	ok = nv_ibv_handle != NULL;
	pthread_mutex_unlock(&nv_load_lock);
	return ok;
}
