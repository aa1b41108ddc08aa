# User-facing tools: nccl-net-bench and its tests.
NB_SOURCES = \
	src/tools/nccl-net-bench.c \
	src/tools/nccl-net-bench-main.c \
	src/tools/nccl-net-bench.h \
	src/tools/nccl-net-bench-net.c \
	src/tools/nccl-net-bench-oob.c \
	src/tools/nccl-net-bench-engine.c \
	src/tools/nccl-net-bench-tests.c \
	src/tools/nccl-net-bench-ar.c \
	src/tools/nccl-net-bench-out.c \
	src/tools/nccl-net-bench-ncclib.c \
	src/tools/nccl-net-bench-self.c \
	src/tools/nccl-net-bench-pairs.c \
	src/tools/nccl-net-bench-cost.c

bin_PROGRAMS += nccl-net-bench
nccl_net_bench_SOURCES = $(NB_SOURCES)
nccl_net_bench_CPPFLAGS = $(AM_CPPFLAGS) -DNB_LIBDIR='"$(libdir)"'
nccl_net_bench_LDADD = -ldl -lm

# Tests (test/bench): a loopback-TCP fake plugin exporting v6..v12 lets the
# benchmark be checked without the verbs plugin; the other tests run over
# simverbs with the real plugin and skip (77) while it is not built.
check_LTLIBRARIES += test/bench/libnccl-net-nbfake.la
test_bench_libnccl_net_nbfake_la_SOURCES = test/bench/nb-fake-net.c test/bench/nb-fake-net-tables.h
test_bench_libnccl_net_nbfake_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere

NB_TESTS = test/bench/nb-fake-modes test/bench/nb-fake-errors \
	test/bench/nb-verbs-modes test/bench/nb-verbs-errors test/bench/nb-compare test/bench/nb-profile \
	test/bench/nb-peerkill test/bench/nb-warm test/bench/nb-pairs test/bench/nb-limits \
	test/bench/cc-idle
TESTS += $(NB_TESTS)
dist_check_SCRIPTS += $(NB_TESTS)
EXTRA_DIST += test/bench/nb-common.sh
