# Connection and data-path layers of the plugin and their unit tests.
# Sources here join libnvcore.la (see src/base.mk).
NV_COMM_SOURCES = src/wire.c src/sock.c src/stage.c src/handshake.c src/connect.c src/admit.c src/accept.c src/qp.c src/cq_plan.c \
	src/engine.c src/recv.c src/send.c src/eager.c src/eager_ring.c src/failover.c src/failover.h src/fo_detect.c src/fo_state.h src/fo_msg.c src/fo_msg.h \
	src/diag.c src/comm.c src/cts.c src/prof.c
noinst_HEADERS += src/wire.h src/sock.h src/stage.h src/comm.h src/handshake.h src/admit.h src/cts.h src/engine.h src/eager.h \
	src/prof.h include/nccl/net_ib_profiler.h

# ---- unit tests ------------------------------------------------------------
check_PROGRAMS += test/unit/test_wire
TESTS += test/unit/test_wire
test_unit_test_wire_SOURCES = test/unit/test_wire.c
test_unit_test_wire_LDADD = libnvcore.la $(IBVERBS_LIBS)

check_PROGRAMS += test/unit/test_wire_bounds
TESTS += test/unit/test_wire_bounds
test_unit_test_wire_bounds_SOURCES = test/unit/test_wire_bounds.c
test_unit_test_wire_bounds_LDADD = libnvcore.la $(IBVERBS_LIBS)

check_PROGRAMS += test/unit/test_sock
TESTS += test/unit/test_sock
test_unit_test_sock_SOURCES = test/unit/test_sock.c
test_unit_test_sock_LDADD = libnvcore.la $(IBVERBS_LIBS)

check_PROGRAMS += test/unit/test_qp
TESTS += test/unit/test_qp
test_unit_test_qp_SOURCES = test/unit/test_qp.c
test_unit_test_qp_LDADD = libnvcore.la $(IBVERBS_LIBS)

check_PROGRAMS += test/unit/test_fo_msg
TESTS += test/unit/test_fo_msg
test_unit_test_fo_msg_SOURCES = test/unit/test_fo_msg.c
test_unit_test_fo_msg_LDADD = libnvcore.la $(IBVERBS_LIBS)

check_PROGRAMS += test/unit/test_cts
TESTS += test/unit/test_cts
test_unit_test_cts_SOURCES = test/unit/test_cts.c
test_unit_test_cts_LDADD = libnvcore.la $(IBVERBS_LIBS)

# the order of reads on peer-written control data (flag first), by page traps
check_PROGRAMS += test/unit/test_read_order
TESTS += test/unit/test_read_order
test_unit_test_read_order_SOURCES = test/unit/test_read_order.c
test_unit_test_read_order_LDADD = libnvcore.la $(IBVERBS_LIBS)

# ECE negotiated through the handshake (simverbs' mlx5-like ECE); modify_qp
# retried on ETIMEDOUT (NCCL_IB_MQP_RETRY_*, simverbs' rtr_timeouts).
check_PROGRAMS += test/unit/test_qp_knobs
TESTS += test/unit/test_qp_knobs
test_unit_test_qp_knobs_SOURCES = test/unit/test_qp_knobs.c
test_unit_test_qp_knobs_LDADD = libnvcore.la $(IBVERBS_LIBS)
