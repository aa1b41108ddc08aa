/*
 * admit.h - admission of connectors at a listener (admit.c): the set of TCP
 * connections that have not presented the secret yet, the backlog of
 * authenticated ones waiting for an accept call, and the listener's
 * rate-limited warnings.
 *
 * Contract (fairness under load):
 *  - At most NCCL_VERBS_LISTEN_PENDING connections wait for their hello.
 *    When a new one arrives and the set is full, the OLDEST connection that
 *    has sent nothing at all is dropped; one whose hello is arriving is
 *    never dropped for room (if all are, the newcomer is refused). So a
 *    flood of silent connections cannot crowd out a connector, which sends
 *    its hello as soon as TCP connects.
 *  - Authenticated connections queue in arrival order, up to
 *    NCCL_VERBS_LISTEN_BACKLOG (the queue grows as needed); the caller's
 *    accept calls take them one by one. Beyond the bound they are refused.
 *  - A refused or dropped connector is told why (NV_WST_BUSY /
 *    NV_WST_BACKLOG / NV_WST_BAD_SECRET); connectors retry BUSY and BACKLOG
 *    within their connect timeout and print the reason if they give up.
 *  - Every refusal is logged, but at most NV_ADMIT_WARN_BURST lines per
 *    NV_ADMIT_WARN_INTERVAL_NS; the rest go into one summary line per
 *    interval (count, sources, reasons).
 * Never blocks; one accept call takes at most NV_ADMIT_TAKE_MAX connections
 * off the kernel's queue.
 */
#ifndef NV_ADMIT_H
#define NV_ADMIT_H

#include <stdint.h>
#include "handshake.h"
#include "sock.h"

#define NV_ADMIT_WARN_BURST 16
#define NV_ADMIT_WARN_INTERVAL_NS 1000000000ull
#define NV_ADMIT_TAKE_MAX 1024
#define NV_ADMIT_SRC_MAX 4	/* sources named in a summary */

enum nv_refusal {
	NV_RF_TIMEOUT,		/* no valid hello within the connect timeout */
	NV_RF_CLOSED,		/* closed before its hello */
	NV_RF_BAD_HELLO,	/* garbage, other version, bad length */
	NV_RF_BAD_SECRET,
	NV_RF_EVICTED,		/* silent, dropped to make room */
	NV_RF_BUSY,		/* newcomer refused: every pending hello is arriving */
	NV_RF_BACKLOG,		/* authenticated, but the backlog is full */
	NV_RF_N
};

struct nv_pending {
	int fd;
	struct nv_sock_addr peer;
	uint64_t deadline_ns;
	uint8_t buf[NV_HELLO_MSG_SIZE];
	size_t off;
};

struct nv_admitted {
	int fd;
	struct nv_sock_addr peer;
	uint64_t conn_id;	/* the connector's nonce, from its hello */
};

struct nv_admit_log {
	uint64_t start_ns;	/* start of the current interval */
	int logged;		/* full lines in this interval */
	unsigned long count[NV_RF_N];	/* suppressed, per reason */
	unsigned long total;
	int nsrc, more_src;
	char src[NV_ADMIT_SRC_MAX][NV_SOCK_ADDR_STRLEN];
};

struct nv_admit {
	int lfd;
	const char *addr;		/* the listener's address, for messages */
	const uint8_t *secret;
	struct nv_pending *pend;	/* oldest first */
	int npend, max_pend;
	struct nv_admitted *back;	/* oldest first */
	int nback, cap_back, max_back;
	struct nv_admit_log log;
};

/* Bounds from NCCL_VERBS_LISTEN_PENDING / NCCL_VERBS_LISTEN_BACKLOG. */
nv_status_t nv_admit_init(struct nv_admit *a, int lfd, const char *addr, const uint8_t *secret);
/* Takes new connections and reads hellos (every accept call, also while an
 * accept is in progress, so admission never stalls behind a slow peer). */
void nv_admit_poll(struct nv_admit *a);
/* The oldest authenticated connection: 1 (*out filled, the fd is the caller's) or 0. */
int nv_admit_pop(struct nv_admit *a, struct nv_admitted *out);
/* Closes every pending and queued connection (telling queued ones why). */
void nv_admit_drop_all(struct nv_admit *a);
/* nv_admit_drop_all, the last summary line, and the arrays freed. */
void nv_admit_fini(struct nv_admit *a);

#endif /* NV_ADMIT_H */
