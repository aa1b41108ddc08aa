#!/usr/bin/env bash
# tsan.sh - `make check-tsan`: builds the plugin and test/fault/fault_threads
# with clang -fsanitize=thread and runs the test on simverbs; any data race
# or lock-order inversion reported by ThreadSanitizer fails it.
# simverbs itself stays uninstrumented (it is the "hardware"; its lock-free
# shared-memory rings are outside the plugin's contract), so only races in
# the plugin and the test are reported.
#   Environment: NV_TOP_SRCDIR, NV_TOP_BUILDDIR, NV_PLUGIN_SOURCES (the .c
#   files of libnvcore + the plugin, from the Makefile), CLANG.
# Exit 77 when clang cannot build with -fsanitize=thread.
set -u
src=${NV_TOP_SRCDIR:?}
build=${NV_TOP_BUILDDIR:?}
cc=${CLANG:-clang}
out=$build/test/fault/tsan
mkdir -p "$out"
echo 'int main(void) { return 0; }' >"$out/probe.c"
if ! "$cc" -fsanitize=thread "$out/probe.c" -o "$out/probe" 2>/dev/null; then
	echo "tsan.sh: $cc cannot link -fsanitize=thread; skipping"
	exit 77
fi
flags=(-std=gnu11 -g -O1 -fsanitize=thread -pthread -I"$src/include" -I"$src/src" -I"$build"
	-I"$src/test/e2e" -I/usr/include/libnl3)
srcs=()
for f in ${NV_PLUGIN_SOURCES:?}; do
	case $f in *.c) srcs+=("$src/$f") ;; esac
done
"$cc" "${flags[@]}" -fPIC -shared -o "$out/libnccl-net-verbs-tsan.so" "${srcs[@]}" \
	-L"$build/test/simverbs/.libs" -libverbs || exit 1
"$cc" "${flags[@]}" -o "$out/fault_threads" "$src/test/fault/fault_threads.c" \
	"$src/test/fault/fh.c" "$src/test/e2e/e2e.c" "$src/test/e2e/e2e_util.c" -ldl || exit 1
export LD_LIBRARY_PATH="$build/test/simverbs/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SIMVERBS_FABRIC="nvtsan-$$" SIMVERBS_LEAK_CHECK=1
export NV_TEST_PLUGIN="$out/libnccl-net-verbs-tsan.so" FH_TIME_SCALE=10
export FAULT_THREADS_MSGS=${FAULT_THREADS_MSGS:-300}
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
"$out/fault_threads"
rc=$?
echo "tsan.sh: fault_threads under ThreadSanitizer: exit $rc"
exit $rc
