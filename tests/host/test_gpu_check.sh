#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The GPU check's dry run (bench/gpu/check.py --dry-run): the whole
# sequence of the check (regions' MemPools with expandable segments on,
# graphs captured with a foreign graph pool, work in flight at the release,
# two cycles at sleep levels 1 and 2, verified free, a second allocation,
# resume, contents, the negative control in a subprocess) over the
# stand-in libcuda and the stand-in torch (tests/host/fake_torch), without
# a GPU. Its figures mean nothing.
cd "$(dirname "$0")/../.." || exit 1
fake=build/tests/host/fakecuda/libcuda.so.1
if [ ! -f "$fake" ]; then
	echo "ok 1 - gpu check dry run # SKIP no $fake (built without cuda.h)"
	exit 0
fi
mkdir -p build/bench/gpu
exec /usr/bin/python3 -B bench/gpu/check.py --dry-run --lib "$fake" \
	--json build/bench/gpu/check-dry.json
