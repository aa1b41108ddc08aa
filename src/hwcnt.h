/*
 * hwcnt.h - a port's NIC counters from sysfs (hwcnt.c): the files of
 * <ibdev_path>/ports/<p>/counters/ and hw_counters/ that mlx5 and rxe
 * expose, read into one struct. A counter the device does not have is
 * absent (its bit in `present` clear), never 0; a delta holds only the
 * counters present in both readings, and a counter that went backwards
 * (reset, wrapped) is absent from it. Control path only: each read opens
 * one file per known name. No locks, no state; the caller owns the structs.
 */
#ifndef NV_HWCNT_H
#define NV_HWCNT_H

#include <stddef.h>
#include <stdint.h>

enum nv_hwcnt_id {
	/* counters/ (IBA PortCounters; port_*_data in 4-byte words) */
	NV_HWCNT_PORT_XMIT_DATA,
	NV_HWCNT_PORT_RCV_DATA,
	NV_HWCNT_PORT_XMIT_PACKETS,
	NV_HWCNT_PORT_RCV_PACKETS,
	NV_HWCNT_PORT_XMIT_WAIT,
	NV_HWCNT_PORT_XMIT_DISCARDS,
	NV_HWCNT_PORT_RCV_ERRORS,
	NV_HWCNT_LINK_DOWNED,
	NV_HWCNT_LINK_ERROR_RECOVERY,
	NV_HWCNT_SYMBOL_ERROR,
	NV_HWCNT_LOCAL_LINK_INTEGRITY_ERRORS,
	NV_HWCNT_EXCESSIVE_BUFFER_OVERRUN_ERRORS,
	/* hw_counters/: mlx5 */
	NV_HWCNT_OUT_OF_SEQUENCE,
	NV_HWCNT_PACKET_SEQ_ERR,
	NV_HWCNT_LOCAL_ACK_TIMEOUT_ERR,
	NV_HWCNT_IMPLIED_NAK_SEQ_ERR,
	NV_HWCNT_DUPLICATE_REQUEST,
	NV_HWCNT_RNR_NAK_RETRY_ERR,
	NV_HWCNT_OUT_OF_BUFFER,
	NV_HWCNT_REQ_CQE_ERROR,
	NV_HWCNT_RESP_CQE_ERROR,
	NV_HWCNT_NP_CNP_SENT,
	NV_HWCNT_RP_CNP_HANDLED,
	NV_HWCNT_NP_ECN_MARKED_ROCE_PACKETS,
	NV_HWCNT_ROCE_ADP_RETRANS,
	NV_HWCNT_ROCE_SLOW_RESTART,
	/* hw_counters/: rxe */
	NV_HWCNT_SENT_PKTS,
	NV_HWCNT_RCVD_PKTS,
	NV_HWCNT_OUT_OF_SEQ_REQUEST,
	NV_HWCNT_RCVD_SEQ_ERR,
	NV_HWCNT_RETRY_EXCEEDED_ERR,
	NV_HWCNT_RETRY_RNR_EXCEEDED_ERR,
	NV_HWCNT_COMPLETER_RETRY_ERR,
	NV_HWCNT_RCVD_RNR_ERR,
	NV_HWCNT_SEND_RNR_ERR,
	NV_HWCNT_COUNT
};
_Static_assert(NV_HWCNT_COUNT <= 64, "present is a 64-bit mask");

/* One reading (or a delta) of one port. */
struct nv_hwcnt {
	uint64_t present;		/* bit i: v[i] was read */
	uint64_t v[NV_HWCNT_COUNT];
	uint64_t t_ns;			/* reading: when (nv_now_ns); delta: the span */
};

/* The sysfs file name of counter id ("port_xmit_data"); NULL out of range. */
const char *nv_hwcnt_name(int id);
/* 1 for counters that count loss or recovery (sequence errors, timeouts, retries, ...). */
int nv_hwcnt_is_loss(int id);
/* 1 when counter id is present in c. */
static inline int nv_hwcnt_has(const struct nv_hwcnt *c, int id)
{
	return id >= 0 && id < NV_HWCNT_COUNT && (c->present >> id) & 1;
}
/*
 * Reads every known counter of the port directory dir (".../ports/1"), from
 * counters/<name>, else hw_counters/<name>. Returns how many were present
 * (0: none, e.g. no such directory).
 */
int nv_hwcnt_read_dir(const char *dir, struct nv_hwcnt *out);
/* The same for port `port` of the device at ibdev_path (ibv_device.ibdev_path). */
int nv_hwcnt_read(const char *ibdev_path, int port, struct nv_hwcnt *out);
/* after - before, for the counters present in both that did not go backwards. */
void nv_hwcnt_delta(const struct nv_hwcnt *before, const struct nv_hwcnt *after,
		    struct nv_hwcnt *delta);
/*
 * "name=N name=N ..." of the counters present in c, of only the non-zero
 * ones when nonzero is set, of only the loss counters when loss is set;
 * "none present" when c has none of those, "all 0" when they are all 0.
 * Returns buf (always terminated).
 */
char *nv_hwcnt_format(const struct nv_hwcnt *c, int nonzero, int loss, char *buf, size_t len);

#endif /* NV_HWCNT_H */
