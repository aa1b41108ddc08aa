/*
 * prof.c - network profiler events (see prof.h). Data-path layer.
 */
#include "config.h"

#include <stdatomic.h>

#include "comm.h"
#include "nccl/net_ib_profiler.h"
#include "prof.h"

ncclProfilerCallback_t nv_prof_cb;
static _Atomic uint64_t nv_prof_drops;
static _Atomic int nv_prof_warned;

void nv_prof_set(ncclProfilerCallback_t cb)
{
	nv_prof_cb = cb;
}

uint64_t nv_prof_dropped(void)
{
	return atomic_load(&nv_prof_drops);
}

static void nv_prof_failed(ncclResult_t res, const char *what)
{
	if (!atomic_exchange(&nv_prof_warned, 1))
		NV_INFO(NV_SUB_NET, "profiler callback failed (%d) on %s; events may be missing",
			(int)res, what);
}

void nv_prof_qp_start(struct nv_request *r, void *phandle, int dev, uint32_t qpn, int opcode,
		      size_t len, uint64_t wr_id)
{
	ncclProfilerNetIbDescr_v1_t d;
	ncclResult_t res;
	void *ev = NULL;

	if (!phandle || !nv_prof_cb)
		return;
	if (r->prof_nev >= NV_PROF_MAX_EV) {
		atomic_fetch_add(&nv_prof_drops, 1);
		return;
	}
	d.type = ncclProfileQp;
	d.qp.device = dev;
	d.qp.wr_id = wr_id;
	d.qp.opcode = opcode;
	d.qp.qpNum = (int)qpn;
	d.qp.length = len;
	res = nv_prof_cb(&ev, ncclProfilerNetEventStart, phandle,
			 (int64_t)(NCCL_PROFILER_NET_TYPE_IB | NCCL_PROFILER_NET_IB_VER), &d);
	if (res != ncclSuccess)
		nv_prof_failed(res, "start");
	else if (ev)
		r->prof_ev[r->prof_nev++] = ev;
}

void nv_prof_stop_all(struct nv_request *r)
{
	for (int i = 0; i < r->prof_nev; i++) {
		ncclResult_t res = nv_prof_cb ? nv_prof_cb(&r->prof_ev[i], ncclProfilerNetEventStop,
							   NULL, 0, NULL)
					      : ncclSuccess;

		if (res != ncclSuccess)
			nv_prof_failed(res, "stop");
	}
	r->prof_nev = 0;
}
