#!/usr/bin/env bash
# rdma-core-tests.sh: runs rdma-core's own pyverbs test suite (the tests/ directory of
# rdma-core) against simverbs, once per simverbs device, with Debian's python3-pyverbs (seen
# only by /usr/bin/python3).  Nothing of rdma-core enters this tree.
#
#   test/simverbs/rdma-core-tests.sh [RDMA_CORE_CHECKOUT|installed] [BUILD_DIR] [-- args...]
#
#   RDMA_CORE_CHECKOUT  a checkout of https://github.com/linux-rdma/rdma-core at the installed
#                       version (Debian 12: tag v44.0; the script warns when they differ), or
#   installed           (the default) the suite python3-pyverbs itself ships, at exactly the
#                       installed version: /usr/share/doc/rdma-core/tests (gzipped by Debian),
#                       or, where dpkg left /usr/share/doc out, from `apt-get download` of the
#                       installed python3-pyverbs; unpacked into a temporary directory
#   BUILD_DIR           this project's build directory (default: ./build, or . when it holds
#                       test/simverbs/.libs), or
#   system              the system's libibverbs and its devices instead of simverbs (a real
#                       RDMA device, or rxe: the same suite as a referee, see
#                       test/simverbs/rdma-core-compare.sh)
#   run_tests.py args   e.g. `-k test_qpex` to select tests (default: all; -v is always given)
#
# Environment: SIMVERBS_DEVICES etc. as for any simverbs program (default devices simib0 and
# simroce0); SV_RDMA_DEVICES="simib0 ..." limits the devices; SV_RDMA_LOG_DIR keeps the logs
# (default: a temporary directory, printed).  Prints per device: ran, passed, failed, errors,
# skipped, each skip reason with its count, and the name and traceback of each failure; writes
# DEV.outcomes in the log directory: one line per test, "id<TAB>ok|skip|fail|error<TAB>reason".
# Exit status: 0 when no test failed or errored, 1 otherwise, 2 on bad usage / missing parts.
set -u
usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
case ${1:-} in -h | --help) usage ;; esac
src=installed
if [ $# -gt 0 ] && [ "$1" != "--" ]; then src=$1; shift; fi
bld=
if [ $# -gt 0 ] && [ "$1" != "--" ]; then bld=$1; shift; fi
[ "${1:-}" = "--" ] && shift
py=/usr/bin/python3
$py -c 'import pyverbs' 2>/dev/null || {
	echo "python3-pyverbs not installed (apt-get install python3-pyverbs; scripts/setup.sh does)" >&2
	exit 2; }
# installed_tests DIR: python3-pyverbs' own copy of the suite into DIR/tests, unzipped
installed_tests() {
	local doc=/usr/share/doc/rdma-core/tests ver deb
	if [ ! -f "$doc/run_tests.py" ]; then	# dpkg path-exclude of /usr/share/doc/*
		ver=$(dpkg-query -W -f='${Version}' python3-pyverbs) &&
			(cd "$1" && apt-get download -q -o APT::Sandbox::User=root "python3-pyverbs=$ver" >/dev/null) &&
			deb=$(ls "$1"/python3-pyverbs_*.deb) && dpkg-deb -x "$deb" "$1/deb" &&
			doc=$1/deb$doc && [ -f "$doc/run_tests.py" ] || return 1
	fi
	cp -r "$doc" "$1/tests" && find "$1/tests" -name '*.gz' -exec gunzip -f {} + &&
		rm -rf "$1/deb" "$1"/*.deb
}
if [ "$src" = installed ]; then
	src=$(mktemp -d "${TMPDIR:-/tmp}/rdma-core-suite.XXXXXX") || exit 2
	trap 'rm -rf "$src"' EXIT
	installed_tests "$src" || {
		echo "python3-pyverbs' tests/ neither in /usr/share/doc/rdma-core nor downloadable" >&2
		exit 2; }
fi
[ -f "$src/tests/run_tests.py" ] || { echo "no tests/run_tests.py in $src" >&2; exit 2; }
if [ -z "$bld" ]; then
	if [ -d test/simverbs/.libs ]; then bld=.; else bld=build; fi
fi
if [ "$bld" != system ]; then
	lib=$(cd "$bld" 2>/dev/null && pwd)/test/simverbs/.libs
	[ -e "$lib/libibverbs.so.1" ] || { echo "simverbs not built: $lib/libibverbs.so.1" >&2; exit 2; }
fi
want=$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")/\1/p' "$src/CMakeLists.txt" 2>/dev/null)
have=$(dpkg-query -W -f='${Version}' python3-pyverbs 2>/dev/null | sed 's/-[^-]*$//')
[ -n "$want" ] && [ -n "$have" ] && [ "${have#"$want"}" = "$have" ] &&
	echo "warning: checkout is rdma-core $want, installed pyverbs is $have" >&2
logs=${SV_RDMA_LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/rdma-core-tests.XXXXXX")}
mkdir -p "$logs"
logs=$(cd "$logs" && pwd)
[ "$bld" = system ] || export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
devs=${SV_RDMA_DEVICES:-$(SIMVERBS_FABRIC=rdma-core-list-$$ ibv_devices 2>/dev/null |
			   awk 'NR > 2 { print $1 }')}
[ -n "$devs" ] || [ "$bld" = system ] || devs="simib0 simroce0"
[ -n "$devs" ] || { echo "no RDMA device (ibv_devices lists none)" >&2; exit 2; }
# run_tests.py with a result class that also writes each test's outcome (SV_RDMA_OUTCOMES)
runner=$logs/sv_run_tests.py
cat >"$runner" <<'PY'
import os, sys, unittest
from importlib.machinery import SourceFileLoader
here = os.getcwd()
sys.path.insert(0, here)
from args_parser import parser
tests = SourceFileLoader('tests', os.path.join(here, '__init__.py')).load_module()
parser.parse_args()
out = open(os.environ['SV_RDMA_OUTCOMES'], 'w')
def one(test, status, reason=''):
    reason = ' '.join(str(reason).split())
    out.write('%s\t%s\t%s\n' % (test.id(), status, reason))
    out.flush()
class Result(unittest.TextTestResult):
    def addSuccess(self, t): super().addSuccess(t); one(t, 'ok')
    def addSkip(self, t, r): super().addSkip(t, r); one(t, 'skip', r)
    def addFailure(self, t, e): super().addFailure(t, e); one(t, 'fail', e[1])
    def addError(self, t, e): super().addError(t, e); one(t, 'error', e[1])
    def addExpectedFailure(self, t, e): super().addExpectedFailure(t, e); one(t, 'ok', 'expected failure')
    def addUnexpectedSuccess(self, t): super().addUnexpectedSuccess(t); one(t, 'fail', 'unexpected success')
class Runner(unittest.TextTestRunner):
    resultclass = Result
unittest.main(module=tests, testRunner=Runner)
PY
set -- -v "$@"	# always verbose: the counts are read from the per-test lines
status=0
for dev in $devs; do
	log=$logs/$dev.log
	( cd "$src/tests" && SIMVERBS_FABRIC=rdma-core-tests-$$-$dev PYTHONPATH="$src/tests" \
		SV_RDMA_OUTCOMES="$logs/$dev.outcomes.tmp" $py "$runner" --dev "$dev" "$@" ) >"$log" 2>&1
	rc=$?
	sort "$logs/$dev.outcomes.tmp" >"$logs/$dev.outcomes" 2>/dev/null
	rm -f "$logs/$dev.outcomes.tmp"
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
