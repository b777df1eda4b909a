#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# bench/vm-suite.sh: inside the VM (gpusleep.ko loaded), run benchmarks 1-5, 7, 8
# one after the other, the whole sequence BENCH_REPEAT times (default 1);
# JSON records go to $GPUSLEEP_OUT/results.jsonl with "rep" added, each
# benchmark's stderr to $GPUSLEEP_OUT/NAME.err; BENCH_ONLY names the ones
# to run (default all). Exit status: the number of benchmark runs that
# failed.
cd "$(dirname "$0")/.."
B=build/bench
R=${GPUSLEEP_OUT:?}/results.jsonl
: > "$R"
fail=0
# What the run's header says of the guest (bench/report.py).
echo "{\"meta\":1,\"kernel\":\"$(uname -r)\",\"vcpus\":$(nproc)}" >> "$R"
# One user runs 1024 waiters' controller fds and 1024 domains here: lift
# the per-user shares (module parameters, 0 = no limit) for the run.
P=/sys/module/gpusleep/parameters
for p in max_domains_per_user max_fds_per_user max_eventfds_per_user \
	max_eventfds_per_user_per_domain; do
	[ -w "$P/$p" ] && echo 0 > "$P/$p"
done
# bench_node makes 1024 domains, the default max_domains, on its own.
[ -w "$P/max_domains" ] && echo 2048 > "$P/max_domains"
for rep in $(seq 1 "${BENCH_REPEAT:-1}"); do
	# bench_host last: its 1 GiB touches evict what the others rely on.
	for b in bench_state bench_roundtrip bench_fanout bench_scale bench_group bench_arbiter \
		bench_node bench_host; do
		# BENCH_ONLY: the benchmarks named there, no other
		[ -z "${BENCH_ONLY:-}" ] || [[ " $BENCH_ONLY " == *" $b "* ]] ||
			continue
		echo "bench: $b (repetition $rep)"
		start=$(date +%s)
		if ! $B/$b > /tmp/bench.out 2>> "$GPUSLEEP_OUT/$b.err"; then
			echo "bench: $b failed:"; tail -n 5 "$GPUSLEEP_OUT/$b.err"
			fail=$((fail + 1))
			# counted as missed by bench/report.py
			echo "{\"id\":\"$b\",\"name\":\"$b failed\",\"env\":\"vm-tcg\",\"ratio\":0,\"target\":0,\"target_kind\":\"none\",\"met\":false,\"note\":\"FAILED (see build/bench/vm/$b.err)\"}" >> /tmp/bench.out
		fi
		sed "s/^{/{\"rep\":$rep,/" /tmp/bench.out >> "$R"
		echo "bench: $b took $(( $(date +%s) - start )) s"
	done
done
exit $fail
