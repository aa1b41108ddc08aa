# Real NCCL drives the plugin (issue 13): the client test/gpu/nccl-allreduce
# (built when configure finds nccl.h, libnccl.so.2 and the CUDA runtime) and
# scripts/gpu-check.sh, which runs it on a GPU machine.  `make check` builds
# the client and runs the script's no-GPU path (gpu_check_nogpu.sh).
if HAVE_NCCL
check_PROGRAMS += test/gpu/nccl-allreduce
test_gpu_nccl_allreduce_SOURCES = test/gpu/nccl-allreduce.c
test_gpu_nccl_allreduce_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
test_gpu_nccl_allreduce_LDADD = $(NCCL_LIBS)
endif
TESTS += test/gpu/gpu_check_nogpu.sh test/gpu/nccl_logcheck.sh
dist_check_SCRIPTS += test/gpu/gpu_check_nogpu.sh test/gpu/nccl_logcheck.sh
EXTRA_DIST += test/gpu/nccl-allreduce.c scripts/gpu-check.sh
if HAVE_CUDA
TESTS += test/gpu/e2e_gpu_fake.sh
endif
dist_check_SCRIPTS += test/gpu/e2e_gpu_fake.sh
