#!/bin/sh
# Install the Debian packages gpusleep needs to build and test, if missing.
# Does nothing when everything is present. Only Debian's archive is used.
#
# --kernels: also fetch (once, into build/kernels/) the other Debian
# kernels the tests build and boot (tools/kernels.sh: 5.10, 6.12, 7.3),
# with a private apt configuration; nothing of them is installed.
set -eu

kernels=0
[ "${1-}" = --kernels ] && kernels=1
fetch_kernels() {
	[ "$kernels" = 1 ] || return 0
	"$(dirname "$0")/kernels.sh" ||
		echo "deps: could not fetch the other kernels; their tests will be skipped" >&2
}

PKGS="build-essential make gcc pkg-config python3 \
qemu-system-x86 linux-image-amd64 linux-headers-amd64 linux-source-6.1 \
busybox-static kmod cpio xz-utils \
libnl-3-dev libnl-genl-3-dev liburing-dev sparse python3-yaml python3-jsonschema \
flex bison bc libelf-dev libssl-dev dwarves rsync dkms \
prometheus prometheus-node-exporter"
# the Python distributions: make wheel, and the venv the tests install into
PKGS="$PKGS python3-pip python3-setuptools python3-wheel python3-venv"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done

if [ -z "$missing" ]; then
	fetch_kernels
	exit 0
fi

echo "deps: installing:$missing" >&2
if [ "$(id -u)" -eq 0 ]; then
	SUDO=""
elif command -v sudo >/dev/null 2>&1; then
	SUDO="sudo"
else
	echo "deps: need root or sudo to install:$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || { echo "deps: apt-get update failed" >&2; exit 1; }
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null || {
	echo "deps: apt-get install failed for:$missing" >&2
	exit 1
}
fetch_kernels
