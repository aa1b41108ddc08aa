#!/bin/sh
# Regenerates the autotools files (configure, Makefile.in, ...). They are never committed.
set -e
cd "$(dirname "$0")"
mkdir -p m4 build-aux
exec autoreconf --install --force --warnings=all
