# Failure, abuse, leak, soak, concurrency and fuzz tests (owner: F).
# The tests build on the end-to-end harness (test/e2e/libe2e.la) plus
# test/fault/fh.[ch]; each has a hard time limit of its own (fh_watchdog).
# What users see and what to do: /work/notes/README-faults.md.

FAULT_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/test/e2e
FAULT_LDADD = test/fault/libfh.la test/e2e/libe2e.la libnvcore.la $(IBVERBS_LIBS) -ldl

check_LTLIBRARIES += test/fault/libfh.la
test_fault_libfh_la_SOURCES = test/fault/fh.c test/fault/fh.h
test_fault_libfh_la_CPPFLAGS = $(FAULT_CPPFLAGS)

FAULT_TESTS = \
	test/fault/fault_handshake

check_PROGRAMS += $(FAULT_TESTS)
TESTS += $(FAULT_TESTS)

test_fault_fault_handshake_SOURCES = test/fault/fault_handshake.c
test_fault_fault_handshake_CPPFLAGS = $(FAULT_CPPFLAGS)
test_fault_fault_handshake_LDADD = $(FAULT_LDADD)
