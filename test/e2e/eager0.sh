#!/bin/sh
# eager0.sh - LOG_COMPILER of the .eager0 tests in `make check`: runs the
# data-path test named by the file (test/e2e/eager0/<test>.eager0 runs
# test/e2e/<test>) with the eager path off, so every data-path test passes
# both with eager on (its own run) and off (this one). The file's own
# content is a comment.
case ${1:-} in
*.eager0) name=$(basename "$1" .eager0); shift ;;
*) echo "eager0.sh: expects a .eager0 file, got '${1:-}'" >&2; exit 99 ;;
esac
prog=${NV_TOP_BUILDDIR:-.}/test/e2e/$name
[ -x "$prog" ] || { echo "eager0.sh: $prog not built" >&2; exit 99; }
NCCL_VERBS_EAGER_MAX=0 exec "$prog" "$@"
