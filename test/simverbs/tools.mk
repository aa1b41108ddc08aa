# test/simverbs/tools.mk - simverbs' command-line tools and their checks.
# perftest stand-ins (libmlx5.so.1, libefa.so.1 next to simverbs' libibverbs.so.1), raw fabric
# benchmarks (sv-rawbench, pvm-bw, fabric-bench.sh) and checks that run unchanged Debian
# programs (ibv_devices, ibv_devinfo, ibv_rc_pingpong, perftest) on simverbs.

# ---- stand-in vendor libraries ------------------------------------------------------------
# Shared (-rpath) so they land in test/simverbs/.libs/ as lib*.so.1, found through the tests'
# LD_LIBRARY_PATH before the system's real providers.
SV_STANDIN_LDFLAGS = -version-info 1:0:0 -rpath $(abs_builddir)/test/simverbs -no-undefined
# Each stand-in's version script and its weak "not supported" stubs are generated at build time
# from the installed Debian library (every version node and function it exports; see
# standin/gen-standin.sh); the hand-written mlx5.c/efa.c override the stubs perftest and the
# checks depend on with real prototypes.  Without the real library, standin/<name>.map is used.
SV_STANDIN_GEN = $(SHELL) $(srcdir)/test/simverbs/standin/gen-standin.sh
SV_STANDIN_DEPS = $(srcdir)/test/simverbs/standin/gen-standin.sh
test/simverbs/standin/gen-mlx5.map: $(srcdir)/test/simverbs/standin/mlx5.map $(SV_STANDIN_DEPS)
	$(AM_V_GEN)$(SV_STANDIN_GEN) "`$(CC) -print-file-name=libmlx5.so.1`" infiniband/mlx5dv.h \
		"$(CC) $(IBVERBS_CFLAGS)" $(srcdir)/test/simverbs/standin/mlx5.map test/simverbs/standin/gen-mlx5
test/simverbs/standin/gen-mlx5-gen.c: test/simverbs/standin/gen-mlx5.map
	@test -f $@ || $(SV_STANDIN_GEN) "`$(CC) -print-file-name=libmlx5.so.1`" infiniband/mlx5dv.h \
		"$(CC) $(IBVERBS_CFLAGS)" $(srcdir)/test/simverbs/standin/mlx5.map test/simverbs/standin/gen-mlx5
test/simverbs/standin/gen-efa.map: $(srcdir)/test/simverbs/standin/efa.map $(SV_STANDIN_DEPS)
	$(AM_V_GEN)$(SV_STANDIN_GEN) "`$(CC) -print-file-name=libefa.so.1`" infiniband/efadv.h \
		"$(CC) $(IBVERBS_CFLAGS)" $(srcdir)/test/simverbs/standin/efa.map test/simverbs/standin/gen-efa
test/simverbs/standin/gen-efa-gen.c: test/simverbs/standin/gen-efa.map
	@test -f $@ || $(SV_STANDIN_GEN) "`$(CC) -print-file-name=libefa.so.1`" infiniband/efadv.h \
		"$(CC) $(IBVERBS_CFLAGS)" $(srcdir)/test/simverbs/standin/efa.map test/simverbs/standin/gen-efa
test/simverbs/standin/gen-mlx4.map: $(srcdir)/test/simverbs/standin/mlx4.map $(SV_STANDIN_DEPS)
	$(AM_V_GEN)$(SV_STANDIN_GEN) "`$(CC) -print-file-name=libmlx4.so.1`" infiniband/mlx4dv.h \
		"$(CC) $(IBVERBS_CFLAGS)" $(srcdir)/test/simverbs/standin/mlx4.map test/simverbs/standin/gen-mlx4
test/simverbs/standin/gen-mlx4-gen.c: test/simverbs/standin/gen-mlx4.map
	@test -f $@ || $(SV_STANDIN_GEN) "`$(CC) -print-file-name=libmlx4.so.1`" infiniband/mlx4dv.h \
		"$(CC) $(IBVERBS_CFLAGS)" $(srcdir)/test/simverbs/standin/mlx4.map test/simverbs/standin/gen-mlx4
test/simverbs/standin/gen-mana.map: $(srcdir)/test/simverbs/standin/mana.map $(SV_STANDIN_DEPS)
	$(AM_V_GEN)$(SV_STANDIN_GEN) "`$(CC) -print-file-name=libmana.so.1`" infiniband/manadv.h \
		"$(CC) $(IBVERBS_CFLAGS)" $(srcdir)/test/simverbs/standin/mana.map test/simverbs/standin/gen-mana
test/simverbs/standin/gen-mana-gen.c: test/simverbs/standin/gen-mana.map
	@test -f $@ || $(SV_STANDIN_GEN) "`$(CC) -print-file-name=libmana.so.1`" infiniband/manadv.h \
		"$(CC) $(IBVERBS_CFLAGS)" $(srcdir)/test/simverbs/standin/mana.map test/simverbs/standin/gen-mana
SV_STANDIN_GENERATED = \
	test/simverbs/standin/gen-mlx5.map test/simverbs/standin/gen-mlx5-gen.c \
	test/simverbs/standin/gen-efa.map test/simverbs/standin/gen-efa-gen.c \
	test/simverbs/standin/gen-mlx4.map test/simverbs/standin/gen-mlx4-gen.c \
	test/simverbs/standin/gen-mana.map test/simverbs/standin/gen-mana-gen.c
BUILT_SOURCES += $(SV_STANDIN_GENERATED)
CLEANFILES += $(SV_STANDIN_GENERATED)
EXTRA_DIST += $(SV_STANDIN_DEPS) test/simverbs/standin/mlx5.map test/simverbs/standin/efa.map \
	test/simverbs/standin/mlx4.map test/simverbs/standin/mana.map
noinst_LTLIBRARIES += test/simverbs/libmlx5.la test/simverbs/libefa.la \
	test/simverbs/libmlx4.la test/simverbs/libmana.la
test_simverbs_libmlx5_la_SOURCES = test/simverbs/standin/mlx5.c
nodist_test_simverbs_libmlx5_la_SOURCES = test/simverbs/standin/gen-mlx5-gen.c
test_simverbs_libmlx5_la_LDFLAGS = $(SV_STANDIN_LDFLAGS) \
	-Wl,--version-script=test/simverbs/standin/gen-mlx5.map
EXTRA_test_simverbs_libmlx5_la_DEPENDENCIES = test/simverbs/standin/gen-mlx5.map
test_simverbs_libefa_la_SOURCES = test/simverbs/standin/efa.c
nodist_test_simverbs_libefa_la_SOURCES = test/simverbs/standin/gen-efa-gen.c
test_simverbs_libefa_la_LDFLAGS = $(SV_STANDIN_LDFLAGS) \
	-Wl,--version-script=test/simverbs/standin/gen-efa.map
EXTRA_test_simverbs_libefa_la_DEPENDENCIES = test/simverbs/standin/gen-efa.map
nodist_test_simverbs_libmlx4_la_SOURCES = test/simverbs/standin/gen-mlx4-gen.c
test_simverbs_libmlx4_la_LDFLAGS = $(SV_STANDIN_LDFLAGS) \
	-Wl,--version-script=test/simverbs/standin/gen-mlx4.map
EXTRA_test_simverbs_libmlx4_la_DEPENDENCIES = test/simverbs/standin/gen-mlx4.map
nodist_test_simverbs_libmana_la_SOURCES = test/simverbs/standin/gen-mana-gen.c
test_simverbs_libmana_la_LDFLAGS = $(SV_STANDIN_LDFLAGS) \
	-Wl,--version-script=test/simverbs/standin/gen-mana.map
EXTRA_test_simverbs_libmana_la_DEPENDENCIES = test/simverbs/standin/gen-mana.map
# Every function@version the installed library exports is exported by its stand-in.
TESTS += test/simverbs/standin/standin-symbols.sh
EXTRA_DIST += test/simverbs/standin/standin-symbols.sh
# Opens the stand-ins by path and checks exports, symbol versions and "no capability" answers.
check_PROGRAMS += test/simverbs/standin/standin-check
test_simverbs_standin_standin_check_SOURCES = test/simverbs/standin/standin-check.c
test_simverbs_standin_standin_check_LDADD = -ldl
TESTS += test/simverbs/standin/standin-check

# ---- raw fabric benchmarks ------------------------------------------------------------------
# Linked against the system libibverbs; at run time LD_LIBRARY_PATH selects simverbs.
noinst_PROGRAMS += test/simverbs/bench/sv-rawbench test/simverbs/bench/pvm-bw \
	test/simverbs/bench/sv-regprobe
test_simverbs_bench_sv_rawbench_SOURCES = test/simverbs/bench/sv-rawbench.c \
	test/simverbs/bench/sb_verbs.c test/simverbs/bench/sb_verbs.h \
	test/simverbs/bench/sb_common.c test/simverbs/bench/sb_common.h
test_simverbs_bench_sv_rawbench_CFLAGS = $(AM_CFLAGS) -O2
test_simverbs_bench_sv_rawbench_LDADD = $(IBVERBS_LIBS)
test_simverbs_bench_sv_regprobe_SOURCES = test/simverbs/bench/sv-regprobe.c
test_simverbs_bench_sv_regprobe_LDADD = $(IBVERBS_LIBS)
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
	test/simverbs/checks/rawbench.sh \
	test/simverbs/checks/regprobe.sh
EXTRA_DIST += $(SV_TOOLS_CHECKS) test/simverbs/checks/lib.sh test/simverbs/checks/perftest-lib.sh \
	test/simverbs/checks/regprobe-rxe.txt
TESTS += $(SV_TOOLS_CHECKS)
