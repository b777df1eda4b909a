#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The kernel side of the netlink family, generated from the spec by the
# kernel's own generator (ynl-gen-c, as tools/net/ynl/ynl-regen.sh runs it
# in the kernel tree):
#   kmod/gpusleep-nl-gen.c   policies and the split-ops table
#   kmod/gpusleep-nl-gen.h   the handlers' prototypes, the op table, the
#                            multicast group ids
#   uapi/linux/gpusleep_netlink.h   the uAPI header (the spec's uapi-header)
#
#   tools/ynl/nlgen.sh [--check | --out DIR] [KSRC]
#
# Without --check, writes those files (`make nlgen`). With --out DIR, writes
# them into DIR instead (tools/upstream/mkpatches.py: a series carries what
# its own tree's generator makes of the spec). With --check, writes
# nothing and fails, with a diff, when a committed file differs from what
# the generator makes of the spec. The generator is pinned to one kernel's
# (the generated text changes between kernels): KSRC, else
# $GPUSLEEP_NLGEN_SRC, else linux-source-6.12 as tools/vm/debug-kernel.sh
# unpacked it under build/debug-kernel/src-6.12*. Exits 0 with "SKIP: why"
# on stdout when there is no such tree.
set -euo pipefail
# shellcheck source=tools/ynl/ynl-lib.sh
. "$(dirname "$0")/ynl-lib.sh"

check=
outdir=
case "${1-}" in
--check) check=1; shift ;;
--out) outdir=$2; shift 2 ;;
esac
# (a tree tools/vm/debug-kernel.sh has unpacked in full, not one it is
# unpacking now, in the background of make check)
# (none yet is no error: pipefail would make the failing ls one)
src=${1:-${GPUSLEEP_NLGEN_SRC:-$({ ls -d "$YNL_REPO"/build/debug-kernel/src-6.12*/.gpusleep-extracted \
	2>/dev/null || true; } | sort -V | tail -n1)}}
src=${src%/.gpusleep-extracted}
if [ -z "$src" ] || ! ynl_setup "$src"; then
	echo "SKIP: no linux-source-6.12 tree with tools/net/ynl (tools/vm/debug-kernel.sh unpacks one; or set GPUSLEEP_NLGEN_SRC)"
	exit 0
fi

tmp=$(mktemp -d "$YNL_REPO/build/.nlgen.XXXXXX" 2>/dev/null ||
	{ mkdir -p "$YNL_REPO/build" && mktemp -d "$YNL_REPO/build/.nlgen.XXXXXX"; })
trap 'rm -rf "$tmp"' EXIT
ynl_tree "$tmp/tree"

# file (relative to the repo) and the generator's mode for it
files=(kmod/gpusleep-nl-gen.c kmod/gpusleep-nl-gen.h uapi/linux/gpusleep_netlink.h)
modes=("kernel --source" "kernel --header" "uapi --header")
status=0
for i in "${!files[@]}"; do
	f=${files[$i]}
	# shellcheck disable=SC2086 # the mode is two words
	timeout 120 python3 "$GEN" --mode ${modes[$i]} --spec "$TSPEC" \
		-o "$tmp/$(basename "$f")"
	if [ -n "$outdir" ]; then
		mkdir -p "$outdir"
		cp "$tmp/$(basename "$f")" "$outdir/"
	elif [ -n "$check" ]; then
		if ! diff -u "$YNL_REPO/$f" "$tmp/$(basename "$f")"; then
			echo "$f differs from what ${GEN#"$KSRC"/} makes of the spec: run make nlgen" >&2
			status=1
		fi
	elif ! cmp -s "$tmp/$(basename "$f")" "$YNL_REPO/$f"; then
		cp "$tmp/$(basename "$f")" "$YNL_REPO/$f"
		echo "  GEN     $f"
	fi
done
exit $status
