#!/bin/sh
# valgrind.sh - LOG_COMPILER of `make check-valgrind`: runs one test program
# under memcheck. Any invalid access, uninitialised use, or definite/indirect
# leak fails the test (exit 98); simverbs' own leak report (SIMVERBS_LEAK_CHECK,
# exit 99) stays on. Children forked by the tests are checked too.
# valgrind.supp holds suppressions for third-party noise only (none needed so far).
here=$(cd "$(dirname "$0")" && pwd)
# Tests scale their time limits by this (valgrind is 10-50x slower).
export FH_TIME_SCALE=${FH_TIME_SCALE:-8}
# Shorter loops of the fault tests under valgrind (same code paths).
export FAULT_CYCLES=${FAULT_CYCLES:-200} FAULT_THREADS_MSGS=${FAULT_THREADS_MSGS:-300}
export FAULT_SOAK_MESSAGES=${FAULT_SOAK_MESSAGES:-1500}
# --fair-sched=yes: the tests' threads busy-poll; under valgrind's default
# lock one spinning thread can starve the thread it waits for (fault_threads
# hung 16 minutes without it, passes in ~25 s with it). The outer timeout is a
# last resort so that no test can hold CI beyond it.
# make check-valgrind names each test test/valgrind/<dir>/<test>.vg, a file
# holding the program's path (so that its logs do not replace make check's).
case ${1:-} in
*.vg) prog=$(cat "$1") || exit 99; shift; set -- "$prog" "$@" ;;
esac
exec timeout --kill-after=10 "${VALGRIND_TEST_TIMEOUT:-600}" \
	valgrind -q --fair-sched=yes --error-exitcode=98 --leak-check=full --show-leak-kinds=definite,indirect \
	--errors-for-leak-kinds=definite,indirect --suppressions="$here/valgrind.supp" \
	--gen-suppressions=all "$@"
