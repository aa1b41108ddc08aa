#!/usr/bin/env bash
# rdma-core-tests.sh: runs rdma-core's own pyverbs test suite (the tests/ directory of an
# rdma-core checkout the user gives) against simverbs, once per simverbs device, with Debian's
# python3-pyverbs (seen only by /usr/bin/python3).  Nothing of rdma-core enters this tree.
#
#   test/simverbs/rdma-core-tests.sh RDMA_CORE_CHECKOUT [BUILD_DIR] [-- run_tests.py args...]
#
#   RDMA_CORE_CHECKOUT  a checkout of https://github.com/linux-rdma/rdma-core at the installed
#                       version (Debian 12: tag v44.0; the script warns when they differ)
#   BUILD_DIR           this project's build directory (default: ./build, or . when it holds
#                       test/simverbs/.libs)
#   run_tests.py args   e.g. `-k test_qpex` to select tests (default: all, verbose)
#
# Environment: SIMVERBS_DEVICES etc. as for any simverbs program (default devices simib0 and
# simroce0); SV_RDMA_DEVICES="simib0 ..." limits the devices; SV_RDMA_LOG_DIR keeps the logs
# (default: a temporary directory, printed).  Prints per device: ran, passed, failed, errors,
# skipped, each skip reason with its count, and the name and traceback of each failure.
# Exit status: 0 when no test failed or errored, 1 otherwise, 2 on bad usage / missing parts.
set -u
usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 1 ] || usage
src=$1; shift
bld=
if [ $# -gt 0 ] && [ "$1" != "--" ]; then bld=$1; shift; fi
[ "${1:-}" = "--" ] && shift
[ -f "$src/tests/run_tests.py" ] || { echo "no tests/run_tests.py in $src" >&2; exit 2; }
if [ -z "$bld" ]; then
	if [ -d test/simverbs/.libs ]; then bld=.; else bld=build; fi
fi
lib=$(cd "$bld" 2>/dev/null && pwd)/test/simverbs/.libs
[ -e "$lib/libibverbs.so.1" ] || { echo "simverbs not built: $lib/libibverbs.so.1" >&2; exit 2; }
py=/usr/bin/python3
$py -c 'import pyverbs' 2>/dev/null || { echo "python3-pyverbs not installed" >&2; exit 2; }
want=$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")/\1/p' "$src/CMakeLists.txt" 2>/dev/null)
have=$(dpkg-query -W -f='${Version}' python3-pyverbs 2>/dev/null | sed 's/-[^-]*$//')
[ -n "$want" ] && [ -n "$have" ] && [ "${have#"$want"}" = "$have" ] &&
	echo "warning: checkout is rdma-core $want, installed pyverbs is $have" >&2
logs=${SV_RDMA_LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/rdma-core-tests.XXXXXX")}
mkdir -p "$logs"
export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
devs=${SV_RDMA_DEVICES:-$(SIMVERBS_FABRIC=rdma-core-list-$$ ibv_devices 2>/dev/null |
			   awk 'NR > 2 { print $1 }')}
[ -n "$devs" ] || devs="simib0 simroce0"
[ $# -gt 0 ] || set -- -v
status=0
for dev in $devs; do
	log=$logs/$dev.log
	( cd "$src/tests" && SIMVERBS_FABRIC=rdma-core-tests-$$-$dev PYTHONPATH="$src/tests" \
		$py run_tests.py --dev "$dev" "$@" ) >"$log" 2>&1
	rc=$?
	ran=$(sed -n 's/^Ran \([0-9]*\) tests.*/\1/p' "$log")
	skipped=$(grep -c '\.\.\. skipped' "$log")
	failed=$(grep -c '^FAIL: ' "$log")
	errors=$(grep -c '^ERROR: ' "$log")
	# "ok" can follow a test's own output on a later line: count the rest
	passed=$(( ${ran:-0} - failed - errors - skipped ))
	echo "== $dev: ran ${ran:-?}, passed $passed, failed $failed, errors $errors, skipped $skipped (log $log)"
	grep '\.\.\. skipped' "$log" | sed "s/.*\.\.\. skipped //" | sort | uniq -c | sort -rn |
		sed 's/^/   skip /'
	if [ "$rc" -ne 0 ] || [ "$failed" -ne 0 ] || [ "$errors" -ne 0 ]; then
		status=1
		awk '/^(FAIL|ERROR): /,/^-{10,}$|^={10,}$/' "$log" | sed 's/^/   /'
	fi
done
exit $status
