#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tests/kernels.sh: build gpusleep.ko with W=1 against each supported
# kernel and print one TAP line per kernel. Used by `make check`.
#
# Usage: tests/kernels.sh [--out DIR] [NAME...]
#   NAME: 6.1 (the machine's own headers), 5.10, 6.12, 7.3 (fetched
#   and prepared by tools/kernels.sh into build/kernels/); default: all.
#
# A kernel passes when the module builds, the log has no compiler or
# modpost warning (unresolved symbols excepted on a tree with no
# Module.symvers: a source tree after modules_prepare), the API probes of
# kmod/conftest.sh found exactly what that kernel has, and modinfo shows
# the version from dkms.conf and that kernel's vermagic. Each build is in
# DIR/NAME/ (default build/compile/), log DIR/NAME.log.
# Environment: KDIR61 (the 6.1 tree; default: the newest
# /usr/src/linux-headers-6.1.*-amd64).
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$REPO/build/compile
if [ "${1-}" = --out ]; then
	out=$2
	shift 2
fi
mkdir -p "$out"
out=$(realpath "$out")
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(6.1 5.10 6.12 7.3)

# unset what a parent make passes down (M=, -j jobserver, W=...)
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES GNUMAKEFLAGS M O W C \
	KBUILD_OUTPUT KBUILD_EXTMOD || true

version=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$REPO/dkms.conf")

# The probes each kernel must answer yes to; every other probe must say no.
expect() {
	case $1 in
	5.10) echo "BASELINE NETLINK_BROADCAST_FILTERED" ;;
	6.1) echo "BASELINE GENL_MCAST_CAP GENL_REQ_ATTR_CHECK" ;;
	*) echo "BASELINE CLASS_ATTR_CONST EVENTFD_SIGNAL_1ARG GENL_MCAST_CAP GENL_REQ_ATTR_CHECK GENL_SPLIT_OPS NETLINK_BROADCAST_FILTERED" ;;
	esac
}

mkdir -p "$out"
for n in "${names[@]}"; do
	log=$out/$n.log
	: > "$log"
	KDIR_N="" KVER="" CC_N=""
	if [ "$n" = 6.1 ]; then
		KDIR_N=${KDIR61:-$(ls -d /usr/src/linux-headers-6.1.*-amd64 2>/dev/null |
			sort -V | tail -n1)}
	elif "$REPO/tools/kernels.sh" "$n" >> "$log" 2>&1; then
		# shellcheck disable=SC1090
		KDIR_N=$(. "$REPO/build/kernels/$n/env" && echo "$KDIR")
		# shellcheck disable=SC1090
		CC_N=$(. "$REPO/build/kernels/$n/env" && echo "${CC-}")
	else
		echo "ok - compile: $n # SKIP cannot fetch or prepare it (see $log)"
		continue
	fi
	if [ -z "$KDIR_N" ] || [ ! -f "$KDIR_N/Makefile" ]; then
		echo "not ok - compile: $n: no kernel tree (KDIR=$KDIR_N)"
		continue
	fi
	KVER=$(sed -n 's/.*UTS_RELEASE "\(.*\)"/\1/p' \
		"$KDIR_N/include/generated/utsrelease.h")
	d=$out/$n
	rm -rf "$d"
	mkdir -p "$d"
	cp -r "$REPO/Kbuild" "$REPO/kmod" "$REPO/uapi" "$REPO/dkms.conf" "$d/"
	rm -f "$d"/kmod/gs_conftest.h*
	modpost_warn=()
	[ -f "$KDIR_N/Module.symvers" ] || modpost_warn=(KBUILD_MODPOST_WARN=1)
	why=""
	if ! make -C "$KDIR_N" M="$d" W=1 ${CC_N:+CC=$CC_N} \
		"${modpost_warn[@]}" modules >> "$log" 2>&1; then
		why="build failed"
	fi
	if [ -z "$why" ]; then
		bad=$(grep -E '(warning|error):|^WARNING|^ERROR' "$log" |
			grep -vE "modpost: .*undefined!|suppressed [0-9]+ unresolved symbol" |
			grep -vE 'Module.symvers is missing' || true)
		if [ ${#modpost_warn[@]} -gt 0 ]; then
			# the block modpost prints when Module.symvers is missing
			bad=$(echo "$bad" | grep -vE '^WARNING: .*Module.symvers' || true)
		fi
		[ -z "$bad" ] || why="warnings: $(echo "$bad" | head -n1)"
	fi
	if [ -z "$why" ]; then
		got=$(sed -n 's/^#define GS_HAVE_\([A-Z0-9_]*\) 1$/\1/p' \
			"$d/kmod/gs_conftest.h" | sort | tr '\n' ' ')
		want=$(expect "$n" | tr ' ' '\n' | sort | tr '\n' ' ')
		[ "$got" = "$want" ] || why="probes found '$got', expected '$want'"
	fi
	if [ -z "$why" ]; then
		v=$(modinfo -F version "$d/gpusleep.ko")
		vm=$(modinfo -F vermagic "$d/gpusleep.ko")
		[ "$v" = "$version" ] || why="modinfo version '$v', dkms.conf says '$version'"
		case "$vm" in
		"$KVER "*) ;;
		*) [ -n "$why" ] || why="vermagic '$vm' is not $KVER's" ;;
		esac
	fi
	if [ -z "$why" ]; then
		echo "ok - compile: $n ($KVER, W=1, probes: $(expect "$n"))"
	else
		echo "not ok - compile: $n ($KVER): $why (see $log)"
		grep -E '(warning|error):' "$log" | head -n 10 | sed 's/^/#   /'
	fi
done
exit 0
