#!/usr/bin/env bash
# The README's test command: set up a fresh Debian machine, build, and run the
# whole test suite over simverbs (plus the extra checks: leak check, fuzz pass).
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$top/scripts/setup.sh"
cd "${NV_BUILD_DIR:-$top/build}"
status=0
make -j"$(nproc)" check || status=$?
if [ $status -ne 0 ]; then
	for f in $(find . -name '*.log' -newer config.status | xargs grep -l '^FAIL\|^ERROR' 2>/dev/null); do
		echo "==== $f"; tail -n 60 "$f"
	done
	exit $status
fi
make -j"$(nproc)" check-extra
