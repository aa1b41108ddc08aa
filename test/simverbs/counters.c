/*
 * Port counters: what the model counts (loss.c, engine.c) per port, and the
 * sysfs files a NIC's driver exposes for them, under the names it uses:
 *   vendor=mellanox (mlx5): ports/<p>/counters/port_{xmit,rcv}_{data,packets}
 *     (data in 4-octet words, as the IB PMA counts it) and ports/<p>/hw_counters/
 *     out_of_sequence, packet_seq_err, local_ack_timeout_err, implied_nak_seq_err,
 *     duplicate_request, rnr_nak_retry_err, out_of_buffer,
 *     req_transport_retries_exceeded, req_rnr_retries_exceeded;
 *   the soft device (rxe): no counters/ directory (rxe has no PMA) and
 *     hw_counters/ sent_pkts, rcvd_pkts, duplicate_request, out_of_seq_request,
 *     rcvd_rnr_err, send_rnr_err, rcvd_seq_err, retry_exceeded_err,
 *     retry_rnr_exceeded_err, completer_retry_err.
 * A counter the model cannot count truthfully (port_xmit_wait, symbol_error,
 * ECN/CNP counters) has no file.
 *
 * Counting costs the data path one process-local relaxed add per counter:
 * each process accumulates and adds its sums to the fabric's per-port
 * counters at most every SV_CNT_FLUSH_NS (from its progress and idle-poll
 * paths) and when it detaches.  The files of a host's ports are rewritten
 * from the fabric's counters by one process at a time (sv_shm_host.cnt_writer),
 * so a file never goes backwards; they lag the traffic by at most that period
 * while some process of the host is active.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sv.h"

#define SV_CNT_FLUSH_NS 20000000ull

_Static_assert(SV_MAX_DEVICES * SV_MAX_PORTS <= 32, "a host's ports fit a dirty mask");

static _Atomic uint64_t sv_acc[SV_MAX_HOSTS][SV_MAX_DEVICES][SV_MAX_PORTS][SV_CNT_N];
static _Atomic uint32_t sv_acc_dirty[SV_MAX_HOSTS];	/* bit dev * SV_MAX_PORTS + port - 1 */
static _Atomic uint64_t sv_next_flush;

struct sv_cnt_file {
	const char *dir, *name;
	enum sv_cnt c;
	uint32_t div;		/* the file counts c / div */
};

static const struct sv_cnt_file sv_mlx_files[] = {
	{ "counters", "port_xmit_data", SV_CNT_XMIT_DATA, 4 },
	{ "counters", "port_rcv_data", SV_CNT_RCV_DATA, 4 },
	{ "counters", "port_xmit_packets", SV_CNT_XMIT_PKTS, 1 },
	{ "counters", "port_rcv_packets", SV_CNT_RCV_PKTS, 1 },
	{ "hw_counters", "out_of_sequence", SV_CNT_OOS, 1 },
	{ "hw_counters", "packet_seq_err", SV_CNT_SEQ_NAK, 1 },
	{ "hw_counters", "local_ack_timeout_err", SV_CNT_ACK_TIMEOUT, 1 },
	{ "hw_counters", "implied_nak_seq_err", SV_CNT_IMPLIED_NAK, 1 },
	{ "hw_counters", "duplicate_request", SV_CNT_DUP, 1 },
	{ "hw_counters", "rnr_nak_retry_err", SV_CNT_RNR_NAK_RCVD, 1 },
	{ "hw_counters", "out_of_buffer", SV_CNT_RNR_NAK_SENT, 1 },
	{ "hw_counters", "req_transport_retries_exceeded", SV_CNT_RETRY_EXC, 1 },
	{ "hw_counters", "req_rnr_retries_exceeded", SV_CNT_RNR_RETRY_EXC, 1 },
};

static const struct sv_cnt_file sv_rxe_files[] = {
	{ "hw_counters", "sent_pkts", SV_CNT_XMIT_PKTS, 1 },
	{ "hw_counters", "rcvd_pkts", SV_CNT_RCV_PKTS, 1 },
	{ "hw_counters", "duplicate_request", SV_CNT_DUP, 1 },
	{ "hw_counters", "out_of_seq_request", SV_CNT_OOS, 1 },
	{ "hw_counters", "rcvd_rnr_err", SV_CNT_RNR_NAK_RCVD, 1 },
	{ "hw_counters", "send_rnr_err", SV_CNT_RNR_NAK_SENT, 1 },
	{ "hw_counters", "rcvd_seq_err", SV_CNT_SEQ_NAK, 1 },
	{ "hw_counters", "retry_exceeded_err", SV_CNT_RETRY_EXC, 1 },
	{ "hw_counters", "retry_rnr_exceeded_err", SV_CNT_RNR_RETRY_EXC, 1 },
	{ "hw_counters", "completer_retry_err", SV_CNT_RETRIES, 1 },
};

/* Octets of headers per packet: RoCE v2 (Ethernet 14 + IPv4 20 + UDP 8 +
 * BTH 12 + ICRC 4 + FCS 4) or IB (LRH 8 + BTH 12 + ICRC 4 + VCRC 2). */
uint32_t sv_pkt_hdr(const struct sv_qp *qp)
{
	return qp->ctx->dev->link_layer == IBV_LINK_LAYER_ETHERNET ? 62 : 26;
}

void sv_cnt_add(uint32_t host, uint32_t dev, uint32_t port, enum sv_cnt c, uint64_t v)
{
	uint32_t bit;

	if (host >= SV_MAX_HOSTS || dev >= SV_MAX_DEVICES || port < 1 || port > SV_MAX_PORTS)
		return;
	bit = 1u << (dev * SV_MAX_PORTS + port - 1);

	atomic_fetch_add_explicit(&sv_acc[host][dev][port - 1][c], v, memory_order_relaxed);
	if (!(atomic_load_explicit(&sv_acc_dirty[host], memory_order_relaxed) & bit))
		atomic_fetch_or_explicit(&sv_acc_dirty[host], bit, memory_order_relaxed);
}

/* The packets of a work request that no loss touched: data one way, the
 * ACK (or the READ request) the other. */
void sv_cnt_op(struct sv_qp *qp, const struct sv_swqe *w)
{
	uint32_t mtu = 128u << (qp->attr.path_mtu ? qp->attr.path_mtu : IBV_MTU_1024);
	uint32_t n = w->length ? (w->length + mtu - 1) / mtu : 1, hdr = sv_pkt_hdr(qp);
	uint64_t data = (uint64_t)w->length + (uint64_t)n * hdr;
	uint32_t h = qp->sh->host, d = qp->sh->dev_idx, p = qp->sh->port;
	uint32_t ph, pd, pp;
	bool rd = w->opcode == IBV_WR_RDMA_READ;

	if (SV_UNLIKELY(w->ah)) {	/* UD: the datagram left (arrival: sv_do_ud) */
		sv_cnt_add(h, d, p, SV_CNT_XMIT_PKTS, 1);
		sv_cnt_add(h, d, p, SV_CNT_XMIT_DATA, data);
		return;
	}
	ph = qp->peer->host;
	pd = qp->peer->dev_idx;
	pp = qp->peer->port;
	sv_cnt_add(h, d, p, SV_CNT_XMIT_PKTS, rd ? 1 : n);
	sv_cnt_add(h, d, p, SV_CNT_XMIT_DATA, rd ? hdr : data);
	sv_cnt_add(h, d, p, SV_CNT_RCV_PKTS, rd ? n : 1);
	sv_cnt_add(h, d, p, SV_CNT_RCV_DATA, rd ? data : hdr);
	sv_cnt_add(ph, pd, pp, SV_CNT_RCV_PKTS, rd ? 1 : n);
	sv_cnt_add(ph, pd, pp, SV_CNT_RCV_DATA, rd ? hdr : data);
	sv_cnt_add(ph, pd, pp, SV_CNT_XMIT_PKTS, rd ? n : 1);
	sv_cnt_add(ph, pd, pp, SV_CNT_XMIT_DATA, rd ? data : hdr);
}

static void sv_cnt_write(const char *dir, const char *name, uint64_t v)
{
	char path[700], tmp[720], buf[32];
	int fd, n = snprintf(buf, sizeof(buf), "%llu\n", (unsigned long long)v);

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)sv_g.pid);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
	if (fd < 0)
		return;
	if (write(fd, buf, (size_t)n) != n) {
		close(fd);
		unlink(tmp);
		return;
	}
	close(fd);
	if (rename(tmp, path))
		unlink(tmp);
}

/* Rewrites the files of one port whose counters changed (all when new). */
static void sv_cnt_render_port(const struct sv_device *d, uint32_t p, struct sv_port_cnt *pc)
{
	bool mlx = d->identity == SV_IDENTITY_MELLANOX;
	const struct sv_cnt_file *t = mlx ? sv_mlx_files : sv_rxe_files;
	size_t nt = mlx ? sizeof(sv_mlx_files) / sizeof(*t) : sizeof(sv_rxe_files) / sizeof(*t);
	char dir[600];

	for (size_t i = 0; i < nt; i++) {
		uint64_t v = atomic_load_explicit(&pc->v[t[i].c], memory_order_relaxed);

		if (pc->rendered && v / t[i].div == pc->written[t[i].c] / t[i].div)
			continue;
		snprintf(dir, sizeof(dir), "%s/class/infiniband/%s/ports/%u/%s", sv_g.sysfs_root,
			 d->ibv.name, p, t[i].dir);
		if (!pc->rendered)
			mkdir(dir, 0755);
		sv_cnt_write(dir, t[i].name, v / t[i].div);
		pc->written[t[i].c] = v;	/* what that file now says */
	}
	pc->rendered = 1;
}

/* Rewrites this host's counter files (one writer per host at a time). */
static void sv_cnt_render(void)
{
	struct sv_shm_host *h;
	int32_t holder = 0;

	if (!sv_g.fab || !sv_g.attached || sv_g.host >= SV_MAX_HOSTS || !sv_g.sysfs_root[0])
		return;
	h = &sv_g.fab->hosts[sv_g.host];
	if (!atomic_compare_exchange_strong(&h->cnt_writer, &holder, sv_g.pid)) {
		if (sv_pid_alive(holder) ||
		    !atomic_compare_exchange_strong(&h->cnt_writer, &holder, sv_g.pid))
			return;	/* another process is writing them */
	}
	for (int i = 0; i < sv_g.ndevs; i++) {
		const struct sv_device *d = &sv_g.devs[i];

		for (uint32_t p = 1; p <= d->nports && p <= SV_MAX_PORTS; p++)
			sv_cnt_render_port(d, p, &h->devs[d->idx].cnt[p - 1]);
	}
	atomic_store(&h->cnt_writer, 0);
}

/* Adds this process's sums to the fabric's counters and rewrites the files. */
void sv_cnt_flush(void)
{
	if (!sv_g.fab || !sv_g.attached)
		return;
	for (int h = 0; h < SV_MAX_HOSTS; h++) {
		uint32_t dirty = atomic_exchange(&sv_acc_dirty[h], 0);

		for (int b = 0; dirty; b++, dirty >>= 1) {
			struct sv_port_cnt *pc;

			if (!(dirty & 1))
				continue;
			pc = &sv_g.fab->hosts[h].devs[b / SV_MAX_PORTS].cnt[b % SV_MAX_PORTS];
			for (int c = 0; c < SV_CNT_N; c++) {
				uint64_t v = atomic_exchange_explicit(
					&sv_acc[h][b / SV_MAX_PORTS][b % SV_MAX_PORTS][c], 0,
					memory_order_relaxed);

				if (v)
					atomic_fetch_add(&pc->v[c], v);
			}
		}
	}
	sv_cnt_render();
}

/* From the progress and idle-poll paths: a flush at most every SV_CNT_FLUSH_NS. */
void sv_cnt_tick(uint64_t now)
{
	uint64_t next = atomic_load_explicit(&sv_next_flush, memory_order_relaxed);

	if (SV_LIKELY(now < next) ||
	    !atomic_compare_exchange_strong(&sv_next_flush, &next, now + SV_CNT_FLUSH_NS))
		return;
	sv_cnt_flush();
}
