/*
 * The fake sysfs tree under <fabric dir>/sys:
 *   class/infiniband/<dev>/            ibdev_path (node_guid, ports/<n>/..., fw_ver)
 *   class/infiniband/<dev>/device  ->  devices/pci0000:00/0000:00:02.0/0000:<bus>:00.0
 *   class/infiniband_verbs/uverbs<i>/  dev_path (ibdev, abi_version)
 * plus the sysfs helpers rdma-core exports (ibv_get_sysfs_path,
 * ibv_read_sysfs_file).  Files and links are written through a rename so
 * readers never see a partial file or a missing link while another process
 * rebuilds the tree.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sv.h"

static void sv_mkdirs(const char *path)
{
	char tmp[512];

	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p == '/') {
			*p = '\0';
			mkdir(tmp, 0755);
			*p = '/';
		}
	}
	mkdir(tmp, 0755);
}

static void sv_put(const char *dir, const char *file, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void sv_put(const char *dir, const char *file, const char *fmt, ...)
{
	char path[600], tmp[640], buf[256];
	va_list ap;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
	{
		char d[600];
		char *slash;

		snprintf(d, sizeof(d), "%s", path);
		slash = strrchr(d, '/');
		if (slash) {
			*slash = '\0';
			sv_mkdirs(d);
		}
	}
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	f = fopen(tmp, "w");
	if (!f)
		return;
	fputs(buf, f);
	fclose(f);
	if (rename(tmp, path) && (rmdir(path) || rename(tmp, path)))
		unlink(tmp);	/* (a directory stood there: see sv_put_einval) */
}

/* Points link at target, replacing an existing link atomically (rename), so a
 * process resolving it while another rebuilds the tree never finds it
 * missing. */
static void sv_symlink(const char *target, const char *link)
{
	char tmp[700];

	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", link, (int)getpid());
	unlink(tmp);
	if (symlink(target, tmp) || rename(tmp, link)) {
		sv_log("sysfs: symlink %s: %s", link, strerror(errno));
		unlink(tmp);
	}
}

static void sv_unlink_in(const char *dir, const char *file)
{
	char path[600];

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	unlink(path);
}

static const char *sv_state_str(uint32_t s)
{
	switch (s) {
	case IBV_PORT_ACTIVE: return "4: ACTIVE";
	case IBV_PORT_INIT: return "2: INIT";
	case IBV_PORT_ARMED: return "3: ARMED";
	default: return "1: DOWN";
	}
}

static void sv_guid_str(char *buf, size_t len, uint64_t be)
{
	uint64_t g = be64toh(be);

	snprintf(buf, len, "%04x:%04x:%04x:%04x", (unsigned)(g >> 48) & 0xffff,
		 (unsigned)(g >> 32) & 0xffff, (unsigned)(g >> 16) & 0xffff,
		 (unsigned)g & 0xffff);
}

static void sv_gid_str(char *buf, size_t len, const union ibv_gid *g)
{
	const uint8_t *r = g->raw;

	snprintf(buf, len,
		 "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x",
		 r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11],
		 r[12], r[13], r[14], r[15]);
}

static int sv_rate_gbps(const struct sv_port *pt)
{
	static const int lane[] = { [1] = 2, [2] = 5, [4] = 10, [8] = 10, [16] = 14,
				    [32] = 25, [64] = 50, [128] = 100 };
	int lanes = pt->width == 1 ? 1 : pt->width == 2 ? 4 : pt->width == 4 ? 8 :
		    pt->width == 8 ? 12 : 2;

	return (pt->speed < 129 ? lane[pt->speed] : 0) * lanes;
}

/* A sysfs attribute whose read() fails with EINVAL, for every user: the
 * kernel answers a read of gid_attrs/{types,ndevs}/<i> of an empty GID entry
 * (and ndevs of an IB GID, which has no netdev) that way, and rdma-core and
 * UCX rely on it.  Plain files cannot fail a read, so such entries are
 * symlinks to a real kernel attribute that behaves so: the loopback netdev's
 * link speed (ethtool has none: -EINVAL).  It is probed once; where it does
 * not fail with EINVAL the entry is a directory (read() fails with EISDIR),
 * still never an empty line.  Readers through ibv_read_sysfs_file() get -1
 * with errno EINVAL either way (see there). */
#define SV_SYSFS_EINVAL_TARGET "/sys/devices/virtual/net/lo/speed"

static bool sv_einval_target_ok(void)
{
	static int ok = -1;
	char c;
	int fd;

	if (ok < 0) {
		fd = open(SV_SYSFS_EINVAL_TARGET, O_RDONLY | O_CLOEXEC);
		ok = fd >= 0 && read(fd, &c, 1) < 0 && errno == EINVAL;
		if (fd >= 0)
			close(fd);
	}
	return ok;
}

static void sv_put_einval(const char *dir, const char *file)
{
	char path[600];

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	{
		char d[600];
		char *slash;

		snprintf(d, sizeof(d), "%s", path);
		slash = strrchr(d, '/');
		if (slash) {
			*slash = '\0';
			sv_mkdirs(d);
		}
	}
	if (sv_einval_target_ok()) {
		rmdir(path);
		sv_symlink(SV_SYSFS_EINVAL_TARGET, path);
	} else {
		unlink(path);
		mkdir(path, 0555);
	}
}

static void sv_sysfs_port(const char *ib, const struct sv_device *d, uint32_t p)
{
	const struct sv_port *pt = &d->ports[p];
	char dir[512], s[128];
	bool eth = d->link_layer == IBV_LINK_LAYER_ETHERNET;
	uint32_t st = sv_port_state(d, p + 1);

	snprintf(dir, sizeof(dir), "%s/ports/%u", ib, p + 1);
	sv_put(dir, "state", "%s\n", sv_state_str(st));
	sv_put(dir, "phys_state", "%s\n", st == IBV_PORT_ACTIVE ? "5: LinkUp" : "3: Disabled");
	sv_put(dir, "rate", "%d Gb/sec (%s)\n", sv_rate_gbps(pt), eth ? "4X EDR" : "4X HDR");
	sv_put(dir, "link_layer", "%s\n", eth ? "Ethernet" : "InfiniBand");
	sv_put(dir, "lid", "0x%x\n", pt->lid);
	sv_put(dir, "sm_lid", "0x%x\n", eth ? 0 : 1);
	sv_put(dir, "lid_mask_count", "0\n");
	sv_put(dir, "sm_sl", "0\n");
	sv_put(dir, "cap_mask", "0x%08x\n", eth ? 0x04010000u : 0x2651e848u);
	sv_put(dir, "pkeys/0", "0xffff\n");
	for (uint32_t i = 0; i < SV_GID_TBL_LEN; i++) {
		char f[64];
		const struct sv_gid *g = &pt->gids[i];

		sv_gid_str(s, sizeof(s), &g->gid);
		snprintf(f, sizeof(f), "gids/%u", i);
		sv_put(dir, f, "%s\n", s);
		snprintf(f, sizeof(f), "gid_attrs/types/%u", i);
		if (g->valid)
			sv_put(dir, f, "%s\n", g->type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2" : "IB/RoCE v1");
		else
			sv_put_einval(dir, f);
		snprintf(f, sizeof(f), "gid_attrs/ndevs/%u", i);
		if (g->valid && eth)
			sv_put(dir, f, "%s\n", g->ndev);
		else
			sv_put_einval(dir, f);
	}
}

/* mlx5's per-priority ECN switches and the MLNX_OFED qos/pfc line, under the
 * port's netdev, when the device is configured with them (else absent). */
static void sv_sysfs_lossless(const char *root, const struct sv_device *d, const char *ndev)
{
	static const char *const ecn[] = { "ecn/roce_np/enable", "ecn/roce_rp/enable" };
	const uint16_t masks[] = { d->ecn_np, d->ecn_rp };
	char dir[600], f[64];

	snprintf(dir, sizeof(dir), "%s/class/net/%s", root, ndev);
	for (int k = 0; k < 2; k++) {
		if (!(masks[k] & SV_LOSSLESS_SET))
			continue;
		for (int prio = 0; prio < 8; prio++) {
			snprintf(f, sizeof(f), "%s/%d", ecn[k], prio);
			sv_put(dir, f, "%d\n", (masks[k] >> prio) & 1);
		}
	}
	if (d->pfc & SV_LOSSLESS_SET) {
		char line[64] = "";

		for (int prio = 0; prio < 8; prio++)
			snprintf(line + strlen(line), sizeof(line) - strlen(line), "%s%d",
				 prio ? " " : "", (d->pfc >> prio) & 1);
		sv_put(dir, "qos/pfc", "%s\n", line);
	}
}

static void sv_sysfs_pci(const char *pci, const struct sv_device *d)
{
	bool mlx = d->identity == SV_IDENTITY_MELLANOX;

	sv_put(pci, "vendor", "0x%04x\n", mlx ? SV_MLX_PCI_VENDOR : SV_SOFT_PCI_VENDOR);
	sv_put(pci, "device", "0x%04x\n", mlx ? SV_MLX_PCI_DEVICE : SV_SOFT_PCI_DEVICE);
	sv_put(pci, "class", "0x%06x\n", mlx ? SV_MLX_PCI_CLASS : SV_SOFT_PCI_CLASS);
	sv_put(pci, "numa_node", "0\n");
	sv_put(pci, "local_cpulist", "0-%ld\n", sysconf(_SC_NPROCESSORS_ONLN) - 1);
	sv_put(pci, "local_cpus", "%lx\n", (1ul << sysconf(_SC_NPROCESSORS_ONLN)) - 1);
	sv_put(pci, "max_link_speed", "16.0 GT/s PCIe\n");
	sv_put(pci, "current_link_speed", "16.0 GT/s PCIe\n");
	sv_put(pci, "max_link_width", "16\n");
	sv_put(pci, "current_link_width", "16\n");
	sv_put(pci, "subsystem_vendor", "0x%04x\n", mlx ? SV_MLX_PCI_VENDOR : SV_SOFT_PCI_VENDOR);
	sv_put(pci, "subsystem_device", "0x%04x\n", mlx ? 0x0007 : 0x0001);
}

static void sv_sysfs_device(const char *root, const struct sv_device *d)
{
	char ib[512], pci[512], link[600], s[64], uv[512];
	unsigned int bus = d->pci_set ? d->pci_bus : 3 + d->idx;

	snprintf(pci, sizeof(pci), "%s/devices/pci0000:00/0000:00:02.0/0000:%02x:%02x.%x", root, bus,
		 d->pci_set ? d->pci_dev : 0, d->pci_set ? d->pci_fn : 0);
	sv_sysfs_pci(pci, d);
	sv_put(pci, "../max_link_speed", "16.0 GT/s PCIe\n");
	sv_put(pci, "../max_link_width", "16\n");
	snprintf(ib, sizeof(ib), "%s/class/infiniband/%s", root, d->ibv.name);
	sv_mkdirs(ib);
	snprintf(link, sizeof(link), "%s/device", ib);
	sv_symlink(pci, link);
	sv_guid_str(s, sizeof(s), d->node_guid);
	sv_put(ib, "node_guid", "%s\n", s);
	sv_guid_str(s, sizeof(s), d->sys_guid);
	sv_put(ib, "sys_image_guid", "%s\n", s);
	sv_put(ib, "node_type", d->ibv.node_type == IBV_NODE_RNIC ? "4: RNIC\n" : "1: CA\n");
	sv_put(ib, "node_desc", "simverbs %s\n", d->ibv.name);
	sv_put(ib, "fw_ver", "%s\n", d->identity == SV_IDENTITY_MELLANOX ? SV_MLX_FW_VER
									 : SV_SOFT_FW_VER);
	if (d->identity == SV_IDENTITY_MELLANOX)
		sv_put(ib, "hca_type", "MT%u\n", SV_VENDOR_PART_ID);
	else
		sv_unlink_in(ib, "hca_type");	/* rxe has none */
	sv_put(ib, "board_id", "SIM0000000001\n");
	sv_put(ib, "hw_rev", "0x0\n");
	pthread_mutex_lock(&sv_g.port_lock);
	for (uint32_t p = 0; p < d->nports; p++)
		sv_sysfs_port(ib, d, p);
	if (d->link_layer == IBV_LINK_LAYER_ETHERNET)	/* the netdev gid_attrs/ndevs names */
		sv_sysfs_lossless(root, d, d->ports[0].bound[0] ? d->ports[0].bound : "eth0");
	pthread_mutex_unlock(&sv_g.port_lock);
	snprintf(uv, sizeof(uv), "%s/class/infiniband_verbs/%s", root, d->ibv.dev_name);
	sv_put(uv, "ibdev", "%s\n", d->ibv.name);
	sv_put(uv, "abi_version", "1\n");
	snprintf(link, sizeof(link), "%s/device", uv);
	sv_symlink(pci, link);
}

SV_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);

/* FNV-1a over the device table and GID tables: the tree is rebuilt only when
 * it changes. */
static uint64_t sv_config_hash(void)
{
	const unsigned char *p;
	uint64_t h = 0xcbf29ce484222325ull;
	size_t n;

	pthread_mutex_lock(&sv_g.port_lock);
	for (int i = 0; i < sv_g.ndevs; i++) {
		const struct sv_device *d = &sv_g.devs[i];

		/* hash only configuration, not runtime pointers */
		p = (const unsigned char *)d->ibv.name;
		n = sizeof(d->ibv.name);
		for (size_t k = 0; k < n; k++)
			h = (h ^ p[k]) * 0x100000001b3ull;
		p = (const unsigned char *)&d->link_layer;
		n = offsetof(struct sv_device, sh) - offsetof(struct sv_device, link_layer);
		for (size_t k = 0; k < n; k++)
			h = (h ^ p[k]) * 0x100000001b3ull;
	}
	pthread_mutex_unlock(&sv_g.port_lock);
	return h;
}

static bool sv_sysfs_current(const char *root, uint64_t hash)
{
	char buf[64];
	int n = ibv_read_sysfs_file(root, ".simverbs-config", buf, sizeof(buf));

	return n > 0 && strtoull(buf, NULL, 16) == hash;
}

/* The tree is visible at the real path when the host's mount namespace has
 * root/class/infiniband mounted on /sys/class/infiniband (sim-cluster). */
static bool sv_sysfs_at_real_path(const char *root)
{
	struct stat a, b;
	char p[600];

	snprintf(p, sizeof(p), "%s/class/infiniband", root);
	return !stat(p, &a) && !stat("/sys/class/infiniband", &b) && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

/* Builds the tree (unless an identical one exists) and fills every device's
 * sysfs paths. */
int sv_sysfs_create(void)
{
	const char *root = sv_g.sysfs_root;
	uint64_t hash = sv_config_hash();
	bool current, real;

	current = sv_sysfs_current(root, hash);
	if (!current)
		sv_put(root, "class/infiniband_verbs/abi_version", "6\n");
	real = sv_sysfs_at_real_path(root);
	for (int i = 0; i < sv_g.ndevs; i++) {
		struct sv_device *d = &sv_g.devs[i];

		if (!current)
			sv_sysfs_device(root, d);
		snprintf(d->ibv.ibdev_path, sizeof(d->ibv.ibdev_path), "%s/class/infiniband/%s",
			 real ? "/sys" : root, d->ibv.name);
		snprintf(d->ibv.dev_path, sizeof(d->ibv.dev_path), "%s/class/infiniband_verbs/%s",
			 real ? "/sys" : root, d->ibv.dev_name);
	}
	if (!current)
		sv_put(root, ".simverbs-config", "%016llx\n", (unsigned long long)hash);
	sv_gpu_sysfs(root);
	return 0;
}

/* Rewrites the port directories (state, GIDs) after a netdev change. */
void sv_sysfs_ports(void)
{
	char ib[512];

	pthread_mutex_lock(&sv_g.port_lock);
	for (int i = 0; i < sv_g.ndevs; i++) {
		const struct sv_device *d = &sv_g.devs[i];

		snprintf(ib, sizeof(ib), "%s/class/infiniband/%s", sv_g.sysfs_root, d->ibv.name);
		for (uint32_t p = 0; p < d->nports; p++)
			sv_sysfs_port(ib, d, p);
	}
	pthread_mutex_unlock(&sv_g.port_lock);
	sv_put(sv_g.sysfs_root, ".simverbs-config", "%016llx\n",
	       (unsigned long long)sv_config_hash());
}

static int sv_rm_cb(const char *path, const struct stat *st SV_UNUSED, int flag SV_UNUSED,
		    struct FTW *ftw SV_UNUSED)
{
	return remove(path) && errno != ENOENT ? 0 : 0;
}

void sv_rm_tree(const char *dir)
{
	nftw(dir, sv_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}


static char sv_sysfs_path_buf[sizeof(sv_g.dir) + 8];

static void sv_sysfs_root_init(void)
{
	const char *env = getenv("SIMVERBS_SYSFS");

	sv_name_fabric();
	if (env && *env)
		snprintf(sv_sysfs_path_buf, sizeof(sv_sysfs_path_buf), "%s", env);
	else
		snprintf(sv_sysfs_path_buf, sizeof(sv_sysfs_path_buf), "%s/sys", sv_g.dir);
}

/* rdma-core's contract: the sysfs root ("/sys" on a real host), never NULL,
 * valid for the life of the process; callers append "class/...".  Here it is
 * the host's fake tree (SIMVERBS_SYSFS, else the fabric's), known as soon as
 * the fabric is named (no attach); "/sys" when the tree is mounted there
 * (sim-cluster's hosts).  Once attached, the host's tree (host.c). */
SV_EXPORT const char *ibv_get_sysfs_path(void);
const char *ibv_get_sysfs_path(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, sv_sysfs_root_init);
	if (sv_sysfs_at_real_path(sv_g.sysfs_root[0] ? sv_g.sysfs_root : sv_sysfs_path_buf))
		return "/sys";
	if (sv_g.sysfs_root[0])
		return sv_g.sysfs_root;
	return sv_sysfs_path_buf;
}

SV_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	char path[1024];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, size);
	if (n < 0 && errno == EISDIR)
		errno = EINVAL;	/* the directory stand-in for a failing attribute */
	{
		int e = errno;

		close(fd);
		errno = e;
	}
	if (n <= 0)
		return -1;
	if ((size_t)n < size)
		buf[n] = '\0';
	if (n > 0 && buf[n - 1] == '\n') {
		buf[n - 1] = '\0';
		n--;
	}
	return (int)n;
}
