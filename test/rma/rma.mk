# The RMA tables (ncclRmaPlugin_v13..v15) driven as NCCL's RMA proxy drives
# them: N ranks as processes over simverbs (test/rma/rma-harness.sh runs the
# cases under `timeout`; test/cluster/cl-rma.sh runs them across simulated
# hosts, meeting at rank 0 through nccl-net-bench's rendezvous).
check_PROGRAMS += test/rma/rma_harness
test_rma_rma_harness_SOURCES = test/rma/rma_harness.c test/rma/rma_harness.h \
	test/rma/rma_load.c test/rma/rma_big.c test/rma/rma_port.c test/rma/rma_bench.c \
	src/tools/nccl-net-bench.c src/tools/nccl-net-bench-oob.c
test_rma_rma_harness_LDADD = -ldl
TESTS += test/rma/rma-harness.sh
EXTRA_DIST += test/rma/rma-harness.sh
# NCCL's loader's path to our tables (plugin_open.cc, rma.cc): by name through
# NCCL_NET_PLUGIN, the version loop, init and devices.
check_PROGRAMS += test/rma/rma_loader
test_rma_rma_loader_SOURCES = test/rma/rma_loader.c
test_rma_rma_loader_LDADD = -ldl
TESTS += test/rma/rma_loader
