/* e2e_script.h - the traffic pattern shared by the multi-process tests. */
#ifndef NV_E2E_SCRIPT_H
#define NV_E2E_SCRIPT_H

#include <stddef.h>
#include <stdint.h>
#include "e2e.h"

/* The largest message the device takes (maxP2pBytes; NCCL sends no more): the big
 * sizes are cut down to it (0: no limit). Both sides set the same. */
void e2e_script_max(size_t max);
/* Buffer both sides need (registered as one region). */
size_t e2e_script_bufsize(int big);
void e2e_script_send(struct e2e_net *n, void *sc, char *buf, void *mh, int big, uint32_t salt);
void e2e_script_recv(struct e2e_net *n, void *rc, char *buf, void *mh, int big, int maxrecvs,
		     uint32_t salt);

#endif /* NV_E2E_SCRIPT_H */
