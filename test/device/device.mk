# The real-device test mode (test/device/run.sh: the plugin's tests on the
# system's libibverbs and devices; docs/testing-real-devices.md). tests.list
# names every test of make check with what it needs; the self-test checks
# that list against TESTS (print-tests) and runs the mode over simverbs.
dist_noinst_SCRIPTS += test/device/run.sh
EXTRA_DIST += test/device/tests.list
dist_check_SCRIPTS += test/device/selftest.sh
TESTS += test/device/selftest.sh

print-tests:
	@echo $(TESTS)
print-cuda-build-tests:
	@echo $(CUDA_BUILD_TESTS)
.PHONY: print-tests print-cuda-build-tests
