#!/bin/sh
# docs/knobs.md's knob table must be what scripts/gen-knobs.sh makes of the
# parameter table in src/param.c: a knob added, removed or changed without
# regenerating the page fails here.
top=${NV_TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
exec sh "$top/scripts/gen-knobs.sh" --check "$top"
