#!/usr/bin/env bash
# test/rxe/run.sh - `make check-rxe`: the plugin on the Linux kernel's own RDMA
# stack, soft-RoCE (rdma_rxe), in a virtual machine.
#
# On the host (nothing is installed but the tools below; the kernel is not):
#   1. installs what is missing (qemu-system-x86, busybox-static, cpio, kmod,
#      ibverbs-utils, ibverbs-providers, iproute2), apt-get update first;
#   2. downloads Debian's kernel package (the one linux-image-amd64 depends on,
#      e.g. linux-image-6.1.0-57-amd64) with `apt-get download`, unpacks it
#      with dpkg-deb -x (not installed), runs depmod -b on the unpacked tree and
#      keeps the kernel and the modules the VM needs;
#   3. builds an initramfs: a static busybox, those modules (virtio, 9p, veth,
#      crc32_generic, ib_uverbs, rdma_rxe, sch_netem and their dependencies)
#      and /init (test/rxe/initramfs-init);
#   4. boots it under QEMU's software emulation (TCG: no /dev/kvm needed), with
#      no network card, the host's root shared read-only over 9p and the build
#      tree read-write; /init switches to the host's root and runs
#      test/rxe/vm-init, which sets up rdma_rxe on veth pairs (test/rxe/vm-net)
#      and runs the steps (test/rxe/vm-tests);
#   5. reads the steps' results back from the build tree and prints one line
#      per step (PASS, FAIL, SKIP with its reason, XFAIL: a known-failing step,
#      reported loudly and counted apart).
#
# Exit status: 0 passed, 1 failed (something ran and went wrong, the VM did
# not boot in time, a step did not finish), 77 skipped (no VM to be had: no
# QEMU and no way to install it, no kernel package and none cached). Writes
# $NV_BUILD_DIR/rxe-results.txt (passed=N failed=N skipped=N xfailed=N, the
# format .ci/run sums) and every log to $NV_BUILD_DIR/rxe/.
#
# Cache (NV_RXE_CACHE, default /var/cache/nccl-net-verbs-rxe): the kernel
# package, the kernel and modules taken from it (kernel/PACKAGE_VERSION/) and
# the initramfs (keyed by its contents' hash), so that a repeated run
# downloads nothing. See docs/rxe.md for the environment (NV_RXE_STEPS,
# NV_RXE_CMD, timeouts).
set -uo pipefail
{
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
B=${NV_BUILD_DIR:-$top/build}
mkdir -p "$B"
B=$(cd "$B" && pwd)
R=$B/rxe
results=$B/rxe-results.txt
cache=${NV_RXE_CACHE:-/var/cache/nccl-net-verbs-rxe}
boot_timeout=${NV_RXE_BOOT_TIMEOUT:-420}	# qemu start to vm-init running
vm_timeout=${NV_RXE_TIMEOUT:-1200}		# qemu start to power-off
two_timeout=${NV_RXE_TWOHOST_TIMEOUT:-300}	# the two VMs of step twohost, boot included
t_start=$(date +%s)

say() { echo "check-rxe: $*"; }
elapsed() { echo $(( $(date +%s) - t_start )); }
skip() {
	say "SKIPPED: $*"
	echo "passed=0 failed=0 skipped=1 xfailed=0" >"$results"
	exit 77
}
fail() {
	say "FAILED: $*"
	echo "passed=0 failed=1 skipped=0 xfailed=0" >"$results"
	exit 1
}

rm -rf "$R"
mkdir -p "$R"
: >"$results"
[ -x "$B/nccl-net-bench" ] && [ -f "$B/.libs/libnccl-net-verbs.so" ] ||
	fail "$B is not built (nccl-net-bench, .libs/libnccl-net-verbs.so): run make first"

# The real-device mode's test programs are built here, not under TCG in the VM.
if [ -x "$top/test/device/run.sh" ] && [ -f "$B/Makefile" ]; then
	case " ${NV_RXE_STEPS:-} $([ "${NV_RXE_REALDEV:-0}" = 1 ] && echo realdev) " in
	*" realdev "*)
		printf 'check-rxe: building the test programs for the real-device mode... '
		make -C "$B" -s -j2 check TESTS= >"$R/prepare.log" 2>&1 && echo done ||
			fail "make check TESTS= failed (see $R/prepare.log)" ;;
	esac
fi

# ---- host tools ---------------------------------------------------------------
# command:package; the VM runs the host's binaries, so the verbs tools and the
# rxe provider (ibverbs-providers) are needed on the host too.
tools=(qemu-system-x86_64:qemu-system-x86 cpio:cpio depmod:kmod modprobe:kmod
	dpkg-deb:dpkg ibv_devinfo:ibverbs-utils ibv_rc_pingpong:ibverbs-utils
	rdma:iproute2 ip:iproute2 tc:iproute2 gzip:gzip timeout:coreutils)
need=()
for t in "${tools[@]}"; do
	command -v "${t%%:*}" >/dev/null 2>&1 || need+=("${t#*:}")
done
static_busybox() {	# a statically linked busybox (the initramfs has no libc)
	local b
	for b in /bin/busybox /usr/bin/busybox; do
		[ -x "$b" ] && ! ldd "$b" >/dev/null 2>&1 && { echo "$b"; return 0; }
	done
	return 1
}
static_busybox >/dev/null || need+=(busybox-static)
[ -e /etc/libibverbs.d/rxe.driver ] || need+=(ibverbs-providers)
if [ ${#need[@]} -gt 0 ]; then
	mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
	[ "$(id -u)" -eq 0 ] || skip "missing ${need[*]} and not root to install them"
	printf 'check-rxe: installing %s... ' "${need[*]}"
	apt=(env DEBIAN_FRONTEND=noninteractive apt-get -y -q -o DPkg::Lock::Timeout=600)
	if "${apt[@]}" update >"$R/host-packages.log" 2>&1 &&
		"${apt[@]}" install --no-install-recommends "${need[@]}" >>"$R/host-packages.log" 2>&1; then
		echo "done in $(elapsed) s"
	else
		echo failed
		tail -n 5 "$R/host-packages.log"
		skip "could not install ${need[*]} (see $R/host-packages.log)"
	fi
fi
busybox=$(static_busybox) || skip "no static busybox after installing busybox-static"
[ -e /etc/libibverbs.d/rxe.driver ] || skip "libibverbs has no rxe provider (/etc/libibverbs.d/rxe.driver)"

# ---- kernel ---------------------------------------------------------------------
# The modules the VM loads; their dependencies are added, in order, by modprobe.
# (sch_netem: step loss drops packets under rxe0 with `tc qdisc ... netem`)
modules=(virtio_pci 9pnet_virtio 9p virtio_net veth crc32_generic ib_uverbs rdma_rxe sch_netem)
mkdir -p "$cache/debs" "$cache/kernel" || skip "cannot create the cache $cache"
# kernel_pkg: the versioned package linux-image-amd64 depends on, and its version.
kernel_pkg() {
	local p
	p=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }')
	[ -n "$p" ] || return 1
	echo "$p $(apt-cache show --no-all-versions "$p" 2>/dev/null | awk '$1 == "Version:" { print $2; exit }')"
}
read -r kpkg kver < <(kernel_pkg || { [ "$(id -u)" -ne 0 ] || apt-get -q -o DPkg::Lock::Timeout=600 update >>"$R/host-packages.log" 2>&1; kernel_pkg; })
kdir=
if [ -n "${kpkg:-}" ] && [ -n "${kver:-}" ]; then
	kdir=$cache/kernel/${kpkg}_${kver}_$(echo "${modules[*]}" | sha256sum | cut -c1-8)
	if [ ! -s "$kdir/order" ]; then
		printf 'check-rxe: preparing the kernel %s %s... ' "$kpkg" "$kver"
		t0=$(date +%s)
		if ! ls "$cache/debs/${kpkg}_${kver//:/%3a}_"*.deb >/dev/null 2>&1; then
			( cd "$cache/debs" && apt-get download "$kpkg=$kver" ) >"$R/kernel.log" 2>&1 ||
				{ [ "$(id -u)" -ne 0 ] || apt-get -q update >>"$R/kernel.log" 2>&1; ( cd "$cache/debs" && apt-get download "$kpkg=$kver" ) >>"$R/kernel.log" 2>&1; } ||
				true
		fi
		deb=$(ls "$cache/debs/${kpkg}_${kver//:/%3a}_"*.deb 2>/dev/null | head -n 1)
		if [ -n "$deb" ]; then
			un=$(mktemp -d "$cache/unpack.XXXXXX")
			rm -rf "$kdir.new"
			mkdir -p "$kdir.new/modules"
			if dpkg-deb -x "$deb" "$un" >>"$R/kernel.log" 2>&1 &&
				kv=$(ls "$un/lib/modules" | head -n 1) && [ -n "$kv" ] &&
				depmod -b "$un" "$kv" >>"$R/kernel.log" 2>&1 &&
				cp "$un/boot/vmlinuz-$kv" "$kdir.new/vmlinuz" &&
				(for m in "${modules[@]}"; do
					modprobe -d "$un" -S "$kv" --show-depends "$m" || exit 1
				done) >"$kdir.new/deps" 2>>"$R/kernel.log"; then
				ok=1
				awk '$1 == "insmod" { print $2 }' "$kdir.new/deps" | awk '!seen[$0]++' |
					while read -r ko; do
						cp "$ko" "$kdir.new/modules/" || exit 1
						basename "$ko"
					done >"$kdir.new/order" || ok=0
				for m in "${modules[@]}"; do	# each one listed (not built in)
					grep -q "^${m//-/_}\.ko" "$kdir.new/order" || grep -q "^$m\.ko" "$kdir.new/order" ||
						{ echo "module $m not found in $deb" >>"$R/kernel.log"; ok=0; }
				done
				echo "$kv" >"$kdir.new/release"
				[ "$ok" = 1 ] && rm -rf "$kdir" && mv "$kdir.new" "$kdir"
			fi
			rm -rf "$un" "$kdir.new"
			# the packages of other versions go
			find "$cache/debs" -name 'linux-image-*.deb' ! -path "$deb" -delete
		fi
		if [ -s "$kdir/order" ]; then
			echo "done in $(( $(date +%s) - t0 )) s"
		else
			echo "failed (see $R/kernel.log)"
			kdir=
		fi
	fi
fi
if [ -z "$kdir" ]; then	# no package to be had now: the newest one cached
	kdir=$(ls -d "$cache"/kernel/*/ 2>/dev/null | sort -V | tail -n 1)
	kdir=${kdir%/}
	[ -n "$kdir" ] && [ -s "$kdir/order" ] ||
		skip "no kernel package (apt-get download ${kpkg:-of linux-image-amd64} failed, see $R/kernel.log) and none cached in $cache"
	say "using the cached kernel ${kdir##*/} (the current package could not be had)"
fi

# ---- initramfs ------------------------------------------------------------------
applets=(sh mount insmod switch_root poweroff cut mkdir sleep cat echo sync)
ikey=$( { cat "$top/test/rxe/initramfs-init" "$kdir/order"; "$busybox" 2>&1 | head -n 1; echo "${applets[*]}"; } |
	sha256sum | cut -c1-16)
initrd=$kdir/initramfs-$ikey.cpio.gz
if [ ! -s "$initrd" ]; then
	d=$(mktemp -d)
	mkdir -p "$d/bin" "$d/modules" "$d/proc" "$d/sys" "$d/dev" "$d/newroot"
	cp "$busybox" "$d/bin/busybox"
	for a in "${applets[@]}"; do ln -s busybox "$d/bin/$a"; done
	cp "$top/test/rxe/initramfs-init" "$d/init"
	chmod 755 "$d/init"
	cp "$kdir/modules/"*.ko "$kdir/order" "$d/modules/"
	rm -f "$kdir"/initramfs-*.cpio.gz
	( cd "$d" && find . | cpio -o -H newc --quiet | gzip -1 ) >"$initrd.new" && mv "$initrd.new" "$initrd" ||
		fail "could not build the initramfs"
	rm -rf "$d"
fi
say "kernel ${kdir##*/}, initramfs ${initrd##*/}, prepared in $(elapsed) s"

# ---- boot -----------------------------------------------------------------------
# What the VM reads: the environment of the steps (written here, sourced by
# vm-init), so that nothing but two paths goes on the kernel command line.
{
	echo "NV_RXE_T0=$(date +%s)"
	for v in $(compgen -e | grep -E '^(NV_RXE_|NCCL_)'); do
		case $v in NV_RXE_CACHE | NV_RXE_BOOT_TIMEOUT) continue ;; esac
		printf 'export %s=%q\n' "$v" "${!v}"
	done
	printf 'export NV_RXE_TIMEOUT=%q\n' "$vm_timeout"
} >"$R/vm.env"
# qemu_common: the machine, the kernel and initramfs, the host's root and
# the build tree; append: the kernel command line (nv_role=A|B added for the
# two VMs of step twohost; no_timer_check: under TCG on a loaded host the
# kernel's IO-APIC timer check can miss its ticks and panic at boot with
# "IO-APIC + timer doesn't work!", as seen at load 12+).
qemu_common=(qemu-system-x86_64 -machine q35 -accel tcg -cpu max -nographic -no-reboot -monitor none
	-kernel "$kdir/vmlinuz" -initrd "$initrd"
	-fsdev "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap"
	-device "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot"
	-fsdev "local,id=build,path=$B,security_model=none,multidevs=remap"
	-device "virtio-9p-pci,fsdev=build,mount_tag=build")
append="console=ttyS0 quiet panic=-1 mitigations=off no_timer_check nv_src=$top nv_build=$B"
# twohost runs in two VMs of its own (after the main one); the main VM runs the
# rest, and does not boot when nothing is left for it
want_steps=${NV_RXE_STEPS:-all}
two=0
case " $want_steps " in *" all "* | *" twohost "*) two=1 ;; esac
main_steps=$(tr ' ' '\n' <<<"$want_steps" | grep -vx 'twohost' | tr '\n' ' ' | sed 's/ *$//')
boot_s=- vm_s=0 timed_out=0
if [ -n "$main_steps" ] || [ -n "${NV_RXE_CMD:-}" ]; then
mem=${NV_RXE_MEM:-2048}
smp=${NV_RXE_SMP:-2}
qemu=("${qemu_common[@]}" -smp "$smp" -m "$mem" -nic none -serial "file:$R/console.log"
	-append "$append")
echo "${qemu[*]}" >"$R/qemu.cmd"
t_boot=$(date +%s)
"${qemu[@]}" </dev/null >"$R/qemu.log" 2>&1 &
qpid=$!
trap 'kill "$qpid" 2>/dev/null' EXIT
trap 'kill "$qpid" 2>/dev/null; exit 130' INT TERM HUP
say "booting the VM (TCG, $smp CPUs, $mem MiB; console: $R/console.log)"
running() { kill -0 "$qpid" 2>/dev/null; }
booted=0
while running; do
	if grep -q '^nv-rxe: vm-init running' "$R/console.log" 2>/dev/null; then booted=1; break; fi
	grep -q '^nv-rxe: FATAL' "$R/console.log" 2>/dev/null && break
	[ $(( $(date +%s) - t_boot )) -lt "$boot_timeout" ] || break
	sleep 1
done
if [ "$booted" != 1 ]; then
	running && kill "$qpid"
	wait "$qpid" 2>/dev/null
	tail -n 30 "$R/console.log" "$R/qemu.log" 2>/dev/null | sed 's/^/  | /'
	if grep -q '^nv-rxe: FATAL' "$R/console.log" 2>/dev/null; then
		fail "the VM did not start: $(grep -m1 '^nv-rxe: FATAL' "$R/console.log")"
	fi
	fail "the VM did not reach vm-init within ${boot_timeout} s (NV_RXE_BOOT_TIMEOUT)"
fi
boot_s=$(( $(date +%s) - t_boot ))
say "VM up: vm-init running $boot_s s after qemu started ($(grep -m1 '^nv-rxe: vm-init running' "$R/console.log" | sed 's/.*running //'))"
# the steps, as the VM reports them
seen=0
while running && [ $(( $(date +%s) - t_boot )) -lt "$vm_timeout" ]; do
	if [ -f "$R/steps.txt" ]; then
		n=$(wc -l <"$R/steps.txt")
		[ "$n" -gt "$seen" ] && { sed -n "$((seen + 1)),${n}p" "$R/steps.txt" | sed 's/^/  step /'; seen=$n; }
	fi
	sleep 1
done
timed_out=0
if running; then
	timed_out=1
	kill "$qpid"
	sleep 2
	running && kill -9 "$qpid"
fi
wait "$qpid" 2>/dev/null
trap - EXIT INT TERM HUP
vm_s=$(( $(date +%s) - t_boot ))

else
	echo "$want_steps" >"$R/plan.txt"
	: >"$R/steps.txt"
fi

# ---- step twohost: two VMs joined by a link ----------------------------------------
# A listens for B's connection on a QEMU socket netdev (a virtual Ethernet link
# between the two virtio NICs); vm-init runs test/rxe/vm-twohost ROLE in each.
if [ "$two" = 1 ]; then
	[ -f "$R/plan.txt" ] && ! grep -qw twohost "$R/plan.txt" && sed -i 's/$/ twohost/' "$R/plan.txt"
	rm -f "$R"/twohost-*
	t2=$(date +%s)
	port=$(( 30000 + RANDOM % 20000 ))
	two_mem=${NV_RXE_TWOHOST_MEM:-1024}
	net_a=(-netdev "socket,id=n0,listen=127.0.0.1:$port" -device "virtio-net-pci,netdev=n0,mac=52:54:00:79:00:01")
	net_b=(-netdev "socket,id=n0,connect=127.0.0.1:$port" -device "virtio-net-pci,netdev=n0,mac=52:54:00:79:00:02")
	say "step twohost: booting two VMs (1 CPU, $two_mem MiB each) joined by a socket link on port $port"
	"${qemu_common[@]}" -smp 1 -m "$two_mem" -serial "file:$R/twohost-console-A.log" "${net_a[@]}" \
		-append "$append nv_role=A" </dev/null >"$R/twohost-qemu-A.log" 2>&1 &
	pa=$!
	pb=
	trap 'kill $pa $pb 2>/dev/null' EXIT
	trap 'kill $pa $pb 2>/dev/null; exit 130' INT TERM HUP
	for i in $(seq 1 20); do	# B connects to A's listening socket, once it listens
		sleep 1
		ss -Hltn "sport = :$port" | grep -q . || continue
		"${qemu_common[@]}" -smp 1 -m "$two_mem" -serial "file:$R/twohost-console-B.log" "${net_b[@]}" \
			-append "$append nv_role=B" </dev/null >"$R/twohost-qemu-B.log" 2>&1 &
		pb=$!
		break
	done
	while [ -n "$pb" ] && [ $(( $(date +%s) - t2 )) -lt "$two_timeout" ] &&
		{ kill -0 "$pa" 2>/dev/null || kill -0 "$pb" 2>/dev/null; }; do
		[ -s "$R/twohost-A.rc" ] && [ -s "$R/twohost-B.rc" ] && break
		sleep 1
	done
	kill $pa $pb 2>/dev/null
	sleep 2
	kill -9 $pa $pb 2>/dev/null
	wait $pa $pb 2>/dev/null
	trap - EXIT INT TERM HUP
	res=PASS reason=
	for r in B A; do	# (A checks the values: its line is the reason shown)
		if [ -s "$R/twohost-$r.rc" ]; then
			read -r rc why <"$R/twohost-$r.rc"
			[ "$rc" = 0 ] || { res=FAIL reason="$why"; break; }
			reason=$why
		else
			res=FAIL
			if [ -z "$pb" ]; then reason="VM B could not connect to A's link (port $port; see $R/twohost-qemu-A.log)"
			else reason="VM $r gave no verdict within ${two_timeout} s (NV_RXE_TWOHOST_TIMEOUT; see $R/twohost-console-$r.log, twohost-$r.log)"; fi
			break
		fi
	done
	echo "twohost $res $(( $(date +%s) - t2 )) $reason" | tee -a "$R/steps.txt" | sed 's/^/  step /'
fi

# ---- results --------------------------------------------------------------------
p=0 f=0 s=0 x=0
echo
echo "check-rxe results (logs: $R/STEP.log):"
if [ -f "$R/plan.txt" ]; then
	for st in $(cat "$R/plan.txt"); do
		line=$(awk -v s="$st" '$1 == s' "$R/steps.txt" 2>/dev/null | tail -n 1)
		if [ -z "$line" ]; then
			why="did not finish"
			[ "$timed_out" = 1 ] && why="did not finish: the VM ran past ${vm_timeout} s (NV_RXE_TIMEOUT)"
			line="$st FAIL - $why"
		fi
		read -r name res secs reason <<<"$line"
		case $res in
		PASS | XPASS) p=$((p + 1)) ;;
		SKIP) s=$((s + 1)) ;;
		XFAIL) x=$((x + 1)) ;;
		*) f=$((f + 1)) ;;
		esac
		printf '  %-14s %-5s %5s s  %s\n' "$name" "$res" "$secs" "$reason"
	done
else
	f=1
	echo "  the VM wrote no plan of steps ($R/plan.txt): see $R/console.log"
	tail -n 20 "$R/console.log" | sed 's/^/  | /'
fi
if [ "$x" -gt 0 ]; then
	echo
	echo "  !!! $x KNOWN-FAILING step(s) FAILED (XFAIL, not counted as passed or failed):"
	awk '$2 == "XFAIL" { print "  !!!   " $0 }' "$R/steps.txt"
fi
awk '$2 == "XPASS" { print "  !!! " $1 " is listed as known-failing but PASSED: take it off the list (NV_RXE_XFAIL in test/rxe/vm-tests)" }' "$R/steps.txt" 2>/dev/null
echo "passed=$p failed=$f skipped=$s xfailed=$x" >"$results"
echo
say "$p passed, $f failed, $s skipped, $x known-failing; VM up in $boot_s s, ran ${vm_s} s; total $(elapsed) s"
[ "$f" -eq 0 ] || exit 1
[ "$p" -gt 0 ] || exit 77
exit 0
}
