# Failure, abuse, leak, soak, concurrency and fuzz tests.
# The tests build on the end-to-end harness (test/e2e/libe2e.la) plus
# test/fault/fh.[ch]; each has a hard time limit of its own (fh_watchdog).
# What users see and what to do: docs/troubleshooting.md.
#
# make check:        the FAULT_TESTS below (about 2 minutes on 2 cores)
# make check-extra:  check-fuzz, check-tsan, check-valgrind (below)
# long runs:         test/fault/soak.sh --messages 1000000 --failover 2
#                    test/fault/fuzz.sh --runs 1000000

FAULT_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/test/e2e
FAULT_LDADD = test/fault/libfh.la test/e2e/libe2e.la libnvcore.la $(IBVERBS_LIBS) -ldl

check_LTLIBRARIES += test/fault/libfh.la
test_fault_libfh_la_SOURCES = test/fault/fh.c test/fault/fh.h
test_fault_libfh_la_CPPFLAGS = $(FAULT_CPPFLAGS)

FAULT_TESTS = \
	test/fault/fault_handshake \
	test/fault/fault_config \
	test/fault/fault_qp \
	test/fault/fault_kill \
	test/fault/fault_cycles \
	test/fault/fault_soak \
	test/fault/fault_threads \
	test/fault/fault_memlock \
	test/fault/fault_probe \
	test/fault/fault_cq \
	test/fault/fault_misroute \
	test/fault/fault_abandon \
	test/fault/fault_storm \
	test/fault/fault_rules \
	test/fault/fault_failover \
	test/fault/fault_hold \
	test/fault/fault_fo_idle \
	test/fault/fault_credit \
	test/fault/fault_stall \
	test/fault/fault_wqelat \
	test/fault/fault_eager \
	test/fault/fault_sqroom \
	test/fault/fault_lb

check_PROGRAMS += $(FAULT_TESTS)
TESTS += $(FAULT_TESTS)

test_fault_fault_lb_SOURCES = test/fault/fault_lb.c
test_fault_fault_lb_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_lb_LDADD = $(FAULT_LDADD)
test_fault_fault_stall_SOURCES = test/fault/fault_stall.c
test_fault_fault_stall_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_stall_LDADD = $(FAULT_LDADD)
test_fault_fault_wqelat_SOURCES = test/fault/fault_wqelat.c
test_fault_fault_wqelat_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_wqelat_LDADD = $(FAULT_LDADD)
test_fault_fault_credit_SOURCES = test/fault/fault_credit.c
test_fault_fault_credit_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_credit_LDADD = $(FAULT_LDADD)

test_fault_fault_handshake_SOURCES = test/fault/fault_handshake.c
test_fault_fault_handshake_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_handshake_LDADD = $(FAULT_LDADD)

test_fault_fault_config_SOURCES = test/fault/fault_config.c
test_fault_fault_config_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_config_LDADD = $(FAULT_LDADD)

test_fault_fault_failover_SOURCES = test/fault/fault_failover.c
test_fault_fault_failover_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_failover_LDADD = $(FAULT_LDADD)

test_fault_fault_hold_SOURCES = test/fault/fault_hold.c
test_fault_fault_hold_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_hold_LDADD = $(FAULT_LDADD)

test_fault_fault_fo_idle_SOURCES = test/fault/fault_fo_idle.c
test_fault_fault_fo_idle_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_fo_idle_LDADD = $(FAULT_LDADD)

test_fault_fault_sqroom_SOURCES = test/fault/fault_sqroom.c
test_fault_fault_sqroom_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_sqroom_LDADD = $(FAULT_LDADD)

test_fault_fault_eager_SOURCES = test/fault/fault_eager.c
test_fault_fault_eager_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_eager_LDADD = $(FAULT_LDADD)

test_fault_fault_qp_SOURCES = test/fault/fault_qp.c
test_fault_fault_qp_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_qp_LDADD = $(FAULT_LDADD)

test_fault_fault_kill_SOURCES = test/fault/fault_kill.c
test_fault_fault_kill_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_kill_LDADD = $(FAULT_LDADD)

test_fault_fault_cycles_SOURCES = test/fault/fault_cycles.c
test_fault_fault_cycles_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_cycles_LDADD = $(FAULT_LDADD)

test_fault_fault_soak_SOURCES = test/fault/fault_soak.c
test_fault_fault_soak_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_soak_LDADD = $(FAULT_LDADD)

test_fault_fault_threads_SOURCES = test/fault/fault_threads.c
test_fault_fault_threads_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_threads_LDADD = $(FAULT_LDADD)

test_fault_fault_memlock_SOURCES = test/fault/fault_memlock.c
test_fault_fault_memlock_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_memlock_LDADD = $(FAULT_LDADD)

test_fault_fault_probe_SOURCES = test/fault/fault_probe.c
test_fault_fault_probe_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_probe_LDADD = $(FAULT_LDADD)

test_fault_fault_misroute_SOURCES = test/fault/fault_misroute.c
test_fault_fault_misroute_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_misroute_LDADD = $(FAULT_LDADD)

test_fault_fault_abandon_SOURCES = test/fault/fault_abandon.c
test_fault_fault_abandon_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_abandon_LDADD = $(FAULT_LDADD)

test_fault_fault_storm_SOURCES = test/fault/fault_storm.c
test_fault_fault_storm_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_storm_LDADD = $(FAULT_LDADD)

test_fault_fault_rules_SOURCES = test/fault/fault_rules.c
test_fault_fault_rules_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_rules_LDADD = $(FAULT_LDADD)

test_fault_fault_cq_SOURCES = test/fault/fault_cq.c
test_fault_fault_cq_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_cq_LDADD = $(FAULT_LDADD)

# The soak again over 4 QPs per connection, split (the program's name selects it).
check_PROGRAMS += test/fault/fault_soak_qps
TESTS += test/fault/fault_soak_qps
test_fault_fault_soak_qps_SOURCES = test/fault/fault_soak.c
test_fault_fault_soak_qps_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_soak_qps_LDADD = $(FAULT_LDADD)

# The soak with 2 more connections over a fused NIC, failover on, random faults injected.
check_PROGRAMS += test/fault/fault_soak_fo
TESTS += test/fault/fault_soak_fo
test_fault_fault_soak_fo_SOURCES = test/fault/fault_soak.c
test_fault_fault_soak_fo_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_soak_fo_LDADD = $(FAULT_LDADD)

# Reruns with the eager path off: test/reruns.mk.

# A known bug found by these tests (fault_config, fault_qp, fault_kill) has its
# case run, while it is open, in a copy of the program named *_xfail listed in
# XFAIL_TESTS (the name selects the cases). None is open. Fixed so far: an empty
# GID entry named by NCCL_IB_GID_INDEX, unsignalled WRs without a wr_id, a
# connect failing after its QPs exist naming our device and QPN.


EXTRA_DIST += test/fault/soak.sh test/fault/valgrind.sh test/fault/valgrind.supp \
	test/fault/tsan.sh test/fault/fuzz.sh test/fault/fuzz/fuzz_common.h \
	test/fault/fuzz/fuzz_seeds.c $(FAULT_FUZZ_TARGETS:%=test/fault/fuzz/fuzz_%.c) \
	test/fault/corpus

# ---- fuzzing: libFuzzer targets of every network decoder (src/wire.c, cts.c, fo_msg.c) --
# Short pass here; the long run is `test/fault/fuzz.sh --runs 1000000`.
FAULT_FUZZ_TARGETS = handle hdr hello status meta stream cts records eager credit fo lb
check-fuzz:
	@NV_TOP_SRCDIR="$(abs_top_srcdir)" NV_TOP_BUILDDIR="$(abs_top_builddir)" \
	  $(SHELL) $(srcdir)/test/fault/fuzz.sh --runs $${FUZZ_RUNS:-20000}; rc=$$?; \
	  if [ $$rc -eq 77 ]; then echo "check-fuzz: SKIP (no clang with libFuzzer)"; rc=0; fi; \
	  exit $$rc

# ---- ThreadSanitizer: plugin + fault_threads built with clang -fsanitize=thread --
check-tsan:
	@NV_TOP_SRCDIR="$(abs_top_srcdir)" NV_TOP_BUILDDIR="$(abs_top_builddir)" \
	  NV_PLUGIN_SOURCES="$(libnvcore_la_SOURCES) $(libnccl_net_verbs_la_SOURCES)" \
	  $(SHELL) $(srcdir)/test/fault/tsan.sh; rc=$$?; \
	  if [ $$rc -eq 77 ]; then echo "check-tsan: SKIP (no clang with ThreadSanitizer)"; rc=0; fi; \
	  exit $$rc

# ---- valgrind memcheck ---------------------------------------------------------
# e2e tests and fault tests under memcheck (test/fault/valgrind.sh: errors and
# definite/indirect leaks fail; simverbs' object report stays on). Data written
# by a peer PROCESS is visible to memcheck since simverbs marks peer-writable
# ranges defined, so the two-process tests are in too.
# e2e_versions (95 s under valgrind) is left out for time; e2e_loopback covers
# the v6 and v12 tables. The soak runs 1500 messages here. The eager path:
# e2e_eager, fault_eager (hostile peers), fault_credit.
FAULT_VALGRIND_TESTS = test/e2e/e2e_loopback test/e2e/e2e_handshake test/e2e/e2e_kill \
	test/e2e/e2e_errors test/e2e/e2e_vnic test/e2e/e2e_multi \
	test/fault/fault_qp test/fault/fault_kill test/fault/fault_cycles \
	test/fault/fault_handshake test/fault/fault_threads test/fault/fault_soak \
	test/fault/fault_abandon test/e2e/e2e_eager test/fault/fault_eager test/fault/fault_credit
# The pass runs under names of its own, test/valgrind/<dir>/<test>.vg (a file
# holding the program's path, read by valgrind.sh), so that its .log and .trs
# files (test/valgrind/...) never overwrite those of `make check`.
TEST_EXTENSIONS = .test .vg .eager0 .fast0	# .eager0, .fast0: test/reruns.mk
VG_LOG_COMPILER = $(SHELL) $(abs_top_srcdir)/test/fault/valgrind.sh
FAULT_VALGRIND_VG = $(FAULT_VALGRIND_TESTS:test/%=test/valgrind/%.vg)
check-valgrind:
	@if ! command -v valgrind >/dev/null 2>&1; then \
	  echo "check-valgrind: SKIP (valgrind not installed)"; exit 0; fi; \
	for t in $(FAULT_VALGRIND_TESTS); do \
	  $(MKDIR_P) "$$(dirname "test/valgrind/$${t#test/}")" && \
	  echo "$$t" >"test/valgrind/$${t#test/}.vg" || exit 1; done; \
	$(MAKE) $(AM_MAKEFLAGS) check TESTS="$(FAULT_VALGRIND_VG)" XFAIL_TESTS= \
	  TEST_SUITE_LOG=test-suite-valgrind.log
clean-local: clean-valgrind
clean-valgrind:
	-rm -rf test/valgrind test-suite-valgrind.log

EXTRA_CHECK_TARGETS += check-fuzz check-tsan check-valgrind
.PHONY: check-fuzz check-tsan check-valgrind clean-valgrind
