#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Issue 21 item 14: the build finds cuda.h where bench/gpu/check.sh does
# (tools/find-cuda-h.sh: CUDA_HOME, the toolkit, PyTorch's pip wheels'
# nvidia/*/include), and without any fails loudly rather than building a
# library whose every allocation fails with ENOSYS (CUDA=0 asks for that).
# `make -n` only: nothing is built.
cd "$(dirname "$0")/../.." || exit 1
tmp=$(mktemp -d "$PWD/build/find-cuda-h.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/site/nvidia/cu13/include"
touch "$tmp/site/nvidia/cu13/include/cuda.h"
n=0
fail=0
t() {	# t WHAT CONDITION-STATUS
	n=$((n + 1))
	if [ "$2" = 0 ]; then echo "ok $n - $1"; else echo "not ok $n - $1"; fail=1; fi
}
mk() {
	env CUDA_HOME=/nonexistent GS_CUDA_DEFAULT=/nonexistent "$@" \
		make -s --no-print-directory -Bn build/lib/libgpusleep.so 2>&1
}
out=$(mk PYTHONPATH="$tmp/site")
echo "$out" | grep -q -- "-DHAVE_CUDA=1 -I$tmp/site/nvidia/cu13/include"
t "cuda.h of a pip wheel (nvidia/cu13/include) builds the CUDA backend" $?
[ "$fail" = 0 ] || echo "$out" | grep -m3 backend | sed 's/^/#   /'
out=$(mk PYTHONPATH=)
st=$?
[ $st != 0 ] && echo "$out" | grep -q "cuda.h" && echo "$out" | grep -q "CUDA=0"
t "no cuda.h anywhere: make fails, naming cuda.h and CUDA=0" $?
out=$(mk PYTHONPATH= CUDA=0)
st=$?
[ $st = 0 ] && ! echo "$out" | grep -q HAVE_CUDA
t "CUDA=0: built without the CUDA backend, as asked" $?
echo "1..$n"
exit $fail
