#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# bench/gpu/build-lib.sh: libgpusleep for the GPU check where there is no
# make (a GPU container image with PyTorch and nothing else): the C
# compiler alone, the same flags as user/user.mk, the agent's io_uring
# loop only where liburing's header is, no CUDA toolkit (the Driver API is
# declared in user/gs_cuda.h). Writes build/lib/libgpusleep.so.0.VERSION
# and its links (what the Python package loads). Needs cc (gcc or clang):
# without one, it says what to install.
#
# Usage: bench/gpu/build-lib.sh [BUILD_DIR]   (default build)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-build}
cc=${CC:-}
if [ -z "$cc" ]; then
	for c in cc gcc clang; do
		if command -v "$c" > /dev/null; then cc=$c; break; fi
	done
fi
if [ -z "$cc" ]; then
	echo "bench/gpu/build-lib.sh: no C compiler: install one (Debian/Ubuntu: apt-get install -y gcc; RHEL: dnf install -y gcc)" >&2
	exit 1
fi
version=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' dkms.conf)
uring=0
libs=(-lpthread -ldl)
if printf '#include <liburing.h>\n' | "$cc" -E -x c - > /dev/null 2>&1; then
	uring=1
	libs=(-lpthread -luring -ldl)
fi
mkdir -p "$out/lib" "$out/user/nomake"
objs=()
for src in user/*.c; do
	obj=$out/user/nomake/$(basename "${src%.c}").o
	"$cc" -std=gnu11 -O2 -g -Wall -Wextra -Werror -Iuapi -fPIC -Iuser \
		-Iuser/include -DGS_HAVE_URING=$uring -DHAVE_CUDA=1 \
		-c -o "$obj" "$src"
	objs+=("$obj")
done
real=$out/lib/libgpusleep.so.0.$version
"$cc" -shared -Wl,-soname,libgpusleep.so.0 -Wl,--no-undefined -o "$real" \
	"${objs[@]}" "${libs[@]}"
ln -sfn "libgpusleep.so.0.$version" "$out/lib/libgpusleep.so.0"
ln -sfn libgpusleep.so.0 "$out/lib/libgpusleep.so"
echo "bench/gpu/build-lib.sh: $real (liburing: $([ $uring = 1 ] && echo yes || echo no, the agent polls))" >&2
