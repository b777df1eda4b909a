#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Where a CUDA toolkit's cuda.h is looked for (tools/find-cuda-h.sh:
# CUDA_HOME, the toolkit, PyTorch's pip wheels' nvidia/*/include; issue
# 21 item 14), now only for checking gpusleep's own declarations against
# it (tests/host/test_cuda_decls.sh): the build needs none (issue 36 item
# 1: the CUDA backend is built from user/gs_cuda.h), and CUDA=0 still
# builds without the backend when asked. `make -n` only: nothing is built.
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
out=$(env CUDA_HOME=/nonexistent GS_CUDA_DEFAULT=/nonexistent \
	PYTHONPATH="$tmp/site" tools/find-cuda-h.sh)
[ "$out" = "$tmp/site/nvidia/cu13/include" ]
t "find-cuda-h.sh finds the cuda.h of a pip wheel (nvidia/cu13/include)" $?
out=$(mk PYTHONPATH=)
st=$?
[ $st = 0 ] && echo "$out" | grep -q -- "-DHAVE_CUDA=1" &&
	echo "$out" | grep -q "backend_cuda.c" &&
	! echo "$out" | grep -q "nvidia\|/usr/local/cuda"
t "no cuda.h anywhere: the CUDA backend is built, from gpusleep's own declarations" $?
[ "$fail" = 0 ] || echo "$out" | grep -m3 backend | sed 's/^/#   /'
out=$(mk PYTHONPATH= CUDA=0)
st=$?
[ $st = 0 ] && ! echo "$out" | grep -q HAVE_CUDA
t "CUDA=0: built without the CUDA backend, as asked" $?
echo "1..$n"
exit $fail
