# test/simverbs/tools.mk - owner: S2.
# perftest stand-ins (libmlx5.so.1, libefa.so.1 next to simverbs' libibverbs.so.1), raw fabric
# benchmarks (sv-rawbench, pvm-bw, fabric-bench.sh) and checks that run unchanged Debian
# programs (ibv_devices, ibv_devinfo, ibv_rc_pingpong, perftest) on simverbs.

# ---- stand-in vendor libraries ------------------------------------------------------------
# Shared (-rpath) so they land in test/simverbs/.libs/ as lib*.so.1, found through the tests'
# LD_LIBRARY_PATH before the system's real providers.
SV_STANDIN_LDFLAGS = -version-info 1:0:0 -rpath $(abs_builddir)/test/simverbs -no-undefined
noinst_LTLIBRARIES += test/simverbs/libmlx5.la test/simverbs/libefa.la
test_simverbs_libmlx5_la_SOURCES = test/simverbs/standin/mlx5.c
test_simverbs_libmlx5_la_LDFLAGS = $(SV_STANDIN_LDFLAGS) \
	-Wl,--version-script=$(srcdir)/test/simverbs/standin/mlx5.map
EXTRA_test_simverbs_libmlx5_la_DEPENDENCIES = $(srcdir)/test/simverbs/standin/mlx5.map
test_simverbs_libefa_la_SOURCES = test/simverbs/standin/efa.c
test_simverbs_libefa_la_LDFLAGS = $(SV_STANDIN_LDFLAGS) \
	-Wl,--version-script=$(srcdir)/test/simverbs/standin/efa.map
EXTRA_test_simverbs_libefa_la_DEPENDENCIES = $(srcdir)/test/simverbs/standin/efa.map
EXTRA_DIST += test/simverbs/standin/mlx5.map test/simverbs/standin/efa.map
# Opens the stand-ins by path and checks exports, symbol versions and "no capability" answers.
check_PROGRAMS += test/simverbs/standin/standin-check
test_simverbs_standin_standin_check_SOURCES = test/simverbs/standin/standin-check.c
test_simverbs_standin_standin_check_LDADD = -ldl
TESTS += test/simverbs/standin/standin-check

# ---- raw fabric benchmarks ------------------------------------------------------------------
# Linked against the system libibverbs; at run time LD_LIBRARY_PATH selects simverbs.
noinst_PROGRAMS += test/simverbs/bench/sv-rawbench test/simverbs/bench/pvm-bw
test_simverbs_bench_sv_rawbench_SOURCES = test/simverbs/bench/sv-rawbench.c \
	test/simverbs/bench/sb_verbs.c test/simverbs/bench/sb_verbs.h \
	test/simverbs/bench/sb_common.c test/simverbs/bench/sb_common.h
test_simverbs_bench_sv_rawbench_CFLAGS = $(AM_CFLAGS) -O2
test_simverbs_bench_sv_rawbench_LDADD = $(IBVERBS_LIBS)
test_simverbs_bench_pvm_bw_SOURCES = test/simverbs/bench/pvm-bw.c \
	test/simverbs/bench/sb_common.c test/simverbs/bench/sb_common.h
test_simverbs_bench_pvm_bw_CFLAGS = $(AM_CFLAGS) -O2
dist_noinst_SCRIPTS += test/simverbs/bench/fabric-bench.sh

# ---- checks: unchanged Debian programs and the benchmarks on simverbs ------------------------
# bash scripts; exit 77 when ibverbs-utils / perftest are missing (scripts/setup.sh installs them).
SV_TOOLS_CHECKS = \
	test/simverbs/checks/ibv-devinfo.sh \
	test/simverbs/checks/rc-pingpong.sh \
	test/simverbs/checks/perftest-write-bw.sh \
	test/simverbs/checks/perftest-write-lat.sh \
	test/simverbs/checks/perftest-send-bw.sh \
	test/simverbs/checks/perftest-read-bw.sh \
	test/simverbs/checks/rawbench.sh
EXTRA_DIST += $(SV_TOOLS_CHECKS) test/simverbs/checks/lib.sh test/simverbs/checks/perftest-lib.sh
TESTS += $(SV_TOOLS_CHECKS)
