/*
 * devset.h - the device set's life: the first nv_devices_init() discovers the
 * devices and starts each HCA's services, the matching last nv_devices_fini()
 * stops them and frees the table (refcounted, so per-communicator
 * init/finalize and library reload work). devset.c; the table is device.c's.
 */
#ifndef NV_DEVSET_H
#define NV_DEVSET_H

#include "device.h"

nv_status_t nv_devices_init(void);  /* refcounted; first call discovers */
void nv_devices_fini(void);         /* last call tears everything down */

#endif /* NV_DEVSET_H */
