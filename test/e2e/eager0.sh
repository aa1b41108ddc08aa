#!/bin/sh
# eager0.sh - LOG_COMPILER of the .eager0 tests in `make check`: runs the
# data-path test named by the file with the eager path off, so every
# data-path test passes both with eager on (its own run) and off (this one).
# test/<dir>/eager0/<test>.eager0 runs test/<dir>/<test>: the program of the
# build tree, else the script of the source tree (e2e_gpu_fake.sh). The
# file's own content is a comment.
case ${1:-} in
*.eager0) name=$(basename "$1" .eager0) dir=$(basename "$(dirname "$(dirname "$1")")"); shift ;;
*) echo "eager0.sh: expects a .eager0 file, got '${1:-}'" >&2; exit 99 ;;
esac
prog=${NV_TOP_BUILDDIR:-.}/test/$dir/$name
[ -x "$prog" ] || prog=${NV_TOP_SRCDIR:-.}/test/$dir/$name
[ -x "$prog" ] || { echo "eager0.sh: test/$dir/$name not built" >&2; exit 99; }
echo "eager0.sh: NCCL_VERBS_EAGER_MAX=0 $prog $*"
NCCL_VERBS_EAGER_MAX=0 exec "$prog" "$@"
