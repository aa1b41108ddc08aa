/*
 * sv_rdmacm: librdmacm (Debian's, unchanged) on simverbs.  librdmacm reads
 * sysfs through ibv_get_sysfs_path()/ibv_read_sysfs_file() and opens the
 * verbs devices itself; with a wrong ibv_get_sysfs_path prototype (once)
 * it dereferenced an int as a path and every rdma_cm program crashed.
 * There is no rdma_cm kernel device here, so an event channel must fail
 * cleanly (NULL, errno set), while rdma_get_devices() lists simverbs' devices.
 */
#include <rdma/rdma_cma.h>
#include <sys/stat.h>

#include "svt.h"

/* rdma-core's prototype (libibverbs/driver.h, not installed). */
const char *ibv_get_sysfs_path(void);

static void check_sysfs_path(void)
{
	const char *root = ibv_get_sysfs_path();
	char path[1024];
	struct stat st;

	SVT_CHECK(root && *root == '/');
	SVT_CHECK(ibv_get_sysfs_path() == root);	/* stable for the process */
	snprintf(path, sizeof(path), "%s/class/infiniband_verbs/abi_version", root);
	SVT_CHECK(stat(path, &st) == 0);
}

int main(void)
{
	struct rdma_event_channel *ch;
	struct ibv_context **devs;
	struct ibv_device **list;
	int n = -1, nibv = -1;

	/* librdmacm opens every device at its first call and keeps the
	 * contexts for the life of the process (as on hardware), so simverbs'
	 * exit-time leak report does not apply to this program. */
	unsetenv("SIMVERBS_LEAK_CHECK");
	(void)svt_control_fn_get();	/* skips unless on simverbs */
	list = ibv_get_device_list(&nibv);
	SVT_CHECK(list && nibv > 0);
	check_sysfs_path();
	devs = rdma_get_devices(&n);
	SVT_CHECK(devs);
	SVT_EQ(n, nibv);
	for (int i = 0; i < n; i++)
		SVT_CHECK(!strcmp(devs[i]->device->name, list[i]->name));
	rdma_free_devices(devs);
	ibv_free_device_list(list);
	errno = 0;
	ch = rdma_create_event_channel();
	if (ch) {	/* only where a real rdma_cm device exists */
		rdma_destroy_event_channel(ch);
	} else {
		SVT_CHECK(errno != 0);
		printf("sv_rdmacm: rdma_create_event_channel: %s (no rdma_cm device, as expected)\n",
		       strerror(errno));
	}
	printf("sv_rdmacm: %d devices through librdmacm, no crash\n", n);
	return 0;
}
