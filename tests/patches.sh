#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tests/patches.sh: the module as a kernel patch series (make patches),
# checked against linux-source-6.12 as tools/vm/debug-kernel.sh prepared it
# (an existing build only; without one, a SKIP line).
# One TAP line per check, "patches: " first. Used by `make check`
# (check-patches).
#
#   tests/patches.sh [--out DIR]       (default build/patches-check)
#
# 1. tools/upstream/mkpatches.py writes the series against the debug
#    kernel's source tree (only read).
# 2. A cheap clean copy: a git repository holding only the files of that
#    tree the series touches, plus tools/net/ynl and the netlink schemas;
#    `git am` applies the series to it; the ioctl range's row in
#    ioctl-number.rst is checked (tools/upstream/check_ioctl_number.py).
# 3. checkpatch.pl --strict (the tree's) on each patch.
# 4. Every prefix of the series builds: its uAPI headers compile in a
#    userspace program, and, once the driver is there, drivers/misc/gpusleep/
#    builds as a module (M=, against the prepared debug kernel, W=1 C=1:
#    no compiler or sparse warning).
# 5. The same objects built in (CONFIG_GPUSLEEP=y: compiled without MODULE,
#    W=1 C=1); no vmlinux is linked (too costly for make check).
# 6. tools/testing/selftests/drivers/gpusleep builds (the kselftest lib.mk).
# 7. tools/net/ynl/ynl-regen.sh -f in the patched copy changes nothing.
# A missing debug kernel gives one SKIP line with the reason.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$REPO/build/patches-check
if [ "${1-}" = --out ]; then
	out=$2
	shift 2
fi
# what a parent make passes down (M=, -j jobserver, W=, C=) stays out
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES GNUMAKEFLAGS M O W C \
	KBUILD_OUTPUT KBUILD_EXTMOD || true

t0=$(date +%s)
say() { echo "$1 - patches: $2"; }

# The newest finished debug kernel build (never started from here: that
# is check-debug's to do, and too costly for this phase).
dk=$(ls -td "$REPO"/build/debug-kernel/*/.gpusleep-complete 2>/dev/null | head -n1)
dk=${dk%/.gpusleep-complete}
if [ -z "$dk" ] || [ ! -f "$dk/.config" ] || [ ! -d "$dk/source/" ]; then
	say ok "the series against linux-source-6.12 # SKIP no prepared debug kernel tree yet (tools/vm/debug-kernel.sh builds it)"
	exit 0
fi
ksrc=$(readlink -f "$dk/source")

rm -rf "$out"
mkdir -p "$out"
out=$(realpath "$out")
log=$out/log

# 1. the series
if ! "$REPO/tools/upstream/mkpatches.py" "$ksrc" "$out/series" > "$log" 2>&1; then
	say "not ok" "make patches against $(basename "$ksrc") (see $log)"
	exit 0
fi
mapfile -t patches < <(ls "$out"/series/*.patch)
say ok "make patches against $(basename "$ksrc"): ${#patches[@]} patches"

# 2. a clean copy of what the series touches, as a git repository
tree=$out/tree
mkdir -p "$tree"
(cd "$ksrc" && cp --parents -r MAINTAINERS Documentation/userspace-api/index.rst \
	Documentation/userspace-api/ioctl/ioctl-number.rst drivers/misc/Kconfig \
	drivers/misc/Makefile tools/testing/selftests/Makefile \
	tools/net/ynl Documentation/netlink/genetlink*.yaml \
	tools/testing/selftests/lib.mk tools/testing/selftests/kselftest_harness.h \
	tools/testing/selftests/kselftest.h tools/testing/selftests/kselftest \
	tools/testing/selftests/run_kselftest.sh scripts/subarch.include \
	"$tree"/) >> "$log" 2>&1
export GIT_AUTHOR_NAME=check GIT_AUTHOR_EMAIL=check@localhost \
	GIT_COMMITTER_NAME=check GIT_COMMITTER_EMAIL=check@localhost
git -C "$tree" init -q && git -C "$tree" add -A &&
	git -C "$tree" commit -q -m "linux-source-6.12 (the files the series touches)" >> "$log" 2>&1
base=$(git -C "$tree" rev-parse HEAD 2>/dev/null)
if git -C "$tree" am -q "${patches[@]}" >> "$log" 2>&1; then
	say ok "git am of the series onto $(basename "$ksrc")"
else
	say "not ok" "git am of the series onto $(basename "$ksrc") (see $log)"
	git -C "$tree" am --abort > /dev/null 2>&1
	exit 0
fi

echo "# patches: applied at $(($(date +%s) - t0)) s" >> "$log"
# 2b. the ioctl range registered: its row in ioctl-number.rst, in the
# table's columns, covering every command the uAPI header defines
if why=$("$REPO/tools/upstream/check_ioctl_number.py" \
	"$tree/Documentation/userspace-api/ioctl/ioctl-number.rst" \
	"$tree/include/uapi/linux/gpusleep.h" 2>&1); then
	say ok "ioctl-number.rst registers 0xBC 00-3F (gpusleep.h), in the table's columns, every command inside"
else
	say "not ok" "ioctl-number.rst registers the ioctl range"
	echo "$why" | head -n 10 | sed 's/^/#   /'
fi
# 3. checkpatch --strict, the tree's own (--no-tree: the copy is partial);
# in the background, beside the builds, read after them
for p in "${patches[@]}"; do
	name=$(basename "$p")
	perl "$ksrc/scripts/checkpatch.pl" --no-tree --strict --show-types "$p" \
		> "$out/checkpatch-${name%.patch}.log" 2>&1
done &
checkpatch_pid=$!

# 4. every prefix builds. The driver, as a module against the prepared
# debug kernel: its own Makefile (obj-$(CONFIG_GPUSLEEP)), the uAPI headers
# of the patched copy.
kbuild() {	# kbuild LOG CONFIG_GPUSLEEP-value [targets...]
	local l=$1 v=$2
	shift 2
	make -C "$dk" M="$tree/drivers/misc/gpusleep" CONFIG_GPUSLEEP="$v" \
		KCFLAGS="-I$tree/include -I$tree/include/uapi" W=1 C=1 -j2 "$@" > "$l" 2>&1 &&
		! grep -E '(warning|error):' "$l" > /dev/null
}
mapfile -t commits < <(git -C "$tree" rev-list --reverse "$base..HEAD")
n=${#commits[@]}
for k in $(seq 1 "$n"); do
	git -C "$tree" checkout -q "${commits[$((k - 1))]}" 2>> "$log"
	why=""
	for h in "$tree"/include/uapi/linux/gpusleep*.h; do
		[ -f "$h" ] || continue
		printf '#include <%s>\nint main(void) { return 0; }\n' "linux/$(basename "$h")" |
			cc -std=gnu11 -Wall -Wextra -Werror -isystem "$tree/include/uapi" \
			-x c -o /dev/null - >> "$log" 2>&1 || why="$why $(basename "$h") does not compile;"
	done
	what="uAPI headers"
	drv=$(git -C "$tree" rev-parse -q --verify "HEAD:drivers/misc/gpusleep")
	if [ -n "$drv" ] && [ "$drv" = "${built-}" ]; then
		what="uAPI headers, drivers/misc/gpusleep/ (as built after patch $built_at)"
	elif [ -n "$drv" ]; then
		what="uAPI headers, drivers/misc/gpusleep/ (module, W=1 C=1)"
		if kbuild "$out/build-$k.log" m modules; then
			built=$drv built_at=$k
		else
			why="$why the driver (see $out/build-$k.log);"
		fi
	fi
	echo "# patches: prefix $k done at $(($(date +%s) - t0)) s" >> "$log"
	if [ -z "$why" ]; then
		say ok "patches 1-$k of $n build: $what"
	else
		say "not ok" "patches 1-$k of $n build:$why"
		grep -E '(warning|error):' "$out/build-$k.log" 2>/dev/null | head -n 10 | sed 's/^/#   /'
	fi
done

echo "# patches: prefixes done at $(($(date +%s) - t0)) s" >> "$log"
# 5. built in: the same objects, compiled as part of vmlinux would be
objs=$(sed -n '/^gpusleep-y :=/,/[^\\]$/p' "$tree/drivers/misc/gpusleep/Makefile" |
	sed 's/^gpusleep-y :=//; s/\\//' | tr -s ' \t\n' ' ')
make -C "$dk" M="$tree/drivers/misc/gpusleep" clean > /dev/null 2>&1
# shellcheck disable=SC2086 # one target per object
if kbuild "$out/builtin.log" y $objs && grep -q ' CC ' "$out/builtin.log" &&
	! grep -E '\-DMODULE' "$tree"/drivers/misc/gpusleep/.main.o.cmd > /dev/null; then
	say ok "drivers/misc/gpusleep/ built in (CONFIG_GPUSLEEP=y objects, W=1 C=1; no vmlinux linked)"
else
	say "not ok" "drivers/misc/gpusleep/ built in (see $out/builtin.log)"
	grep -E '(warning|error):' "$out/builtin.log" | head -n 10 | sed 's/^/#   /'
fi

echo "# patches: built-in done at $(($(date +%s) - t0)) s" >> "$log"
# 6. the kselftests build in their place, by lib.mk (the uAPI headers of
# the series standing in for `make headers`)
mkdir -p "$out/hdr/linux"
cp "$tree"/include/uapi/linux/gpusleep*.h "$out/hdr/linux/"
if make -C "$tree/tools/testing/selftests/drivers/gpusleep" -j2 \
	KHDR_INCLUDES="-isystem $out/hdr" > "$out/selftests.log" 2>&1 &&
	! grep -E '(warning|error):' "$out/selftests.log" > /dev/null; then
	say ok "tools/testing/selftests/drivers/gpusleep builds (lib.mk)"
	# installed as the kselftest runner wants them: the debug kernel's
	# VM suite runs a few through run_kselftest.sh
	# (tests/vm/ksft_runner_test.sh)
	rm -rf "$out/ksft"
	if make -C "$tree/tools/testing/selftests" TARGETS=drivers/gpusleep \
		KHDR_INCLUDES="-isystem $out/hdr" INSTALL_PATH="$out/ksft" \
		install > "$out/selftests-install.log" 2>&1 &&
		[ -x "$out/ksft/run_kselftest.sh" ]; then
		say ok "make -C tools/testing/selftests TARGETS=drivers/gpusleep install"
	else
		say "not ok" "make -C tools/testing/selftests TARGETS=drivers/gpusleep install (see $out/selftests-install.log)"
	fi
else
	say "not ok" "tools/testing/selftests/drivers/gpusleep builds (see $out/selftests.log)"
	grep -E '(warning|error):' "$out/selftests.log" | head -n 10 | sed 's/^/#   /'
fi
echo "# patches: selftests done at $(($(date +%s) - t0)) s" >> "$log"

wait "$checkpatch_pid"
echo "# patches: checkpatch done at $(($(date +%s) - t0)) s" >> "$log"
for p in "${patches[@]}"; do
	name=$(basename "$p")
	cp_log=$out/checkpatch-${name%.patch}.log
	tot=$(grep -E '^total: ' "$cp_log" | tail -n1)
	if [[ $name == *selftests* ]]; then
		# userspace test programs: reported, not yet held to it
		if [[ $tot == "total: 0 errors, 0 warnings, 0 checks"* ]]; then
			say ok "checkpatch --strict $name"
		else
			say ok "checkpatch --strict $name # SKIP the kselftests (tests/vm/*.c) are not checkpatch-clean yet: ${tot#total: } (see $cp_log)"
		fi
	elif [[ $tot == "total: 0 errors, 0 warnings, 0 checks"* ]]; then
		say ok "checkpatch --strict $name"
	else
		say "not ok" "checkpatch --strict $name: ${tot#total: } (see $cp_log)"
		grep -E '^(ERROR|WARNING|CHECK)' "$cp_log" | head -n 10 | sed 's/^/#   /'
	fi
done


# 7. the generated files are what the tree's generator makes of the spec
git -C "$tree" checkout -q -f "${commits[$((n - 1))]}" 2>/dev/null
git -C "$tree" clean -qfdx -e '*.patch' > /dev/null 2>&1
if (cd "$tree" && timeout 300 tools/net/ynl/ynl-regen.sh -f) > "$out/regen.log" 2>&1 &&
	[ -z "$(git -C "$tree" status --porcelain)" ]; then
	say ok "tools/net/ynl/ynl-regen.sh -f in the patched tree changes nothing"
else
	say "not ok" "tools/net/ynl/ynl-regen.sh -f in the patched tree (see $out/regen.log)"
	git -C "$tree" status --porcelain | head -n 5 | sed 's/^/#   /'
fi
echo "# patches: $(($(date +%s) - t0)) s"
