#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# tools/vm/shell.sh: the shell `make vm-shell` gives you, run inside the VM
# by tools/vm/run.sh --interactive with gpusleep.ko loaded. Puts this
# tree's gpusleepctl (build/bin) on PATH and its Python package
# (user/python, which finds build/lib/libgpusleep.so.0 by itself) on
# PYTHONPATH, says what is there, and starts an interactive shell in the
# repository. Leaving it (exit, Ctrl-D) stops what you left running there
# (background jobs: tools/vm/guest.sh names each), unloads the module and
# powers the VM off.

REPO=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$REPO/build/bin:$REPO/build/demo:$PATH"
export PYTHONPATH="$REPO/user/python${PYTHONPATH:+:$PYTHONPATH}"
export PS1='gpusleep-vm# '
cd "$REPO" || exit 1

cat <<EOF
gpusleep VM: kernel $(uname -r), gpusleep.ko loaded ($(ls /dev/gpusleep 2>/dev/null || echo 'no /dev/gpusleep!')).
  gpusleepctl list                     gpusleepctl, from build/bin
  python3 -c 'import gpusleep'         the Python package, from user/python
  engine --help, trainer --help        the demo's programs (sh tools/demo.sh runs them)
The host's files are read-only here: write under /tmp, or under
$GPUSLEEP_OUT to keep a file. exit or Ctrl-D stops what you left
running (background jobs), unloads the module and powers the VM off;
Ctrl-A X stops it at once.
EOF
if command -v bash > /dev/null; then
	exec bash --norc --noprofile -i
fi
exec sh -i
