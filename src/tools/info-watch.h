/*
 * info-watch.h - nccl-net-verbs-info --watch (nccl-net-verbs-info-watch.c):
 * the ports' NIC counters each interval, their rates and a loss diagnosis.
 */
#ifndef NV_INFO_WATCH_H
#define NV_INFO_WATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "hwcnt.h"

/* Reads every port's counters every interval_s seconds, count times (<= 0:
 * until killed), printing rates, the loss counters that moved and the
 * diagnosis. 0, or 1 when there is no device. */
int nv_info_watch(double interval_s, long count);
/* The diagnosis line for port `name` from delta d over span_s seconds;
 * false and "" when d shows no loss. tc: the traffic class in words. */
bool nv_watch_diagnose(const char *name, bool roce, const struct nv_hwcnt *d, double span_s,
		       const char *tc, char *buf, size_t len);

#endif /* NV_INFO_WATCH_H */
