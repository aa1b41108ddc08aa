/*
 * failover.h - port failover of multi-device comms (NCCL_IB_RESILIENCY_PORT_FAILOVER,
 * failover.c). The protocol is described at the top of failover.c and in
 * docs/design.md ("Port failover").
 *
 * Contract with the data path (the completion engine, engine.c; its hooks
 * are listed in engine.h):
 *  - c->fo is NULL unless the knob is on and the comm has QPs on more than
 *    one device pair; every hook below is behind a c->fo test placed on a
 *    path that is already cold (an error completion, the slow half of the
 *    health check, the rate-limited liveness check), so a comm without
 *    failover runs the same instructions as before.
 *  - A detected failure sets NV_SINK_FAILOVER in c->sink.fatal, so the next
 *    call of the data path takes nv_comm_check's slow half, which runs
 *    nv_fo_check(). While a round is under way nv_fo_check() returns
 *    NV_FO_BUSY: isend/irecv give no request, test says "not done"; it never
 *    blocks and never waits for the peer inside one call, so one thread can
 *    drive both sides of a connection (and many comms) through a round.
 */
#ifndef NV_FAILOVER_H
#define NV_FAILOVER_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>
#include "comm.h"
#include "fo_msg.h"

/* plugin.c: after connect/accept returned comm (may leave failover off: INFO). */
void nv_fo_attach(void *comm);
/* plugin.c: before closeSend/closeRecv; gives the comm its own QP array back. */
void nv_fo_release(void *comm);

/* Rounds completed and messages sent again over the comm's life (tests; 0 when off). */
void nv_fo_stats(const struct nv_comm *c, unsigned *rounds, unsigned *resent);

/* The engine's hooks (see the contract above). */
nv_status_t nv_fo_check(struct nv_comm *c);
/* An error completion on device dev: 1 taken by failover (counts retired), 0 not. */
int nv_fo_wc_error(struct nv_comm *c, int dev, const struct ibv_wc *wc);
/* Liveness check while waiting: 1 when the peer started a round (socket readable). */
int nv_fo_peer_spoke(struct nv_comm *c);

#endif /* NV_FAILOVER_H */
