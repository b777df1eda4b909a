#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tools/vm/suite.sh: run a test suite in one VM boot and print TAP for all of
# it, VM-level failures included. Used by `make check`.
#
# Usage: tools/vm/suite.sh [--prefix P] [--out DIR] [--vm-timeout S]
#        [--test-timeout S] [--scale auto|PCT] [run.sh options...] -- TEST...
# Boots tools/vm/run.sh with the given options and runs tests/run-in-vm.sh
# over TEST... inside. Both timeouts are for a quiet machine and the stock
# kernel: --scale auto (the default) stretches them by the slowness the
# guest measures (tests/run-in-vm.sh --scale), PCT by a fixed percentage. Prints the tests' TAP lines, then one
# "not ok - Pvm: REASON" line per VM-level problem (timeout, kernel log with
# WARNING, module that would not unload, ...). Exit 0 when all went well.

set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
prefix=""
out="$REPO/build/vm/suite"
vm_timeout=1200
test_timeout=300
scale=auto
runopts=()

while [ $# -gt 0 ]; do
	case "$1" in
	--prefix) prefix=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--vm-timeout) vm_timeout=$2; shift 2 ;;
	--test-timeout) test_timeout=$2; shift 2 ;;
	--scale) scale=$2; shift 2 ;;
	--) shift; break ;;
	--quiet) shift ;;
	*) runopts+=("$1" "$2"); shift 2 ;;
	esac
done
if [ $# -eq 0 ]; then
	echo "not ok - ${prefix}vm: no tests given"
	exit 1
fi

mkdir -p "$out"
out=$(realpath "$out")
rc=0
"$REPO/tools/vm/run.sh" "${runopts[@]}" --out "$out" --timeout "$vm_timeout" \
	-- "$REPO/tests/run-in-vm.sh" --prefix "$prefix" \
	--timeout "$test_timeout" --scale "$scale" --out "$out/tests" "$@" 2> "$out.stderr" || rc=$?

if [ -s "$out/vm-error" ]; then
	while IFS= read -r reason; do
		echo "not ok - ${prefix}vm: $reason"
	done < "$out/vm-error"
	echo "# console: $out/console.log"
	exit 1
fi
case "$rc" in
0) ;;
1) exit 1 ;;	# failures already reported by run-in-vm.sh
*)
	echo "not ok - ${prefix}vm: runner failed (status $rc): $(tail -n1 "$out.stderr")"
	exit 1
	;;
esac
