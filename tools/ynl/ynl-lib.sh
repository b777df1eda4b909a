# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# Sourced by tools/ynl/build.sh and tools/ynl/nlgen.sh: where the kernel's
# YNL generator is, and the minimal tree it needs to run on our spec.
#
# ynl_setup [KSRC] sets KSRC (the kernel source tree: the argument, else
# $GPUSLEEP_YNL_SRC, else the newest tree under build/kernels/*/src and
# build/debug-kernel/src-*) and GEN (its ynl-gen-c), or returns 1 with
# YNL_WHY saying why not.
# ynl_tree DIR copies the spec and the tree's schema into DIR as a minimal
# kernel tree and sets TSPEC to the spec there.

YNL_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
YNL_SPEC=$YNL_REPO/Documentation/netlink/specs/gpusleep.yaml

ynl_gen_of() {
	local g
	for g in tools/net/ynl/pyynl/ynl_gen_c.py tools/net/ynl/ynl-gen-c.py; do
		[ -f "$1/$g" ] && { echo "$1/$g"; return 0; }
	done
	return 1
}

ynl_setup() {
	local d
	KSRC=${1:-${GPUSLEEP_YNL_SRC:-}}
	if [ -z "$KSRC" ]; then
		for d in $(ls -d "$YNL_REPO"/build/kernels/*/src \
			   "$YNL_REPO"/build/debug-kernel/src-* 2>/dev/null | sort -rV); do
			# a debug-kernel tree only once unpacked in full
			case $d in */debug-kernel/src-*)
				[ -f "$d/.gpusleep-extracted" ] || continue ;;
			esac
			ynl_gen_of "$d" >/dev/null && { KSRC=$d; break; }
		done
	fi
	if [ -z "$KSRC" ] || ! GEN=$(ynl_gen_of "$KSRC"); then
		YNL_WHY="no kernel source with tools/net/ynl (set GPUSLEEP_YNL_SRC or run tools/deps.sh --kernels)"
		return 1
	fi
}

# The generator finds the schema beside the spec's directory and the tree's
# root by a MAINTAINERS file (it loops forever without one): give it a
# minimal tree. The root-relative spec path is what the generated files'
# "auto-generated from" line names, as in the kernel's own tree.
ynl_tree() {
	mkdir -p "$1/Documentation/netlink/specs"
	: > "$1/MAINTAINERS"
	cp "$KSRC/Documentation/netlink/genetlink-legacy.yaml" "$1/Documentation/netlink/"
	cp "$YNL_SPEC" "$1/Documentation/netlink/specs/"
	TSPEC=$1/Documentation/netlink/specs/gpusleep.yaml
}
