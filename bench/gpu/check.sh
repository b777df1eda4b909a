#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# bench/gpu/check.sh: the GPU check of the data plane (bench/gpu/check.py),
# one command for a machine with an NVIDIA GPU and PyTorch, e.g. an H200
# with PyTorch 2.11 and CUDA 13 where kernel modules cannot be loaded and
# a command may run at most 10 minutes: builds libgpusleep (no module; no
# CUDA toolkit needed: user/gs_cuda.h), then
# runs the check in one PyTorch process (weights 40 GiB backed up, KV
# 60 GiB discarded by default), and its negative control in a second.
#
# Usage: bench/gpu/check.sh [--dry-run] [check.py options...]
#   --dry-run  over the tests' stand-in libcuda and stand-in torch, no GPU
#              (small sizes; part of make check)
# Writes build/bench/gpu/check.json (the figures) and prints TAP.
set -euo pipefail
cd "$(dirname "$0")/../.."
targets=(build/lib/libgpusleep.so build/lib/libgpusleep.so.0)
dry=0
for a in "$@"; do
	[ "$a" = --dry-run ] && dry=1
done
[ $dry = 1 ] && targets+=(build/tests/host/fakecuda/libcuda.so.1)
# only what is needed: the library (and the stand-in), not the module
make -s "${targets[@]}" >&2
mkdir -p build/bench/gpu
PY=${PYTHON:-python3}
[ $dry = 1 ] && PY=${PYTHON:-/usr/bin/python3}
exec timeout --signal=INT 540 "$PY" bench/gpu/check.py \
	--json build/bench/gpu/check$([ $dry = 1 ] && echo -dry).json "$@"
