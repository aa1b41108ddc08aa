#!/bin/sh
# The client's NCCL log assertions (nccl-allreduce -C) on logs written in the
# formats of NCCL 2.28/2.30's own INFO lines (src/plugin/net/net_v1[12].cc,
# src/init.cc, src/graph/topo.cc, src/transport/net.cc): a GPUDirect run
# passes; the wrong plugin version for the NCCL, GDRDMA channels where host
# staging is expected, a missing "Using network Verbs", a plugin WARN (other
# than the memlock advice) fail.
c="${NV_TOP_BUILDDIR:-.}/test/gpu/nccl-allreduce"
[ -x "$c" ] || { echo "client not built (no nccl.h/libnccl.so.2 at configure)"; exit 77; }
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
mklog() { # rank version gdr(0|1) [omit-using]
	p="h:$((100 + $1)):$((100 + $1)) [0] NCCL INFO"
	g=; [ "$3" = 1 ] && g=/GDRDMA
	en=Disabled; [ "$3" = 1 ] && en=Enabled
	{
		echo "$p NET/Plugin: Loaded net plugin Verbs (v$2)"
		[ "${4:-}" = omit-using ] || echo "$p Using network Verbs"
		echo "$p NET/Verbs : GPU Direct RDMA $en for HCA 0 'simib0'"
		echo "$p NET/Verbs : GPU Direct RDMA $en for HCA 1 'simroce0'"
		echo "$p Channel 00/0 : 1[0] -> $1[0] [receive] via NET/Verbs/0$g"
		echo "$p Channel 00/0 : $1[0] -> 1[0] [send] via NET/Verbs/1$g"
	} > "$d/nccl-rank$1.log"
}
fail=0
expect() { # rc args...
	want=$1; shift
	"$c" -l "$d" -n 2 "$@" > "$d/out" 2>&1
	rc=$?
	if [ "$rc" != "$want" ]; then
		echo "FAIL: nccl-allreduce $* -> $rc, expected $want"; cat "$d/out"; fail=1
	fi
}
mklog 0 12 1; mklog 1 12 1
expect 0 -C 23007 -g 1
grep -q "devices \[0:simib0(GDR on) 1:simroce0(GDR on)\]" "$d/out" || { echo "FAIL: devices"; cat "$d/out"; fail=1; }
expect 1 -C 22809 -g 1		# NCCL 2.28 loads v11, not v12
expect 1 -C 23007 -g 0		# host staging expected, GDRDMA seen
mklog 0 11 0; mklog 1 11 0
expect 0 -C 22809 -g 0
expect 1 -C 22809 -g 1		# GPUDirect expected, none
mklog 1 11 0 omit-using
expect 1 -C 22809 -g 0
mklog 1 11 0
echo "h:101:101 [0] NCCL WARN NET/Verbs : RLIMIT_MEMLOCK is 8388608 bytes, not unlimited: ..." >> "$d/nccl-rank1.log"
expect 0 -C 22809 -g 0		# the memlock advice alone is no failure
echo "h:101:101 [0] NCCL WARN NET/Verbs : simib0: something broke" >> "$d/nccl-rank1.log"
expect 1 -C 22809 -g 0
rm -f "$d/nccl-rank1.log"
expect 1 -C 22809 -g 0		# no log at all
exit $fail
