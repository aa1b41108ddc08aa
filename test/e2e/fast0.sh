#!/bin/sh
# fast0.sh - LOG_COMPILER of the .fast0 tests in `make check`: runs the
# data-path test named by the file with NCCL_VERBS_FAST_PATHS=0, so every
# message takes the general isend, irecv and completion paths, and each
# test passes both through the fast paths (its own run) and without them
# (this one). test/<dir>/<test>-general.fast0 (listed in test/reruns.mk,
# generated there) runs test/<dir>/<test>: the program of the build tree,
# else the script of the source tree. The file itself is not read.
case ${1:-} in
*-general.fast0) name=$(basename "$1" -general.fast0) dir=$(basename "$(dirname "$1")"); shift ;;
*) echo "fast0.sh: expects a TEST-general.fast0 name, got '${1:-}'" >&2; exit 99 ;;
esac
prog=${NV_TOP_BUILDDIR:-.}/test/$dir/$name
[ -x "$prog" ] || prog=${NV_TOP_SRCDIR:-.}/test/$dir/$name
[ -x "$prog" ] || { echo "fast0.sh: test/$dir/$name not built" >&2; exit 99; }
echo "fast0.sh: NCCL_VERBS_FAST_PATHS=0 $prog $*"
NCCL_VERBS_FAST_PATHS=0 exec "$prog" "$@"
