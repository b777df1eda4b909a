#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# tests/run-in-vm.sh: run test executables one after another and print one
# TAP result line per test. Made to run inside the VM (tools/vm/run.sh), and
# used on the host too for the host tests.
#
# Usage: tests/run-in-vm.sh [--prefix P] [--timeout S] [--scale auto|PCT]
#                           [--out DIR] TEST|DIR...
#   TEST     an executable; a DIR stands for the executables in it
#   --prefix put P in front of every test name (e.g. 'debug: ')
#   --timeout kill a test executable after S seconds (default 300), times
#            the scale
#   --scale  auto: measure how slow this machine is now and stretch every
#            timeout by as much (for the VM: a debug kernel, TCG, a busy
#            host); PCT: a fixed factor in percent; default auto in the VM
#            (GPUSLEEP_VM=1), else 100
#   --out    where each executable's full output goes, as NAME.log, and
#            "NAME SECONDS LIMIT" lines in durations (what each took, and
#            its timeout) (default $GPUSLEEP_OUT/tests, else
#            /tmp/gpusleep-tests)
#
# --scale auto: a calibration step (5 runs of /bin/true: fork, exec, the
# dynamic loader, page faults, what a test does most) is timed at the start
# (once to warm up, then the median of 3) and again before each test. Its
# cost against REF_STEP_MS, what it costs in a quiet TCG guest of Debian's
# 6.1, is the factor (at least 1, at most 16) for that test: the larger of
# the start's and the test's own. A test sees it as $GPUSLEEP_TIME_SCALE
# (percent), for bounds of its own. In the VM the largest factor so far
# (auto or not) is also written to $GPUSLEEP_OUT/.vm/time-scale, where
# tools/vm/run.sh reads it to stretch the VM's own timeout.
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
scale=100
[ "${GPUSLEEP_VM:-}" = 1 ] && scale=auto
# The calibration step's cost (ms) in a quiet TCG guest of Debian's 6.1 on
# a 2-core host: on the low side, so that an error stretches timeouts.
REF_STEP_MS=100
MAX_SCALE=1600
out="${GPUSLEEP_OUT:+$GPUSLEEP_OUT/tests}"
out="${out:-/tmp/gpusleep-tests}"

while [ $# -gt 0 ]; do
	case "$1" in
	--prefix) prefix=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--scale) scale=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--) shift; break ;;
	-*) echo "run-in-vm.sh: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
mkdir -p "$out" || exit 2
case "$scale" in
auto) ;;
*[!0-9]*|"") echo "run-in-vm.sh: --scale takes auto or a percentage" >&2; exit 2 ;;
esac

failed=0

now_ms() {
	echo $(($(date +%s%N) / 1000000))
}

# The calibration step, in ms.
step_ms() {
	t0=$(now_ms)
	for _ in 1 2 3 4 5; do /bin/true; done
	echo $(($(now_ms) - t0))
}

# A step's cost as a factor in percent, bounded.
step_pct() {
	p=$(($1 * 100 / REF_STEP_MS))
	[ "$p" -lt 100 ] && p=100
	[ "$p" -gt "$MAX_SCALE" ] && p=$MAX_SCALE
	echo "$p"
}

# x.y of a percentage
pct_str() {
	echo "$(($1 / 100)).$(($1 % 100 / 10))"
}

base_pct=$scale
max_pct=0
if [ "$scale" = auto ]; then
	step_ms > /dev/null
	a=$(step_ms); b=$(step_ms); c=$(step_ms)
	med=$(printf '%s\n' "$a" "$b" "$c" | sort -n | sed -n 2p)
	base_pct=$(step_pct "$med")
	echo "# ${prefix}timeouts x$(pct_str "$base_pct"): a calibration step took ${med} ms here (median of $a, $b, $c), ${REF_STEP_MS} ms in a quiet VM"
fi

# The factor for the next test: $base_pct, or with --scale auto the larger
# of it and a fresh measurement. Sets pct.
measure() {
	pct=$base_pct
	if [ "$scale" = auto ]; then
		now=$(step_pct "$(step_ms)")
		[ "$now" -gt "$pct" ] && pct=$now
	fi
	if [ "$pct" -gt "$max_pct" ]; then
		max_pct=$pct
		if [ -n "${GPUSLEEP_OUT:-}" ] && [ -d "$GPUSLEEP_OUT/.vm" ]; then
			echo "$max_pct" > "$GPUSLEEP_OUT/.vm/time-scale"
		fi
	fi
}

run_one() {
	exe=$1
	# build/tests/vm/X -> X, build/tests/host-asan/X -> host-asan/X
	name=${exe#*build/tests/}
	name=${name#vm/}
	case "$name" in /*) name=$(basename "$exe") ;; esac
	log="$out/$(printf '%s' "$name" | tr / _).log"
	case "$exe" in */*) ;; *) exe="./$exe" ;; esac

	measure
	limit=$((timeout * pct / 100))
	t0=$(now_ms)
	GPUSLEEP_TIME_SCALE=$pct timeout -k 10 "$limit" "$exe" > "$log" 2>&1 < /dev/null
	rc=$?
	echo "$name $((($(now_ms) - t0) / 1000)) $limit" >> "$out/durations"

	# Result lines of the executable, named after it.
	sed -n -E "s/^(not ok|ok) +([0-9]+) +(- +)?(.*)$/\1 \2 $(printf '%s' "$prefix$name" | sed 's/[\/&]/\\&/g'): \4/p" \
		"$log"
	nres=$(grep -cE '^(not ok|ok) +[0-9]+' "$log")
	nfail=$(grep -cE '^not ok +[0-9]+' "$log")

	bad=0
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		if [ "$pct" = 100 ]; then
			echo "not ok - $prefix$name: timed out after ${limit}s"
		else
			echo "not ok - $prefix$name: timed out after ${limit}s (${timeout}s x$(pct_str "$pct"), the measured slowness)"
		fi
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
