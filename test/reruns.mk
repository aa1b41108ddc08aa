# Reruns: tests of make check run once more under another setting, named
# TEST-eager-off.eager0 or TEST-general.fast0 (the log: TEST-eager-off.log or
# TEST-general.log, beside TEST.log). Each list names the tests; the .eager0
# and .fast0 files are generated
# in the build tree (they hold a comment only), so no placeholder is kept in
# the source tree. test/device/tests.list names each rerun with its mode.
#
# The eager path off (NCCL_VERBS_EAGER_MAX=0, test/e2e/rerun.sh): every test
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
EAGER0_LOG_COMPILER = $(SHELL) $(abs_top_srcdir)/test/e2e/rerun.sh
EXTRA_DIST += test/e2e/rerun.sh
CLEANFILES += $(EAGER_OFF_TESTS)
$(EAGER_OFF_TESTS): $(top_srcdir)/test/reruns.mk
	$(AM_V_GEN)$(MKDIR_P) `dirname $@` && \
	  echo "# $@: test/e2e/rerun.sh runs the test with NCCL_VERBS_EAGER_MAX=0" >$@

# The general paths (NCCL_VERBS_FAST_PATHS=0, test/e2e/rerun.sh): the
# one-buffer one-QP fast paths of isend (send.c), irecv (recv.c) and the eager
# irecv and completion (eager.h) are copies of the general paths, so the tests
# that drive them through every case they take (sizes over and under the
# adaptive-routing split, truncation, tags, zero bytes, eager crossings and
# credit, CQ and receive-queue room, hostile peer writes, error completions,
# QP errors, splitting under a lowered max_msg_sz, soak and threads) run once
# more with every message on the general paths; test/unit/test_fast_paths
# proves the mode reaches them. The twelve add about a minute (52 s wall, 28 s
# CPU with make -j1 on 2 shared cores; their originals 70 s, 35 s). Left out: the tests
# whose comms take the general paths anyway (several QPs or devices:
# e2e_multi, e2e_vnic, fault_failover, fault_soak_qps), those that move no
# data or test the handshake, a dying peer or the ABI tables around the same
# calls (e2e_versions, e2e_kill, fault_kill, fault_handshake, the eager-off
# list's others), and fault_sqroom: its premise (the send queue filled to
# max_qp_wr - 1 by one-WR messages before its test) is the fast isend's room
# check, which reserves the message's WRs, where the general one reserves the
# chain of the receive's whole capacity and so polls sooner: in this mode the
# test stops at that premise (round 0: 3 WRs outstanding, not 17).
GENERAL_RERUNS = test/e2e/e2e_loopback test/e2e/e2e_cq test/e2e/e2e_errors \
	test/e2e/e2e_eager test/e2e/e2e_sources \
	test/fault/fault_qp test/fault/fault_cq test/fault/fault_eager test/fault/fault_credit \
	test/fault/fault_soak test/fault/fault_threads test/unit/test_limits

GENERAL_TESTS = $(GENERAL_RERUNS:=-general.fast0)
TESTS += $(GENERAL_TESTS)
FAST0_LOG_COMPILER = $(SHELL) $(abs_top_srcdir)/test/e2e/rerun.sh
CLEANFILES += $(GENERAL_TESTS)
$(GENERAL_TESTS): $(top_srcdir)/test/reruns.mk
	$(AM_V_GEN)$(MKDIR_P) `dirname $@` && \
	  echo "# $@: test/e2e/rerun.sh runs the test with NCCL_VERBS_FAST_PATHS=0" >$@
