#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The kselftests in the kernel's layout, run by the kernel's own runner:
# tests/patches.sh applies the series to the 6.12 source, builds
# tools/testing/selftests/drivers/gpusleep and installs it with
# `make -C tools/testing/selftests TARGETS=drivers/gpusleep install`
# into build/patches-check/ksft/. Booted on the debug kernel (built from
# that same source), this runs two of them through run_kselftest.sh and
# passes on the runner's own TAP lines. The full set runs directly in
# the same boot (the suite's other entries): running it twice would cost
# minutes for nothing. SKIP when the series was not built.
set -u
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ksft=$repo/build/patches-check/ksft
echo "TAP version 13"
if [ ! -x "$ksft/run_kselftest.sh" ] || [ ! -e /dev/gpusleep ]; then
	echo "1..1"
	echo "ok 1 run_kselftest.sh drivers/gpusleep # SKIP no installed series (make check-patches) or no module"
	exit 0
fi
# run_kselftest.sh cds into its directory and needs nothing writable
# there; its per-test output goes to stdout, nested under "# ".
out=$("$ksft/run_kselftest.sh" -o 300 -t drivers/gpusleep:00-smoke \
	-t drivers/gpusleep:uapi_test 2>&1)
rc=$?
printf '%s\n' "$out" | sed 's/^/# /'
echo "1..3"
n=0
for t in 00-smoke uapi_test; do
	n=$((n + 1))
	if printf '%s\n' "$out" | grep -qE "^ok [0-9]+ selftests: drivers/gpusleep: $t\$"; then
		echo "ok $n the runner ran drivers/gpusleep:$t and it passed"
	else
		echo "not ok $n the runner ran drivers/gpusleep:$t and it passed"
	fi
done
if [ "$rc" = 0 ]; then
	echo "ok 3 run_kselftest.sh exits 0"
else
	echo "not ok 3 run_kselftest.sh exits 0 (rc $rc)"
fi
