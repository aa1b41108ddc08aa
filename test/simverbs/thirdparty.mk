# test/simverbs/thirdparty.mk - simverbs under software nobody here wrote (issue 14):
# librdmacm and Debian's rdma_cm programs, UCX, rdma-core's own pyverbs suite
# (test/simverbs/rdma-core-tests.sh, run by hand; see test/simverbs/README.md).

# ---- librdmacm: a program calling rdma_get_devices/rdma_create_event_channel
if HAVE_RDMACM
check_PROGRAMS += test/simverbs/tests/sv_rdmacm
test_simverbs_tests_sv_rdmacm_LDADD = -lrdmacm $(IBVERBS_LIBS) -ldl
TESTS += test/simverbs/tests/sv_rdmacm
endif
EXTRA_DIST += test/simverbs/tests/sv_rdmacm.c test/simverbs/rdma-core-tests.sh \
	test/simverbs/rdma-core-compare.sh test/simverbs/perftest-probe.sh

# ---- answers third-party software relies on (phys_port_cnt_ex, create flags,
# sysfs EINVAL, identity, atomics)
check_PROGRAMS += test/simverbs/tests/sv_compat
test_simverbs_tests_sv_compat_LDADD = $(IBVERBS_LIBS) -ldl
TESTS += test/simverbs/tests/sv_compat

# ---- RDMA atomics (fetch-and-add, compare-and-swap)
check_PROGRAMS += test/simverbs/tests/sv_atomic
test_simverbs_tests_sv_atomic_LDADD = $(IBVERBS_LIBS) -ldl
TESTS += test/simverbs/tests/sv_atomic

# ---- shared receive queues
check_PROGRAMS += test/simverbs/tests/sv_srq
test_simverbs_tests_sv_srq_LDADD = $(IBVERBS_LIBS) -ldl
TESTS += test/simverbs/tests/sv_srq

# ---- device limits count every process of a host
check_PROGRAMS += test/simverbs/tests/sv_devlimits
test_simverbs_tests_sv_devlimits_LDADD = $(IBVERBS_LIBS) -ldl
TESTS += test/simverbs/tests/sv_devlimits

# ---- UD QPs and address handles
check_PROGRAMS += test/simverbs/tests/sv_ud
test_simverbs_tests_sv_ud_LDADD = $(IBVERBS_LIBS) -ldl
TESTS += test/simverbs/tests/sv_ud

# ---- Debian programs (skip 77 when rdmacm-utils / ucx-utils are missing)
SV_THIRDPARTY_CHECKS = test/simverbs/checks/rdmacm-utils.sh test/simverbs/checks/ucx-load.sh \
	test/simverbs/checks/ucx-perftest.sh
EXTRA_DIST += $(SV_THIRDPARTY_CHECKS)
TESTS += $(SV_THIRDPARTY_CHECKS)

# ---- rdma-core's own pyverbs suite, by hand: make check-rdma-core [RDMA_CORE=<checkout>]
# (default: the copy of the suite python3-pyverbs installs)
RDMA_CORE = installed
check-rdma-core: all
	$(SHELL) $(srcdir)/test/simverbs/rdma-core-tests.sh "$(RDMA_CORE)" "$(abs_builddir)"
.PHONY: check-rdma-core
