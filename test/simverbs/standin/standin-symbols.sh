#!/bin/sh
# standin-symbols.sh: every function the installed Debian provider library exports, under every
# version node (default or not), is exported by the build's stand-in of the same name, so no
# Debian program (perftest, UCX's libuct_ib, pyverbs' provider modules) can fail to load on a
# missing symbol@version.  Skips (77) without binutils; a library Debian does not install is skipped.
top=${NV_TOP_BUILDDIR:-$PWD}
command -v objdump >/dev/null 2>&1 || { echo "objdump missing: skip"; exit 77; }
cc=${CC:-cc}
fails=0 checked=0
exports() {	# "name@NODE" per exported function (non-default versions in parentheses)
	objdump -T "$1" | awk '$3 == "DF" && $4 != "*UND*" && NF >= 7 {
		v = $(NF - 1); gsub(/[()]/, "", v); print $NF "@" v }' | sort -u
}
for lib in libmlx5.so.1 libefa.so.1 libmlx4.so.1 libmana.so.1; do
	real=$($cc -print-file-name=$lib 2>/dev/null)
	[ -e "$real" ] || real=$(ldconfig -p 2>/dev/null | awk -v l=$lib '$1 == l { print $NF; exit }')
	[ -n "$real" ] && [ -e "$real" ] || { echo "$lib: not installed, not checked"; continue; }
	mine=$top/test/simverbs/.libs/$lib
	[ -e "$mine" ] || { echo "FAIL: stand-in $mine missing"; fails=$((fails + 1)); continue; }
	exports "$real" > standin-symbols.real.$$
	exports "$mine" > standin-symbols.mine.$$
	missing=$(comm -23 standin-symbols.real.$$ standin-symbols.mine.$$)
	n=$(wc -l < standin-symbols.real.$$)
	rm -f standin-symbols.real.$$ standin-symbols.mine.$$
	if [ -n "$missing" ]; then
		echo "FAIL: $lib lacks:" $missing
		fails=$((fails + 1))
	else
		echo "$lib: all $n function versions of $real exported"
		checked=$((checked + 1))
	fi
done
[ "$fails" -eq 0 ] || exit 1
[ "$checked" -gt 0 ] || { echo "no provider library installed: skip"; exit 77; }
exit 0
