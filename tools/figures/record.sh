#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# tools/figures/record.sh: record the runs of the sequence pictures and
# draw them. Boots the VM with this tree's gpusleep.ko (make first), runs
# tools/figures/record.py for each scenario there, copies the recordings
# into docs/figures/SCENARIO.jsonl and draws docs/figures/SCENARIO.svg
# from each (tools/figures/sequence.py). The recordings are committed: the
# pictures are drawn from them, and tests/host/test_figures.py checks that
# each picture is what its recording gives.
#
# Usage: tools/figures/record.sh [SCENARIO...]   (default: all)
set -eu
cd "$(dirname "$0")/../.."
scenarios=${*:-sglang vllm rollback}
# the kernel gpusleep.ko was built for (make's KVER): its release string
KVER=$(modinfo -F vermagic gpusleep.ko | cut -d' ' -f1)
out=build/vm/figures
cmd=""
for s in $scenarios; do
	cmd="$cmd python3 tools/figures/record.py $s \$GPUSLEEP_OUT/$s.jsonl &&"
done
tools/vm/run.sh --quiet --module gpusleep.ko --kernel "/boot/vmlinuz-$KVER" \
	--out "$out" --timeout 600 -- sh -c "$cmd true"
mkdir -p docs/figures
for s in $scenarios; do
	cp "$out/$s.jsonl" "docs/figures/$s.jsonl"
	python3 tools/figures/sequence.py "docs/figures/$s.jsonl" "docs/figures/$s.svg"
	echo "docs/figures/$s.svg"
done
