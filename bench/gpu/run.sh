#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# bench/gpu/run.sh: benchmark 6 on a machine with an NVIDIA GPU (see
# bench/gpu/README.md). Builds libgpusleep and bench_cuda (no CUDA toolkit
# needed: user/gs_cuda.h), runs it, prints the table and writes
# build/bench/gpu/results.json.
#
# Usage: bench/gpu/run.sh [--dry-run] [bench_cuda options...]
#   e.g. bench/gpu/run.sh --sizes 1,4,16,64,100 --reps 5
#   --dry-run: over the tests' stand-in libcuda (no GPU needed; builds it).
set -euo pipefail
cd "$(dirname "$0")/../.."
targets=(build/bench/gpu/bench_cuda)
for a in "$@"; do
	[ "$a" = --dry-run ] && targets+=(build/tests/host/fakecuda/libcuda.so.1)
done
make -s "${targets[@]}"
mkdir -p build/bench/gpu
build/bench/gpu/bench_cuda "$@" | tee build/bench/gpu/results.jsonl
python3 bench/report.py build/bench/gpu/results.json build/bench/gpu/results.jsonl
