/*
 * test_param - the parameter table: defaults, overrides (decimal and hex),
 * malformed and out-of-range values (rejected, named in the WARN, nothing
 * published), string validators, reset, lookup and the dump.
 */
#include "config.h"

#include <stdlib.h>

#include "nvtest.h"
#include "param.h"

static void test_defaults(void)
{
	const char *none[] = { NULL };

	nv_param_reset();
	CHECK(nv_param_load_from(nvt_env, none) == NV_OK);
	CHECK(nv_param_int(NV_PARAM_IB_TIMEOUT) == 20);
	CHECK(nv_param_int(NV_PARAM_IB_RETRY_CNT) == 7);
	CHECK(nv_param_int(NV_PARAM_IB_GID_INDEX) == -1);
	CHECK(nv_param_int(NV_PARAM_IB_ROCE_VERSION_NUM) == 2);
	CHECK(nv_param_int(NV_PARAM_IB_QPS_PER_CONNECTION) == 1);
	CHECK(nv_param_int(NV_PARAM_IB_SPLIT_DATA_ON_QPS) == 0);
	CHECK(nv_param_int(NV_PARAM_IB_PCI_RELAXED_ORDERING) == 2);
	CHECK(nv_param_int(NV_PARAM_IB_ECE_ENABLE) == 1);
	CHECK(nv_param_int(NV_PARAM_IB_AR_THRESHOLD) == -2); /* NCCL's auto: 8192 */
	CHECK(nv_param_int(NV_PARAM_IB_ADAPTIVE_ROUTING) == -2);
	CHECK(nv_param_int(NV_PARAM_IB_SL) == -1 && nv_param_int(NV_PARAM_IB_TC) == -1);
	CHECK(nv_param_int(NV_PARAM_IB_FIFO_TC) == -1 && nv_param_int(NV_PARAM_IB_PKEY) == 0);
	CHECK(nv_param_int(NV_PARAM_VERBS_CONNECT_TIMEOUT_MS) == 30000);
	CHECK(nv_param_str(NV_PARAM_IB_HCA) == NULL);
	CHECK(!strcmp(nv_param_str(NV_PARAM_IB_ADDR_FAMILY), "AF_INET"));
	CHECK(nv_param_str(NV_PARAM_SOCKET_IFNAME) == NULL);
	CHECK(!nv_param_is_set(NV_PARAM_IB_TIMEOUT));
	/* type confusion is harmless */
	CHECK(nv_param_str(NV_PARAM_IB_TIMEOUT) == NULL);
	CHECK(nv_param_int(NV_PARAM_IB_HCA) == 0);
}

static void test_overrides(void)
{
	const char *env[] = { "NCCL_IB_TIMEOUT=22", "NCCL_IB_TC=0x68", "NCCL_IB_GID_INDEX=3",
			      "NCCL_IB_HCA=^=mlx5_1:1,mlx5_2", "NCCL_IB_ADDR_FAMILY=AF_INET6",
			      "NCCL_IB_ADDR_RANGE=fd00::/8", "NCCL_SOCKET_IFNAME=eth",
			      "NCCL_VERBS_CONNECT_TIMEOUT_MS= 500 ", NULL };

	nvt_log_clear();
	CHECK(nv_param_load_from(nvt_env, env) == NV_OK);
	CHECK(nvt_nwarn == 0);
	CHECK(nv_param_int(NV_PARAM_IB_TIMEOUT) == 22 && nv_param_is_set(NV_PARAM_IB_TIMEOUT));
	CHECK(nv_param_int(NV_PARAM_IB_TC) == 0x68);
	CHECK(nv_param_int(NV_PARAM_IB_GID_INDEX) == 3);
	CHECK(nv_param_int(NV_PARAM_VERBS_CONNECT_TIMEOUT_MS) == 500);
	CHECK(!strcmp(nv_param_str(NV_PARAM_IB_HCA), "^=mlx5_1:1,mlx5_2"));
	CHECK(!strcmp(nv_param_str(NV_PARAM_SOCKET_IFNAME), "eth"));
	CHECK(nv_param_int(NV_PARAM_IB_RETRY_CNT) == 7); /* untouched */
}

/* A bad value fails the load, names knob and value, and publishes nothing. */
static void expect_bad(const char *kv, const char *name)
{
	const char *env[] = { "NCCL_IB_PKEY=5", kv, NULL };

	nvt_log_clear();
	CHECK(nv_param_load_from(nvt_env, env) == NV_ERR_USAGE);
	if (!strstr(nvt_warns, name)) {
		fprintf(stderr, "no WARN naming %s for '%s': %s\n", name, kv, nvt_warns);
		nvt_failures++;
	}
	/* the previous, valid load is still in force */
	CHECK(nv_param_int(NV_PARAM_IB_PKEY) == 0);
	CHECK(nv_param_int(NV_PARAM_IB_TIMEOUT) == 22);
}

static void test_bad_values(void)
{
	expect_bad("NCCL_IB_TIMEOUT=abc", "NCCL_IB_TIMEOUT='abc'");
	expect_bad("NCCL_IB_TIMEOUT=12x", "NCCL_IB_TIMEOUT='12x'");
	expect_bad("NCCL_IB_TIMEOUT= ", "NCCL_IB_TIMEOUT=' '");
	expect_bad("NCCL_IB_TIMEOUT=32", "NCCL_IB_TIMEOUT=32 is out of range 1..31");
	expect_bad("NCCL_IB_TIMEOUT=0", "NCCL_IB_TIMEOUT=0 is out of range");
	expect_bad("NCCL_IB_RETRY_CNT=8", "NCCL_IB_RETRY_CNT=8");
	expect_bad("NCCL_IB_SL=16", "NCCL_IB_SL=16");
	expect_bad("NCCL_IB_TC=-2", "NCCL_IB_TC=-2");
	expect_bad("NCCL_IB_QPS_PER_CONNECTION=0", "NCCL_IB_QPS_PER_CONNECTION=0");
	expect_bad("NCCL_IB_DISABLE=99999999999999999999999", "NCCL_IB_DISABLE");
	expect_bad("NCCL_IB_ADDR_FAMILY=INET", "NCCL_IB_ADDR_FAMILY='INET'");
	expect_bad("NCCL_IB_ADDR_RANGE=10.0.0.0", "NCCL_IB_ADDR_RANGE='10.0.0.0'");
	expect_bad("NCCL_IB_ADDR_RANGE=10.0.0.0/33", "NCCL_IB_ADDR_RANGE");
	expect_bad("NCCL_IB_ADDR_RANGE=nonsense/8", "NCCL_IB_ADDR_RANGE");
	expect_bad("NCCL_IB_HCA=mlx5_0:x", "NCCL_IB_HCA='mlx5_0:x'");
	expect_bad("NCCL_IB_HCA=mlx5_0:1:2:3:4", "NCCL_IB_HCA");
	/* a limit, not the syntax: the WARN says which */
	expect_bad("NCCL_IB_HCA=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		   "64 or more characters (the limit is 63)");
	expect_bad("NCCL_IB_HCA=a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t,u,v,w,x,y,z,A,B,C,D,E,F,G",
		   "more than 32 entries (the limit is 32 devices)");
	expect_bad("NCCL_SOCKET_FAMILY=AF_UNIX", "NCCL_SOCKET_FAMILY");
	expect_bad("NCCL_VERBS_CONNECT_TIMEOUT_MS=5", "NCCL_VERBS_CONNECT_TIMEOUT_MS=5");
}

static void test_empty_is_unset(void)
{
	const char *env[] = { "NCCL_IB_TIMEOUT=", "NCCL_IB_HCA=", NULL };

	CHECK(nv_param_load_from(nvt_env, env) == NV_OK);
	CHECK(nv_param_int(NV_PARAM_IB_TIMEOUT) == 20 && !nv_param_is_set(NV_PARAM_IB_TIMEOUT));
	CHECK(nv_param_str(NV_PARAM_IB_HCA) == NULL);
	test_overrides(); /* back to the state test_lookup_dump expects */
}

static void test_lookup_dump(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CHECK(nv_param_find("NCCL_IB_PKEY") == nv_param_def(NV_PARAM_IB_PKEY));
	CHECK(nv_param_find("NCCL_NOPE") == NULL);
	CHECK(nv_param_def(NV_PARAM_COUNT) == NULL);
	for (int i = 0; i < NV_PARAM_COUNT; i++) {
		const struct nv_param_def *d = nv_param_def(i);

		CHECK(d && d->id == (enum nv_param_id)i && d->env && d->help && d->help[0]);
		if (d && d->type == NV_PARAM_INT)
			CHECK(d->min <= d->def && d->def <= d->max);
	}
	nv_param_dump(f);
	fclose(f);
	for (int i = 0; i < NV_PARAM_COUNT; i++)
		CHECK(strstr(buf, nv_param_def(i)->env) != NULL);
	CHECK(strstr(buf, "NCCL_IB_TIMEOUT                 22") != NULL);
	free(buf);
	nv_param_reset();
	CHECK(nv_param_int(NV_PARAM_IB_TIMEOUT) == 20 && !nv_param_is_set(NV_PARAM_IB_TIMEOUT));
}

int main(void)
{
	nvt_log_capture();
	test_defaults();
	test_overrides();
	test_bad_values();
	test_empty_is_unset();
	test_lookup_dump();
	return nvt_exit("test_param");
}
