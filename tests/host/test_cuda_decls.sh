#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# user/gs_cuda.h (the CUDA Driver API subset gpusleep declares itself, so
# that it builds without the toolkit) against the toolkit's cuda.h, where
# one is installed (tools/find-cuda-h.sh: CUDA_HOME, /usr/local/cuda, a
# pip wheel's): tests/host/cuda_decls_check.c compiled against both, then
# run. Skipped without a cuda.h. Prints TAP.
cd "$(dirname "$0")/../.." || exit 1
inc=$(tools/find-cuda-h.sh) || {
	echo "ok 1 - gs_cuda.h against cuda.h # SKIP no cuda.h here (CUDA_HOME, /usr/local/cuda, pip wheels)"
	exit 0
}
mkdir -p build/tests/host
bin=build/tests/host/cuda_decls_check
if ! ${CC:-cc} -std=gnu11 -Wall -Wextra -Werror -I"$inc" -Iuser \
	-o "$bin" tests/host/cuda_decls_check.c > "$bin.log" 2>&1; then
	echo "not ok 1 - gs_cuda.h against $inc/cuda.h: compiling the check"
	sed 's/^/#   /' "$bin.log" | head -n 40
	echo "1..1"
	exit 1
fi
exec "$bin"
