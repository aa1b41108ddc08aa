/*
 * nvcomm.h - what the unit tests that call the plugin's own functions
 * (linked with libnvcore, not loaded by dlopen: see nvplugin.h for those)
 * share: finding a device by name and connecting one send/receive comm pair.
 * Both end the test process (exit 1) when the set-up itself fails.
 */
#ifndef NV_COMM_TEST_H
#define NV_COMM_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "device.h"
#include "nv_api.h"

/* The index of the device (virtual NIC) named name. */
static inline int nvt_find_dev(const char *name)
{
	for (int i = 0; i < nv_vdev_count(); i++)
		if (!strcmp(nv_vdev_get(i)->name, name))
			return i;
	fprintf(stderr, "no device %s\n", name);
	exit(1);
}

/* A send comm on sdev connected to a receive comm on rdev (traffic class tc, -1: none). */
static inline void nvt_pair(int sdev, int rdev, int tc, struct nv_comm **s, struct nv_comm **r)
{
	char handle[128];
	void *lc, *sc = NULL, *rc = NULL;
	int i;

	if (nv_net_listen(NULL, rdev, handle, &lc) != NV_OK)
		exit(1);
	for (i = 0; (!sc || !rc) && i < 2000000; i++) {
		if (!sc && nv_net_connect(NULL, sdev, handle, tc, &sc) != NV_OK)
			exit(1);
		if (!rc && nv_net_accept(lc, &rc) != NV_OK)
			exit(1);
	}
	if (!sc || !rc) {
		fprintf(stderr, "connect/accept did not finish\n");
		exit(1);
	}
	nv_net_close_listen(lc);
	*s = sc;
	*r = rc;
}

#endif /* NV_COMM_TEST_H */
