#!/bin/sh
# Install the Debian packages gpusleep needs, if missing. Does nothing when
# everything is present. Only Debian's archive is used.
#
# Usage: tools/deps.sh [--demo | --kernels] [--list]
#   (none)     what `make` and `make check` need: the demo set and the
#              check set below
#   --demo     only what `make demo` and `make vm-shell` need: a compiler,
#              the kernel headers and image the VM boots, qemu, busybox,
#              libnl and liburing
#   --kernels  the full set, then also fetch (once, into build/kernels/)
#              the other Debian kernels the tests build and boot
#              (tools/kernels.sh: 5.10, 6.12, 7.3), with a private apt
#              configuration; nothing of them is installed
#   --list     print the packages of the chosen set, one line, and
#              install nothing
#
# Nothing is left running: on a systemd host Debian starts a package's
# services when it is installed (prometheus, prometheus-node-exporter); a
# policy-rc.d refuses those starts for the length of the install, and the
# services of packages installed here are disabled afterwards (start them
# with systemctl when you want them).
set -eu

# make demo: build the module, libgpusleep, gpusleepctl and the demo
# programs, boot the VM.
DEMO_PKGS="build-essential make gcc pkg-config python3 \
qemu-system-x86 linux-image-amd64 linux-headers-amd64 \
busybox-static kmod cpio xz-utils \
libnl-3-dev libnl-genl-3-dev liburing-dev"
# make check on top: kselftest headers and checkpatch (linux-source), sparse,
# the YNL client's and the spec tests' Python modules, the debug kernel's
# build, DKMS, promtool (prometheus) and the node exporter's textfile
# directory (prometheus-node-exporter); the Python distributions (make
# wheel) and the venv the tests install them into.
CHECK_PKGS="linux-source-6.1 sparse python3-yaml python3-jsonschema \
flex bison bc libelf-dev libssl-dev dwarves rsync dkms \
prometheus prometheus-node-exporter \
python3-pip python3-setuptools python3-wheel python3-venv"
# Packages of the sets above that ship a service Debian would start.
SERVICE_PKGS="prometheus prometheus-node-exporter"

set_=full
kernels=0
list=0
for a in "$@"; do
	case "$a" in
	--demo) set_=demo ;;
	--kernels) kernels=1 ;;
	--list) list=1 ;;
	*) echo "deps: unknown option $a (see the head of $0)" >&2; exit 2 ;;
	esac
done
if [ "$set_" = demo ] && [ "$kernels" = 1 ]; then
	echo "deps: --demo and --kernels do not go together" >&2
	exit 2
fi
PKGS=$DEMO_PKGS
[ "$set_" = full ] && PKGS="$DEMO_PKGS $CHECK_PKGS"
if [ "$list" = 1 ]; then
	echo $PKGS
	exit 0
fi

fetch_kernels() {
	[ "$kernels" = 1 ] || return 0
	"$(dirname "$0")/kernels.sh" ||
		echo "deps: could not fetch the other kernels; their tests will be skipped" >&2
}

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

# No service starts during the install (invoke-rc.d and deb-systemd-invoke
# ask /usr/sbin/policy-rc.d; 101 = action forbidden). One that is there
# already (a container's) is left as it is.
policy=/usr/sbin/policy-rc.d
ours=0
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\n# tools/deps.sh (gpusleep): no service starts during its install\nexit 101\n' |
		$SUDO tee "$policy" > /dev/null && $SUDO chmod 755 "$policy" && ours=1
fi
rc=0
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null || rc=$?
[ "$ours" = 1 ] && $SUDO rm -f "$policy"
if [ "$rc" != 0 ]; then
	echo "deps: apt-get install failed for:$missing" >&2
	exit 1
fi

# Enabled for the next boot all the same: disable (and stop, should one
# have started anyway) the services and timers of the packages installed
# just now.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	for p in $missing; do
		case " $SERVICE_PKGS " in *" $p "*) ;; *) continue ;; esac
		for unit in $(dpkg-query -L "$p" 2>/dev/null |
			grep -E '^/(usr/)?lib/systemd/system/[^/@]+\.(service|timer)$'); do
			unit=${unit##*/}
			$SUDO systemctl disable --now "$unit" >/dev/null 2>&1 &&
				echo "deps: $unit (from $p) disabled; systemctl enable --now $unit starts it" >&2
		done
	done
fi
fetch_kernels
