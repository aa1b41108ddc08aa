#!/usr/bin/env bash
# fresh-check.sh - the README's two commands on a truly fresh Debian machine.
#
# Builds a minimal Debian root (debootstrap --variant=minbase, from the apt
# mirror and release this machine is configured with), installs nothing in it
# but git, clones this repository's HEAD into it and runs, inside it, as a
# newcomer would:
#   1. scripts/bench.sh   (NB_QUICK=1 unless NV_FRESH_FULL=1)
#   2. scripts/test.sh
#   3. the Debian package: apt-get build-dep, dpkg-buildpackage -b -us -uc
#      (the clone stays clean), apt-get install of the .deb, then the
#      installed nccl-net-verbs-info and a short nccl-net-bench (which finds
#      the plugin by name, NCCL_NET_PLUGIN=verbs) over simverbs; lintian on
#      the host.
# Prints each step's time and result. Every mount lives in a private mount
# namespace (gone when this script ends, however it ends) and is also
# unmounted by a trap on exit and interruption; the root is then deleted.
#
# Exit status: 0 passed, 1 failed, 77 skipped (not root, or the mirror cannot
# be reached): a skip is never reported as passed. Writes
# $NV_BUILD_DIR/fresh-check-results.txt (passed=N failed=N skipped=N, one per
# step) and the full logs to $NV_BUILD_DIR/fresh-check/.
#
# Cache (NV_FRESH_CACHE, default /var/cache/nccl-net-verbs-fresh): the base
# root with git as a tarball (rebuilt after 7 days or when the mirror
# changes) and apt's downloaded packages, so that a repeated run downloads
# nothing and skips debootstrap. Environment: NV_BUILD_DIR (default build/),
# NV_FRESH_FULL=1 (full benchmark), NV_FRESH_STEPS="bench test package" (the
# steps to run), NV_FRESH_KEEP=1 (keep the root, report
# where), NV_FRESH_MIRROR / NV_FRESH_SUITE (override the machine's).
set -euo pipefail
# All of it in one compound command: bash reads it whole before running it, so
# editing or checking out this file while it runs cannot change what runs.
{
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=${NV_BUILD_DIR:-$top/build}
mkdir -p "$B"
B=$(cd "$B" && pwd)
logs=$B/fresh-check
results=$B/fresh-check-results.txt
cache=${NV_FRESH_CACHE:-/var/cache/nccl-net-verbs-fresh}

skip() {
	echo "fresh-check: SKIPPED: $*"
	echo "passed=0 failed=0 skipped=1" >"$results"
	exit 77
}

# ---- re-run in a private mount namespace (mounts vanish with the process) ---
if [ -z "${NV_FRESH_IN_NS:-}" ]; then
	[ "$(id -u)" -eq 0 ] || skip "needs root (debootstrap, chroot and mounts)"
	command -v unshare >/dev/null || skip "unshare (util-linux) is missing"
	rm -rf "$logs"
	mkdir -p "$logs"
	: >"$results"
	# In the background (so that the traps run at once), an asynchronous
	# command ignores SIGINT: an interruption is passed on as SIGTERM, and we
	# wait for the inner run to finish its clean-up.
	NV_FRESH_IN_NS=1 unshare --mount --propagation private -- "$0" "$@" &
	inner=$!
	trap 'kill -TERM "$inner" 2>/dev/null' INT TERM HUP
	rc=0
	until wait "$inner"; rc=$?; ! kill -0 "$inner" 2>/dev/null; do :; done
	# a run killed before writing its verdict counts as failed, never as passed
	[ -s "$results" ] || echo "passed=0 failed=1 skipped=0" >"$results"
	exit $rc
fi

# ---- host tools: installed when missing, so that nothing skips for a tool -----
need=()
for p in debootstrap lintian; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
	printf 'fresh-check: installing %s on this machine... ' "${need[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=600 \
		--no-install-recommends "${need[@]}" >"$logs/host-packages.log" 2>&1 ||
		skip "could not install ${need[*]} (see $logs/host-packages.log)"
	echo done
fi

# ---- the machine's configured mirror and release -----------------------------
# shellcheck disable=SC1091
. /etc/os-release
suite=${NV_FRESH_SUITE:-${VERSION_CODENAME:-}}
[ -n "$suite" ] || skip "no VERSION_CODENAME in /etc/os-release"
mirror_of() {	# the enabled "deb" URIs that serve $suite (deb822 and one-line files)
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk -v s="$suite" 'function flush() { if (deb && on && uri != "" && (" " suites " ") ~ (" " s " "))
				print uri; deb = 0; on = 1; uri = ""; suites = "" }
			BEGIN { on = 1 }
			/^[ \t]*$/ { flush(); next }
			tolower($1) == "types:" { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
			tolower($1) == "uris:" { uri = $2 }
			tolower($1) == "suites:" { $1 = ""; suites = $0 }
			tolower($1) == "enabled:" { on = (tolower($2) != "no") }
			END { flush() }' "$f"
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		awk -v s="$suite" '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
			if ($(i + 1) == s) print $i }' "$f"
	done
	return 0
}
mirror=${NV_FRESH_MIRROR:-$(mirror_of | grep -E '^(https?|file):' | head -n 1 || true)}
[ -n "$mirror" ] || skip "no apt mirror for $suite in /etc/apt/sources.list(.d)"
arch=$(dpkg --print-architecture)
if ! timeout 60 /usr/lib/apt/apt-helper download-file "$mirror/dists/$suite/Release" \
	"$logs/Release" >"$logs/mirror-probe.log" 2>&1; then
	skip "the mirror $mirror cannot be reached ($suite Release: see $logs/mirror-probe.log)"
fi

# ---- the root, its mounts, and their clean-up -------------------------------
mkdir -p "$cache/archives/partial" "$cache/debootstrap"
# roots left by a run that was killed outright (its mounts died with it)
find /var/tmp -maxdepth 1 -name 'nv-fresh.*' -mmin +1440 -exec rm -rf --one-file-system {} + 2>/dev/null || true
root=$(mktemp -d /var/tmp/nv-fresh.XXXXXX)
mounts=()
cur=""	# the long command running now (see run_bg), stopped by an interruption
run_bg() {	# run_bg CMD...: run CMD in the background and wait, so that the traps run at once
	local rc=0
	"$@" &
	cur=$!
	wait "$cur" || rc=$?
	cur=""
	return "$rc"
}
cleanup() {
	local i rc=$?
	trap '' INT TERM HUP	# a second interruption must not stop the clean-up half way
	trap - EXIT
	for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
		umount -l "${mounts[$i]}" 2>/dev/null || true
	done
	if [ "${NV_FRESH_KEEP:-0}" = 1 ]; then
		echo "fresh-check: root kept at $root (mounts are gone with this process)"
	elif ! grep -qE " $root(/| )" /proc/self/mounts; then
		rm -rf --one-file-system "$root"
	fi
	[ "$rc" -lt 128 ] || echo "fresh-check: interrupted (exit $rc): mounts gone, root $root deleted"
	exit "$rc"
}
trap cleanup EXIT
interrupted() {
	if [ -n "$cur" ]; then
		# cur may be the subshell of a function (in_root): stop its child first,
		# which is timeout (passing it on to the whole step) or the command itself
		pkill -TERM -P "$cur" 2>/dev/null || true
		kill -TERM "$cur" 2>/dev/null || true
		wait "$cur" 2>/dev/null || true
	fi
	exit 130
}
trap interrupted INT TERM HUP
mnt() {	# mnt ARGS... TARGET: mount and remember TARGET for the clean-up
	mount "$@"
	mounts+=("${!#}")
}
in_root() {	# in_root CMD...: run CMD in the fresh root with a clean environment
	env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		LANG=C.UTF-8 TERM="${TERM:-dumb}" DEBIAN_FRONTEND=noninteractive \
		chroot "$root" "$@"
}
secs() { echo $(( $(date +%s) - $1 )); }

# The root is a mount point of its own, as / is on a real machine (ip netns
# exec, unshare --mount --propagation ... need / to be a mount).
mnt --bind "$root" "$root"

commit=$(git -C "$top" rev-parse --short HEAD)
echo "fresh-check: Debian $suite ($arch) minbase from $mirror; commit $commit of $top"
[ -z "$(git -C "$top" status --porcelain --untracked-files=no)" ] ||
	echo "fresh-check: note: uncommitted changes in $top are not part of the clone"

base=$cache/base-$suite-$arch-$(echo "$mirror" | md5sum | cut -c1-8).tar.gz
t0=$(date +%s)
if [ -s "$base" ] && [ -n "$(find "$base" -mtime -7)" ]; then
	printf 'fresh root: unpacking the cached base (minbase + git)... '
	tar -xzf "$base" -C "$root"
else
	printf 'fresh root: debootstrap --variant=minbase %s, then apt-get install git... ' "$suite"
	run_bg debootstrap --variant=minbase --cache-dir="$cache/debootstrap" "$suite" "$root" "$mirror" \
		>"$logs/debootstrap.log" 2>&1 || { echo "FAILED (see $logs/debootstrap.log)"; exit 1; }
	cp /etc/resolv.conf "$root/etc/resolv.conf"
	mnt --bind "$cache/archives" "$root/var/cache/apt/archives"
	mnt -t proc proc "$root/proc"
	run_bg in_root apt-get -q update >"$logs/git.log" 2>&1 &&
		run_bg in_root apt-get install -y -q --no-install-recommends git >>"$logs/git.log" 2>&1 ||
		{ echo "FAILED (see $logs/git.log)"; exit 1; }
	umount "$root/proc" "$root/var/cache/apt/archives"
	mounts=("$root")
	tar -czf "$base.tmp" -C "$root" . && mv "$base.tmp" "$base"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
mnt -t proc proc "$root/proc"
mnt -t sysfs sysfs "$root/sys"
mnt --rbind /dev "$root/dev"
mount --make-rslave "$root/dev"
mnt -t tmpfs -o mode=1777 tmpfs "$root/dev/shm"
mnt -t tmpfs -o mode=755 tmpfs "$root/run"
mnt --bind "$cache/archives" "$root/var/cache/apt/archives"
git -C "$top" bundle create "$root/root/repo.bundle" HEAD >"$logs/clone.log" 2>&1
in_root git -c advice.detachedHead=false clone -q /root/repo.bundle /root/nccl-net-verbs >>"$logs/clone.log" 2>&1
echo "done in $(secs "$t0") s; packages installed: $(in_root dpkg-query -W | wc -l)"

passed=0 failed=0
verdict() {	# verdict NAME RC START: one result line; counts it
	if [ "$2" -eq 0 ]; then
		passed=$((passed + 1)); echo "  $1: ok in $(secs "$3") s"
	else
		failed=$((failed + 1)); echo "  $1: FAILED (exit $2) after $(secs "$3") s (log: $logs/$1.log)"
	fi
}
src=/root/nccl-net-verbs
want() { case " ${NV_FRESH_STEPS:-bench test package} " in *" $1 "*) return 0 ;; esac; return 1; }

# ---- 1. the main command ----------------------------------------------------
if want bench; then
	quick=NB_QUICK=1
	[ "${NV_FRESH_FULL:-0}" = 1 ] && quick=NB_QUICK=0
	echo "== $quick scripts/bench.sh (in the fresh root)"
	t=$(date +%s) rc=0
	run_bg in_root timeout 1800 env "$quick" sh -c "cd $src && scripts/bench.sh" >"$logs/bench.log" 2>&1 || rc=$?
	grep -E '^(installing|updating|building|configuring|bootstrapping)' "$logs/bench.log" | sed 's/^/  /' || true
	sed -n '/^== summary/,$p' "$logs/bench.log" | sed 's/^/  /'
	verdict bench "$rc" "$t"
fi

# ---- 2. the test command ----------------------------------------------------
if want test; then
	echo "== scripts/test.sh (in the fresh root)"
	t=$(date +%s) rc=0
	run_bg in_root timeout 2400 sh -c "cd $src && scripts/test.sh" >"$logs/test.log" 2>&1 || rc=$?
	grep -E '^(make check:|check-extra:|failed: |[0-9]+ passed, [0-9]+ failed$)' "$logs/test.log" | sed 's/^/  /' || true
	# a failure is shown where CI prints it: the end of each failed test's log
	# (test.sh's "==== NAME.log" sections), at most 40 lines of each
	[ "$rc" -eq 0 ] || awk '
		function flush(  i) {
			if (name == "") return
			print "    " name
			for (i = (n > 40 ? n - 40 : 0); i < n; i++) print "    " l[i % 40]
			name = ""
		}
		/^==== .*\.log$/ { flush(); name = $0; n = 0; next }
		/^(make check:|check-extra:)/ { flush() }
		name != "" { l[n % 40] = $0; n++ }
		END { flush() }' "$logs/test.log" || true
	verdict test "$rc" "$t"
fi

# ---- 3. the Debian package, installed and run --------------------------------
if want package; then
	echo "== dpkg-buildpackage -b -us -uc, install, run (in the fresh root)"
	t=$(date +%s) rc=0
	cat >"$root/root/package.sh" <<EOF
set -eux
cd $src
# run alone (NV_FRESH_STEPS=package): set up and build what the runs below use
[ -e build/test/simverbs/.libs/libibverbs.so.1 ] || scripts/setup.sh
apt-get -q update
apt-get build-dep -y -q ./
DEB_BUILD_OPTIONS=nocheck dpkg-buildpackage -b -us -uc
test -z "\$(git status --porcelain)"   # outputs are ignored, nothing tracked changed
apt-get install -y -q ../nccl-net-verbs_*.deb
dpkg -L nccl-net-verbs
test -f /usr/lib/\$(dpkg-architecture -qDEB_HOST_MULTIARCH)/libnccl-net-verbs.so
test -f /usr/share/man/man1/nccl-net-bench.1.gz
test -f /usr/share/man/man1/nccl-net-verbs-info.1.gz
if dpkg -L nccl-net-verbs | grep '\.la\$'; then exit 1; fi
# over simverbs: the build tree's libibverbs.so.1 (and nothing else of ours)
export LD_LIBRARY_PATH=$src/build/test/simverbs/.libs SIMVERBS_FABRIC=nvfresh-\$\$
if ls \$LD_LIBRARY_PATH | grep nccl-net; then exit 1; fi
/usr/bin/nccl-net-verbs-info | tee /tmp/info.out
grep -q simib0 /tmp/info.out
cd /tmp
# found by name (NCCL_NET_PLUGIN=verbs, as NCCL does), then as the installed default
NCCL_NET_PLUGIN=verbs /usr/bin/nccl-net-bench -t sendrecv,latency -b 8 -e 1M -f 32 -n 5 -w 1 --timeout 120 |
	tee /tmp/nb.out
# loaded by its bare name: the loader found it (LD_LIBRARY_PATH holds no plugin)
grep -q "plugin Verbs from libnccl-net-verbs.so," /tmp/nb.out
/usr/bin/nccl-net-bench -l --timeout 60 | tee /tmp/nbl.out
grep -q simib0 /tmp/nbl.out
EOF
	run_bg in_root timeout 1200 bash /root/package.sh >"$logs/package.log" 2>&1 || rc=$?
	grep -E '^# nccl-net-bench: .*plugin|^# Avg bus bandwidth' "$logs/package.log" | head -n 3 | sed 's/^/  /' || true
	if [ "$rc" -eq 0 ]; then
		mkdir -p "$logs/deb"
		cp "$root"/root/nccl-net-verbs*.deb "$root"/root/nccl-net-verbs_*.changes "$root"/root/*.buildinfo \
			"$logs/deb/" 2>/dev/null || true
		if lintian --fail-on warning -I --pedantic "$logs"/deb/*.changes >"$logs/lintian.log" 2>&1 &&
			! grep -v 'root privileges' "$logs/lintian.log" | grep -q .; then
			echo "  lintian (-I --pedantic): clean; the justified overrides are in debian/*.lintian-overrides"
		else
			rc=1; echo "  lintian: FAILED:"; grep -v 'root privileges' "$logs/lintian.log" | sed 's/^/    /'
		fi
	fi
	verdict package "$rc" "$t"
fi

echo "passed=$passed failed=$failed skipped=0" >"$results"
echo "fresh-check: $passed passed, $failed failed in $(secs "$t0") s (logs: $logs)"
[ "$failed" -eq 0 ]
exit
}
