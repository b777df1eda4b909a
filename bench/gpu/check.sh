#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# bench/gpu/check.sh: the GPU check of the data plane (bench/gpu/check.py),
# one command for a machine with an NVIDIA GPU and PyTorch (an H100 80GB
# by default, or an H200), root or not, no network, no kernel module, and
# a command that may run at most 10 minutes: the whole run, build
# included, ends inside 9 (540 s). Builds libgpusleep only (make, or
# without make bench/gpu/build-lib.sh: a C compiler alone; no CUDA toolkit,
# no liburing needed), then runs the check in one PyTorch process (sizes:
# what fits the device found, see check.py --help), and its negative
# control in a second.
#
# Usage: bench/gpu/check.sh [--dry-run] [check.py options...]
#   --dry-run  over the tests' stand-in libcuda and stand-in torch, no GPU
#              (needs make: the stand-in is a test build)
# Writes build/bench/gpu/check.json (the figures; written on a timeout
# too) and prints TAP.
set -euo pipefail
cd "$(dirname "$0")/../.."
budget=${GPUSLEEP_CHECK_SECONDS:-540}
start=$SECONDS
dry=0
for a in "$@"; do
	[ "$a" = --dry-run ] && dry=1
done
if command -v make > /dev/null; then
	targets=(build/lib/libgpusleep.so build/lib/libgpusleep.so.0)
	[ $dry = 1 ] && targets+=(build/tests/host/fakecuda/libcuda.so.1)
	# only what is needed: the library (and the stand-in), not the module
	make -s "${targets[@]}" >&2
elif [ $dry = 1 ]; then
	echo "bench/gpu/check.sh: --dry-run needs make (the stand-in libcuda is a test build)" >&2
	exit 1
else
	bench/gpu/build-lib.sh build
fi
mkdir -p build/bench/gpu
PY=${PYTHON:-python3}
[ $dry = 1 ] && PY=${PYTHON:-/usr/bin/python3}
# what is left of the budget: timeout(1) sends SIGINT at its end (the
# check writes its JSON then), SIGKILL 10 s later; the check itself
# begins no step it cannot end 20 s before that
left=$((budget - (SECONDS - start) - 10))
exec timeout --signal=INT --kill-after=10 "$left" "$PY" bench/gpu/check.py \
	--time-limit-s $((left - 20)) \
	--json build/bench/gpu/check$([ $dry = 1 ] && echo -dry).json "$@"
