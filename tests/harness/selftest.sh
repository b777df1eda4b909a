#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tests/harness/selftest.sh: self-tests of the test harness, one VM boot
# each. Each passes when the harness reports the failure it must report:
#  1. a failing kselftest: `make check-vm-only` with the suite replaced by
#     ksft-fail ends with "1 passed, 1 failed" and exits non-zero;
#  2. a WARN_ON in the guest (module warnmod/) fails the VM run;
#  3. a module that cannot be unloaded (a process still holds /dev/gpusleep
#     when the command ends) fails the VM run.
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

# 1. A failing kselftest is counted and makes make fail.
mkdir -p $B/vm
log=$B/vm/harness-ksft-fail.log
rc=0
make -s --no-print-directory check-vm-only VM_SUITE=$B/tests/harness/ksft-fail \
	VM_SUITE_OUT=$B/vm/harness-ksft-fail > "$log" 2> "$log.stderr" || rc=$?
last=$(tail -n1 "$log")	# make's own "*** Error" line goes to stderr
[ "$rc" != 0 ] && [ "$last" = "1 passed, 1 failed" ]
report $? "failing kselftest is counted and fails make (got '$last', status $rc)" "$log"

# 2. A WARN_ON in the guest kernel fails the run.
out=$B/vm/harness-warn
rc=0
tools/vm/run.sh --quiet --kernel "$KERNEL" --module gpusleep.ko --module "$warnmod" \
	--out $out --timeout 300 -- true > $B/vm/harness-warn.log 2>&1 || rc=$?
[ "$rc" != 0 ] && grep -q 'kernel log has WARNING:' $out/vm-error 2>/dev/null
report $? "WARN_ON in the guest fails the VM run (status $rc)" $B/vm/harness-warn.log

# 3. A module kept busy by a leftover process fails the run.
out=$B/vm/harness-busy
rc=0
tools/vm/run.sh --quiet --kernel "$KERNEL" --module gpusleep.ko --out $out \
	--timeout 300 -- sh -c 'sleep 1000 < /dev/gpusleep > /dev/null 2>&1 &' \
	> $B/vm/harness-busy.log 2>&1 || rc=$?
[ "$rc" != 0 ] && grep -q 'rmmod gpusleep failed' $out/vm-error 2>/dev/null
report $? "module that will not unload fails the VM run (status $rc)" $B/vm/harness-busy.log
exit 0
