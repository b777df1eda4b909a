#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tests/harness/selftest.sh: self-tests of the test harness. Each passes
# when the harness does what it must. With a stand-in for qemu (no VM):
#  1. a KVM probe whose qemu aborts leaves no shell job message ("Aborted")
#     behind, only the runner's own one-line notice, and
#  1b. that notice says what qemu said, and every log it names has
#     something in it;
#  2. the VM timeout is stretched by the slowness the guest reported in
#     .vm/time-scale, and
#  3. applies as given when the guest reported none;
# without a VM:
#  4. tests/run-in-vm.sh --scale stretches a test's timeout, and
#  5. without it the same test times out;
# one VM boot each:
#  6. the guest's root is a mount root: unshare(CLONE_NEWUSER) works;
#  7. a failing kselftest: `make check-vm-only` with the suite replaced by
#     ksft-fail ends with "1 passed, 1 failed" and exits non-zero;
#  8. a WARN_ON in the guest (module warnmod/) fails the VM run;
#  9. a module that cannot be unloaded (a process still holds /dev/gpusleep
#     when the command ends) fails the VM run;
# 10. make vm-shell's way (--interactive, tools/vm/shell.sh) with a job
#     left in the background holding /dev/gpusleep: `exit` stops it,
#     naming it, the module unloads and the run succeeds.
# Needs `make all` and the harness-warnmod target built first (make check
# does both). Environment: KVER, the distro kernel release.
# Prints TAP; logs go to build/vm/harness-*/.

set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 2
KVER=${KVER:?KVER not set}
KERNEL=/boot/vmlinuz-$KVER
B=build
warnmod=$B/tests/harness/warnmod/gpusleep_harness_warn.ko

report() {
	# $1: 0 when the expectation held, $2: name, $3: log to show otherwise
	if [ "$1" = 0 ]; then
		echo "ok - harness: $2"
	else
		echo "not ok - harness: $2"
		[ -f "$3" ] && tail -n 15 "$3" | sed 's/^/#   /'
	fi
}

mkdir -p $B/vm

# A stand-in for qemu-system-x86_64: aborts when asked for KVM (as one that
# cannot use it may), else writes $FAKE_SCALE into .vm/time-scale when set,
# sleeps $FAKE_SLEEP seconds and reports a clean end in .vm/result.
fake=$B/vm/harness-fake
rm -rf "$fake"
mkdir -p "$fake/bin"
cat > "$fake/bin/qemu-system-x86_64" <<'EOF'
#!/bin/sh
out=""
for a in "$@"; do
	case "$a" in
	local,path=*,mount_tag=out,*) out=${a#local,path=}; out=${out%%,*} ;;
	esac
done
case " $* " in *" -accel kvm "*)
	echo "qemu-system-x86_64: failed to initialize kvm: Permission denied" >&2
	kill -ABRT $$ ;;
esac
[ -n "${FAKE_SCALE:-}" ] && echo "$FAKE_SCALE" > "$out/.vm/time-scale"
sleep "${FAKE_SLEEP:-0}"
printf 'status 0\ndone\n' > "$out/.vm/result"
EOF
chmod +x "$fake/bin/qemu-system-x86_64"
fakerun() {
	# $1: log; the rest: run.sh options. Sets rc.
	local log=$1
	shift
	rc=0
	PATH="$PWD/$fake/bin:$PATH" tools/vm/run.sh --quiet --kernel "$KERNEL" \
		"$@" -- true > "$log" 2>&1 || rc=$?
}

# 1. A KVM probe that aborts. The stand-in device has a fixed mtime; the
#    verdict cached under it is removed before and after.
: > "$fake/kvm"
touch -d @1000000000 "$fake/kvm"
probe=$B/vm/kvm-probe-$(basename "$KERNEL")-1000000000
rm -f "$probe"
GPUSLEEP_KVM_DEV=$fake/kvm fakerun "$fake/probe.log" --out "$fake/probe"
rm -f "$probe"
[ "$rc" = 0 ] && ! grep -qE 'Aborted|line [0-9]+:' "$fake/probe.log"
report $? "a KVM probe that aborts leaves no job message (status $rc)" "$fake/probe.log"
notice=$(grep 'run.sh: ' "$fake/probe.log")
empty=""
for f in $(printf '%s\n' "$notice" | grep -oE "$B/vm/[^ ,;)]+\.log"); do
	[ -s "$f" ] || empty="$empty $f"
done
printf '%s\n' "$notice" | grep -q 'failed to initialize kvm: Permission denied' &&
	[ -z "$empty" ]
report $? "the KVM probe's notice says what qemu said and names no empty log${empty:+ (empty:$empty)}" \
	"$fake/probe.log"

# 2. and 3. The VM timeout, stretched by the guest's measured slowness.
FAKE_SCALE=500 FAKE_SLEEP=4 fakerun "$fake/stretch.log" --out "$fake/stretch" --timeout 2
[ "$rc" = 0 ]
report $? "the VM timeout stretches by the guest's time-scale (status $rc)" "$fake/stretch.log"
FAKE_SLEEP=4 fakerun "$fake/plain.log" --out "$fake/plain" --timeout 2
[ "$rc" = 124 ] && grep -q 'timed out after 2s' "$fake/plain/vm-error"
report $? "the VM timeout applies when the guest reports no slowness (status $rc)" "$fake/plain.log"

# 4. and 5. The test runner's --scale.
printf '#!/bin/sh\nsleep 3\n' > "$fake/slow"
chmod +x "$fake/slow"
tests/run-in-vm.sh --timeout 1 --scale 600 --out "$fake/tests" "$fake/slow" \
	> "$fake/scaled.log" 2>&1
grep -q '^ok - ' "$fake/scaled.log"
report $? "run-in-vm.sh --scale stretches a test's timeout" "$fake/scaled.log"
tests/run-in-vm.sh --timeout 1 --out "$fake/tests" "$fake/slow" \
	> "$fake/unscaled.log" 2>&1
grep -q '^not ok - .*timed out after 1s' "$fake/unscaled.log"
report $? "run-in-vm.sh without --scale times the same test out" "$fake/unscaled.log"

# 6. User namespaces in the guest: its root is not a chroot.
rc=0
tools/vm/run.sh --quiet --kernel "$KERNEL" --out $B/vm/harness-userns --timeout 300 \
	-- unshare --user true > $B/vm/harness-userns.log 2>&1 || rc=$?
report $rc "unshare(CLONE_NEWUSER) works in the guest (its root is a mount root; status $rc)" \
	$B/vm/harness-userns.log

# 7. A failing kselftest is counted and makes make fail.
log=$B/vm/harness-ksft-fail.log
rc=0
make -s --no-print-directory check-vm-only VM_SUITE=$B/tests/harness/ksft-fail \
	VM_SUITE_OUT=$B/vm/harness-ksft-fail > "$log" 2> "$log.stderr" || rc=$?
last=$(tail -n1 "$log")	# make's own "*** Error" line goes to stderr
[ "$rc" != 0 ] && [ "$last" = "1 passed, 1 failed" ]
report $? "failing kselftest is counted and fails make (got '$last', status $rc)" "$log"

# 8. A WARN_ON in the guest kernel fails the run.
out=$B/vm/harness-warn
rc=0
tools/vm/run.sh --quiet --kernel "$KERNEL" --module gpusleep.ko --module "$warnmod" \
	--out $out --timeout 300 -- true > $B/vm/harness-warn.log 2>&1 || rc=$?
[ "$rc" != 0 ] && grep -q 'kernel log has WARNING:' $out/vm-error 2>/dev/null
report $? "WARN_ON in the guest fails the VM run (status $rc)" $B/vm/harness-warn.log

# 9. A module kept busy by a leftover process fails the run.
out=$B/vm/harness-busy
rc=0
tools/vm/run.sh --quiet --kernel "$KERNEL" --module gpusleep.ko --out $out \
	--timeout 300 -- sh -c 'sleep 1000 < /dev/gpusleep > /dev/null 2>&1 &' \
	> $B/vm/harness-busy.log 2>&1 || rc=$?
[ "$rc" != 0 ] && grep -q 'rmmod gpusleep failed' $out/vm-error 2>/dev/null
report $? "module that will not unload fails the VM run (status $rc)" $B/vm/harness-busy.log

# 10. exit from the VM shell with a background job left running.
out=$B/vm/harness-shell
rc=0
# (the first bytes can be lost before the guest opens its terminal: a
# line of blanks first)
printf '%64s\nsleep 1000 < /dev/gpusleep > /dev/null 2>&1 &\nexit\n' '' |
	timeout 300 tools/vm/run.sh --interactive --kernel "$KERNEL" \
	--module gpusleep.ko --out $out -- sh tools/vm/shell.sh \
	> $B/vm/harness-shell.log 2>&1 || rc=$?
[ "$rc" = 0 ] && [ ! -e $out/vm-error ] &&
	grep -q 'pid [0-9]*: sleep 1000' $B/vm/harness-shell.log
report $? "exit from the VM shell stops a job left running and unloads the module (status $rc)" \
	$B/vm/harness-shell.log
exit 0
