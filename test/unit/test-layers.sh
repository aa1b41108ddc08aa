#!/bin/sh
# The layers of src/ import only downwards (scripts/check-layers.sh): includes
# from the sources, calls from the built objects of this build tree.
exec sh "${NV_TOP_SRCDIR:-.}/scripts/check-layers.sh" "${NV_TOP_BUILDDIR:-.}"
