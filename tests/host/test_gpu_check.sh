#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The GPU check's dry run (bench/gpu/check.py --dry-run): the whole
# sequence of the check (regions' MemPools with expandable segments on,
# graphs captured with a foreign graph pool, work in flight at the release,
# two cycles at sleep levels 1 and 2, verified free, a second allocation,
# resume, contents, the negative control in a subprocess) over the
# stand-in libcuda and the stand-in torch (tests/host/fake_torch), without
# a GPU. Its figures mean nothing; what they are made of is checked in the
# JSON it writes (a rate counts the bytes copied, none when nothing was).
cd "$(dirname "$0")/../.." || exit 1
fake=build/tests/host/fakecuda/libcuda.so.1
if [ ! -f "$fake" ]; then
	echo "ok 1 - gpu check dry run # SKIP no $fake (built with CUDA=0)"
	exit 0
fi
mkdir -p build/bench/gpu
json=build/bench/gpu/check-dry.json
rm -f "$json"
# one plan, at the end
/usr/bin/python3 -B bench/gpu/check.py --dry-run --lib "$fake" --json "$json" |
	grep -v '^1\.\.'
st=${PIPESTATUS[0]}
# the figures' own checks, after the check's TAP (numbered on)
/usr/bin/python3 - "$json" <<'PY' || st=1
import json, sys
n = int(open(sys.argv[1]).read() and json.load(open(sys.argv[1]))["checks"])
fig = json.load(open(sys.argv[1]))
def t(cond, what):
    global n
    n += 1
    print(f"{'ok' if cond else 'not ok'} {n} - figures: {what}")
    return cond
ok = True
l1, l2 = fig.get("level1", {}), fig.get("level2", {})
w1 = l1.get("release", {}).get("per_tag", {}).get("weights", {})
ok &= t(w1.get("copied_bytes", 0) > 0 and
        w1.get("copied_bytes", 0) < w1.get("bytes", 0),
        "level 1 backup counts the bytes copied, not the chunks' size "
        f"({w1.get('copied_bytes')} of {w1.get('bytes')})")
ok &= t(l2.get("restore_gbps", 0) is None,
        "level 2 restores nothing: no restore rate "
        f"(restore_gbps {l2.get('restore_gbps')!r})")
print(f"1..{n}")
sys.exit(0 if ok else 1)
PY
exit $st
