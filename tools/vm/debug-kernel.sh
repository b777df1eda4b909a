#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Build (once) the gpusleep debug kernel: Debian's linux-source-6.12 (from
# bookworm-backports, fetched by tools/kernels.sh into build/kernels/), make
# ARCH=x86_64 tinyconfig + tools/vm/debug.config (KASAN, lockdep, kmemleak,
# debugobjects, fault injection), bzImage and modules_prepare.
#
# Usage: tools/vm/debug-kernel.sh
#
# On success prints exactly one line on stdout, the absolute path of the
# result directory build/debug-kernel/<hash>/, which holds `bzImage` and is a
# kernel build tree usable as KDIR:  make -C <dir> M=<module dir> modules
# <hash> covers the config fragment, the source package version and this
# script's recipe version; a finished result is reused (the second call is
# instant). Progress goes to stderr; the build log is <dir>/build.log.
#
# Environment:
#   GPUSLEEP_LINUX_SOURCE  source tarball (default: linux-source-6.12's, from
#                          tools/kernels.sh 6.12)
#   JOBS                   parallel make jobs (default: nproc)
set -eu

# Bump when the build steps below change in a way that changes the result.
RECIPE=2

me=debug-kernel
say() { echo "$me: $*" >&2; }
die() { echo "$me: error: $*" >&2; exit 1; }

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
fragment=$here/debug.config
tarball=${GPUSLEEP_LINUX_SOURCE:-}
srcver=""
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
top=$repo/build/debug-kernel

# A parent make (make check) passes its flags and command-line variables
# (M=, O=, KDIR=, -j jobserver) down through the environment; none of them
# may leak into the kernel build.
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES GNUMAKEFLAGS \
	M O KBUILD_OUTPUT KBUILD_EXTMOD KBUILD_SRC KDIR ARCH SRCARCH \
	CROSS_COMPILE LOCALVERSION KCONFIG_CONFIG || true

[ -f "$fragment" ] || die "config fragment $fragment is missing"
if [ -z "$tarball" ]; then
	"$repo/tools/kernels.sh" 6.12 >&2 || die "cannot fetch linux-source-6.12 (tools/kernels.sh 6.12)"
	# shellcheck disable=SC1091
	tarball=$(. "$repo/build/kernels/6.12/env" && echo "$SOURCE")
	# shellcheck disable=SC1091
	srcver=$(. "$repo/build/kernels/6.12/env" && echo "$SOURCE_VERSION")
fi
[ -f "$tarball" ] || die "kernel source $tarball is missing"
for t in make gcc flex bison bc tar xz sha256sum perl flock; do
	command -v "$t" >/dev/null 2>&1 || die "'$t' not found (run tools/deps.sh)"
done
[ -f /usr/include/gelf.h ] || die "libelf headers missing (libelf-dev; run tools/deps.sh)"
[ -f /usr/include/openssl/ssl.h ] || die "openssl headers missing (libssl-dev; run tools/deps.sh)"

# Source identity: the Debian package version, else the tarball's size+mtime.
[ -n "$srcver" ] || srcver=$(stat -c 'custom-%s-%Y' "$tarball")
srcver_safe=$(printf '%s' "$srcver" | tr -c 'A-Za-z0-9.+_-' '_')

hash=$( { echo "recipe $RECIPE"; echo "source $srcver"; cat "$fragment"; } |
	sha256sum | cut -c1-16)
out=$top/$hash
src=$top/src-$srcver_safe
log=$out/build.log

# Fast path: a finished build.
if [ -f "$out/.gpusleep-complete" ] && [ -f "$out/bzImage" ]; then
	echo "$out"
	exit 0
fi

mkdir -p "$top"
# One builder at a time (parallel `make check` runs share build/).
exec 9>"$top/.lock"
flock 9
if [ -f "$out/.gpusleep-complete" ] && [ -f "$out/bzImage" ]; then
	echo "$out"
	exit 0
fi

start=$(date +%s)

# 1. Unpack the source once, atomically (src-<ver>.tmp then rename).
if [ ! -f "$src/.gpusleep-extracted" ]; then
	say "unpacking $tarball into $src"
	rm -rf "$src" "$src.tmp"
	mkdir -p "$src.tmp"
	tar -xJf "$tarball" -C "$src.tmp" --strip-components=1 ||
		die "unpacking $tarball failed"
	touch "$src.tmp/.gpusleep-extracted"
	mv "$src.tmp" "$src"
fi

mkdir -p "$out"
: >"$log"

kmake() {
	make -C "$src" O="$out" ARCH=x86_64 "$@" >>"$log" 2>&1
}

fail() {
	say "$1; last lines of $log:"
	tail -n 40 "$log" >&2
	exit 1
}

# 2. Configure: tinyconfig + fragment, then check that every line of the
#    fragment survived (merge_config.sh only warns).
if [ ! -f "$out/.gpusleep-configured" ]; then
	say "configuring (tinyconfig + $(basename "$fragment"))"
	kmake tinyconfig || fail "make tinyconfig failed"
	(cd "$out" && ARCH=x86_64 "$src/scripts/kconfig/merge_config.sh" \
		-m -O "$out" "$out/.config" "$fragment") >>"$log" 2>&1 ||
		fail "merge_config.sh failed"
	kmake olddefconfig || fail "make olddefconfig failed"

	bad=""
	while IFS= read -r line; do
		case $line in
		CONFIG_*=*)
			grep -qxF "$line" "$out/.config" || bad="$bad
  wanted: $line  got: $(grep -E "^(# )?${line%%=*}[= ]" "$out/.config" || echo '(absent)')"
			;;
		"# CONFIG_"*" is not set")
			opt=${line#\# }
			opt=${opt%% *}
			if grep -q "^$opt=" "$out/.config"; then
				bad="$bad
  wanted: $line  got: $(grep "^$opt=" "$out/.config")"
			fi
			;;
		esac
	done <"$fragment"
	[ -z "$bad" ] || die "options of $fragment missing from $out/.config (unmet dependencies?):$bad"
	touch "$out/.gpusleep-configured"
fi

# 3. Build bzImage, vmlinux's Module.symvers and the external-module
#    prerequisites.
say "building bzImage with -j$jobs (log: $log; about 5 minutes on 2 cores)"
kmake -j"$jobs" bzImage modules || fail "kernel build failed"
kmake modules_prepare || fail "make modules_prepare failed"
cp "$out/arch/x86/boot/bzImage" "$out/bzImage"
[ -f "$out/Module.symvers" ] || fail "Module.symvers was not produced"

# 4. Check the tree works as KDIR for an external module.
probe=$top/probe-$hash
rm -rf "$probe"
mkdir -p "$probe"
cat >"$probe/probe.c" <<'EOF'
// SPDX-License-Identifier: GPL-2.0
#include <linux/module.h>
#include <linux/slab.h>
static int __init probe_init(void)
{
	kfree(kzalloc(16, GFP_KERNEL));
	return 0;
}
static void __exit probe_exit(void) { }
module_init(probe_init);
module_exit(probe_exit);
MODULE_LICENSE("GPL");
EOF
echo 'obj-m := probe.o' >"$probe/Kbuild"
make -C "$out" M="$probe" modules >>"$log" 2>&1 ||
	fail "an external module does not build against $out"
[ -f "$probe/probe.ko" ] || fail "probe.ko was not produced"
rm -rf "$probe"

end=$(date +%s)
echo "$((end - start))" >"$out/build-seconds"
echo "$srcver" >"$out/source-version"
touch "$out/.gpusleep-complete"
say "done in $((end - start)) s: $(make -s -C "$out" kernelrelease 2>/dev/null || true)"
echo "$out"
