# Connection and data-path layers of the plugin (unit tests: test/unit/unit.mk).
# Sources here join libnvcore.la (see src/base.mk).
NV_COMM_SOURCES = src/state.c src/wire.c src/sock.c src/stage.c src/handshake.c src/connect.c src/admit.c src/accept.c src/qp.c src/cq_plan.c \
	src/engine.c src/recv.c src/send.c src/eager.c src/eager_ring.c src/failover.c src/failover.h src/fo_detect.c src/fo_state.h src/fo_msg.c src/fo_msg.h src/lb.c src/lb.h \
	src/diag.c src/comm.c src/cts.c src/prof.c
noinst_HEADERS += src/wire.h src/sock.h src/stage.h src/comm.h src/handshake.h src/admit.h src/cts.h src/engine.h src/eager.h \
	src/prof.h include/nccl/net_ib_profiler.h
