#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# How libgpusleep is laid out for linkers, loaders and pkg-config, in
# build/lib as `make install` copies it: the library is
# libgpusleep.so.0.VERSION with SONAME libgpusleep.so.0, libgpusleep.so.0
# and libgpusleep.so are links to it (not the other way round), and
# libgpusleep.pc builds and links a program that then loads the soname.
# Prints TAP.
cd "$(dirname "$0")/../.." || exit 1
L=build/lib
V=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' dkms.conf)
echo "TAP version 13"
echo "1..6"
n=0
ok() {
	n=$((n + 1))
	if [ "$1" = 0 ]; then echo "ok $n $2"; else
		echo "not ok $n $2"
		[ -n "${3-}" ] && printf '%s\n' "$3" | sed 's/^/# /'
	fi
}
real=$L/libgpusleep.so.0.$V
[ -f "$real" ] && [ ! -L "$real" ]
ok $? "the library is the file libgpusleep.so.0.$V" "$(ls -l $L/libgpusleep.so* 2>&1)"
soname=$(readelf -d "$real" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libgpusleep.so.0 ]
ok $? "its SONAME is libgpusleep.so.0" "SONAME: '$soname'"
[ "$(readlink $L/libgpusleep.so.0)" = "libgpusleep.so.0.$V" ] &&
	[ "$(readlink $L/libgpusleep.so)" = libgpusleep.so.0 ]
ok $? "libgpusleep.so.0 -> .so.0.$V, libgpusleep.so -> .so.0" \
	"$(ls -l $L/libgpusleep.so* 2>&1)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the .pc as installed under a prefix: lib/ and include/ of a stage
mkdir -p "$tmp/p/lib/pkgconfig" "$tmp/p/include"
cp -P $L/libgpusleep.so* "$tmp/p/lib/" 2>/dev/null
cp user/include/libgpusleep.h "$tmp/p/include/"
cp -r uapi/linux "$tmp/p/include/"
if [ -f $L/libgpusleep.pc ]; then
	sed "s|^prefix=.*|prefix=$tmp/p|" $L/libgpusleep.pc > "$tmp/p/lib/pkgconfig/libgpusleep.pc"
fi
printf '#include <libgpusleep.h>\nint main(void) { return !gs_state_name(0); }\n' > "$tmp/t.c"
out=$( (
	export PKG_CONFIG_PATH="$tmp/p/lib/pkgconfig"
	set -e
	[ "$(pkg-config --modversion libgpusleep)" = "$V" ]
	# shellcheck disable=SC2046
	cc -o "$tmp/t" "$tmp/t.c" $(pkg-config --cflags --libs libgpusleep)
	readelf -d "$tmp/t" | grep -q 'NEEDED.*\[libgpusleep.so.0\]'
	LD_LIBRARY_PATH="$tmp/p/lib" "$tmp/t"
	LD_LIBRARY_PATH="$tmp/p/lib" ldd "$tmp/t" | grep "libgpusleep.so.0 => $tmp/p/lib/"
	pkg-config --static --libs libgpusleep | grep -q -- -lpthread
	) 2>&1)
ok $? "libgpusleep.pc: version $V, a program built with it needs and loads libgpusleep.so.0" "$out"
# make install-lib: the library, headers and a .pc naming the PREFIX given
# at install time (the tree was built with the default one), no module;
# make uninstall-lib leaves nothing behind.
st="$tmp/stage"
out=$( (
	set -e
	make -s install-lib DESTDIR="$st" PREFIX=/opt/gs
	[ "$(readlink "$st/opt/gs/lib/libgpusleep.so.0")" = "libgpusleep.so.0.$V" ]
	[ -f "$st/opt/gs/include/libgpusleep.h" ]
	[ -f "$st/opt/gs/include/linux/gpusleep.h" ]
	grep -qx 'prefix=/opt/gs' "$st/opt/gs/lib/pkgconfig/libgpusleep.pc"
	[ ! -e "$st/lib/modules" ]
	) 2>&1)
ok $? "make install-lib PREFIX=/opt/gs: library, headers, a .pc with prefix=/opt/gs, no module" "$out"
out=$( (
	set -e
	make -s uninstall-lib DESTDIR="$st" PREFIX=/opt/gs
	left=$(find "$st" ! -type d)
	[ -z "$left" ] || { echo "left behind: $left"; exit 1; }
	) 2>&1)
ok $? "make uninstall-lib removes all of it" "$out"
