#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tools/kernels.sh: fetch (once) the Debian kernels gpusleep is tested
# against besides the machine's own 6.1, without touching the machine's apt
# configuration: a private apt configuration under build/kernels/apt/
# (sources list, lists, cache), `apt-get download`, `dpkg -x` into
# build/kernels/NAME/root/. Nothing is installed system-wide.
#
# Usage: tools/kernels.sh [NAME...]     (default: all of them)
#   5.10   bullseye(-security) linux-headers (+ -common, linux-kbuild)
#   6.12   bookworm-backports linux-headers, linux-image (vmlinuz and
#          modules, for the VM suite), linux-source-6.12 (the debug kernel)
#   7.3    trixie-backports linux-source-7.3, unpacked and prepared with
#          `make defconfig modules_prepare` (its headers package needs
#          gcc-14 and glibc 2.38; the source builds with bookworm's gcc)
#
# For each NAME, build/kernels/NAME/env (shell syntax) holds:
#   KDIR=    a tree to build external modules against
#   KVER=    its release string
#   KERNEL=  the kernel image (6.12 only)
#   MODROOT= the directory holding lib/modules/KVER (6.12 only)
#   SOURCE=  the source tarball (6.12, 7.3)
# A finished NAME is reused: a second run downloads nothing. The mirror is
# the one the machine's own apt sources name for Debian.
#
# Environment: JOBS (parallel make jobs for 7.3, default nproc).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOP=$REPO/build/kernels
APT=$TOP/apt
DEBS=$TOP/debs
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}

# Bump when what a NAME's directory holds changes.
RECIPE=1

say() { echo "kernels: $*" >&2; }
die() { echo "kernels: error: $*" >&2; exit 1; }

# The Debian mirror the machine uses (deb822 or one-line sources).
mirror() {
	local u
	u=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
		/etc/apt/sources.list.d/*.sources 2>/dev/null |
		grep -vE '^[[:space:]]*#' |
		grep -oE '(https?|file)://[^ ]+/debian/?( |$)' | head -n1 | tr -d ' ')
	echo "${u%/}"
}

aptopts() {
	echo -o Dir::Etc::SourceList="$APT/sources.list" \
		-o Dir::Etc::SourceParts=/dev/null \
		-o Dir::State::Lists="$APT/lists" \
		-o Dir::Cache="$APT/cache" \
		-o Dir::State::status=/var/lib/dpkg/status \
		-o Debug::NoLocking=1 -o APT::Get::List-Cleanup=0 \
		-o APT::Sandbox::User=root
}

updated=0
apt_update() {
	[ "$updated" = 1 ] && return 0
	local m
	m=$(mirror)
	[ -n "$m" ] || die "no Debian mirror found in /etc/apt/sources.list*"
	mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial" "$DEBS"
	local key=/usr/share/keyrings/debian-archive-keyring.gpg
	cat > "$APT/sources.list" <<EOF
deb [signed-by=$key] $m bullseye main
deb [signed-by=$key] $m-security bullseye-security main
deb [signed-by=$key] $m bookworm-backports main
deb [signed-by=$key] $m trixie-backports main
EOF
	say "apt-get update (private configuration in $APT)"
	# shellcheck disable=SC2046
	apt-get $(aptopts) -qq update >&2 || die "apt-get update failed"
	updated=1
}

# newest VERSION of package $1 in suite $2
version_in() {
	# shellcheck disable=SC2046
	apt-cache $(aptopts) madison "$1" 2>/dev/null |
		awk -F'|' -v s=" $2/" 'index($3, s) { gsub(/ /, "", $2); print $2; exit }'
}

# Depends of $1=$2 whose names match the regex $3, one per line
deps_of() {
	# shellcheck disable=SC2046
	apt-cache $(aptopts) show "$1=$2" 2>/dev/null |
		sed -n 's/^Depends: //p' | head -n1 | tr ',' '\n' |
		sed 's/^ *//; s/ .*//; s/|.*//' | grep -E "$3" || true
}

# download package $1 version $2 (cached) and print the .deb path
fetch() {
	local f
	f=$(ls "$DEBS/$1_${2/:/%3a}_"*.deb 2>/dev/null | head -n1 || true)
	if [ -z "$f" ]; then
		say "downloading $1 $2"
		# shellcheck disable=SC2046
		(cd "$DEBS" && apt-get $(aptopts) -qq download "$1=$2" >&2) ||
			die "apt-get download $1=$2 failed"
		f=$(ls "$DEBS/$1_${2/:/%3a}_"*.deb 2>/dev/null | head -n1 || true)
		[ -n "$f" ] || die "downloaded $1 $2 but cannot find its .deb"
	fi
	echo "$f"
}

# The concrete headers package of suite $1 (via linux-headers-amd64), plus
# its -common and linux-kbuild packages: "name version" lines.
headers_pkgs() {
	local suite=$1 metav hdr hdrv d
	metav=$(version_in linux-headers-amd64 "$suite")
	[ -n "$metav" ] || die "no linux-headers-amd64 in $suite"
	hdr=$(deps_of linux-headers-amd64 "$metav" '^linux-headers-')
	hdrv=$(version_in "$hdr" "$suite")
	echo "$hdr $hdrv"
	for d in $(deps_of "$hdr" "$hdrv" '^linux-(headers|kbuild)-'); do
		echo "$d $(version_in "$d" "$suite")"
	done
}

# dpkg -x the packages ("name version" lines on stdin) into $1
unpack_into() {
	local root=$1 name ver
	mkdir -p "$root"
	while read -r name ver; do
		[ -n "$ver" ] || die "no version for $name"
		dpkg -x "$(fetch "$name" "$ver")" "$root"
	done
}

# Headers unpacked with dpkg -x include their -common tree (and name it in
# MAKEARGS) by absolute /usr/src paths: point them into $1.
fix_headers() {
	local root=$1 mk
	for mk in "$root"/usr/src/linux-headers-*/Makefile; do
		grep -q '/usr/src/' "$mk" || continue
		sed -i "s,\([ =]\)/usr/src/,\1$root/usr/src/,g" "$mk"
	done
}

headers_kdir() {
	ls -d "$1"/usr/src/linux-headers-*-amd64 | head -n1
}

kver_of() {
	sed -n 's/.*UTS_RELEASE "\(.*\)"/\1/p' "$1/include/generated/utsrelease.h"
}

finish() {
	# $1 name; stdin: env lines
	cat > "$TOP/$1/env.tmp"
	echo "RECIPE=$RECIPE" >> "$TOP/$1/env.tmp"
	mv "$TOP/$1/env.tmp" "$TOP/$1/env"
}

done_already() {
	[ -f "$TOP/$1/env" ] && grep -qx "RECIPE=$RECIPE" "$TOP/$1/env"
}

get_5_10() {
	local d=$TOP/5.10 suite=bullseye-security kdir
	done_already 5.10 && return 0
	apt_update
	[ -n "$(version_in linux-headers-amd64 $suite)" ] || suite=bullseye
	rm -rf "$d"
	headers_pkgs "$suite" | unpack_into "$d/root"
	fix_headers "$d/root"
	kdir=$(headers_kdir "$d/root")
	# bullseye's headers name gcc-10 (not in bookworm): build with CC=gcc.
	finish 5.10 <<EOF
KDIR=$kdir
KVER=$(kver_of "$kdir")
CC=gcc
EOF
}

get_6_12() {
	local d=$TOP/6.12 suite=bookworm-backports metav img srcv kdir kver
	done_already 6.12 && return 0
	apt_update
	rm -rf "$d"
	metav=$(version_in linux-image-amd64 "$suite")
	img=$(deps_of linux-image-amd64 "$metav" '^linux-image-')
	srcv=$(version_in linux-source-6.12 "$suite")
	{
		headers_pkgs "$suite"
		echo "$img $(version_in "$img" "$suite")"
		echo "linux-source-6.12 $srcv"
	} | unpack_into "$d/root"
	fix_headers "$d/root"
	kdir=$(headers_kdir "$d/root")
	kver=$(kver_of "$kdir")
	[ -f "$d/root/boot/vmlinuz-$kver" ] || die "no vmlinuz-$kver in the 6.12 image package"
	# modules.dep for modprobe -d (the package's postinst runs depmod)
	/sbin/depmod -b "$d/root" "$kver" || die "depmod for $kver failed"
	finish 6.12 <<EOF
KDIR=$kdir
KVER=$kver
KERNEL=$d/root/boot/vmlinuz-$kver
MODROOT=$d/root
SOURCE=$(ls "$d"/root/usr/src/linux-source-6.12.tar.xz)
SOURCE_VERSION=$srcv
EOF
}

get_7_3() {
	local d=$TOP/7.3 suite=trixie-backports srcv tar src log start
	done_already 7.3 && return 0
	apt_update
	rm -rf "$d"
	srcv=$(version_in linux-source-7.3 "$suite")
	[ -n "$srcv" ] || die "no linux-source-7.3 in $suite"
	echo "linux-source-7.3 $srcv" | unpack_into "$d/root"
	tar=$d/root/usr/src/linux-source-7.3.tar.xz
	src=$d/src
	log=$d/prepare.log
	start=$(date +%s)
	say "unpacking and preparing linux-source-7.3 (defconfig modules_prepare, log: $log)"
	mkdir -p "$src.tmp"
	tar -xJf "$tar" -C "$src.tmp" --strip-components=1 || die "unpacking $tar failed"
	(
		unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES GNUMAKEFLAGS M O \
			KBUILD_OUTPUT KBUILD_EXTMOD KDIR ARCH SRCARCH CROSS_COMPILE
		make -C "$src.tmp" ARCH=x86_64 defconfig &&
		make -C "$src.tmp" ARCH=x86_64 -j"$jobs" modules_prepare
	) > "$log" 2>&1 || { tail -n 30 "$log" >&2; die "preparing 7.3 failed"; }
	mv "$src.tmp" "$src"
	# The tarball is no longer needed: the prepared tree is the cache.
	rm -f "$tar"
	echo "$(($(date +%s) - start))" > "$d/prepare-seconds"
	finish 7.3 <<EOF
KDIR=$src
KVER=$(kver_of "$src")
SOURCE_VERSION=$srcv
EOF
}

names=("$@")
[ ${#names[@]} -gt 0 ] || names=(5.10 6.12 7.3)
mkdir -p "$TOP"
exec 8> "$TOP/.lock"
flock 8
for n in "${names[@]}"; do
	case $n in
	5.10) get_5_10 ;;
	6.12) get_6_12 ;;
	7.3) get_7_3 ;;
	*) die "unknown kernel $n (5.10, 6.12, 7.3)" ;;
	esac
done
