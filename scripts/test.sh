#!/usr/bin/env bash
# The README's test command: set up a fresh Debian machine, build, run the
# whole test suite over simverbs (make check), then each extra check of
# make check-extra (fuzz pass, ThreadSanitizer, valgrind). Ends with one line
# for make check and one for check-extra, each counted from its own results,
# then "failed: NAME ..." naming each failed test (when any), then the plain
# "N passed, N failed" line over both (also written to
# $NV_BUILD_DIR/test-results.txt for .ci/run). Exit status: 0 when nothing failed.
#
# scripts/test.sh --device D0[,D1] (or NV_TEST_DEVICES=D0[,D1]): after the same
# set-up and build, the real-device mode instead: the tests that need nothing
# of simverbs, on those devices of the system (test/device/run.sh,
# docs/testing-real-devices.md). Further arguments go to run.sh (--only ...).
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
devices=${NV_TEST_DEVICES:-}
case ${1:-} in
--device) devices=${2:?"--device needs D0[,D1]"}; shift 2 ;;
--device=*) devices=${1#*=}; shift ;;
esac
if [ -z "$devices" ] && [ $# -gt 0 ]; then
	echo "test.sh: unknown arguments: $* (only --device D0[,D1] [run.sh options])" >&2
	exit 2
fi
"$top/scripts/setup.sh"
cd "${NV_BUILD_DIR:-$top/build}"
if [ -n "$devices" ]; then
	status=0
	"$top/test/device/run.sh" --build . --device "$devices" --prepare "$@" | tee test-device.out ||
		status=${PIPESTATUS[0]}
	tail -n 1 test-device.out | awk '/passed, .* failed, .* skipped$/ {
		printf "passed=%d failed=%d skipped=%d\n", $1, $3, $5 }' >test-results.txt
	exit "$status"
fi

# count_trs STAMP: "pass fail skip xfail" over the automake results written
# after STAMP (the targets run one after the other).
count_trs() {
	find . -name '*.trs' -newer "$1" -print0 | xargs -0r cat | awk '/^:test-result:/ { r[$2]++ }
		END { printf "%d %d %d %d\n", r["PASS"] + r["XFAIL"], r["FAIL"] + r["ERROR"] + r["XPASS"],
		      r["SKIP"], r["XFAIL"] }'
}
# show_failures STAMP: the end of every failed test's log written after STAMP.
show_failures() {
	find . -name '*.trs' -newer "$1" -print0 | xargs -0r grep -l '^:test-result: \(FAIL\|ERROR\|XPASS\)' |
		while read -r trs; do echo "==== ${trs%.trs}.log"; tail -n 60 "${trs%.trs}.log"; done
}

# failed_names STAMP: the tests that failed in the automake results written after STAMP.
failed_names() {
	find . -name '*.trs' -newer "$1" -print0 | xargs -0r grep -l '^:test-result: \(FAIL\|ERROR\|XPASS\)' |
		sed 's|^\./||; s|\.trs$||' | sort
}

status=0
failed=()
mkdir -p test-stamps
t0=$(date +%s); touch test-stamps/check
make -s -j"$(nproc)" check || status=$?
read -r cp cf cs cx < <(count_trs test-stamps/check)
check_s=$(( $(date +%s) - t0 ))
[ "$status" -eq 0 ] || show_failures test-stamps/check
mapfile -t -O "${#failed[@]}" failed < <(failed_names test-stamps/check)
if [ "$status" -ne 0 ] && [ "${#failed[@]}" -eq 0 ]; then failed+=("make check (outside any test)"); fi
if [ "$status" -ne 0 ] && [ "$cf" -eq 0 ]; then cf=1; fi	# make failed outside any test (build)

# The extra checks, one target at a time, each counted from its own results:
# automake results (check-valgrind) when it wrote any, else its per-target
# "fuzz_NAME: exit N" lines (check-fuzz), else its exit status; "TARGET: SKIP".
ep=0 ef=0 es=0 per=()
t1=$(date +%s)
for t in $(make -s print-check-extra); do
	touch "test-stamps/$t"
	rc=0
	make -s "$t" 2>&1 | tee "test-stamps/$t.out" || rc=${PIPESTATUS[0]}
	read -r p f s _ < <(count_trs "test-stamps/$t")
	if [ $((p + f + s)) -eq 0 ]; then
		p=$(grep -Ec '^fuzz_[a-z0-9_]+: exit 0,' "test-stamps/$t.out" || true)
		f=$(grep -Ec '^fuzz_[a-z0-9_]+: exit [1-9][0-9]*,' "test-stamps/$t.out" || true)
	fi
	if [ $((p + f)) -eq 0 ]; then
		if grep -q "^$t: SKIP" "test-stamps/$t.out"; then s=1
		elif [ "$rc" -eq 0 ]; then p=1
		else f=1; fi
	fi
	if [ "$rc" -ne 0 ]; then
		status=1
		[ "$f" -gt 0 ] || f=1
		show_failures "test-stamps/$t"
		n0=${#failed[@]}
		mapfile -t -O "$n0" failed < <(failed_names "test-stamps/$t")
		mapfile -t -O "${#failed[@]}" failed < <(grep -Eo '^fuzz_[a-z0-9_]+: exit [1-9]' \
			"test-stamps/$t.out" | sed 's/: exit.*//' || true)
		[ "${#failed[@]}" -gt "$n0" ] || failed+=("$t")
	fi
	ep=$((ep + p)) ef=$((ef + f)) es=$((es + s))
	per+=("${t#check-} $p/$((p + f + s))$( [ "$s" -eq 0 ] || echo " ($s skipped)")")
done
extra_s=$(( $(date +%s) - t1 ))

echo
printf 'make check:  %d passed, %d failed, %d skipped%s in %d s\n' "$cp" "$cf" "$cs" \
	"$( [ "$cx" -gt 0 ] && echo " ($cx of the passed are expected failures)")" "$check_s"
printf 'check-extra: %d passed, %d failed, %d skipped in %d s (%s)\n' "$ep" "$ef" "$es" "$extra_s" \
	"$(printf '%s, ' "${per[@]}" | sed 's/, $//')"
printf 'passed=%d failed=%d skipped=%d\n' $((cp + ep)) $((cf + ef)) $((cs + es)) >test-results.txt
[ "${#failed[@]}" -eq 0 ] || echo "failed: ${failed[*]}"
echo "$((cp + ep)) passed, $((cf + ef)) failed"
exit "$status"
