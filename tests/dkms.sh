#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tests/dkms.sh: do what the README tells a user to do with DKMS, for real,
# and leave the machine as it was found. Prints TAP. Used by `make check`.
#
#   /usr/src/gpusleep-VERSION/ <- Kbuild, kmod/, uapi/, dkms.conf
#   dkms add gpusleep/VERSION
#   dkms build gpusleep/VERSION -k KVER     for 6.1 (the machine's headers)
#                                           and 6.12 (build/kernels/6.12/)
#   dkms remove gpusleep/VERSION --all
#
# Each build must produce gpusleep.ko with dkms.conf's version and that
# kernel's vermagic, signed (Secure Boot: docs/deployment.md) with the MOK
# key DKMS uses: the module's key id is /var/lib/dkms/mok.pub's serial
# (unless DKMS said it found no sign-file for that kernel: 6.12 here, whose
# linux-kbuild is not installed). Afterwards /usr/src/gpusleep-VERSION, /var/lib/dkms
# and the MOK signing key dkms may have created (/var/lib/dkms/mok.key,
# mok.pub) must be as before. Skipped, with the reason, without root or
# dkms, or when the machine already has a gpusleep DKMS tree (not ours to
# touch). Environment: KDIR61 (6.1 headers; default the newest
# /usr/src/linux-headers-6.1.*-amd64).
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$REPO/build/check/dkms
mkdir -p "$out"
log=$out/dkms.log
: > "$log"
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES GNUMAKEFLAGS M O W C \
	KBUILD_OUTPUT KBUILD_EXTMOD || true

version=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$REPO/dkms.conf")
src=/usr/src/gpusleep-$version
tree=/var/lib/dkms
skip() {
	echo "ok - dkms: add, build for 6.1 and 6.12, remove # SKIP $*"
	exit 0
}

[ "$(id -u)" -eq 0 ] || skip "needs root (dkms writes /usr/src and /var/lib/dkms)"
command -v dkms > /dev/null || skip "dkms is not installed (tools/deps.sh installs it)"
[ -n "$version" ] || { echo "not ok - dkms: no PACKAGE_VERSION in dkms.conf"; exit 0; }
if [ -e "$src" ] || [ -e "$tree/gpusleep" ]; then
	skip "this machine has its own gpusleep DKMS tree ($src or $tree/gpusleep): not touching it"
fi

# What the machine looks like now, to compare after.
state() {
	{
		ls -la /usr/src 2>&1 | awk '{print $1, $NF}'
		find "$tree" /etc/dkms 2>/dev/null | sort
		for f in "$tree/mok.key" "$tree/mok.pub"; do
			[ -f "$f" ] && sha256sum "$f"
		done
		ls /lib/modules/*/updates/dkms 2>/dev/null
	} 2>&1
}
state > "$out/before"
had_key=0
[ -e "$tree/mok.key" ] && had_key=1

cleanup() {
	dkms remove -m gpusleep -v "$version" --all >> "$log" 2>&1 || true
	rm -rf "$src" "${tree:?}/gpusleep"
	if [ "$had_key" = 0 ]; then
		rm -f "$tree/mok.key" "$tree/mok.pub"
	fi
}
trap cleanup EXIT

# 1. the source tree, as the README says (generated files left out)
mkdir -p "$src/kmod" "$src/uapi"
cp "$REPO/Kbuild" "$REPO/dkms.conf" "$src/"
cp "$REPO"/kmod/*.c "$REPO"/kmod/conftest.sh "$src/kmod/"
find "$REPO/kmod" -maxdepth 1 -name '*.h' ! -name 'gs_conftest.h' \
	-exec cp {} "$src/kmod/" \;
cp -r "$REPO/uapi/linux" "$src/uapi/"

if dkms add -m gpusleep -v "$version" >> "$log" 2>&1; then
	echo "ok - dkms: add gpusleep/$version"
else
	echo "not ok - dkms: add gpusleep/$version (see $log)"
	exit 0
fi

# 2. build for each kernel: "NAME KVER KDIR" lines
kernels=()
kdir61=${KDIR61:-$(ls -d /usr/src/linux-headers-6.1.*-amd64 2>/dev/null | sort -V | tail -n1)}
if [ -n "$kdir61" ] && [ -f "$kdir61/include/generated/utsrelease.h" ]; then
	kernels+=("6.1 $(sed -n 's/.*UTS_RELEASE "\(.*\)"/\1/p' \
		"$kdir61/include/generated/utsrelease.h") $kdir61")
else
	echo "not ok - dkms: build for 6.1: no 6.1 headers (KDIR=$kdir61)"
fi
if "$REPO/tools/kernels.sh" 6.12 >> "$log" 2>&1; then
	kernels+=("6.12 $(. "$REPO/build/kernels/6.12/env" && echo "$KVER $KDIR")")
else
	echo "ok - dkms: build for 6.12 # SKIP cannot fetch Debian's 6.12 (see $log)"
fi
# The module is signed by DKMS's MOK certificate: the module's sig_key is
# the certificate's serial number (sign-file's PKCS#7 names the signer by
# issuer and serial). Sets why when not.
signed() {
	local ko=$1 blog=$2 key cert
	key=$(modinfo -F sig_key "$ko" | tr -d ':' | tr 'A-F' 'a-f')
	if grep -q "modules won't be signed" "$blog"; then
		# DKMS says so: no sign-file for this kernel (its linux-kbuild)
		sig="not signed: $(grep "modules won't be signed" "$blog" | head -n 1)"
		[ -z "$key" ] || why="${why:-signed although DKMS said it would not}"
		return
	fi
	if [ -z "$key" ]; then
		why="${why:-gpusleep.ko is not signed (DKMS signs with $tree/mok.key)}"
		return
	fi
	cert=$(openssl x509 -in "$tree/mok.pub" -inform DER -noout -serial \
		2>/dev/null | sed 's/^serial=//' | tr 'A-F' 'a-f')
	sig="signed with the DKMS MOK key ($tree/mok.pub, serial $cert)"
	[ "$cert" = "$key" ] ||
		why="${why:-signed by key $key, not by the DKMS MOK certificate (serial $cert)}"
}
for k in "${kernels[@]}"; do
	read -r name kver kdir <<< "$k"
	why=""
	sig=""
	blog=$out/build-$name.log
	if ! dkms build -m gpusleep -v "$version" -k "$kver" \
		--kernelsourcedir "$kdir" > "$blog" 2>&1; then
		why="dkms build failed"
	else
		ko=$(find "$tree/gpusleep/$version/$kver" -name 'gpusleep.ko*' | head -n1)
		if [ -z "$ko" ]; then
			why="no gpusleep.ko under $tree/gpusleep/$version/$kver"
		else
			v=$(modinfo -F version "$ko")
			vm=$(modinfo -F vermagic "$ko")
			[ "$v" = "$version" ] || why="module version '$v', dkms.conf says '$version'"
			case "$vm" in
			"$kver "*) ;;
			*) [ -n "$why" ] || why="vermagic '$vm' is not that of $kver" ;;
			esac
			signed "$ko" "$blog"
		fi
	fi
	cat "$blog" >> "$log" 2>/dev/null
	if [ -z "$why" ]; then
		echo "ok - dkms: build for $name ($kver): version $version, $sig"
	else
		echo "not ok - dkms: build for $name ($kver): $why (see $log)"
		tail -n 20 "$log" | sed 's/^/#   /'
	fi
done

# 3. remove, then the machine must be as it was
if dkms remove -m gpusleep -v "$version" --all >> "$log" 2>&1; then
	rm -rf "$src"
	if [ "$had_key" = 0 ]; then
		rm -f "$tree/mok.key" "$tree/mok.pub"
	fi
	state > "$out/after"
	if diff -u "$out/before" "$out/after" > "$out/state.diff"; then
		echo "ok - dkms: remove --all leaves the machine as found"
	else
		echo "not ok - dkms: remove --all leaves the machine as found (see $out/state.diff)"
		head -n 20 "$out/state.diff" | sed 's/^/#   /'
	fi
else
	echo "not ok - dkms: remove gpusleep/$version --all (see $log)"
fi
