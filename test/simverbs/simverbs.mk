# simverbs: the software RDMA fabric.  Builds
# test/simverbs/.libs/libibverbs.so.1, a drop-in for rdma-core's libibverbs,
# the simverbs-ctl CLI, and the simverbs tests.  See test/simverbs/README.md.

noinst_LTLIBRARIES += test/simverbs/libibverbs.la
test_simverbs_libibverbs_la_SOURCES = \
	test/simverbs/config.c \
	test/simverbs/context.c \
	test/simverbs/counters.c \
	test/simverbs/cq.c \
	test/simverbs/cqx.c \
	test/simverbs/engine.c \
	test/simverbs/fault.c \
	test/simverbs/gid.c \
	test/simverbs/gpu.c \
	test/simverbs/gpu.h \
	test/simverbs/host.c \
	test/simverbs/leak.c \
	test/simverbs/loss.c \
	test/simverbs/misc.c \
	test/simverbs/nl.c \
	test/simverbs/obj.c \
	test/simverbs/pd_mr.c \
	test/simverbs/post.c \
	test/simverbs/qp.c \
	test/simverbs/qpx.c \
	test/simverbs/route.c \
	test/simverbs/shm.c \
	test/simverbs/ah.c \
	test/simverbs/srccheck.c \
	test/simverbs/srq.c \
	test/simverbs/sysfs.c \
	test/simverbs/fabric_param.h \
	test/simverbs/sv.h
test_simverbs_libibverbs_la_LDFLAGS = -version-info 1:0:0 -no-undefined \
	-rpath $(abs_builddir)/test/simverbs \
	-Wl,--version-script=$(srcdir)/test/simverbs/simverbs.map
test_simverbs_libibverbs_la_CPPFLAGS = $(AM_CPPFLAGS) -D_GNU_SOURCE $(CUDA_CPPFLAGS)
# paths are bounded by IBV_SYSFS_PATH_MAX by design; truncation is checked where it matters
test_simverbs_libibverbs_la_CFLAGS = $(AM_CFLAGS) -Wno-format-truncation
test_simverbs_libibverbs_la_LIBADD = -lpthread -lrt -ldl -lm
EXTRA_test_simverbs_libibverbs_la_DEPENDENCIES = $(srcdir)/test/simverbs/simverbs.map
EXTRA_DIST += test/simverbs/simverbs.map test/simverbs/README.md

# ---- prototype check: every function simverbs.map exports, taken into a
# pointer of rdma-core's declared type (see gen-protocheck.sh).  Built by `make`
# with -Werror whatever --disable-picky says; not linked anywhere.
noinst_LTLIBRARIES += test/simverbs/libsvprotocheck.la
nodist_test_simverbs_libsvprotocheck_la_SOURCES = test/simverbs/sv_protocheck.c
test_simverbs_libsvprotocheck_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/test/simverbs
test_simverbs_libsvprotocheck_la_CFLAGS = $(AM_CFLAGS) -Werror
test/simverbs/sv_protocheck.c: $(srcdir)/test/simverbs/simverbs.map \
		$(srcdir)/test/simverbs/gen-protocheck.sh
	$(AM_V_GEN)$(MKDIR_P) test/simverbs && \
	$(SHELL) $(srcdir)/test/simverbs/gen-protocheck.sh $(srcdir)/test/simverbs/simverbs.map > $@.tmp && \
	mv $@.tmp $@
CLEANFILES += test/simverbs/sv_protocheck.c
EXTRA_DIST += test/simverbs/gen-protocheck.sh test/simverbs/rdma_private.h
noinst_HEADERS += test/simverbs/rdma_private.h

# ---- tests (programs linked against the system libibverbs for its symbol
# versions; at run time LD_LIBRARY_PATH from AM_TESTS_ENVIRONMENT makes them
# load simverbs, which they verify through dlsym("simverbs_control")).
SV_TEST_LDADD = $(IBVERBS_LIBS) -ldl
SV_TEST_PROGS = \
	test/simverbs/tests/sv_basic \
	test/simverbs/tests/sv_verbs \
	test/simverbs/tests/sv_errors \
	test/simverbs/tests/sv_faults \
	test/simverbs/tests/sv_events \
	test/simverbs/tests/sv_memcheck \
	test/simverbs/tests/sv_cqrace \
	test/simverbs/tests/sv_lifecycle \
	test/simverbs/tests/sv_parity \
	test/simverbs/tests/sv_stream \
	test/simverbs/tests/sv_addr \
	test/simverbs/tests/sv_netdev \
	test/simverbs/tests/sv_srccheck \
	test/simverbs/tests/sv_rxe \
	test/simverbs/tests/sv_flap \
	test/simverbs/tests/sv_loss
check_PROGRAMS += $(SV_TEST_PROGS)
TESTS += $(SV_TEST_PROGS) test/simverbs/tests/sv_ctl.sh
dist_check_SCRIPTS += test/simverbs/tests/sv_ctl.sh
noinst_HEADERS += test/simverbs/tests/svt.h
test_simverbs_tests_sv_basic_LDADD = $(SV_TEST_LDADD)
test_simverbs_tests_sv_verbs_LDADD = $(SV_TEST_LDADD)
test_simverbs_tests_sv_errors_LDADD = $(SV_TEST_LDADD)
test_simverbs_tests_sv_faults_LDADD = $(SV_TEST_LDADD)
test_simverbs_tests_sv_events_LDADD = $(SV_TEST_LDADD) -lpthread
test_simverbs_tests_sv_memcheck_LDADD = $(SV_TEST_LDADD)
test_simverbs_tests_sv_cqrace_LDADD = $(SV_TEST_LDADD) -lpthread
test_simverbs_tests_sv_lifecycle_LDADD = $(SV_TEST_LDADD)
test_simverbs_tests_sv_addr_LDADD = $(SV_TEST_LDADD)
test_simverbs_tests_sv_netdev_LDADD = $(SV_TEST_LDADD)
test_simverbs_tests_sv_stream_LDADD = $(SV_TEST_LDADD) -lpthread
test_simverbs_tests_sv_parity_LDADD = $(SV_TEST_LDADD)
test_simverbs_tests_sv_srccheck_LDADD = $(SV_TEST_LDADD)
test_simverbs_tests_sv_rxe_LDADD = $(SV_TEST_LDADD)
test_simverbs_tests_sv_flap_LDADD = $(SV_TEST_LDADD)
test_simverbs_tests_sv_loss_LDADD = $(SV_TEST_LDADD)

noinst_PROGRAMS += test/simverbs/simverbs-ctl
test_simverbs_simverbs_ctl_SOURCES = test/simverbs/ctl.c
test_simverbs_simverbs_ctl_LDADD = test/simverbs/libibverbs.la

# ---- "old rdma-core": the same simverbs with only the IBVERBS_1.0/1.1 symbol
# versions (rdma-core before v17 / MOFED 4) and no extended query_port op, in
# test/simverbs/old/.libs/libibverbs.so.1. The plugin must load and work on it
# with the optional verbs switched off (test/unit/test-oldverbs.sh).
check_LTLIBRARIES += test/simverbs/old/libibverbs.la
test_simverbs_old_libibverbs_la_SOURCES = $(test_simverbs_libibverbs_la_SOURCES)
test_simverbs_old_libibverbs_la_LDFLAGS = -version-info 1:0:0 -no-undefined \
	-rpath $(abs_builddir)/test/simverbs/old \
	-Wl,--version-script=test/simverbs/old/simverbs-old.map
test_simverbs_old_libibverbs_la_CPPFLAGS = $(test_simverbs_libibverbs_la_CPPFLAGS) -DSV_OLD_RDMA_CORE
test_simverbs_old_libibverbs_la_CFLAGS = $(test_simverbs_libibverbs_la_CFLAGS)
test_simverbs_old_libibverbs_la_LIBADD = $(test_simverbs_libibverbs_la_LIBADD)
EXTRA_test_simverbs_old_libibverbs_la_DEPENDENCIES = test/simverbs/old/simverbs-old.map
# The 1.0 and 1.1 nodes of simverbs.map, plus simverbs' private control entry.
test/simverbs/old/simverbs-old.map: $(srcdir)/test/simverbs/simverbs.map
	$(AM_V_GEN)mkdir -p test/simverbs/old && \
	sed -n '1,/^} IBVERBS_1.0;/p' $(srcdir)/test/simverbs/simverbs.map > $@.tmp && \
	grep '^SIMVERBS_PRIVATE' $(srcdir)/test/simverbs/simverbs.map >> $@.tmp && mv $@.tmp $@
CLEANFILES += test/simverbs/old/simverbs-old.map

# GPU memory (gpu.c) against fakecuda, a stand-in libcuda.so.1 over host memory
if HAVE_CUDA
check_LTLIBRARIES += test/simverbs/tests/fakecuda/libcuda.la
test_simverbs_tests_fakecuda_libcuda_la_SOURCES = test/simverbs/tests/fakecuda.c
test_simverbs_tests_fakecuda_libcuda_la_CPPFLAGS = $(AM_CPPFLAGS) -D_GNU_SOURCE $(CUDA_CPPFLAGS)
# exported like the real driver: no -fvisibility=hidden
test_simverbs_tests_fakecuda_libcuda_la_CFLAGS = -std=gnu11 $(NV_WARN_CFLAGS) -pthread
test_simverbs_tests_fakecuda_libcuda_la_LDFLAGS = -version-info 1:0:0 -no-undefined \
	-rpath $(abs_builddir)/test/simverbs/tests/fakecuda
check_PROGRAMS += test/simverbs/tests/sv_gpu
TESTS += test/simverbs/tests/sv_gpu
test_simverbs_tests_sv_gpu_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
test_simverbs_tests_sv_gpu_LDADD = $(SV_TEST_LDADD)
EXTRA_test_simverbs_tests_sv_gpu_DEPENDENCIES = test/simverbs/tests/fakecuda/libcuda.la
endif
CUDA_BUILD_TESTS += test/simverbs/tests/sv_gpu
EXTRA_DIST += test/simverbs/tests/fakecuda.c test/simverbs/tests/sv_gpu.c
