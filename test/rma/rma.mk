# The RMA tables (ncclRmaPlugin_v13..v15) driven as NCCL's RMA proxy drives
# them: N ranks as processes over simverbs (test/rma/rma-harness.sh runs the
# cases under `timeout`).
check_PROGRAMS += test/rma/rma_harness
test_rma_rma_harness_SOURCES = test/rma/rma_harness.c
test_rma_rma_harness_LDADD = -ldl
TESTS += test/rma/rma-harness.sh
EXTRA_DIST += test/rma/rma-harness.sh
