#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# bench/run.sh: run every benchmark (docs/benchmarks.md), called by
# `make bench` after building. Natively: bench_host (benchmark 4, no module
# needed), bench_model (benchmark 6m, modelled on the stand-in libcuda)
# and, when built, bench/gpu/bench_cuda --dry-run against the tests'
# stand-in libcuda. Then one VM boot with gpusleep.ko running
# bench/vm-suite.sh (benchmarks 1-5, 7, 8). Prints the table and writes
# build/bench/results.json (bench/report.py).
#
# Every comparison is run BENCH_REPEAT times (default 3) as a whole: the
# native part BENCH_REPEAT times, the VM suite BENCH_REPEAT times in its
# one boot; each record carries "rep", and the report gives each ratio's
# median with its min and max over the repetitions.
#
# Environment: BENCH_REPEAT (whole repetitions, >= 1), BENCH_SCALE
# (repetitions factor inside each benchmark), BENCH_ONLY (names of the
# benchmarks to run, e.g. "bench_state bench_roundtrip"; default all),
# BENCH_STRICT (0: report a missed target without failing), BENCH_GPU
# (path of bench_cuda, empty to skip), BENCH_MODEL (path of bench_model), KERNEL (VM kernel), VM_TIMEOUT (s),
# BENCH_SMP (guest vCPUs, default 1: under TCG a wake-up that crosses to an
# idle vCPU costs milliseconds of host scheduling, which would swamp every
# process-to-process figure; docs/benchmarks.md), BENCH_CMD (the command
# line recorded in results.json).
#
# The last line is "N met, M missed"; the exit status is non-zero when a
# target was missed or a run failed (unless BENCH_STRICT=0). The table of
# results.json goes to build/bench/results.md and its chart to
# build/bench/results.svg; `make bench-docs` copies a run into the docs.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=build/bench
mkdir -p $OUT
rm -f $OUT/native.jsonl $OUT/results.json
: > $OUT/native.jsonl
export BENCH_SCALE=${BENCH_SCALE:-1}
export BENCH_REPEAT=${BENCH_REPEAT:-3}
export BENCH_ONLY=${BENCH_ONLY:-}
only() { [ -z "$BENCH_ONLY" ] || [[ " $BENCH_ONLY " == *" $1 "* ]]; }
case $BENCH_REPEAT in
''|*[!0-9]*|0) echo "bench: BENCH_REPEAT=$BENCH_REPEAT: not a count >= 1" >&2; exit 2 ;;
esac
start=$(date -u '+%Y-%m-%d %H:%M UTC')
host="host: $(nproc) CPUs, load average $(cut -d' ' -f1 /proc/loadavg) at the start"
echo "== $start, load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs; BENCH_REPEAT=$BENCH_REPEAT BENCH_SCALE=$BENCH_SCALE"

for rep in $(seq 1 "$BENCH_REPEAT"); do
	if only bench_host; then
		echo "== native: bench_host (benchmark 4), repetition $rep/$BENCH_REPEAT"
		$OUT/bench_host | sed "s/^{/{\"rep\":$rep,/" >> $OUT/native.jsonl
	fi
	if only bench_roundtrip; then
		echo "== native: bench_roundtrip --native (2c: floor and pickle stand-in), repetition $rep/$BENCH_REPEAT"
		$OUT/bench_roundtrip --native | sed "s/^{/{\"rep\":$rep,/" >> $OUT/native.jsonl
	fi
done

# benchmark 6m: modelled, its figures the model's (no repetition: the
# model's clock is deterministic)
if [ -n "${BENCH_MODEL:-}" ] && [ -x "$BENCH_MODEL" ] && only bench_model; then
	echo "== native: $BENCH_MODEL (benchmark 6m, an H100-sized cycle modelled on the stand-in libcuda)"
	"$BENCH_MODEL" >> $OUT/native.jsonl
fi

if [ -n "${BENCH_GPU:-}" ] && [ -x "$BENCH_GPU" ] && only bench_cuda; then
	echo "== native: $BENCH_GPU --dry-run (benchmark 6, stand-in libcuda)"
	if "$BENCH_GPU" --dry-run > $OUT/gpu-dryrun.log 2>&1; then
		echo '{"id":"6-dry","name":"bench/gpu dry run over the stand-in libcuda","env":"native","ratio":0,"target":0,"target_kind":"none","met":true,"note":"code paths exercised; figures meaningless (see build/bench/gpu-dryrun.log)"}' >> $OUT/native.jsonl
	else
		tail -n 20 $OUT/gpu-dryrun.log >&2
		echo '{"id":"6-dry","name":"bench/gpu dry run over the stand-in libcuda","env":"native","ratio":0,"target":0,"target_kind":"none","met":false,"note":"FAILED (see build/bench/gpu-dryrun.log)"}' >> $OUT/native.jsonl
	fi
fi

echo "== VM (qemu): benchmarks 1-5, 7, 8 with gpusleep.ko, one boot, $BENCH_REPEAT repetitions"
kargs=()
[ -n "${KERNEL:-}" ] && [ -e "$KERNEL" ] && kargs=(--kernel "$KERNEL")
rc=0
tools/vm/run.sh "${kargs[@]}" --module gpusleep.ko --out "$PWD/$OUT/vm" \
	--smp "${BENCH_SMP:-1}" \
	--timeout "${VM_TIMEOUT:-1800}" --quiet \
	-- env BENCH_SCALE="$BENCH_SCALE" BENCH_REPEAT="$BENCH_REPEAT" \
	BENCH_ONLY="$BENCH_ONLY" bench/vm-suite.sh || rc=$?
[ $rc -eq 0 ] || echo "bench: the VM run ended with status $rc (see $OUT/vm/)" >&2

rrc=0
python3 bench/report.py $OUT/results.json $OUT/native.jsonl $OUT/vm/results.jsonl \
	--meta "date=$start" --meta "command=${BENCH_CMD:-bench/run.sh}" \
	--meta "repetitions=$BENCH_REPEAT" --meta "scale=$BENCH_SCALE" \
	--meta "host=$host" > $OUT/report.txt || rrc=$?
python3 bench/report.py --markdown $OUT/results.json > $OUT/results.md
python3 bench/report.py --svg $OUT/results.json $OUT/results.svg
echo "bench: $OUT/results.json, $OUT/results.md, $OUT/results.svg"
cat $OUT/report.txt	# the verdict, "N met, M missed", last
if [ $rc -ne 0 ] && [ "${BENCH_STRICT:-1}" != 0 ]; then
	exit $rc
fi
exit $rrc
