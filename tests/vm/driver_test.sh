#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# tests/vm/driver_test.sh: the driver container's entrypoint
# (packaging/containers/gpusleep-driver, the gpusleep-driver DaemonSet's)
# in the VM, as the node would run it, without the container:
#   1. the module loaded already (the node image's): it says so, writes
#      the CDI spec into CDI_DIR (the same bytes as packaging/cdi) and
#      exits 0 (--once);
#   2. not loaded, GPUSLEEP_KO given: it loads it; /dev/gpusleep is there;
#   3. a file that is no module: exit 1, saying what failed; nothing
#      loaded.
# 2 and 3 unload the module first (SKIP when something holds it) and
# leave it loaded as they found it. Prints TAP.
cd "$(dirname "$0")/../.." || exit 1
DRIVER=packaging/containers/gpusleep-driver
SPEC=packaging/cdi/gpusleep.yaml
# the gpusleep.ko this VM loaded (GPUSLEEP_VM_MODULES: the 6.12 suite's is
# build/kmod-6.12/gpusleep.ko), else the tree's
KO=$PWD/gpusleep.ko
for m in ${GPUSLEEP_VM_MODULES-}; do
	case "$m" in */gpusleep.ko) KO=$m ;; esac
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "TAP version 13"
echo "1..3"

out=$(CDI_SPEC=$SPEC CDI_DIR=$tmp/cdi sh $DRIVER --once 2>&1)
rc=$?
if [ $rc = 0 ] && printf '%s' "$out" | grep -q 'loaded in .* already' &&
	cmp -s $SPEC "$tmp/cdi/gpusleep.yaml"; then
	echo "ok 1 loaded already: says so, writes the CDI spec"
else
	echo "not ok 1 loaded already: says so, writes the CDI spec (exit $rc)"
	printf '%s\n' "$out" | sed 's/^/# /'
fi

if [ ! -d /sys/module/gpusleep ] || ! rmmod gpusleep 2> "$tmp/rmmod"; then
	echo "ok 2 not loaded: GPUSLEEP_KO is loaded # SKIP cannot unload gpusleep: $(cat "$tmp/rmmod")"
	echo "ok 3 no module in GPUSLEEP_KO: exit 1, nothing loaded # SKIP as 2"
	exit 0
fi
out=$(GPUSLEEP_KO=/etc/hostname CDI_SPEC=$SPEC CDI_DIR=$tmp/cdi3 sh $DRIVER --once 2>&1)
rc=$?
if [ $rc = 1 ] && printf '%s' "$out" | grep -q 'error: loading gpusleep.ko' &&
	[ ! -d /sys/module/gpusleep ] && [ ! -e "$tmp/cdi3/gpusleep.yaml" ]; then
	res3="ok 3 no module in GPUSLEEP_KO: exit 1, nothing loaded"
else
	res3="not ok 3 no module in GPUSLEEP_KO: exit 1, nothing loaded (exit $rc)
$(printf '%s\n' "$out" | sed 's/^/# /')"
fi
out=$(GPUSLEEP_KO=$KO CDI_SPEC=$SPEC CDI_DIR=$tmp/cdi2 sh $DRIVER --once 2>&1)
rc=$?
if [ $rc = 0 ] && [ -c /dev/gpusleep ] && [ -d /sys/module/gpusleep ] &&
	cmp -s $SPEC "$tmp/cdi2/gpusleep.yaml"; then
	echo "ok 2 not loaded: GPUSLEEP_KO is loaded"
else
	echo "not ok 2 not loaded: GPUSLEEP_KO is loaded (exit $rc)"
	printf '%s\n' "$out" | sed 's/^/# /'
	[ -d /sys/module/gpusleep ] || insmod "$KO"
fi
echo "$res3"
