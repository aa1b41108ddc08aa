/*
 * test_ibv - the verbs seam's failure messages over simverbs: each names the
 * verb, the device (and port / QPN), the errno text from the right source,
 * and the hint where there is one (ENOMEM on registration: the size and
 * RLIMIT_MEMLOCK). SIMVERBS_LIMITS=max_mr=2 makes the third MR fail.
 */
#include "config.h"

#include <stdlib.h>
#include <sys/mman.h>

#include "nvtest.h"
#include "device.h"
#include "devset.h"
#include "ibv.h"
#include "mr.h"
#include "param.h"

static bool warned(const char *a, const char *b, const char *c)
{
	bool ok = strstr(nvt_warns, a) && (!b || strstr(nvt_warns, b)) && (!c || strstr(nvt_warns, c));

	if (!ok)
		fprintf(stderr, "expected WARN with '%s' '%s' '%s', got:\n%s", a, b ? b : "",
			c ? c : "", nvt_warns);
	return ok;
}

int main(void)
{
	const char *env[] = { "NCCL_IB_HCA==simib0", NULL };
	static char buf[4][8192] __attribute__((aligned(4096)));
	struct ibv_port_attr pa;
	struct ibv_qp_init_attr qia;
	struct ibv_qp_attr qa;
	struct ibv_mr *m[3] = { NULL };
	struct ibv_pd *pd;
	struct ibv_cq *cq = NULL;
	struct ibv_qp *qp = NULL;
	struct nv_hca *h;
	void *unmapped;

	setenv("SIMVERBS_LIMITS", "max_mr=2", 1);
	nvt_log_capture();
	if (nv_param_load_from(nvt_env, (void *)env) != NV_OK || nv_devices_init() != NV_OK) {
		printf("test_ibv: no simverbs device: skipped\n");
		return 77;
	}
	h = nv_dev_get(0)->hca;

	nvt_log_clear();
	CHECK(nv_ibv_query_port(h->ctx, 9, &pa) == NV_ERR_SYSTEM);
	CHECK(warned("ibv_query_port failed on simib0:9", "errno", NULL));

	CHECK(nv_hca_pd_get(h, &pd) == NV_OK);
	nvt_log_clear();
	CHECK(nv_ibv_create_cq(h->ctx, 1 << 30, NULL, &cq) == NV_ERR_SYSTEM && cq == NULL);
	CHECK(warned("ibv_create_cq failed on simib0", "entries", "errno"));
	CHECK(nv_ibv_create_cq(h->ctx, 16, NULL, &cq) == NV_OK);

	memset(&qia, 0, sizeof(qia));
	qia.qp_type = IBV_QPT_RC;
	qia.send_cq = qia.recv_cq = cq;
	qia.cap.max_send_wr = 1u << 30; /* beyond max_qp_wr */
	qia.cap.max_send_sge = qia.cap.max_recv_sge = 1;
	nvt_log_clear();
	CHECK(nv_ibv_create_qp(pd, &qia, &qp) == NV_ERR_SYSTEM && qp == NULL);
	CHECK(warned("ibv_create_qp failed on simib0", "send_wr 1073741824", "errno"));
	qia.cap.max_send_wr = 8;
	qia.cap.max_recv_wr = 8;
	CHECK(nv_ibv_create_qp(pd, &qia, &qp) == NV_OK);
	if (qp) {
		char qpn[32];

		memset(&qa, 0, sizeof(qa));
		qa.qp_state = IBV_QPS_RTR; /* RESET -> RTR is illegal */
		nvt_log_clear();
		CHECK(nv_ibv_modify_qp(qp, &qa, IBV_QP_STATE) == NV_ERR_SYSTEM);
		snprintf(qpn, sizeof(qpn), "qpn 0x%x", qp->qp_num);
		CHECK(warned("ibv_modify_qp failed on simib0", qpn, "moving to RTR"));
		CHECK(nv_ibv_destroy_qp(qp) == NV_OK);
	}
	CHECK(nv_ibv_destroy_cq(cq) == NV_OK);

	/* registration failures: unmapped memory, then the MR limit as ENOMEM */
	unmapped = mmap(NULL, 8192, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(unmapped != MAP_FAILED);
	munmap(unmapped, 8192);
	nvt_log_clear();
	CHECK(nv_mr_acquire(h, unmapped, 100, NV_MEM_HOST, 0, -1, NV_MR_DATA, &m[0]) == NV_ERR_SYSTEM);
	CHECK(warned("failed on simib0", "registering host data", "errno"));
	CHECK(nv_mr_acquire(h, buf[0], 100, NV_MEM_HOST, 0, -1, NV_MR_DATA, &m[0]) == NV_OK);
	CHECK(nv_mr_acquire(h, buf[2], 100, NV_MEM_HOST, 0, -1, NV_MR_CTRL, &m[1]) == NV_OK);
	nvt_log_clear();
	CHECK(nv_mr_acquire(h, buf[3], 5000, NV_MEM_HOST, 0, -1, NV_MR_DATA, &m[2]) == NV_ERR_SYSTEM);
	CHECK(warned("Cannot allocate memory", "+8192", "RLIMIT_MEMLOCK is"));
	CHECK(nv_mr_release(h, m[0]) == NV_OK && nv_mr_release(h, m[1]) == NV_OK);
	CHECK(h->mr_cache && nv_mr_cache_entries(h->mr_cache) == 0);
	nv_hca_pd_put(h);
	nv_devices_fini();
	return nvt_exit("test_ibv");
}
