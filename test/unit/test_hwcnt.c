/*
 * test_hwcnt - reading a port's NIC counters (hwcnt.c) from a crafted
 * sysfs directory: counters/ before hw_counters/, absent files absent (not
 * 0), files that are not numbers absent, deltas only of counters present in
 * both readings and not gone backwards, and the formatted lists; and a
 * port of 6.1's rxe as its sysfs has it (hw_counters/ only, with the names
 * the kernel gives, unknown ones and the "lifespan" knob beside them).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nvtest.h"
#include "hwcnt.h"

static char root[256];

static void put(const char *sub, const char *name, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/ports/1/%s", root, sub);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/ports/1/%s/%s", root, sub, name);
	f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(1);
	}
	fputs(text, f);
	fclose(f);
}

static void cleanup(void)
{
	char cmd[400];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", root);
}

/*
 * Port 2: what 6.1's rxe exposes (listed in the rxe VM, step loss of
 * check-rxe): no counters/, hw_counters/ with these files. The loss and
 * recovery ones are read and listed as such, the packet counts read, the
 * rest (ack_deferred, rdma_sends, lifespan, ...) not known and skipped.
 */
static void rxe_port(void)
{
	static const char *const files[][2] = {
		{ "ack_deferred", "3" }, { "completer_retry_err", "12" },
		{ "duplicate_request", "40" }, { "lifespan", "12" }, { "link_downed", "0" },
		{ "out_of_seq_request", "0" }, { "rcvd_pkts", "36680" }, { "rcvd_rnr_err", "0" },
		{ "rcvd_seq_err", "9" }, { "rdma_recvs", "310" }, { "rdma_sends", "0" },
		{ "retry_exceeded_err", "0" }, { "retry_rnr_exceeded_err", "0" }, { "send_err", "0" },
		{ "send_rnr_err", "0" }, { "sent_pkts", "69952" },
	};
	struct nv_hwcnt c;
	char dir[300], buf[1024];
	size_t i;

	snprintf(dir, sizeof(dir), "%s/rxe", root);
	mkdir(dir, 0755);
	snprintf(dir, sizeof(dir), "%s/rxe/ports", root);
	mkdir(dir, 0755);
	snprintf(dir, sizeof(dir), "%s/rxe/ports/1", root);
	mkdir(dir, 0755);
	snprintf(dir, sizeof(dir), "%s/rxe/ports/1/hw_counters", root);
	mkdir(dir, 0755);
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char path[512];
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s", dir, files[i][0]);
		f = fopen(path, "w");
		if (!f) {
			perror(path);
			exit(1);
		}
		fprintf(f, "%s\n", files[i][1]);
		fclose(f);
	}
	snprintf(dir, sizeof(dir), "%s/rxe", root);
	CHECK(nv_hwcnt_read(dir, 1, &c) == 11);
	CHECK(nv_hwcnt_has(&c, NV_HWCNT_RCVD_SEQ_ERR) && c.v[NV_HWCNT_RCVD_SEQ_ERR] == 9);
	CHECK(nv_hwcnt_has(&c, NV_HWCNT_SENT_PKTS) && c.v[NV_HWCNT_SENT_PKTS] == 69952);
	CHECK(nv_hwcnt_has(&c, NV_HWCNT_LINK_DOWNED)); /* rxe's is in hw_counters/ */
	CHECK(!nv_hwcnt_has(&c, NV_HWCNT_PORT_XMIT_DATA)); /* no counters/: no byte rates */
	CHECK(strcmp(nv_hwcnt_format(&c, 1, 1, buf, sizeof(buf)),
		     "duplicate_request=40 rcvd_seq_err=9 completer_retry_err=12") == 0);
}

int main(void)
{
	struct nv_hwcnt a, b, d;
	char dir[300], buf[1024];

	snprintf(root, sizeof(root), "%s/nvhwcnt.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	atexit(cleanup);
	snprintf(dir, sizeof(dir), "%s/ports", root);
	mkdir(dir, 0755);
	snprintf(dir, sizeof(dir), "%s/ports/1", root);
	mkdir(dir, 0755);

	/* no counter directories: nothing present, and the text says so */
	CHECK(nv_hwcnt_read(root, 1, &a) == 0);
	CHECK(a.present == 0);
	CHECK(strcmp(nv_hwcnt_format(&a, 0, 0, buf, sizeof(buf)), "none present") == 0);
	CHECK(nv_hwcnt_read(root, 2, &a) == 0); /* no such port */

	put("counters", "port_xmit_data", "1000\n");
	put("counters", "link_downed", "0\n");
	put("hw_counters", "link_downed", "77\n"); /* counters/ wins */
	put("hw_counters", "out_of_sequence", "5\n");
	put("hw_counters", "local_ack_timeout_err", "garbage\n");
	put("hw_counters", "np_cnp_sent", "3");
	CHECK(nv_hwcnt_read(root, 1, &a) == 4);
	CHECK(nv_hwcnt_has(&a, NV_HWCNT_PORT_XMIT_DATA) && a.v[NV_HWCNT_PORT_XMIT_DATA] == 1000);
	CHECK(nv_hwcnt_has(&a, NV_HWCNT_LINK_DOWNED) && a.v[NV_HWCNT_LINK_DOWNED] == 0);
	CHECK(nv_hwcnt_has(&a, NV_HWCNT_OUT_OF_SEQUENCE) && a.v[NV_HWCNT_OUT_OF_SEQUENCE] == 5);
	CHECK(nv_hwcnt_has(&a, NV_HWCNT_NP_CNP_SENT) && a.v[NV_HWCNT_NP_CNP_SENT] == 3);
	CHECK(!nv_hwcnt_has(&a, NV_HWCNT_LOCAL_ACK_TIMEOUT_ERR)); /* not a number: absent */
	CHECK(!nv_hwcnt_has(&a, NV_HWCNT_PORT_RCV_DATA));	      /* no file: absent, not 0 */
	CHECK(nv_hwcnt_is_loss(NV_HWCNT_OUT_OF_SEQUENCE) && !nv_hwcnt_is_loss(NV_HWCNT_PORT_XMIT_DATA));
	CHECK(strcmp(nv_hwcnt_name(NV_HWCNT_RNR_NAK_RETRY_ERR), "rnr_nak_retry_err") == 0);
	CHECK(nv_hwcnt_name(NV_HWCNT_COUNT) == NULL && nv_hwcnt_name(-1) == NULL);
	CHECK(strcmp(nv_hwcnt_format(&a, 0, 0, buf, sizeof(buf)),
		     "port_xmit_data=1000 link_downed=0 out_of_sequence=5 np_cnp_sent=3") == 0);
	CHECK(strcmp(nv_hwcnt_format(&a, 1, 1, buf, sizeof(buf)), "out_of_sequence=5") == 0);

	put("counters", "port_xmit_data", "1500\n");
	put("hw_counters", "out_of_sequence", "2\n"); /* went backwards: reset */
	put("hw_counters", "local_ack_timeout_err", "9\n"); /* appeared: not in both */
	put("counters", "port_rcv_data", "10\n");
	CHECK(nv_hwcnt_read(root, 1, &b) == 6);
	nv_hwcnt_delta(&a, &b, &d);
	CHECK(nv_hwcnt_has(&d, NV_HWCNT_PORT_XMIT_DATA) && d.v[NV_HWCNT_PORT_XMIT_DATA] == 500);
	CHECK(nv_hwcnt_has(&d, NV_HWCNT_LINK_DOWNED) && d.v[NV_HWCNT_LINK_DOWNED] == 0);
	CHECK(!nv_hwcnt_has(&d, NV_HWCNT_OUT_OF_SEQUENCE));
	CHECK(!nv_hwcnt_has(&d, NV_HWCNT_LOCAL_ACK_TIMEOUT_ERR));
	CHECK(!nv_hwcnt_has(&d, NV_HWCNT_PORT_RCV_DATA));
	CHECK(d.t_ns == b.t_ns - a.t_ns);
	CHECK(strcmp(nv_hwcnt_format(&d, 1, 0, buf, sizeof(buf)), "port_xmit_data=500") == 0);
	CHECK(strcmp(nv_hwcnt_format(&d, 1, 1, buf, sizeof(buf)), "all 0") == 0);
	/* a short buffer ends at a whole entry */
	CHECK(strcmp(nv_hwcnt_format(&b, 0, 0, buf, 24), "port_xmit_data=1500") == 0);

	rxe_port();
	return nvt_exit("test_hwcnt");
}
