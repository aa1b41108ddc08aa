#!/bin/sh
# The documentation holds together: every page in docs/ is in docs/docs.mk's
# EXTRA_DIST (so a release tarball has it), every relative link in README.md,
# docs/*.md and test/README.md leads to a file that exists, and no line is
# longer than 400 characters (prose is wrapped; only tables may run long).
top=${NV_TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$top" || exit 1
fail=0
for f in docs/*.md test/README.md; do
	grep -q "[[:space:]]$f\([[:space:]]\|\$\)" docs/docs.mk ||
		{ echo "FAIL: $f is not in docs/docs.mk's EXTRA_DIST"; fail=1; }
done
for f in README.md docs/*.md test/README.md; do
	d=$(dirname "$f")
	for l in $(grep -o '](\([^)#]*\)' "$f" | sed 's/^](//'); do
		case $l in http*|mailto:*) continue ;; esac
		[ -e "$d/$l" ] || { echo "FAIL: $f links to $l, which does not exist"; fail=1; }
	done
	awk -v f="$f" 'length > 400 { print "FAIL: " f ":" FNR " has " length " characters"; bad = 1 }
		END { exit bad }' "$f" || fail=1
done
[ $fail = 0 ] && echo "docs: every page distributed, every link resolves"
exit $fail
