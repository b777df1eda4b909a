#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# tools/pytools.sh: the PyPI tools of the checks (auditwheel,
# kubernetes-validate), pinned in tools/pytools/requirements.txt, in a
# venv of their own: build/pytools/venv, made (once per version of that
# file) with Debian's python3 and pip, from PyPI, the files checked
# against their pinned sha256; nothing is installed into the system. The
# downloads stay in build/pytools/cache, so making the venv again (a
# changed pin, a cleaned venv) downloads only what changed.
#
# Usage: tools/pytools.sh        prints the venv's bin directory
# Exit status 1, saying why, when the venv cannot be made (no network).
set -eu

REPO=$(cd "$(dirname "$0")/.." && pwd)
REQ=$REPO/tools/pytools/requirements.txt
TOP=$REPO/build/pytools
V=$TOP/venv
PY=${PYTHON:-/usr/bin/python3}

mkdir -p "$TOP"
exec 9> "$TOP/.lock"
flock 9
key=$({ cat "$REQ"; "$PY" --version; } 2>&1 | sha256sum | cut -c1-16)
if [ "$(cat "$V/.key" 2>/dev/null)" != "$key" ]; then
	rm -rf "$V"
	"$PY" -m venv --without-pip "$V"
	if ! PIP_CACHE_DIR=$TOP/cache "$PY" -m pip --python "$V/bin/python" \
		install -q --disable-pip-version-check --require-hashes \
		--no-deps --only-binary :all: -r "$REQ" > "$TOP/install.log" 2>&1; then
		echo "pytools: could not install $REQ into $V (PyPI unreachable? see $TOP/install.log):" >&2
		tail -n 5 "$TOP/install.log" >&2
		rm -rf "$V"
		exit 1
	fi
	echo "$key" > "$V/.key"
fi
echo "$V/bin"
