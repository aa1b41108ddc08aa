#!/bin/sh
# gen-protocheck.sh SIMVERBS_MAP > sv_protocheck.c
#
# Writes a translation unit that takes the address of every function
# simverbs.map exports (all version nodes but SIMVERBS_PRIVATE_*, simverbs' own)
# into a pointer of the type rdma-core declares for it: the TU includes only
# <infiniband/verbs.h> and rdma_private.h (rdma-core's driver.h/marshall.h
# prototypes, or those headers themselves where installed).  A symbol rdma-core
# does not declare is an undeclared identifier, so the build fails; sv.h
# includes the same declarations, so a simverbs definition whose signature
# differs from rdma-core's is a "conflicting types" error.  Together no
# exported function can have a prototype of its own (a wrong
# ibv_get_sysfs_path prototype once crashed every rdma_cm program).
set -eu
map=$1
syms=$(awk '
	/^[A-Za-z_][A-Za-z0-9_.]* *\{/ { node = $1 }
	{
		line = $0
		sub(/\/\*.*\*\//, "", line)
		sub(/.*global:/, "", line)
		sub(/local:.*/, "", line)
		sub(/\}.*/, "", line)
		n = split(line, w, /[ \t;]+/)
		for (i = 1; i <= n; i++)
			if (w[i] ~ /^[A-Za-z_][A-Za-z0-9_]*$/ && node !~ /^SIMVERBS_PRIVATE/ &&
			    w[i] != node)
				print w[i]
	}' "$map" | sort -u)
[ -n "$syms" ] || { echo "gen-protocheck.sh: no symbols in $map" >&2; exit 1; }
echo "/* Generated from simverbs.map by gen-protocheck.sh; do not edit. */"
echo '#include "rdma_private.h"'
echo
echo "#define SV_PROTO(f) extern __typeof__(f) *const sv_proto_##f; __typeof__(f) *const sv_proto_##f = &f;"
for s in $syms; do
	echo "SV_PROTO($s)"
done
