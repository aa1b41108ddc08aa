# Reruns: tests of make check run once more under another setting, named
# TEST-eager-off.eager0 (the log: TEST-eager-off.log, beside TEST.log). Each
# list names the tests; the .eager0 files are generated
# in the build tree (they hold a comment only), so no placeholder is kept in
# the source tree. test/device/tests.list names each rerun with its mode.
#
# The eager path off (NCCL_VERBS_EAGER_MAX=0, test/e2e/eager0.sh): every test
# that moves data over one-device one-QP comms, where eager applies, passes
# with eager on (its own run) and off (this one). Left out: e2e_multi and
# e2e_vnic (several QPs or devices), e2e_eager (needs eager on), the fault
# tests that move no data (fault_storm, _abandon, _misroute, _probe, _rules,
# _config) or use several devices or QPs (fault_failover, fault_soak_qps).
EAGER_OFF_RERUNS = test/e2e/e2e_loopback test/e2e/e2e_cq test/e2e/e2e_errors \
	test/e2e/e2e_versions test/e2e/e2e_kill test/e2e/e2e_gpu \
	test/fault/fault_qp test/fault/fault_kill test/fault/fault_cycles test/fault/fault_soak \
	test/fault/fault_threads test/fault/fault_cq test/fault/fault_handshake \
	test/fault/fault_memlock \
	test/cluster/cl-ring.sh test/cluster/cl-linkdown.sh
if HAVE_CUDA
# GPU buffers take the clear-to-send path
EAGER_OFF_RERUNS += test/gpu/e2e_gpu_fake.sh
endif

EAGER_OFF_TESTS = $(EAGER_OFF_RERUNS:=-eager-off.eager0)
TESTS += $(EAGER_OFF_TESTS)
EAGER0_LOG_COMPILER = $(SHELL) $(abs_top_srcdir)/test/e2e/eager0.sh
EXTRA_DIST += test/e2e/eager0.sh
CLEANFILES += $(EAGER_OFF_TESTS)
$(EAGER_OFF_TESTS): $(top_srcdir)/test/reruns.mk
	$(AM_V_GEN)$(MKDIR_P) `dirname $@` && \
	  echo "# $@: test/e2e/eager0.sh runs the test with NCCL_VERBS_EAGER_MAX=0" >$@
