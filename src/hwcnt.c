/*
 * hwcnt.c - a port's NIC counters from sysfs (contract in hwcnt.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hwcnt.h"
#include "os.h"

struct nv_hwcnt_desc {
	const char *name;
	int loss;	/* counts a loss or its recovery */
};

static const struct nv_hwcnt_desc nv_hwcnt_table[NV_HWCNT_COUNT] = {
	[NV_HWCNT_PORT_XMIT_DATA] = { "port_xmit_data", 0 },
	[NV_HWCNT_PORT_RCV_DATA] = { "port_rcv_data", 0 },
	[NV_HWCNT_PORT_XMIT_PACKETS] = { "port_xmit_packets", 0 },
	[NV_HWCNT_PORT_RCV_PACKETS] = { "port_rcv_packets", 0 },
	[NV_HWCNT_PORT_XMIT_WAIT] = { "port_xmit_wait", 0 },
	[NV_HWCNT_PORT_XMIT_DISCARDS] = { "port_xmit_discards", 1 },
	[NV_HWCNT_PORT_RCV_ERRORS] = { "port_rcv_errors", 1 },
	[NV_HWCNT_LINK_DOWNED] = { "link_downed", 1 },
	[NV_HWCNT_LINK_ERROR_RECOVERY] = { "link_error_recovery", 1 },
	[NV_HWCNT_SYMBOL_ERROR] = { "symbol_error", 1 },
	[NV_HWCNT_LOCAL_LINK_INTEGRITY_ERRORS] = { "local_link_integrity_errors", 1 },
	[NV_HWCNT_EXCESSIVE_BUFFER_OVERRUN_ERRORS] = { "excessive_buffer_overrun_errors", 1 },
	[NV_HWCNT_OUT_OF_SEQUENCE] = { "out_of_sequence", 1 },
	[NV_HWCNT_PACKET_SEQ_ERR] = { "packet_seq_err", 1 },
	[NV_HWCNT_LOCAL_ACK_TIMEOUT_ERR] = { "local_ack_timeout_err", 1 },
	[NV_HWCNT_IMPLIED_NAK_SEQ_ERR] = { "implied_nak_seq_err", 1 },
	[NV_HWCNT_DUPLICATE_REQUEST] = { "duplicate_request", 1 },
	[NV_HWCNT_RNR_NAK_RETRY_ERR] = { "rnr_nak_retry_err", 1 },
	[NV_HWCNT_OUT_OF_BUFFER] = { "out_of_buffer", 1 },
	[NV_HWCNT_REQ_CQE_ERROR] = { "req_cqe_error", 1 },
	[NV_HWCNT_RESP_CQE_ERROR] = { "resp_cqe_error", 1 },
	[NV_HWCNT_NP_CNP_SENT] = { "np_cnp_sent", 0 },
	[NV_HWCNT_RP_CNP_HANDLED] = { "rp_cnp_handled", 0 },
	[NV_HWCNT_NP_ECN_MARKED_ROCE_PACKETS] = { "np_ecn_marked_roce_packets", 0 },
	[NV_HWCNT_ROCE_ADP_RETRANS] = { "roce_adp_retrans", 1 },
	[NV_HWCNT_ROCE_SLOW_RESTART] = { "roce_slow_restart", 1 },
	[NV_HWCNT_SENT_PKTS] = { "sent_pkts", 0 },
	[NV_HWCNT_RCVD_PKTS] = { "rcvd_pkts", 0 },
	[NV_HWCNT_OUT_OF_SEQ_REQUEST] = { "out_of_seq_request", 1 },
	[NV_HWCNT_RCVD_SEQ_ERR] = { "rcvd_seq_err", 1 },
	[NV_HWCNT_RETRY_EXCEEDED_ERR] = { "retry_exceeded_err", 1 },
	[NV_HWCNT_RETRY_RNR_EXCEEDED_ERR] = { "retry_rnr_exceeded_err", 1 },
	[NV_HWCNT_COMPLETER_RETRY_ERR] = { "completer_retry_err", 1 },
	[NV_HWCNT_RCVD_RNR_ERR] = { "rcvd_rnr_err", 1 },
	[NV_HWCNT_SEND_RNR_ERR] = { "send_rnr_err", 1 },
};

const char *nv_hwcnt_name(int id)
{
	return id >= 0 && id < NV_HWCNT_COUNT ? nv_hwcnt_table[id].name : NULL;
}

int nv_hwcnt_is_loss(int id)
{
	return id >= 0 && id < NV_HWCNT_COUNT && nv_hwcnt_table[id].loss;
}

/* One decimal counter file; 0 and *v set, or -1 (absent or not a number).
 * Read with open/read, never stdio: the HCA's event thread calls this, and a
 * FILE's malloc there made glibc map a new arena for that thread (memory and
 * mappings the process never gets back; fault_cycles counts them). */
static int nv_hwcnt_file(const char *path, uint64_t *v)
{
	char buf[64], *end;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	do
		n = read(fd, buf, sizeof(buf) - 1);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	errno = 0;
	*v = strtoull(buf, &end, 10);
	if (end == buf || errno || (*end && *end != '\n'))
		return -1;
	return 0;
}

int nv_hwcnt_read_dir(const char *dir, struct nv_hwcnt *out)
{
	static const char *const sub[] = { "counters", "hw_counters" };
	char path[4096];
	int id, s, n = 0;

	memset(out, 0, sizeof(*out));
	out->t_ns = nv_now_ns();
	for (id = 0; id < NV_HWCNT_COUNT; id++) {
		for (s = 0; s < 2; s++) {
			snprintf(path, sizeof(path), "%s/%s/%s", dir, sub[s], nv_hwcnt_table[id].name);
			if (nv_hwcnt_file(path, &out->v[id]) == 0) {
				out->present |= 1ull << id;
				n++;
				break;
			}
		}
	}
	return n;
}

int nv_hwcnt_read(const char *ibdev_path, int port, struct nv_hwcnt *out)
{
	char dir[4096];

	snprintf(dir, sizeof(dir), "%s/ports/%d", ibdev_path ? ibdev_path : "", port);
	return nv_hwcnt_read_dir(dir, out);
}

void nv_hwcnt_delta(const struct nv_hwcnt *before, const struct nv_hwcnt *after,
		    struct nv_hwcnt *delta)
{
	int id;

	memset(delta, 0, sizeof(*delta));
	delta->t_ns = after->t_ns > before->t_ns ? after->t_ns - before->t_ns : 0;
	for (id = 0; id < NV_HWCNT_COUNT; id++) {
		if (!nv_hwcnt_has(before, id) || !nv_hwcnt_has(after, id) ||
		    after->v[id] < before->v[id])
			continue;
		delta->present |= 1ull << id;
		delta->v[id] = after->v[id] - before->v[id];
	}
}

char *nv_hwcnt_format(const struct nv_hwcnt *c, int nonzero, int loss, char *buf, size_t len)
{
	size_t used = 0;
	int id, any = 0;

	if (!len)
		return buf;
	buf[0] = '\0';
	for (id = 0; id < NV_HWCNT_COUNT; id++) {
		int w;

		if (!nv_hwcnt_has(c, id) || (loss && !nv_hwcnt_table[id].loss))
			continue;
		any = 1;
		if (nonzero && !c->v[id])
			continue;
		w = snprintf(buf + used, len - used, "%s%s=%" PRIu64, used ? " " : "",
			     nv_hwcnt_table[id].name, c->v[id]);
		if (w < 0 || (size_t)w >= len - used) {
			buf[used] = '\0';
			break;
		}
		used += (size_t)w;
	}
	if (!used)
		snprintf(buf, len, "%s", any ? "all 0" : "none present");
	return buf;
}
