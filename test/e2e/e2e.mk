# End-to-end tests of the plugin: each dlopens the built plugin
# ($NV_TEST_PLUGIN) and drives its ncclNetPlugin_vN tables over simverbs.
# Every test runs under `timeout` (test/e2e/run.sh) so a hang fails fast.

check_LTLIBRARIES += test/e2e/libe2e.la
test_e2e_libe2e_la_SOURCES = test/e2e/e2e.c test/e2e/e2e_util.c test/e2e/e2e.h \
	test/e2e/e2e_script.c test/e2e/e2e_script.h
test_e2e_libe2e_la_LIBADD = -ldl

E2E_LDADD = test/e2e/libe2e.la -ldl

check_PROGRAMS += test/e2e/e2e_loopback
test_e2e_e2e_loopback_SOURCES = test/e2e/e2e_loopback.c
test_e2e_e2e_loopback_LDADD = $(E2E_LDADD)

check_PROGRAMS += test/e2e/e2e_versions
test_e2e_e2e_versions_SOURCES = test/e2e/e2e_versions.c
test_e2e_e2e_versions_LDADD = $(E2E_LDADD)

check_PROGRAMS += test/e2e/e2e_handshake
test_e2e_e2e_handshake_SOURCES = test/e2e/e2e_handshake.c
test_e2e_e2e_handshake_LDADD = $(E2E_LDADD)

check_PROGRAMS += test/e2e/e2e_kill
test_e2e_e2e_kill_SOURCES = test/e2e/e2e_kill.c
test_e2e_e2e_kill_LDADD = $(E2E_LDADD)

check_PROGRAMS += test/e2e/e2e_multi
test_e2e_e2e_multi_SOURCES = test/e2e/e2e_multi.c
test_e2e_e2e_multi_LDADD = $(E2E_LDADD)

check_PROGRAMS += test/e2e/e2e_errors
test_e2e_e2e_errors_SOURCES = test/e2e/e2e_errors.c
test_e2e_e2e_errors_LDADD = $(E2E_LDADD)

check_PROGRAMS += test/e2e/e2e_gpu
test_e2e_e2e_gpu_SOURCES = test/e2e/e2e_gpu.c
test_e2e_e2e_gpu_LDADD = $(E2E_LDADD)

check_PROGRAMS += test/e2e/e2e_vnic
test_e2e_e2e_vnic_SOURCES = test/e2e/e2e_vnic.c
test_e2e_e2e_vnic_LDADD = $(E2E_LDADD)

check_PROGRAMS += test/e2e/e2e_cq
test_e2e_e2e_cq_SOURCES = test/e2e/e2e_cq.c
test_e2e_e2e_cq_LDADD = $(E2E_LDADD)

check_PROGRAMS += test/e2e/e2e_eager
test_e2e_e2e_eager_SOURCES = test/e2e/e2e_eager.c
test_e2e_e2e_eager_LDADD = $(E2E_LDADD)

check_PROGRAMS += test/e2e/e2e_sources
test_e2e_e2e_sources_SOURCES = test/e2e/e2e_sources.c
test_e2e_e2e_sources_LDADD = $(E2E_LDADD)

E2E_TESTS = test/e2e/e2e_loopback test/e2e/e2e_versions test/e2e/e2e_handshake \
	test/e2e/e2e_kill test/e2e/e2e_multi test/e2e/e2e_errors test/e2e/e2e_gpu \
	test/e2e/e2e_vnic test/e2e/e2e_cq test/e2e/e2e_eager test/e2e/e2e_sources
TESTS += $(E2E_TESTS)
# Reruns with the eager path off: test/reruns.mk.
