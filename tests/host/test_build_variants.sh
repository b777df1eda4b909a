#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# libgpusleep as the machines that are not this one build it (issue 34
# item 1): a GPU image with PyTorch and the CUDA toolkit but no liburing
# (the agent then polls: GS_HAVE_URING=0). The variant is built in a build
# directory of its own (build/variants/...), its host tests that need no
# module run there, and its library must not need liburing.
# Prints TAP.
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
echo "1..$n"
exit $fail
