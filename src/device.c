/*
 * device.c - discovery of ACTIVE IB/RoCE ports, the refcounted global device
 * table, virtual NICs, the per-port GID cache and PD refcounts. The
 * properties NCCL sees are in props.c, the async-event thread in event.c,
 * GPUDirect detection in gdr.c, the pure decisions (NCCL_IB_HCA, speed, GID
 * rule) in select.c, and the bring-up and teardown of the whole set (the
 * refcount, each HCA's GPUDirect probe, registration cache and event thread)
 * in devset.c, which calls the steps here.
 *
 * Locking: nv_dev_lock (nv_devices_lock) serializes init/fini/makeVDevice. Readers (devices,
 * getProperties, the comm layer) only run between init and fini, while the
 * table is stable; makeVDevice appends a fully built entry and then publishes
 * the new count (release), so concurrent readers see either count.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "device.h"
#include "ibv.h"
#include "param.h"
#include "select.h"

static pthread_mutex_t nv_dev_lock = PTHREAD_MUTEX_INITIALIZER;
static int nv_nhca;
static struct nv_hca *nv_hcas[NV_MAX_DEVS];
static int nv_ndev;
static struct nv_dev *nv_devs[NV_MAX_DEVS];
static atomic_int nv_nvdev;
static struct nv_vdev *nv_vdevs; /* NV_MAX_VDEVS entries */

int nv_dev_count(void)
{
	return nv_ndev;
}

struct nv_dev *nv_dev_get(int index)
{
	return (index >= 0 && index < nv_ndev) ? nv_devs[index] : NULL;
}

int nv_vdev_count(void)
{
	return atomic_load_explicit(&nv_nvdev, memory_order_acquire);
}

const struct nv_vdev *nv_vdev_get(int index)
{
	return (index >= 0 && index < nv_vdev_count()) ? &nv_vdevs[index] : NULL;
}

/* The PCI address ending a sysfs path ("0000:03:00.1") as one hex number, as
 * NCCL orders devices by (NCCL_IB_DEVICE_PCI_ORDER); -1 if there is none. */
static int64_t nv_pci_busid(const char *path)
{
	const char *s = strrchr(path, '/');
	int64_t id = 0;
	int digits = 0;

	for (s = s ? s + 1 : path; *s && digits < 15; s++) {
		if (*s == ':' || *s == '.')
			continue;
		if (!isxdigit((unsigned char)*s))
			break;
		id = id << 4 | (isdigit((unsigned char)*s) ? *s - '0' : (tolower(*s) - 'a' + 10));
		digits++;
	}
	return digits ? id : -1;
}

/* realpath(<ibdev_path>/device), with the PCI function digit zeroed as NCCL
 * does so that the ports/functions of one NIC sit on one PCI node; *busid: the
 * unmerged address (nv_pci_busid). */
static void nv_hca_pci_path(struct ibv_device *dev, char *out, size_t len, int64_t *busid)
{
	char path[PATH_MAX + 16], real[PATH_MAX];
	size_t n;

	out[0] = '\0';
	*busid = -1;
	snprintf(path, sizeof(path), "%s/device", dev->ibdev_path);
	if (!realpath(path, real)) {
		NV_INFO(NV_SUB_INIT | NV_SUB_NET, "%s: no PCI path (%s: %s); NCCL will place it "
			"on CPU 0", nv_ibv_device_name(dev), path, strerror(errno));
		return;
	}
	*busid = nv_pci_busid(real);
	n = strlen(real);
	if (n > 2 && real[n - 2] == '.')
		real[n - 1] = '0';
	/* NCCL_IB_MERGE_VFS: the device number too (bus:DD.F), so the virtual
	 * functions of one NIC count as one PCI device, as in NCCL */
	if (n > 4 && real[n - 2] == '.' && nv_param_int(NV_PARAM_IB_MERGE_VFS))
		real[n - 3] = real[n - 4] = '0';
	snprintf(out, len, "%s", real);
}

/* Port speed in Mb/s: ibv_query_port_speed when the loaded libibverbs has it
 * (exact for XDR and beyond), else from the speed and width codes, as NCCL. */
static int nv_dev_speed(struct nv_hca *h, int port, uint32_t speed, uint8_t width)
{
	uint64_t mbps = 0;

	if (nv_param_int(NV_PARAM_IB_QUERY_PORT_SPEED) &&
	    nv_ibv_query_port_speed_probe(h->ctx, (uint8_t)port, &mbps) == 0 && mbps &&
	    mbps <= INT32_MAX)
		return (int)mbps;
	return nv_port_speed_mbps(speed, width);
}

void nv_dev_speed_refresh(struct nv_hca *h, int port)
{
	for (int i = 0; i < nv_dev_count(); i++) {
		struct nv_dev *d = nv_dev_get(i);
		struct ibv_port_attr pa;
		int before, now;

		if (!d || d->hca != h || (port > 0 && d->port != port) ||
		    nv_ibv_query_port(h->ctx, (uint8_t)d->port, &pa) != NV_OK)
			continue;
		before = d->speed_mbps;
		now = nv_dev_speed(h, d->port, pa.active_speed, pa.active_width);
		__atomic_store_n(&d->speed_mbps, now, __ATOMIC_RELAXED); /* comms read it (lb.c) */
		NV_INFO(NV_SUB_NET, "%s:%d speed %d -> %d Mbps (IBV_EVENT_DEVICE_SPEED_CHANGE); %s",
			h->name, d->port, before, now, nv_param_int(NV_PARAM_IB_EVENT_BASED_LB)
				? "its fused-NIC comms weigh their devices again (NCCL_IB_EVENT_BASED_LB)"
				: "the comms keep their equal split (NCCL_IB_EVENT_BASED_LB=0)");
	}
}

static bool nv_relaxed_ordering_allowed(const char *name)
{
	int64_t mode = nv_param_int(NV_PARAM_IB_PCI_RELAXED_ORDERING);

	if (mode == 0)
		return false;
	if (!nv_ibv_have_iova2()) {
		if (mode == 1)
			NV_INFO(NV_SUB_INIT, "%s: NCCL_IB_PCI_RELAXED_ORDERING=1 but libibverbs "
				"has no ibv_reg_mr_iova2; relaxed ordering off", name);
		return false;
	}
	return true;
}

static nv_status_t nv_hca_open(struct ibv_device *idev, struct nv_hca **out)
{
	struct nv_hca *h = calloc(1, sizeof(*h));
	nv_status_t st;

	if (!h) {
		NV_WARN("out of memory opening %s", nv_ibv_device_name(idev));
		return NV_ERR_SYSTEM;
	}
	snprintf(h->name, sizeof(h->name), "%s", nv_ibv_device_name(idev));
	pthread_mutex_init(&h->lock, NULL);
	h->event_stop_fd = h->event_wake_fd = -1;
	NV_CHECK_GOTO(nv_ibv_open_device(idev, &h->ctx), st, err_free);
	NV_CHECK_GOTO(nv_ibv_query_device(h->ctx, &h->attr), st, err_close);
	nv_hca_pci_path(idev, h->pci_path, sizeof(h->pci_path), &h->pci_busid);
	*out = h;
	return NV_OK;
err_close:
	nv_ibv_close_device(h->ctx);
err_free:
	pthread_mutex_destroy(&h->lock);
	free(h);
	return st;
}

/* An HCA's event thread and registration cache were stopped (devset.c), or never started. */
static void nv_hca_close(struct nv_hca *h)
{
	if (!h)
		return;
	if (h->pd_refs)
		NV_WARN("%s: %d PD reference(s) still held at teardown (a comm was not closed)",
			h->name, h->pd_refs);
	if (h->pd && nv_ibv_dealloc_pd(h->pd) == NV_OK)
		h->pd = NULL;
	if (h->ctx)
		nv_ibv_close_device(h->ctx);
	h->ctx = NULL;
	pthread_mutex_destroy(&h->lock);
	free(h);
}

nv_status_t nv_dev_gid_table(struct nv_dev *d, struct nv_gid_entry **table, int *count)
{
	/* IB: GID 0 and, for IB routers, the routable-FLID index */
	int n = d->link_layer == IBV_LINK_LAYER_INFINIBAND
			? (int)nv_param_int(NV_PARAM_IB_ROUTABLE_FLID_GID_INDEX) + 1 : d->gid_tbl_len;

	if (n > d->gid_tbl_len && d->link_layer == IBV_LINK_LAYER_INFINIBAND)
		n = d->gid_tbl_len;
	struct nv_gid_entry *tbl;
	bool legacy = false;

	if (n < 1)
		n = 1;
	tbl = calloc((size_t)n, sizeof(*tbl));
	if (!tbl) {
		NV_WARN("%s: out of memory reading %d GIDs", d->name, n);
		return NV_ERR_SYSTEM;
	}
	for (int i = 0; i < n; i++) {
		struct ibv_gid_entry e;
		int err = legacy ? EOPNOTSUPP : nv_ibv_query_gid_ex_probe(d->hca->ctx, d->port, i, &e);

		tbl[i].type = -1;
		if (err == ENODATA) {
			tbl[i].readable = true; /* empty slot: reads as a zero GID, skipped */
		} else if (err == 0) {
			memcpy(tbl[i].gid.raw, e.gid.raw, 16);
			tbl[i].type = (int)e.gid_type;
			tbl[i].readable = true;
		} else if (err == EOPNOTSUPP || err == ENOSYS) {
			legacy = true; /* no gid_ex: plain GIDs, RoCE version unknown */
			tbl[i].readable = nv_ibv_query_gid_probe(d->hca->ctx, d->port, i,
								 &tbl[i].gid) == 0;
		}
	}
	*table = tbl;
	*count = n;
	return NV_OK;
}

/* Snapshot the port's GID table and run the selection rule. */
static nv_status_t nv_dev_gid_compute(struct nv_dev *d, struct nv_gid_info *out)
{
	struct nv_gid_policy pol;
	struct nv_gid_entry *tbl;
	nv_status_t st;
	int n;

	st = nv_gid_policy_init(&pol, (int)nv_param_int(NV_PARAM_IB_GID_INDEX),
				(int)nv_param_int(NV_PARAM_IB_ROCE_VERSION_NUM),
				nv_param_str(NV_PARAM_IB_ADDR_FAMILY), nv_param_str(NV_PARAM_IB_ADDR_RANGE));
	if (st == NV_OK)
		st = nv_dev_gid_table(d, &tbl, &n);
	if (st != NV_OK)
		return st;
	if (d->link_layer == IBV_LINK_LAYER_INFINIBAND)
		/* GID 0, or the routable FLID one */
		pol.forced_index = nv_ib_gid_index(tbl, n,
						   (int)nv_param_int(NV_PARAM_IB_ROUTABLE_FLID_GID_INDEX));
	nv_gid_select(tbl, n, &pol, out);
	free(tbl);
	if (d->link_layer == IBV_LINK_LAYER_INFINIBAND && out->index >= 0) {
		char g[INET6_ADDRSTRLEN];

		snprintf(out->why, sizeof(out->why), "index %d %s (InfiniBand: LID %u routing%s, GRH %s)",
			 out->index, nv_ibv_gid_str(&out->gid, g, sizeof(g)), d->lid,
			 out->index ? "; routable FLID GID (NCCL_IB_ROUTABLE_FLID_GID_INDEX)" : "",
			 d->grh_required ? "required by the port" : "only across subnets");
	}
	return NV_OK;
}

nv_status_t nv_dev_gid(struct nv_dev *d, struct nv_gid_info *out)
{
	nv_status_t st = NV_OK;

	pthread_mutex_lock(&d->gid_lock);
	if (atomic_exchange(&d->gid_stale, 0)) {
		st = nv_dev_gid_compute(d, &d->gid);
		NV_INFO(NV_SUB_INIT | NV_SUB_NET, "%s:%d GID %s", d->hca->name, d->port, d->gid.why);
	}
	*out = d->gid;
	pthread_mutex_unlock(&d->gid_lock);
	if (st == NV_OK && out->index < 0) {
		NV_WARN("%s:%d has no usable GID: %s", d->hca->name, d->port, out->why);
		st = NV_ERR_USAGE;
	}
	return st;
}

static nv_status_t nv_dev_add(struct nv_hca *h, uint8_t port, const struct ibv_port_attr *pa,
			      int16_t rail, int16_t plane)
{
	struct nv_dev *d;

	if (nv_ndev >= NV_MAX_DEVS) {
		NV_WARN("more than %d ports found; ignoring %s:%d (use NCCL_IB_HCA)", NV_MAX_DEVS,
			h->name, port);
		return NV_OK;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		NV_WARN("out of memory adding %s:%d", h->name, port);
		return NV_ERR_SYSTEM;
	}
	d->hca = h;
	d->port = port;
	d->link_layer = pa->link_layer == IBV_LINK_LAYER_ETHERNET ? IBV_LINK_LAYER_ETHERNET
								  : IBV_LINK_LAYER_INFINIBAND;
	d->lid = pa->lid;
	d->sm_sl = pa->sm_sl;
	d->active_mtu = pa->active_mtu;
	d->grh_required = (pa->flags & IBV_QPF_GRH_REQUIRED) != 0;
#ifdef HAVE_STRUCT_IBV_PORT_ATTR_ACTIVE_SPEED_EX
	d->active_speed = pa->active_speed_ex ? pa->active_speed_ex : pa->active_speed; /* XDR */
#else
	d->active_speed = pa->active_speed;
#endif
	d->active_width = pa->active_width;
	d->speed_mbps = nv_dev_speed(h, port, d->active_speed, d->active_width);
	d->gid_tbl_len = pa->gid_tbl_len;
	d->max_msg_sz = pa->max_msg_sz ? pa->max_msg_sz : 1u << 31; /* 0: not reported */
	d->guid = h->attr.sys_image_guid;
	d->rail = rail;
	d->plane = plane;
	pthread_mutex_init(&d->gid_lock, NULL);
	atomic_store(&d->gid_stale, 1);
	nv_devs[nv_ndev++] = d;
	return NV_OK;
}

/* NCCL_IB_PKEY is an index into the port's P_Key table: it must exist and
 * hold a valid P_Key, or every QP on the port would fail its move to INIT. */
static bool nv_port_pkey_ok(struct nv_hca *h, int port, const struct ibv_port_attr *pa)
{
	int idx = (int)nv_param_int(NV_PARAM_IB_PKEY);
	uint16_t pkey = 0;

	if (idx >= pa->pkey_tbl_len) {
		NV_WARN("NCCL_IB_PKEY=%d: %s:%d has %d P_Key table entr%s (indexes 0..%d); port "
			"skipped", idx, h->name, port, pa->pkey_tbl_len,
			pa->pkey_tbl_len == 1 ? "y" : "ies", pa->pkey_tbl_len - 1);
		return false;
	}
	if (nv_ibv_query_pkey(h->ctx, (uint8_t)port, idx, &pkey) != NV_OK)
		return false; /* logged, naming the knob */
	pkey = ntohs(pkey);
	if ((pkey & 0x7fff) == 0) {
		NV_WARN("NCCL_IB_PKEY=%d: entry %d of %s:%d's P_Key table is empty (0x%04x); port "
			"skipped", idx, idx, h->name, port, pkey);
		return false;
	}
	return true;
}

/* Keeps each ACTIVE IB/Ethernet port of one device that passes the filter. */
static nv_status_t nv_scan_hca(struct ibv_device *idev, const struct nv_hca_filter *f)
{
	struct nv_hca *h = NULL;
	int kept = 0;
	nv_status_t st;

	const char *skip = nv_transport_skip_reason(idev->transport_type);

	if (skip) {
		NV_INFO(NV_SUB_INIT | NV_SUB_NET, "%s skipped: %s", nv_ibv_device_name(idev), skip);
		return NV_OK;
	}
	if (nv_hca_open(idev, &h) != NV_OK)
		return NV_OK; /* logged; other devices may still work */
	for (int p = 1; p <= h->attr.phys_port_cnt; p++) {
		struct ibv_port_attr pa;
		int16_t rail, plane;

		if (nv_ibv_query_port(h->ctx, (uint8_t)p, &pa) != NV_OK)
			continue;
		if (pa.state != IBV_PORT_ACTIVE) {
			NV_INFO(NV_SUB_INIT | NV_SUB_NET, "%s:%d skipped: port %s", h->name, p,
				nv_ibv_port_state_str(pa.state));
			continue;
		}
		if (pa.link_layer != IBV_LINK_LAYER_INFINIBAND &&
		    pa.link_layer != IBV_LINK_LAYER_ETHERNET &&
		    pa.link_layer != IBV_LINK_LAYER_UNSPECIFIED)
			continue;
		if (!nv_hca_filter_match(f, h->name, p, &rail, &plane)) {
			NV_INFO(NV_SUB_INIT | NV_SUB_NET, "%s:%d skipped by NCCL_IB_HCA", h->name, p);
			continue;
		}
		if (!nv_port_pkey_ok(h, p, &pa))
			continue;
		NV_CHECK_GOTO(nv_dev_add(h, (uint8_t)p, &pa, rail, plane), st, err);
		kept++;
	}
	if (!kept) {
		nv_hca_close(h);
		return NV_OK;
	}
	h->relaxed_ordering = nv_relaxed_ordering_allowed(h->name);
	h->order = nv_nhca;
	nv_hcas[nv_nhca++] = h;
	return NV_OK;
err:
	nv_hca_close(h);
	return st;
}

/* As NCCL (NCCL_IB_DEVICE_PCI_ORDER=1): by the PCI address, devices without
 * one last; otherwise, and among ports of one device, the verbs list's order. */
static int nv_dev_cmp(const void *a, const void *b)
{
	const struct nv_dev *x = *(struct nv_dev *const *)a, *y = *(struct nv_dev *const *)b;
	int64_t bx = x->hca->pci_busid, by = y->hca->pci_busid;

	if (nv_param_int(NV_PARAM_IB_DEVICE_PCI_ORDER) && bx != by)
		return bx < 0 ? 1 : by < 0 ? -1 : bx < by ? -1 : 1;
	if (x->hca->order != y->hca->order)
		return x->hca->order - y->hca->order;
	return (int)x->port - (int)y->port;
}

/* Sort, name, index, GID, one virtual device each, one INFO line each. */
/*
 * NCCL makes its virtual NICs once per library load. With the library kept
 * loaded (NCCL_NET_PLUGIN_REF_COUNT>=1, or our nodelete) a later init after
 * the last finalize may reuse those indices without calling makeVDevice
 * again, so the merged entries are remembered across a teardown and rebuilt
 * when the same physical devices come back.
 */
static struct {
	int ndev;                            /* physical devices when saved */
	char names[NV_MAX_DEVS][NV_NAME_MAX + 8];
	int nmerged;
	struct nv_vdev merged[NV_MAX_VDEVS];
} nv_saved;

static void nv_vdevs_save(void)
{
	int n = atomic_load(&nv_nvdev);

	nv_saved.ndev = nv_ndev;
	for (int i = 0; i < nv_ndev; i++)
		snprintf(nv_saved.names[i], sizeof(nv_saved.names[i]), "%s", nv_devs[i]->name);
	nv_saved.nmerged = n > nv_ndev ? n - nv_ndev : 0;
	for (int i = 0; i < nv_saved.nmerged; i++)
		nv_saved.merged[i] = nv_vdevs[nv_ndev + i];
}

/* Called with the physical vdevs in place; returns the vdev count to publish. */
static int nv_vdevs_restore(void)
{
	if (nv_saved.nmerged == 0 || nv_saved.ndev != nv_ndev)
		return nv_ndev;
	for (int i = 0; i < nv_ndev; i++)
		if (strcmp(nv_saved.names[i], nv_devs[i]->name))
			return nv_ndev; /* different devices: NCCL will merge afresh */
	for (int i = 0; i < nv_saved.nmerged; i++)
		nv_vdevs[nv_ndev + i] = nv_saved.merged[i];
	NV_INFO(NV_SUB_INIT | NV_SUB_NET, "restored %d virtual device(s) made before the last "
		"finalize", nv_saved.nmerged);
	return nv_ndev + nv_saved.nmerged;
}

/* A port whose GID cannot be used (forced index empty or beyond the table,
 * nothing in NCCL_IB_ADDR_RANGE, ...) could only fail later at connect time:
 * drop it now, after nv_dev_gid() said why. */
static void nv_devs_drop_gidless(void)
{
	int kept = 0;

	for (int i = 0; i < nv_ndev; i++) {
		struct nv_dev *d = nv_devs[i];
		struct nv_gid_info g;

		if (nv_dev_gid(d, &g) == NV_OK) {
			nv_devs[kept++] = d;
			continue;
		}
		NV_WARN("%s:%d skipped: no usable GID", d->hca->name, d->port);
		pthread_mutex_destroy(&d->gid_lock);
		free(d);
	}
	for (int i = kept; i < nv_ndev; i++)
		nv_devs[i] = NULL;
	nv_ndev = kept;
}

/*
 * After sorting (so every rank numbers them alike): index the distinct planes
 * in order of first appearance, index 0 standing for "no plane" (-1), as NCCL
 * does; at most NV_PLANE_MAX_INDEX - 1 distinct planes fit the int16_t mask.
 */
static nv_status_t nv_planes_index(void)
{
	int16_t planes[NV_PLANE_MAX_INDEX] = { -1 };
	int n = 1;

	for (int i = 0; i < nv_ndev; i++) {
		struct nv_dev *d = nv_devs[i];
		int k = 0;

		while (k < n && planes[k] != d->plane)
			k++;
		if (k == n) {
			if (n == NV_PLANE_MAX_INDEX - 1) {
				NV_WARN("NCCL_IB_HCA names more than %d distinct planes (%s:%d has "
					"plane %d); a fused NIC's planeId holds one bit per plane",
					NV_PLANE_MAX_INDEX - 2, d->hca->name, d->port, d->plane);
				return NV_ERR_USAGE;
			}
			planes[n++] = d->plane;
		}
		d->plane_idx = (int16_t)k;
	}
	return NV_OK;
}

nv_status_t nv_devices_finish(void)
{
	nv_devs_drop_gidless();
	if (nv_ndev == 0) {
		NV_WARN("no usable RDMA port: every ACTIVE port lacks a usable GID (see above)");
		return NV_ERR_USAGE;
	}
	qsort(nv_devs, (size_t)nv_ndev, sizeof(nv_devs[0]), nv_dev_cmp);
	if (nv_planes_index() != NV_OK)
		return NV_ERR_USAGE;
	for (int i = 0; i < nv_ndev; i++) {
		struct nv_dev *d = nv_devs[i];
		int ports = 0;

		for (int j = 0; j < nv_ndev; j++)
			ports += nv_devs[j]->hca == d->hca;
		d->index = i;
		d->nccl_port = d->port;
		for (int j = 0; j < i; j++) /* earlier functions on the same PCI node */
			if (d->hca->pci_path[0] && nv_devs[j]->hca != d->hca &&
			    nv_devs[j]->port == d->port &&
			    !strcmp(nv_devs[j]->hca->pci_path, d->hca->pci_path))
				d->nccl_port++;
		if (ports > 1)
			snprintf(d->name, sizeof(d->name), "%s.%d", d->hca->name, d->port);
		else
			snprintf(d->name, sizeof(d->name), "%s", d->hca->name);
		nv_vdevs[i].ndevs = 1;
		nv_vdevs[i].devs[0] = i;
		snprintf(nv_vdevs[i].name, sizeof(nv_vdevs[i].name), "%s", d->name);
		NV_INFO(NV_SUB_INIT | NV_SUB_NET, "dev %d: %s port %d %s speed %d Mbps mtu %d lid %u "
			"pci %s gdr: %s%s", i, d->hca->name, d->port,
			d->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "IB", d->speed_mbps,
			128 << d->active_mtu, d->lid, d->hca->pci_path[0] ? d->hca->pci_path : "-",
			d->hca->gdr.why, d->hca->relaxed_ordering ? " [RO]" : "");
		if (d->speed_mbps <= 0)
			NV_INFO(NV_SUB_INIT, "%s:%d reports unknown speed 0x%x width 0x%x", d->name,
				d->port, d->active_speed, d->active_width);
	}
	atomic_store_explicit(&nv_nvdev, nv_vdevs_restore(), memory_order_release);
	return NV_OK;
}

void nv_devices_free(void)
{
	if (nv_vdevs && atomic_load(&nv_nvdev) > 0)
		nv_vdevs_save();
	for (int i = 0; i < nv_ndev; i++) {
		pthread_mutex_destroy(&nv_devs[i]->gid_lock);
		free(nv_devs[i]);
		nv_devs[i] = NULL;
	}
	nv_ndev = 0;
	for (int i = 0; i < nv_nhca; i++) {
		nv_hca_close(nv_hcas[i]);
		nv_hcas[i] = NULL;
	}
	nv_nhca = 0;
	atomic_store(&nv_nvdev, 0);
	free(nv_vdevs);
	nv_vdevs = NULL;
}

nv_status_t nv_devices_scan(void)
{
	struct ibv_device **list = NULL;
	struct nv_hca_filter filter;
	int n = 0;
	nv_status_t st;

	if (nv_hca_filter_parse(nv_param_str(NV_PARAM_IB_HCA), &filter) != NV_OK) {
		NV_WARN("NCCL_IB_HCA='%s' is malformed: %s", nv_param_str(NV_PARAM_IB_HCA),
			filter.why);
		return NV_ERR_USAGE;
	}
	nv_vdevs = calloc(NV_MAX_VDEVS, sizeof(*nv_vdevs));
	if (!nv_vdevs) {
		NV_WARN("out of memory allocating the device table");
		return NV_ERR_SYSTEM;
	}
	NV_CHECK_GOTO(nv_ibv_load(nv_param_str(NV_PARAM_IBVERBS_LIB)), st, err);
	nv_ibv_set_mqp_retry(nv_param_int(NV_PARAM_IB_MQP_RETRY_ALL) != 0,
			     (int)nv_param_int(NV_PARAM_IB_MQP_RETRY_CNT),
			     (int)nv_param_int(NV_PARAM_IB_MQP_RETRY_SLEEP_MSEC));
	NV_CHECK_GOTO(nv_ibv_get_device_list(&list, &n), st, err);
	for (int i = 0; i < n && list[i]; i++)
		NV_CHECK_GOTO(nv_scan_hca(list[i], &filter), st, err);
	nv_ibv_free_device_list(list);
	list = NULL;
	if (nv_ndev == 0) {
		NV_WARN("no usable RDMA port: %d device(s) found, none with an ACTIVE InfiniBand or "
			"Ethernet port%s%s", n, nv_param_str(NV_PARAM_IB_HCA) ? " matching NCCL_IB_HCA="
			: "", nv_param_str(NV_PARAM_IB_HCA) ? nv_param_str(NV_PARAM_IB_HCA) : "");
		st = NV_ERR_SYSTEM;
		goto err;
	}
	return NV_OK;
err:
	nv_ibv_free_device_list(list);
	return st;
}

void nv_devices_lock(void)
{
	pthread_mutex_lock(&nv_dev_lock);
}

void nv_devices_unlock(void)
{
	pthread_mutex_unlock(&nv_dev_lock);
}

int nv_hca_count(void)
{
	return nv_nhca;
}

struct nv_hca *nv_hca_get(int index)
{
	return (index >= 0 && index < nv_nhca) ? nv_hcas[index] : NULL;
}

bool nv_devices_busy(void)
{
	bool busy = false;

	pthread_mutex_lock(&nv_dev_lock);
	for (int i = 0; i < nv_nhca && !busy; i++) {
		pthread_mutex_lock(&nv_hcas[i]->lock);
		busy = nv_hcas[i]->pd_refs > 0;
		pthread_mutex_unlock(&nv_hcas[i]->lock);
	}
	pthread_mutex_unlock(&nv_dev_lock);
	return busy;
}

nv_status_t nv_hca_pd_get(struct nv_hca *hca, struct ibv_pd **pd)
{
	nv_status_t st = NV_OK;

	pthread_mutex_lock(&hca->lock);
	if (!hca->pd)
		st = nv_ibv_alloc_pd(hca->ctx, &hca->pd);
	if (st == NV_OK) {
		hca->pd_refs++;
		*pd = hca->pd;
	}
	pthread_mutex_unlock(&hca->lock);
	return st;
}

void nv_hca_pd_put(struct nv_hca *hca)
{
	pthread_mutex_lock(&hca->lock);
	if (hca->pd_refs > 0 && --hca->pd_refs == 0 && hca->pd) {
		if (nv_ibv_dealloc_pd(hca->pd) == NV_OK)
			hca->pd = NULL;
	}
	pthread_mutex_unlock(&hca->lock);
}

/* ---- virtual NICs (their properties: props.c) ----------------------------- */

static nv_status_t nv_vdev_check(const int *devs, int ndevs, int max_devs)
{
	if (ndevs < 1 || ndevs > max_devs) {
		NV_WARN("makeVDevice: %d devices requested, this ABI version allows 1..%d", ndevs,
			max_devs);
		return NV_ERR_INVALID;
	}
	if (ndevs > 1 && nv_param_int(NV_PARAM_IB_MERGE_NICS) == 0) {
		NV_WARN("makeVDevice: NIC fusion disabled by NCCL_IB_MERGE_NICS=0");
		return NV_ERR_USAGE;
	}
	for (int i = 0; i < ndevs; i++) {
		if (devs[i] < 0 || devs[i] >= nv_ndev) {
			NV_WARN("makeVDevice: device %d is not a physical device (0..%d)", devs[i],
				nv_ndev - 1);
			return NV_ERR_INVALID;
		}
		for (int j = 0; j < i; j++)
			if (devs[j] == devs[i]) {
				NV_WARN("makeVDevice: device %d listed twice", devs[i]);
				return NV_ERR_INVALID;
			}
		if (nv_devs[devs[i]]->link_layer != nv_devs[devs[0]]->link_layer) {
			NV_WARN("makeVDevice: cannot merge %s (%s) with %s (%s): link layers differ",
				nv_devs[devs[0]]->name,
				nv_devs[devs[0]]->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE"
											: "IB",
				nv_devs[devs[i]]->name,
				nv_devs[devs[i]]->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE"
											: "IB");
			return NV_ERR_INVALID;
		}
	}
	return NV_OK;
}

nv_status_t nv_vdev_make(const int *devs, int ndevs, int max_devs, int *vdev)
{
	struct nv_vdev *v;
	nv_status_t st;
	int n;

	pthread_mutex_lock(&nv_dev_lock);
	st = nv_vdev_check(devs, ndevs, max_devs);
	n = atomic_load(&nv_nvdev);
	if (st == NV_OK && n >= NV_MAX_VDEVS) {
		NV_WARN("makeVDevice: table full (%d virtual devices)", NV_MAX_VDEVS);
		st = NV_ERR_INTERNAL;
	}
	if (st == NV_OK) {
		v = &nv_vdevs[n];
		memset(v, 0, sizeof(*v));
		v->ndevs = ndevs;
		for (int i = 0; i < ndevs; i++) {
			size_t used = strlen(v->name);

			v->devs[i] = devs[i];
			snprintf(v->name + used, sizeof(v->name) - used, "%s%s", i ? "+" : "",
				 nv_devs[devs[i]]->name);
		}
		atomic_store_explicit(&nv_nvdev, n + 1, memory_order_release);
		*vdev = n;
		NV_INFO(NV_SUB_INIT | NV_SUB_NET, "virtual device %d = %s", n, v->name);
	}
	pthread_mutex_unlock(&nv_dev_lock);
	return st;
}
