/*
 * fo_state.h - the failover state of one comm, shared by the round
 * (failover.c) and detection, recovery checks and attach (fo_detect.c).
 * Private to those two files; the data path sees failover.h only.
 */
#ifndef NV_FO_STATE_H
#define NV_FO_STATE_H

#include "failover.h"

#define NV_FO_MARKER 0xfffffffeu	/* wr_id index of a drain marker */
#define NV_FO_MSG_MAX (NV_FO_HDR_SIZE + NV_FO_PAYLOAD_MAX)
_Static_assert(NV_FO_MAX_RECS == NV_FIFO_SLOTS && NV_CTS_MAX_RECVS == NV_MAX_RECVS,
	       "a STATE holds one record per open receive");

enum nv_fo_state {
	NV_FO_IDLE = 0,
	NV_FO_DRAIN,		/* QPs to error, waiting for their queues to empty */
	NV_FO_XCHG,		/* our STATE sent (or being sent), waiting for the peer's */
	NV_FO_READY,		/* restarted; READY sent, waiting for the peer's */
	NV_FO_RESEND,		/* sender: posting the messages to send again */
	NV_FO_HOLD,		/* NCCL_VERBS_LINK_HOLD_MS: no device pair left, waiting for one */
};

struct nv_fo {
	int state;			/* enum nv_fo_state */
	int failover;			/* NCCL_IB_RESILIENCY_PORT_FAILOVER applies (several devices) */
	uint64_t hold_ns;		/* NCCL_VERBS_LINK_HOLD_MS in ns, 0 = off */
	uint64_t hold_t0, hold_until;	/* this hold's start and end (0: not holding) */
	uint64_t hold_retry_ns;		/* back-off between recovery attempts of one hold */
	char hold_gid[96];		/* GID indexes that moved, for the recovered line */
	uint32_t epoch;			/* rounds completed (the PSNs follow it) */
	uint32_t dead_local;		/* our failed devices (until recovered) */
	uint32_t dead_peer;		/* the peer's, as its last STATE said */
	uint32_t revive;		/* recovery: local devices taken back in this round */
	uint64_t t_dead[NV_COMM_MAX_DEVS];	/* when each local device was found failed */
	uint16_t revivals[NV_COMM_MAX_DEVS];	/* recoveries per local device (<= 1000) */
	uint32_t blame;			/* local devices found failed in this round */
	uint32_t suspect;		/* local devices with errors the peer may explain */
	uint32_t sus_sent;		/* suspects our STATE of this round named (undecided) */
	uint32_t later;			/* found after our STATE left: the next round */
	uint32_t sent_dead;		/* dead_local when the last round ended */
	uint64_t next_revive;		/* recovery: the next look at the ports (ns) */
	int round_failed;		/* this round has newly failed devices (not only recovery) */
	int initiator;			/* we saw a failure (not only the peer's message) */
	int errored;			/* our QPs were moved to error in this round */
	int peer_spoke;			/* the socket had data while we were idle */
	int state_in;			/* the peer's STATE of this round is in `in` */
	int scan;			/* look at ports, HCAs and QP states */
	uint64_t t0, deadline;		/* round start, its time limit (ns) */
	char first[160];		/* the first failure seen in this round */
	int nall, nq0;			/* the handshake's QP count and QPs per message */
	struct nv_comm_qp *all;		/* the handshake's QP array */
	struct nv_comm_qp *live;	/* the surviving ones (c->qps after a round) */
	uint8_t lidx[NV_WIRE_MAX_QPS];	/* live[j] is all[lidx[j]] */
	uint8_t qerr[NV_WIRE_MAX_QPS];	/* live QP j had an error completion */
	uint8_t mark[NV_WIRE_MAX_QPS];	/* drain marker: 0 none, 1 posted, 2 completed */
	struct nv_fo_hdr peer;		/* header of the message in `in` */
	size_t out_len, out_off, in_off;
	uint64_t resend[NV_FIFO_SLOTS];	/* sender: sequences to post again, ascending */
	int nresend, iresend, nresent;
	uint64_t att_seq[NV_FIFO_SLOTS];	/* per slot: message and the failovers it saw */
	uint16_t att_n[NV_FIFO_SLOTS];
	uint8_t out[NV_FO_MSG_MAX];
	uint8_t in[NV_FO_MSG_MAX];
};

/* fo_detect.c */
/* "send comm to" / "receive comm from", for messages. */
const char *nv_fo_kind(const struct nv_comm *c);
/* Keeps the first failure's text of the round (for the WARN). */
void nv_fo_note(struct nv_fo *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Keeps the comm on the slow path until the round is over. */
void nv_fo_arm(struct nv_comm *c);
/* Ports, HCAs and QP states: blames what failed (syscalls: after an event only). */
void nv_fo_scan(struct nv_comm *c);
/* Async events recorded into the comm's sink: noted and cleared (scan follows). */
void nv_fo_take_events(struct nv_comm *c);
/* Recovery: failed local devices that may be taken back now (*wait: soon). */
uint32_t nv_fo_revivable(struct nv_comm *c, int *wait);
/* Hold: device d's GID chosen again (its index may have moved); its port GID changed: fails. */
nv_status_t nv_fo_gid_again(struct nv_comm *c, int d);
/* 1 when the comm has requests NCCL has not seen complete. */
int nv_fo_requests_open(const struct nv_comm *c);

#endif /* NV_FO_STATE_H */
