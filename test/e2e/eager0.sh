#!/bin/sh
# eager0.sh - LOG_COMPILER of the .eager0 tests in `make check`: runs the
# data-path test named by the file with the eager path off, so every
# data-path test passes both with eager on (its own run) and off (this one).
# test/<dir>/<test>-eager-off.eager0 (listed in test/reruns.mk, generated there) runs
# test/<dir>/<test>: the program of the build tree, else the script of the
# source tree (cl-ring.sh). The file itself is not read.
case ${1:-} in
*-eager-off.eager0) name=$(basename "$1" -eager-off.eager0) dir=$(basename "$(dirname "$1")"); shift ;;
*) echo "eager0.sh: expects a TEST-eager-off.eager0 name, got '${1:-}'" >&2; exit 99 ;;
esac
prog=${NV_TOP_BUILDDIR:-.}/test/$dir/$name
[ -x "$prog" ] || prog=${NV_TOP_SRCDIR:-.}/test/$dir/$name
[ -x "$prog" ] || { echo "eager0.sh: test/$dir/$name not built" >&2; exit 99; }
echo "eager0.sh: NCCL_VERBS_EAGER_MAX=0 $prog $*"
NCCL_VERBS_EAGER_MAX=0 exec "$prog" "$@"
