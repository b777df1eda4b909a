#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Guest side of tools/vm/run.sh: runs inside the VM, chrooted into the host
# root (read-only), with the results dir mounted read-write at its host path.
# Argument: the config file written by run.sh. Steps: insmod the modules in
# order, run the command in the repository dir with its output in
# $VM_OUT/output.log, rmmod the modules in reverse order, save dmesg, and
# record every step in $VM_OUT/.vm/result, which run.sh reads afterwards.
# Only /tmp (tmpfs) and the results dir are writable here.

. "$1"
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/tmp GPUSLEEP_VM=1 GPUSLEEP_OUT="$VM_OUT"
# The modules this VM loads, for a test that unloads and loads them again.
export GPUSLEEP_VM_MODULES="$VM_MODULES"
res="$VM_OUT/.vm/result"
: > "$res"

kmemleak=/sys/kernel/debug/kmemleak
# Objects allocated before this point are not ours to report.
[ -w "$kmemleak" ] && echo clear > "$kmemleak"

loaded=""
ok=1
for m in $VM_MODULES; do
	name=$(modinfo -F name "$m" 2>/dev/null)
	[ -n "$name" ] || name=$(basename "$m" .ko | tr - _)
	if insmod "$m"; then
		loaded="$name $loaded"
	else
		echo "insmod_failed $m" >> "$res"
		ok=0
		break
	fi
done

if [ "$ok" = 1 ]; then
	cd "$VM_CWD" || echo "cd_failed $VM_CWD" >> "$res"
	sh "$VM_OUT/.vm/cmd" > "$VM_OUT/output.log" 2>&1 < /dev/null
	echo "status $?" >> "$res"
	cd /
fi

for name in $loaded; do
	if ! rmmod "$name" 2> "$VM_OUT/.vm/rmmod.err"; then
		echo "rmmod_failed $name" >> "$res"
	fi
done

if [ -w "$kmemleak" ]; then
	echo scan > "$kmemleak"
	echo scan > "$kmemleak"
	cat "$kmemleak" > "$VM_OUT/kmemleak.log"
	[ -s "$VM_OUT/kmemleak.log" ] && echo "kmemleak" >> "$res"
fi

dmesg > "$VM_OUT/dmesg.log"
echo "done" >> "$res"
sync
