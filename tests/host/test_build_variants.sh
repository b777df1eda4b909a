#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# libgpusleep as the machines that are not this one build it (issue 34
# item 1): a GPU image with PyTorch and the CUDA toolkit but no liburing
# (the agent then polls: GS_HAVE_URING=0); a Debian 12 without the CUDA
# toolkit (issue 36 item 1: no cuda.h anywhere, the CUDA backend built from
# gpusleep's own declarations, user/gs_cuda.h). Each variant is built in a
# directory of its own (build/variants/...), its host tests that need no
# module run there. Prints TAP.
cd "$(dirname "$0")/../.." || exit 1
top=$PWD
out=build/variants
mkdir -p "$out"
n=0
fail=0
t() {	# t WHAT STATUS [LOG]
	n=$((n + 1))
	if [ "$2" = 0 ]; then
		echo "ok $n - $1"
	else
		echo "not ok $n - $1"
		fail=1
		[ -n "${3-}" ] && [ -f "$3" ] && tail -n 15 "$3" | sed 's/^/#   /'
	fi
}
# a make of its own (not the jobserver of a make check around it), the
# kselftest headers of the main build (extracted once by make all)
mk() {	# mk BUILD [VAR=...] TARGET...
	local b=$1
	shift
	env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s --no-print-directory \
		BUILD="$b" LINUX_SRC_STAMP="$top/build/.linux-src.stamp" \
		KSFT_INC="$top/build/kselftest" "$@"
}

# 1. no liburing: the agent's poll() loop
b=$out/nouring
log=$out/nouring.log
mk "$b" GS_HAVE_URING=0 "$b/lib/libgpusleep.so" "$b/tests/host/test_mm_host" \
	> "$log" 2>&1
st=$?
t "GS_HAVE_URING=0 (no liburing): libgpusleep and its host tests build" $st "$log"
if [ $st = 0 ]; then
	! readelf -d "$b/lib/libgpusleep.so" | grep -q 'liburing'
	t "GS_HAVE_URING=0: the library does not need liburing" $?
	"$b/tests/host/test_mm_host" > "$out/nouring-test_mm_host.log" 2>&1
	t "GS_HAVE_URING=0: test_mm_host passes" $? "$out/nouring-test_mm_host.log"
fi

# 2. no cuda.h visible: a scratch copy of the tree, built with every place
# cuda.h is looked for pointed away (CUDA_HOME, /usr/local/cuda, PyTorch's
# pip wheels through $PYTHON); the compiler's own paths hold none
src=$top/$out/nocudah-src
log=$top/$out/nocudah.log
rm -rf "$src"
mkdir -p "$src"
git ls-files -z -co --exclude-standard | grep -zv '^build/' |
	tar --null -T - -cf - | tar -xf - -C "$src"
( cd "$src" && mk build CUDA_HOME=/nonexistent GS_CUDA_DEFAULT=/nonexistent \
	PYTHON=/bin/false build/lib/libgpusleep.so \
	build/tests/host/fakecuda/libcuda.so.1 build/tests/host/test_cuda_mm ) \
	> "$log" 2>&1
st=$?
t "no cuda.h visible: libgpusleep with its CUDA backend, the stand-in libcuda and test_cuda_mm build" $st "$log"
if [ $st = 0 ]; then
	! grep -q -- '-I[^ ]*cuda[^ ]*/include' "$log" && ! grep -rEqs --include=*.d '(^|[ /])cuda\.h' "$src/build"
	t "no cuda.h visible: nothing included a cuda.h" $?
	nm -D "$src/build/lib/libgpusleep.so" | grep -q ' T gs_backend_cuda_new' &&
		strings "$src/build/lib/libgpusleep.so" | grep -q 'cuMemCreate'
	t "no cuda.h visible: the library has the CUDA backend (not the ENOSYS stub)" $?
	( cd "$src" && build/tests/host/test_cuda_mm ) > "$out/nocudah-test_cuda_mm.log" 2>&1
	t "no cuda.h visible: test_cuda_mm passes over the stand-in" $? "$out/nocudah-test_cuda_mm.log"
fi

# 3. no make either (a GPU container image): bench/gpu/check.sh builds the
# library with bench/gpu/build-lib.sh (the C compiler alone), and the
# Python package loads it; --help stands for the check (no GPU here)
nomake=$top/$out/nomake-bin
log=$top/$out/nomake.log
rm -rf "$nomake"
mkdir -p "$nomake"
for f in /usr/local/bin/* /usr/bin/* /bin/*; do
	b=${f##*/}
	case $b in make|gmake) continue ;; esac
	[ -e "$nomake/$b" ] || ln -s "$f" "$nomake/$b"
done
( cd "$src" && rm -rf build && env PATH="$nomake" bash -c '
	! command -v make > /dev/null || { echo "make still found"; exit 1; }
	bench/gpu/check.sh --help > /dev/null &&
	python3 -c "import sys; sys.path.insert(0, \"user/python\")
from gpusleep import _lib
_lib.lib()
p = _lib.path()
assert p.startswith(sys.argv[1]), p
print(p)" "$PWD/build/lib/"' ) > "$log" 2>&1
t "no make: bench/gpu/check.sh builds libgpusleep with the compiler alone, and the package loads it" $? "$log"
rm -rf "$src" "$nomake"
echo "1..$n"
exit $fail
