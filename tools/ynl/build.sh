#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Generate the YNL user library of the gpusleep netlink family with the
# kernel's own generator (ynl-gen-c --mode user) and build it, libynl and
# the C client tools/ynl/gpusleep-ynl-client.c, all with -Werror.
#
#   tools/ynl/build.sh OUTDIR [KSRC]
#
# KSRC is a kernel source tree with tools/net/ynl (6.12 layout or the
# pyynl one of 6.14 and later); without it, $GPUSLEEP_YNL_SRC or the newest
# tree under build/kernels/*/src and build/debug-kernel/src-*. Exits 0 with
# "SKIP: why" on stdout when there is no such tree; anything the generator
# or the compiler prints is a failure.
set -euo pipefail
# shellcheck source=tools/ynl/ynl-lib.sh
. "$(dirname "$0")/ynl-lib.sh"
REPO=$YNL_REPO
OUT=${1:?usage: build.sh OUTDIR [KSRC]}
CC=${CC:-cc}

if ! ynl_setup "${2:-}"; then
	echo "SKIP: $YNL_WHY"
	exit 0
fi
ynl_tree "$OUT/tree"

for m in header source; do
	ext=h; [ $m = source ] && ext=c
	timeout 120 python3 "$GEN" --mode user --$m --spec "$TSPEC" \
		-o "$OUT/gpusleep-user.$ext" 2>&1
done

# The kernel's generated code has unused callback parameters by design
# (tools/net/ynl uses -Wno-unused-parameter too); the client has none.
LIBFLAGS="-std=gnu11 -O2 -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow"
INC="-I$KSRC/tools/net/ynl/lib -I$OUT -I$REPO/uapi"
$CC $LIBFLAGS $INC -c -o "$OUT/ynl.o" "$KSRC/tools/net/ynl/lib/ynl.c"
$CC $LIBFLAGS $INC -c -o "$OUT/gpusleep-user.o" "$OUT/gpusleep-user.c"
ar rcs "$OUT/libynl-gpusleep.a" "$OUT/gpusleep-user.o" "$OUT/ynl.o"
$CC -std=gnu11 -O2 -Wall -Wextra -Werror $INC -o "$OUT/gpusleep-ynl-client" \
	"$REPO/tools/ynl/gpusleep-ynl-client.c" "$OUT/libynl-gpusleep.a"
echo "$KSRC" > "$OUT/ksrc"
