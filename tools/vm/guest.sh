#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Guest side of tools/vm/run.sh: runs inside the VM with the host root
# (read-only) as its root (a mount root, not a chroot: user namespaces work),
# with the results dir mounted read-write at its host path.
# Argument: the config file written by run.sh. Steps: insmod the modules in
# order, run the command in the repository dir with its output in
# $VM_OUT/output.log, rmmod the modules in reverse order, save dmesg, and
# record every step in $VM_OUT/.vm/result, which run.sh reads afterwards.
# Only /tmp (tmpfs) and the results dir are writable here.
#
# Python cannot write its bytecode caches beside the sources here: they go
# to /tmp/pycache (PYTHONPYCACHEPREFIX), filled first with what the host
# compiled into build/pycache (make pycache), so that each test does not
# compile the same modules again (under TCG and a debug kernel, seconds per
# Python start).

. "$1"
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/tmp GPUSLEEP_VM=1 GPUSLEEP_OUT="$VM_OUT"
# The modules this VM loads, for a test that unloads and loads them again.
export GPUSLEEP_VM_MODULES="$VM_MODULES"
res="$VM_OUT/.vm/result"
: > "$res"

export PYTHONPYCACHEPREFIX=/tmp/pycache
if [ -d "$VM_REPO/build/pycache" ]; then
	cp -R "$VM_REPO/build/pycache" "$PYTHONPYCACHEPREFIX" 2>/dev/null
fi

kmemleak=/sys/kernel/debug/kmemleak
# Objects allocated before this point are not ours to report.
[ -w "$kmemleak" ] && echo clear > "$kmemleak"

# The parent pid of process $1 (the field after the command name, which
# may hold spaces and parentheses); empty when it is gone.
ppid_of() {
	sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f2
}

# After an interactive command: every process still running but the
# kernel's threads, this script, its ancestors and its own helpers (all
# of them the user's: the guest runs nothing else). SIGTERM, then SIGKILL
# to what is left after 5 s; each one named on stdout.
stop_leftovers() {
	keep=" 1 2 $$ "
	p=$$
	while [ -n "$p" ] && [ "$p" -gt 1 ]; do
		p=$(ppid_of "$p")
		keep="$keep$p "
	done
	left=""
	for d in /proc/[0-9]*; do
		pid=${d#/proc/}
		case "$keep" in *" $pid "*) continue ;; esac
		pp=$(ppid_of "$pid")
		case "$pp" in ''|2|$$) continue ;; esac
		left="$left $pid"
	done
	[ -n "$left" ] || return 0
	echo "vm-shell: stopping what is still running, so that the module can be unloaded:"
	for pid in $left; do
		cmd=$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)
		echo "  pid $pid: ${cmd:-?}"
	done
	# shellcheck disable=SC2086
	kill -TERM $left 2>/dev/null
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		alive=""
		for pid in $left; do
			[ -d "/proc/$pid" ] && alive="$alive $pid"
		done
		[ -n "$alive" ] || return 0
		sleep 0.5
	done
	echo "vm-shell: still running after SIGTERM, killed:$alive"
	# shellcheck disable=SC2086
	kill -KILL $alive 2>/dev/null
	sleep 0.5
}

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
	if [ "${VM_INTERACTIVE:-0}" = 1 ]; then
		# run.sh --interactive: the second serial port is the user's
		# terminal, and the command's controlling tty.
		tty=/dev/ttyS1
		set -- $VM_TTY_SIZE
		if [ $# = 2 ]; then
			stty -F "$tty" rows "$1" cols "$2" 2>/dev/null
		fi
		TERM=${TERM:-vt100} setsid -c -w sh "$VM_OUT/.vm/cmd" \
			< "$tty" > "$tty" 2>&1
		echo "status $?" >> "$res"
		# What the user left running (a job sent to the background)
		# would keep the module from unloading: stop it, saying so.
		stop_leftovers > "$tty" 2>&1
	else
		sh "$VM_OUT/.vm/cmd" > "$VM_OUT/output.log" 2>&1 < /dev/null
		echo "status $?" >> "$res"
	fi
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
