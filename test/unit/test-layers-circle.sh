#!/bin/sh
# test-layers-circle.sh - scripts/check-layers.sh fails on a new import circle.
# In a temporary copy of src/ and of this build's objects it plants one circle
# at a time and requires the check to fail, naming the circle's upward step:
# headers that include each other, two files of one layer that call each
# other (devices: select.c and device.c; data path: the engine calling an
# eager function that is not one of its declared hooks), and a declared hook
# that is no longer used. The copy as it stands must pass, the engine/protocol
# hooks included. Calls are planted by linking into a file's object (ld -r) a
# small object that calls the function.
set -u
src=${NV_TOP_SRCDIR:-.} build=${NV_TOP_BUILDDIR:-.}
objs=$build/src/.libs
ls "$objs"/*.o >/dev/null 2>&1 || { echo "SKIP: no objects in $objs"; exit 77; }
for tool in nm ld ${CC:-cc}; do
	command -v "$tool" >/dev/null || { echo "SKIP: no $tool"; exit 77; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/layers-circle.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
t=$tmp/tree
errors=0

fresh() {
	rm -rf "$t" && mkdir -p "$t/scripts" "$t/src" "$t/build/src/.libs" &&
		cp "$src/scripts/check-layers.sh" "$t/scripts/" &&
		cp "$src"/src/*.c "$src"/src/*.h "$t/src/" &&
		cp "$objs"/*.o "$t/build/src/.libs/" || exit 99
}
# plant_call FILE FUNCTION: FILE's object (FILE.o) now also calls FUNCTION
plant_call() {
	printf 'extern void %s(void);\nvoid nv_planted_%s(void) { %s(); }\n' "$2" "$1" "$2" >"$tmp/plant.c"
	${CC:-cc} -fPIC -c "$tmp/plant.c" -o "$tmp/plant.o" &&
		ld -r "$t/build/src/.libs/$1.o" "$tmp/plant.o" -o "$tmp/merged.o" &&
		mv "$tmp/merged.o" "$t/build/src/.libs/$1.o" || exit 99
}
# plant_include FILE HEADER: FILE includes HEADER (after its first include)
plant_include() {
	awk -v h="$2" '{ print } /^#include "/ && !done { print "#include \"" h "\""; done = 1 }' \
		"$t/src/$1" >"$tmp/planted" && mv "$tmp/planted" "$t/src/$1" || exit 99
	grep -q "^#include \"$2\"" "$t/src/$1" || exit 99
}
# expect WHAT RC PATTERN: the check exits RC and, for a failure, prints PATTERN
expect() {
	sh "$t/scripts/check-layers.sh" "$t/build" >"$tmp/out" 2>&1
	rc=$?
	if [ "$rc" -ne "$2" ] || ! grep -q -- "$3" "$tmp/out"; then
		echo "FAIL: $1: check-layers exited $rc (want $2), output:"
		sed 's/^/    /' "$tmp/out"
		echo "  wanted a line with: $3"
		errors=$((errors + 1))
	else
		echo "ok: $1: $(grep -- "$3" "$tmp/out" | head -n 1)"
	fi
}

fresh
expect "the tree as built" 0 "check-layers: ok"

fresh
plant_include device.h devset.h	# devset.h includes device.h
expect "two headers of the devices layer include each other" 1 \
	"src/device.h (rank 2.00) includes devset.h (rank 2.09): upward"

fresh
plant_include engine.h eager.h	# eager.h includes engine.h
expect "engine.h and eager.h include each other" 1 "src/engine.h (rank 4.10) includes eager.h"

fresh
plant_call select nv_dev_get	# device.c calls select.c
expect "select.c and device.c call each other" 1 \
	"select.c (rank 2.01) calls nv_dev_get of device.c (rank 2.03): upward"

fresh
plant_call engine nv_eager_irecv	# eager.c calls engine.c; not a hook
expect "the engine calls an eager function that is not a hook" 1 \
	"engine.c (rank 4.10) calls nv_eager_irecv of eager.c (rank 4.20): upward"

fresh
plant_call log nv_sock_close	# sock.c calls log.c
expect "log.c and sock.c call each other" 1 "log.c (rank 0.01) calls nv_sock_close of sock.c"

fresh
sed 's/^engine\.c nv_fo_check$/&\nengine.c nv_eager_isend/' "$src/scripts/check-layers.sh" >"$t/scripts/check-layers.sh"
expect "a declared hook the engine does not call" 1 'hook "engine.c nv_eager_isend" is not used'

fresh
: >"$t/src/planted.c"
expect "a source file without a rank" 1 "src/planted.c has no layer"

[ "$errors" -eq 0 ] || { echo "test-layers-circle: $errors case(s) failed"; exit 1; }
echo "test-layers-circle: all cases passed"
