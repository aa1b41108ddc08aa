#!/bin/sh
# rerun.sh - LOG_COMPILER of the generated reruns in `make check` (listed in
# test/reruns.mk, generated there): runs the test named by the file once more
# with one knob set, so each test passes both in its own run and in this one:
#   test/<dir>/<test>-eager-off.eager0  NCCL_VERBS_EAGER_MAX=0 (the eager path off)
#   test/<dir>/<test>-general.fast0     NCCL_VERBS_FAST_PATHS=0 (every message on
#                                       the general isend, irecv and completion paths)
# It runs test/<dir>/<test>: the program of the build tree, else the script of
# the source tree (cl-ring.sh). The file itself is not read.
case ${1:-} in
*-eager-off.eager0) name=$(basename "$1" -eager-off.eager0) knob=NCCL_VERBS_EAGER_MAX=0 ;;
*-general.fast0) name=$(basename "$1" -general.fast0) knob=NCCL_VERBS_FAST_PATHS=0 ;;
*) echo "rerun.sh: expects a TEST-eager-off.eager0 or TEST-general.fast0 name, got '${1:-}'" >&2
   exit 99 ;;
esac
dir=$(basename "$(dirname "$1")")
shift
prog=${NV_TOP_BUILDDIR:-.}/test/$dir/$name
[ -x "$prog" ] || prog=${NV_TOP_SRCDIR:-.}/test/$dir/$name
[ -x "$prog" ] || { echo "rerun.sh: test/$dir/$name not built" >&2; exit 99; }
echo "rerun.sh: $knob $prog $*"
export "$knob"
exec "$prog" "$@"
