#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tools/vm/run.sh: run a command inside a throw-away qemu VM, against a kernel
# module, the way virtme-ng does, with the host's root filesystem as the
# guest's root (read-only, over 9p).
#
# Usage:
#   tools/vm/run.sh [options] -- COMMAND [ARG...]
#
# Options:
#   --kernel PATH    kernel image to boot (default: /boot/vmlinuz-VER of the
#                    newest /lib/modules/VER that has 9p modules)
#   --modules VER|DIR|none
#                    take the 9p/virtio modules for the initramfs from
#                    /lib/modules/VER, or from DIR, an absolute
#                    .../lib/modules/VER directory with a modules.dep (a
#                    kernel unpacked under build/kernels/); "none" when the
#                    kernel has them built in (default: VER when the kernel
#                    is /boot/vmlinuz-VER, else none)
#   --module PATH.ko insmod this module before the command and rmmod it after
#                    (repeatable; loaded in order, unloaded in reverse)
#   --out DIR        results dir (default build/vm/out); emptied first. Holds
#                    console.log (serial console), output.log (the command's
#                    stdout+stderr), dmesg.log, kmemleak.log (when the kernel
#                    has kmemleak) and vm-error (one line per VM-level problem;
#                    absent when there was none). Inside the guest it is
#                    mounted read-write at the same absolute path and exported
#                    as $GPUSLEEP_OUT.
#   --timeout S      kill the VM after S seconds (default 600; 0: never),
#                    stretched by the factor the guest last wrote to
#                    .vm/time-scale in the results dir (percent; the test
#                    runner tests/run-in-vm.sh --scale auto writes the
#                    slowness it measured there)
#   --interactive    give the command the terminal: a second serial port
#                    (the guest's /dev/ttyS1, its controlling tty) on our
#                    stdin/stdout, the kernel console staying in
#                    console.log; no timeout; Ctrl-A X stops the VM
#   --mem SIZE       guest memory (default 2G);  --smp N  vCPUs (default 2)
#   --accel auto|kvm|tcg
#                    auto (default) uses KVM only when /dev/kvm is usable and a
#                    probe boot with it succeeds (cached in build/vm/), else TCG
#   --append ARGS    extra kernel command line
#   --quiet          do not copy the command's output to stdout
#
# The guest runs the command with the current directory (which must be
# visible in the host root; the repository is), PATH of the host, HOME=/tmp,
# GPUSLEEP_VM=1. The host root is read-only inside: write under /tmp or
# $GPUSLEEP_OUT only.
#
# The command's output is streamed to stdout. Exit status: the command's own
# status when the VM side was clean. Otherwise one line per problem goes to
# stderr and to DIR/vm-error and the status is non-zero (124 on a timeout,
# 125 when the command itself succeeded): timeout, a guest that did not reach
# the end, a failed insmod, a failed rmmod (module still in use), kmemleak
# reports, or a guest kernel log with BUG:, WARNING:, Oops, general
# protection, KASAN, possible circular locking, refcount_t, UBSAN:,
# Kernel panic, a hung task ("blocked for more than"), a soft lockup, a
# debug-objects (ODEBUG:) or list-debug report, or inconsistent lock state.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
KERNEL=""
MODVER="auto"
MODULES=()
OUT="$REPO/build/vm/out"
TIMEOUT=600
MEM=2G
SMP=2
ACCEL=auto
APPEND=""
QUIET=0
INTERACTIVE=0
# The KVM device (a variable so that the harness self-tests can point the
# probe at a stand-in).
KVM_DEV=${GPUSLEEP_KVM_DEV:-/dev/kvm}

BAD_PATTERNS=(
	'BUG:' 'WARNING:' 'Oops' 'general protection' 'KASAN'
	'possible circular locking' 'refcount_t' 'UBSAN:' 'Kernel panic'
	'blocked for more than' 'soft lockup' 'ODEBUG:' 'list_add corruption'
	'list_del corruption' 'inconsistent lock state'
)

die() {
	echo "run.sh: $*" >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) KERNEL=$2; shift 2 ;;
	--modules) MODVER=$2; shift 2 ;;
	--module) MODULES+=("$(realpath "$2")") || die "no module $2"; shift 2 ;;
	--out) OUT=$2; shift 2 ;;
	--timeout) TIMEOUT=$2; shift 2 ;;
	--mem) MEM=$2; shift 2 ;;
	--smp) SMP=$2; shift 2 ;;
	--accel) ACCEL=$2; shift 2 ;;
	--append) APPEND=$2; shift 2 ;;
	--quiet) QUIET=1; shift ;;
	--interactive) INTERACTIVE=1; TIMEOUT=0; shift ;;
	--) shift; break ;;
	-h|--help) sed -n '3,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
done
[ $# -gt 0 ] || die "no command given (use -- COMMAND)"
for m in "${MODULES[@]}"; do
	[ -f "$m" ] || die "module $m does not exist"
done
# The guest mounts a tmpfs on /tmp, hiding the host's /tmp.
for p in "$REPO" "$PWD" "${MODULES[@]}"; do
	case "$p" in
	/tmp|/tmp/*) die "$p is under /tmp, which the guest cannot see (its /tmp is a tmpfs)" ;;
	esac
done
command -v qemu-system-x86_64 > /dev/null || die "qemu-system-x86_64 missing (run tools/deps.sh)"
BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] || die "$BUSYBOX missing (install busybox-static)"

# Kernel and its module version.
if [ -z "$KERNEL" ]; then
	for d in $(ls -d /lib/modules/*/kernel/fs/9p 2>/dev/null | sort -V -r); do
		v=${d#/lib/modules/}
		v=${v%%/*}
		if [ -f "/boot/vmlinuz-$v" ]; then
			KERNEL="/boot/vmlinuz-$v"
			break
		fi
	done
	[ -n "$KERNEL" ] || die "no /boot/vmlinuz-VER with 9p modules; pass --kernel"
fi
[ -r "$KERNEL" ] || die "kernel $KERNEL not readable"
if [ "$MODVER" = auto ]; then
	MODVER=none
	case "$KERNEL" in
	/boot/vmlinuz-*)
		v=${KERNEL#/boot/vmlinuz-}
		[ -d "/lib/modules/$v" ] && MODVER=$v
		;;
	esac
fi

# Boot speed: under TCG, decompressing an xz bzImage takes seconds. When the
# kernel supports PVH entry, boot its uncompressed vmlinux (extracted once,
# cached in build/vm/) directly; otherwise boot the bzImage as it is.
VMDIR="$REPO/build/vm"
mkdir -p "$VMDIR"
boot_image() {
	local k=$1 cache magic off dec
	cache="$VMDIR/vmlinux-$(basename "$k")-$(stat -c '%s-%Y' "$k")"
	if [ ! -e "$cache" ] && [ ! -e "$cache.none" ]; then
		for magic in xz gz zst; do
			case $magic in
			xz) off=$(grep -abo $'\xfd7zXZ\x00' "$k" | head -n1 | cut -d: -f1); dec="xz -dc --single-stream" ;;
			gz) off=$(grep -abo $'\x1f\x8b\x08' "$k" | head -n1 | cut -d: -f1); dec="gzip -dc" ;;
			zst) off=$(grep -abo $'\x28\xb5\x2f\xfd' "$k" | head -n1 | cut -d: -f1); dec="zstd -qdc" ;;
			esac
			[ -n "$off" ] || continue
			tail -c +$((off + 1)) "$k" | $dec > "$cache.tmp" 2>/dev/null
			if readelf -n "$cache.tmp" 2>/dev/null | grep -q 'Xen.*(0x00000012)'; then
				mv "$cache.tmp" "$cache"
				break
			fi
		done
		rm -f "$cache.tmp"
		[ -e "$cache" ] || : > "$cache.none"
	fi
	if [ -e "$cache" ]; then echo "$cache"; else echo "$k"; fi
}
BOOT_IMAGE=$(boot_image "$KERNEL")

# Results dir: ours alone, emptied at each run. Runs that share a results
# dir wait for each other (lock file beside it).
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
exec 9> "$OUT.lock"
if ! flock -n 9; then
	echo "run.sh: waiting for another run using $OUT" >&2
	flock 9
fi
if [ -n "$(ls -A "$OUT")" ] && [ ! -e "$OUT/.gpusleep-vm" ]; then
	die "$OUT is not empty and not a previous results dir; refusing to empty it"
fi
find "$OUT" -mindepth 1 -delete
touch "$OUT/.gpusleep-vm"
mkdir -p "$OUT/.vm"

# Initramfs: busybox, the modules needed for virtio-pci + 9p, tools/vm/init.
# Cached in build/vm/ under a key of its inputs.
modlist=()
MODROOT=/
case "$MODVER" in
/*/lib/modules/*)
	MODROOT=${MODVER%/lib/modules/*}
	MODVER=${MODVER##*/lib/modules/}
	MODVER=${MODVER%/}
	;;
esac
if [ "$MODVER" != none ]; then
	[ -d "$MODROOT/lib/modules/$MODVER" ] || die "no $MODROOT/lib/modules/$MODVER"
	for want in virtio_pci 9pnet_virtio 9p; do
		while read -r verb path _; do
			[ "$verb" = insmod ] || continue
			case " ${modlist[*]-} " in *" $path "*) continue ;; esac
			modlist+=("$path")
		done < <(modprobe -d "$MODROOT" -S "$MODVER" --show-depends "$want" 2>/dev/null ||
			 die "cannot resolve module $want for $MODVER")
	done
fi
key=$( (cat "$REPO/tools/vm/init"; printf '%s\n' "${modlist[@]-}";
	stat -c '%s %Y' "$BUSYBOX" ${modlist[@]+"${modlist[@]}"}) | sha256sum | cut -c1-16)
INITRD="$VMDIR/initramfs-$key.cpio.gz"
if [ ! -f "$INITRD" ]; then
	stage=$(mktemp -d "$VMDIR/initramfs.XXXXXX")
	mkdir -p "$stage"/{bin,dev,proc,sys,modules,host,out}
	cp "$BUSYBOX" "$stage/bin/busybox"
	cp "$REPO/tools/vm/init" "$stage/init"
	chmod 755 "$stage/init"
	: > "$stage/modules.list"
	for path in ${modlist[@]+"${modlist[@]}"}; do
		base=$(basename "$path")
		case "$base" in
		*.ko.xz) xz -dc "$path" > "$stage/modules/${base%.xz}"; base=${base%.xz} ;;
		*.ko.gz) gzip -dc "$path" > "$stage/modules/${base%.gz}"; base=${base%.gz} ;;
		*.ko.zst) zstd -qdc "$path" > "$stage/modules/${base%.zst}"; base=${base%.zst} ;;
		*) cp "$path" "$stage/modules/$base" ;;
		esac
		echo "$base" >> "$stage/modules.list"
	done
	(cd "$stage" && find . | cpio -o -H newc --quiet | gzip -1) > "$INITRD.tmp"
	mv "$INITRD.tmp" "$INITRD"
	rm -rf "$stage"
fi

# Config and command for the guest (sourced by init and guest.sh).
q() {
	printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"
}
case "$OUT" in *[!A-Za-z0-9_./+-]*) die "results dir path $OUT has unusual characters" ;; esac
{
	echo "VM_OUT=$(q "$OUT")"
	echo "VM_REPO=$(q "$REPO")"
	echo "VM_CWD=$(q "$PWD")"
	printf 'VM_MODULES='
	q "${MODULES[*]-}"
	echo
	echo "VM_INTERACTIVE=$INTERACTIVE"
	# rows and columns of our terminal, for the guest's tty
	echo "VM_TTY_SIZE='$( { stty size < /dev/tty; } 2>/dev/null | tr -cd '0-9 ')'"
} > "$OUT/.vm/config"
{
	printf 'exec'
	for a in "$@"; do
		printf ' %s' "$(q "$a")"
	done
	echo
} > "$OUT/.vm/cmd"

qemu_base() {
	# $1: accel
	local cpu=()
	[ "$1" = kvm ] && cpu=(-cpu host)
	echo qemu-system-x86_64 -nodefaults -no-user-config -display none \
		-no-reboot -machine pc -accel "$1" "${cpu[@]}" -m "$MEM" -smp "$SMP" \
		-kernel "$BOOT_IMAGE" -initrd "$INITRD"
}

# KVM only when it really works here (it can exist and still fail nested).
if [ "$ACCEL" = auto ]; then
	ACCEL=tcg
	if [ -r "$KVM_DEV" ] && [ -w "$KVM_DEV" ]; then
		probe="$VMDIR/kvm-probe-$(basename "$KERNEL")-$(stat -c %Y "$KVM_DEV")"
		if [ ! -f "$probe" ]; then
			plog="$VMDIR/kvm-probe.log"		# the guest's console
			qlog="$VMDIR/kvm-probe.qemu.log"	# what qemu printed
			rm -f "$plog" "$qlog"
			# A qemu that cannot use KVM may abort: its "Aborted" job
			# message (from this subshell) and core dump are not news,
			# the verdict below is, with what qemu said.
			# shellcheck disable=SC2046
			prc=$( (ulimit -c 0; rc=0; timeout -k 2 30 $(qemu_base kvm) \
				-serial "file:$plog" \
				-append "console=ttyS0 panic=-1 no_timer_check gpusleep.probe=1" \
				> "$qlog" 2>&1 || rc=$?; echo "$rc") 2> /dev/null)
			if grep -q GPUSLEEP-VM-PROBE-OK "$plog" 2>/dev/null; then
				echo kvm > "$probe"
			else
				echo tcg > "$probe"
				why="qemu exited with status ${prc:-unknown}"
				case "$prc" in
				124|137) why="qemu did not finish booting in 30 s" ;;
				13[0-9]|1[4-9][0-9]) why="qemu was killed by signal $((prc - 128))" ;;
				esac
				said=$(grep -v '^[[:space:]]*$' "$qlog" 2>/dev/null | tail -n 1)
				[ -n "$said" ] && why="$why, saying: $said"
				[ -s "$qlog" ] && why="$why (all of it: $qlog)"
				[ -s "$plog" ] && why="$why (guest console: $plog)"
				echo "run.sh: $KVM_DEV is there but a probe VM did not boot with it: $why; using TCG, which is slower" >&2
			fi
		fi
		ACCEL=$(cat "$probe")
	fi
fi

# Boot. The serial console goes to console.log; the command's output is
# written by the guest into output.log (9p, uncached), which we follow.
# With --interactive the command has a second serial port, on our stdio.
# no_timer_check: on a busy host a TCG guest's timer interrupt can miss
# the kernel's boot-time check of the IO-APIC timer, which then panics
# ("IO-APIC + timer doesn't work!"); qemu's timer is known to work.
: > "$OUT/output.log"
# shellcheck disable=SC2207
qemu=($(qemu_base "$ACCEL")
	-serial "file:$OUT/console.log"
	-virtfs "local,path=/,mount_tag=hostroot,readonly=on,security_model=none,multidevs=remap"
	-virtfs "local,path=$OUT,mount_tag=out,security_model=none"
	-append "console=ttyS0 panic=-1 mitigations=off no_timer_check $APPEND")
qrc=0
timed_out=0
limit=$TIMEOUT
if [ "$INTERACTIVE" = 1 ]; then
	# In the foreground, on the terminal: no timeout, the user ends it.
	"${qemu[@]}" -serial mon:stdio 2> "$OUT/qemu.log" || qrc=$?
else
	"${qemu[@]}" > "$OUT/qemu.log" 2>&1 < /dev/null &
	qpid=$!
	trap 'kill "$qpid" 2>/dev/null; exit 130' INT TERM HUP
	if [ "$QUIET" = 0 ]; then
		tail -n +1 -s 0.2 -f --pid="$qpid" "$OUT/output.log" &
		tpid=$!
	fi
	# The timeout, stretched by the slowness the guest measured and
	# reported in .vm/time-scale (percent; tests/run-in-vm.sh --scale
	# auto writes it). 0: none.
	start=$SECONDS
	while kill -0 "$qpid" 2>/dev/null; do
		pct=$(cat "$OUT/.vm/time-scale" 2>/dev/null || true)
		case "$pct" in ''|*[!0-9]*) pct=100 ;; esac
		[ "$pct" -lt 100 ] && pct=100
		limit=$((TIMEOUT * pct / 100))
		if [ "$TIMEOUT" != 0 ] && [ $((SECONDS - start)) -ge "$limit" ]; then
			timed_out=1
			kill "$qpid" 2>/dev/null || true
			for _ in 1 2 3 4 5; do
				kill -0 "$qpid" 2>/dev/null || break
				sleep 1
			done
			kill -9 "$qpid" 2>/dev/null || true
			break
		fi
		sleep 1
	done
	wait "$qpid" || qrc=$?
	[ "$QUIET" = 0 ] && wait "$tpid"
fi

# Verdict.
init_error() {
	[ -s "$OUT/.vm/init.log" ] && printf ': %s' "$(tail -n1 "$OUT/.vm/init.log")"
	true
}
problems=()
status=""
if [ "$timed_out" = 1 ]; then
	if [ "$limit" = "$TIMEOUT" ]; then
		problems+=("timed out after ${TIMEOUT}s (see console.log)")
	else
		problems+=("timed out after ${limit}s (${TIMEOUT}s stretched by the measured slowness; see console.log)")
	fi
fi
res="$OUT/.vm/result"
if [ -f "$res" ]; then
	status=$(sed -n 's/^status \([0-9][0-9]*\)$/\1/p' "$res" | tail -n1)
	while read -r what arg; do
		case "$what" in
		insmod_failed) problems+=("insmod $arg failed") ;;
		rmmod_failed) problems+=("rmmod $arg failed: $(head -n1 "$OUT/.vm/rmmod.err" 2>/dev/null)") ;;
		cd_failed) problems+=("cannot cd to $arg in the guest") ;;
		kmemleak) problems+=("kmemleak reports leaks (see kmemleak.log)") ;;
		esac
	done < "$res"
	if ! grep -qx done "$res" && [ ${#problems[@]} = 0 ]; then
		problems+=("guest did not finish (see console.log)$(init_error)")
	fi
elif [ ${#problems[@]} = 0 ]; then
	problems+=("guest did not finish; qemu exit $qrc (see console.log, qemu.log)$(init_error)")
fi
klog="$OUT/dmesg.log"
[ -s "$klog" ] || klog="$OUT/console.log"
if [ -f "$klog" ]; then
	for p in "${BAD_PATTERNS[@]}"; do
		if grep -qF -- "$p" "$klog"; then
			problems+=("kernel log has $p (see $(basename "$klog"))")
		fi
	done
fi

if [ ${#problems[@]} -gt 0 ]; then
	printf '%s\n' "${problems[@]}" > "$OUT/vm-error"
	for p in "${problems[@]}"; do
		echo "run.sh: vm: $p" >&2
	done
	if [ "$timed_out" = 1 ]; then
		exit 124
	fi
	if [ -z "$status" ] || [ "$status" = 0 ]; then
		exit 125
	fi
fi
exit "${status:-125}"
