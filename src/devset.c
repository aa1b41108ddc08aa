/*
 * devset.c - bring-up and teardown of the device set: discovery (device.c),
 * then on each HCA the GPUDirect probe (gdr.c), the registration cache
 * (mr.c) and the async-event thread (event.c), then the table's last steps;
 * teardown in the reverse order. It owns the refcount of nv_devices_init.
 */
#include "config.h"

#include "devset.h"
#include "event.h"
#include "mr.h"

static int nv_refs;

/* Each HCA's event thread (they read the device table on GID_CHANGE) and
 * registration cache, then the table; both idempotent, so a partial start is
 * undone too. */
static void nv_devices_stop(void)
{
	for (int i = 0; i < nv_hca_count(); i++)
		nv_event_stop(nv_hca_get(i));
	for (int i = 0; i < nv_hca_count(); i++)
		nv_mr_hca_fini(nv_hca_get(i));
	nv_devices_free();
}

/* An HCA with at least one kept port: GPUDirect, registration cache, events. */
static nv_status_t nv_hca_start(struct nv_hca *h)
{
	nv_status_t st = nv_gdr_detect(h);

	if (st == NV_OK)
		st = nv_mr_hca_init(h);
	if (st == NV_OK)
		st = nv_event_start(h);
	return st;
}

static nv_status_t nv_devices_start(void)
{
	nv_status_t st;

	NV_CHECK_GOTO(nv_devices_scan(), st, err);
	for (int i = 0; i < nv_hca_count(); i++)
		NV_CHECK_GOTO(nv_hca_start(nv_hca_get(i)), st, err);
	NV_CHECK_GOTO(nv_devices_finish(), st, err);
	nv_event_dump_signal_setup();
	return NV_OK;
err:
	nv_devices_stop();
	return st;
}

nv_status_t nv_devices_init(void)
{
	nv_status_t st = NV_OK;

	nv_devices_lock();
	if (nv_refs == 0)
		st = nv_devices_start();
	if (st == NV_OK)
		nv_refs++;
	nv_devices_unlock();
	return st;
}

void nv_devices_fini(void)
{
	nv_devices_lock();
	if (nv_refs > 0 && --nv_refs == 0)
		nv_devices_stop();
	nv_devices_unlock();
}
