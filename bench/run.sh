#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# bench/run.sh: run every benchmark (docs/benchmarks.md), called by
# `make bench` after building. Natively: bench_host (benchmark 4, no module
# needed) and, when built, bench/gpu/bench_cuda --dry-run against the
# tests' stand-in libcuda. Then one VM boot with gpusleep.ko running
# bench/vm-suite.sh (benchmarks 1-5). Prints the table and writes
# build/bench/results.json (bench/report.py).
#
# Every comparison is run BENCH_REPEAT times (default 3) as a whole: the
# native part BENCH_REPEAT times, the VM suite BENCH_REPEAT times in its
# one boot; each record carries "rep", and the report gives each ratio's
# median with its min and max over the repetitions.
#
# Environment: BENCH_REPEAT (whole repetitions, >= 1), BENCH_SCALE
# (repetitions factor inside each benchmark), BENCH_GPU (path of
# bench_cuda, empty to skip), KERNEL (VM kernel), VM_TIMEOUT (s),
# BENCH_SMP (guest vCPUs, default 1: under TCG a wake-up that crosses to an
# idle vCPU costs milliseconds of host scheduling, which would swamp every
# process-to-process figure; docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=build/bench
mkdir -p $OUT
rm -f $OUT/native.jsonl $OUT/results.json
export BENCH_SCALE=${BENCH_SCALE:-1}
export BENCH_REPEAT=${BENCH_REPEAT:-3}
case $BENCH_REPEAT in
''|*[!0-9]*|0) echo "bench: BENCH_REPEAT=$BENCH_REPEAT: not a count >= 1" >&2; exit 2 ;;
esac
echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs; BENCH_REPEAT=$BENCH_REPEAT BENCH_SCALE=$BENCH_SCALE"

for rep in $(seq 1 "$BENCH_REPEAT"); do
	echo "== native: bench_host (benchmark 4), repetition $rep/$BENCH_REPEAT"
	$OUT/bench_host | sed "s/^{/{\"rep\":$rep,/" >> $OUT/native.jsonl
	echo "== native: bench_roundtrip --native (2c: floor and pickle stand-in), repetition $rep/$BENCH_REPEAT"
	$OUT/bench_roundtrip --native | sed "s/^{/{\"rep\":$rep,/" >> $OUT/native.jsonl
done

if [ -n "${BENCH_GPU:-}" ] && [ -x "$BENCH_GPU" ]; then
	echo "== native: $BENCH_GPU --dry-run (benchmark 6, stand-in libcuda)"
	if "$BENCH_GPU" --dry-run > $OUT/gpu-dryrun.log 2>&1; then
		echo '{"id":"6-dry","name":"bench/gpu dry run over the stand-in libcuda","env":"native","ratio":0,"target":0,"target_kind":"none","met":true,"note":"code paths exercised; figures meaningless (see build/bench/gpu-dryrun.log)"}' >> $OUT/native.jsonl
	else
		tail -n 20 $OUT/gpu-dryrun.log >&2
		echo '{"id":"6-dry","name":"bench/gpu dry run over the stand-in libcuda","env":"native","ratio":0,"target":0,"target_kind":"none","met":false,"note":"FAILED (see build/bench/gpu-dryrun.log)"}' >> $OUT/native.jsonl
	fi
fi

echo "== VM (qemu): benchmarks 1-5 with gpusleep.ko, one boot, $BENCH_REPEAT repetitions"
kargs=()
[ -n "${KERNEL:-}" ] && [ -e "$KERNEL" ] && kargs=(--kernel "$KERNEL")
rc=0
tools/vm/run.sh "${kargs[@]}" --module gpusleep.ko --out "$PWD/$OUT/vm" \
	--smp "${BENCH_SMP:-1}" \
	--timeout "${VM_TIMEOUT:-1800}" --quiet \
	-- env BENCH_SCALE="$BENCH_SCALE" BENCH_REPEAT="$BENCH_REPEAT" \
	bench/vm-suite.sh || rc=$?
[ $rc -eq 0 ] || echo "bench: the VM run ended with status $rc (see $OUT/vm/)" >&2

python3 bench/report.py $OUT/results.json $OUT/native.jsonl $OUT/vm/results.jsonl
exit $rc
