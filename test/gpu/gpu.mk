# Real NCCL drives the plugin: the client test/gpu/nccl-allreduce
# (built when configure finds nccl.h, libnccl.so.2 and the CUDA runtime) and
# scripts/gpu-check.sh, which runs it on a GPU machine.  `make check` builds
# the client and runs the script's no-GPU path (gpu_check_nogpu.sh).
if HAVE_NCCL
check_PROGRAMS += test/gpu/nccl-allreduce
test_gpu_nccl_allreduce_SOURCES = test/gpu/nccl-allreduce.c
test_gpu_nccl_allreduce_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
test_gpu_nccl_allreduce_LDADD = $(NCCL_LIBS)
# one-sided: ncclPutSignal through our RMA tables (NCCL 2.29+ headers; older: exits 77)
check_PROGRAMS += test/gpu/nccl-putsignal
test_gpu_nccl_putsignal_SOURCES = test/gpu/nccl-putsignal.c
test_gpu_nccl_putsignal_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
test_gpu_nccl_putsignal_LDADD = $(NCCL_LIBS)
# the client's own logic over stand-ins for libnccl.so.2 and the CUDA runtime
check_LTLIBRARIES += test/gpu/fake/libnccl.la test/gpu/fake/libcudart.la
FAKE_LIB_CFLAGS = -std=gnu11 $(NV_WARN_CFLAGS) -pthread
test_gpu_fake_libnccl_la_SOURCES = test/gpu/fake_nccl.c
test_gpu_fake_libnccl_la_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
test_gpu_fake_libnccl_la_CFLAGS = $(FAKE_LIB_CFLAGS)
test_gpu_fake_libnccl_la_LDFLAGS = -version-info 2:0:0 -no-undefined \
	-rpath $(abs_builddir)/test/gpu/fake
test_gpu_fake_libnccl_la_LIBADD = -lrt
test_gpu_fake_libcudart_la_SOURCES = test/gpu/fake_cudart.c
test_gpu_fake_libcudart_la_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
test_gpu_fake_libcudart_la_CFLAGS = $(FAKE_LIB_CFLAGS)
test_gpu_fake_libcudart_la_LDFLAGS = -version-info $(CUDART_SOMAJOR):0:0 -no-undefined \
	-rpath $(abs_builddir)/test/gpu/fake -Wl,--version-script=test/gpu/fake/cudart.map
EXTRA_test_gpu_fake_libcudart_la_DEPENDENCIES = test/gpu/fake/cudart.map
test/gpu/fake/cudart.map: Makefile
	$(AM_V_GEN)mkdir -p test/gpu/fake && \
	echo 'libcudart.so.$(CUDART_SOMAJOR) { global: cuda*; local: *; };' > $@
CLEANFILES += test/gpu/fake/cudart.map
TESTS += test/gpu/nccl_fake.sh
endif
CUDA_BUILD_TESTS += test/gpu/nccl_fake.sh
dist_check_SCRIPTS += test/gpu/nccl_fake.sh
EXTRA_DIST += test/gpu/fake_nccl.c test/gpu/fake_cudart.c
TESTS += test/gpu/gpu_check_nogpu.sh test/gpu/nccl_logcheck.sh
dist_check_SCRIPTS += test/gpu/gpu_check_nogpu.sh test/gpu/nccl_logcheck.sh
EXTRA_DIST += test/gpu/nccl-allreduce.c test/gpu/nccl-putsignal.c scripts/gpu-check.sh
CUDA_BUILD_TESTS += test/gpu/e2e_gpu_fake.sh test/gpu/e2e_gpu_fake.sh-eager-off.eager0
if HAVE_CUDA
TESTS += test/gpu/e2e_gpu_fake.sh
# once more with the eager path off: test/reruns.mk
endif
dist_check_SCRIPTS += test/gpu/e2e_gpu_fake.sh
