#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# tests/run-in-vm.sh: run test executables one after another and print one
# TAP result line per test. Made to run inside the VM (tools/vm/run.sh), and
# used on the host too for the host tests.
#
# Usage: tests/run-in-vm.sh [--prefix P] [--timeout S] [--out DIR] TEST|DIR...
#   TEST     an executable; a DIR stands for the executables in it
#   --prefix put P in front of every test name (e.g. 'debug: ')
#   --timeout kill a test executable after S seconds (default 300)
#   --out    where each executable's full output goes, as NAME.log
#            (default $GPUSLEEP_OUT/tests, else /tmp/gpusleep-tests)
#
# Kselftest executables print TAP themselves; their result lines are
# re-emitted as "ok N PREFIXNAME: TEST" (numbering is redone by
# tests/tap-summary.sh). An executable that prints no result line counts as
# one test judged by its exit status (4 = skip). An executable that times
# out, or fails without printing a "not ok" line (a crash), adds a
# "not ok" line of its own. On a failure the end of its log follows as
# "# " lines. Exit status: 0 when nothing failed, else 1.

prefix=""
timeout=300
out="${GPUSLEEP_OUT:+$GPUSLEEP_OUT/tests}"
out="${out:-/tmp/gpusleep-tests}"

while [ $# -gt 0 ]; do
	case "$1" in
	--prefix) prefix=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--) shift; break ;;
	-*) echo "run-in-vm.sh: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
mkdir -p "$out" || exit 2

failed=0

run_one() {
	exe=$1
	# build/tests/vm/X -> X, build/tests/host-asan/X -> host-asan/X
	name=${exe#*build/tests/}
	name=${name#vm/}
	case "$name" in /*) name=$(basename "$exe") ;; esac
	log="$out/$(printf '%s' "$name" | tr / _).log"
	case "$exe" in */*) ;; *) exe="./$exe" ;; esac

	timeout -k 10 "$timeout" "$exe" > "$log" 2>&1 < /dev/null
	rc=$?

	# Result lines of the executable, named after it.
	sed -n -E "s/^(not ok|ok) +([0-9]+) +(- +)?(.*)$/\1 \2 $(printf '%s' "$prefix$name" | sed 's/[\/&]/\\&/g'): \4/p" \
		"$log"
	nres=$(grep -cE '^(not ok|ok) +[0-9]+' "$log")
	nfail=$(grep -cE '^not ok +[0-9]+' "$log")

	bad=0
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		echo "not ok - $prefix$name: timed out after ${timeout}s"
		bad=1
	elif [ "$nres" = 0 ]; then
		case "$rc" in
		0) echo "ok - $prefix$name" ;;
		4) echo "ok - $prefix$name # SKIP $(grep '^#' "$log" | tail -n1 | cut -c3-)" ;;
		*) echo "not ok - $prefix$name: exit status $rc"; bad=1 ;;
		esac
	elif [ "$rc" != 0 ] && [ "$rc" != 4 ] && [ "$nfail" = 0 ]; then
		echo "not ok - $prefix$name: exit status $rc after its tests"
		bad=1
	fi
	[ "$nfail" != 0 ] && bad=1
	if [ "$bad" = 1 ]; then
		failed=1
		echo "# $prefix$name failed; end of $log:"
		tail -n 30 "$log" | sed 's/^/#   /'
	fi
}

for arg in "$@"; do
	if [ -d "$arg" ]; then
		for f in "$arg"/*; do
			[ -f "$f" ] && [ -x "$f" ] && run_one "$f"
		done
	else
		run_one "$arg"
	fi
done
exit "$failed"
