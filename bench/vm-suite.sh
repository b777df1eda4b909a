#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# bench/vm-suite.sh: inside the VM (gpusleep.ko loaded), run benchmarks 1-5
# one after the other; JSON records go to $GPUSLEEP_OUT/results.jsonl,
# each benchmark's stderr to $GPUSLEEP_OUT/NAME.err. Exit status: the number
# of benchmarks that failed to run.
cd "$(dirname "$0")/.."
B=build/bench
R=${GPUSLEEP_OUT:?}/results.jsonl
: > "$R"
fail=0
# bench_host last: its 1 GiB touches evict what the others rely on.
for b in bench_state bench_roundtrip bench_fanout bench_scale bench_host; do
	echo "bench: $b"
	start=$(date +%s)
	if ! $B/$b >> "$R" 2> "$GPUSLEEP_OUT/$b.err"; then
		echo "bench: $b failed:"; tail -n 5 "$GPUSLEEP_OUT/$b.err"
		fail=$((fail + 1))
	fi
	echo "bench: $b took $(( $(date +%s) - start )) s"
done
exit $fail
