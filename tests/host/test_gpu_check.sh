#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The GPU check's dry run (bench/gpu/check.py --dry-run): the whole
# sequence of the check (regions' MemPools with expandable segments on,
# graphs captured with a foreign graph pool, work in flight at the release,
# two cycles at sleep levels 1 and 2, verified free, a second allocation,
# resume, contents, the negative control in a subprocess) over the
# stand-in libcuda and the stand-in torch (tests/host/fake_torch), without
# a GPU, on the capacity of the devices it is meant for: an H100's and an
# H200's (--stand-in h100|h200: the stand-in's device memory as the
# driver reports theirs, the dry run's GiB being MiB), with the sizes it
# picks for them by default. Its figures mean nothing; what they are made
# of is checked in the JSON it writes (the sizes fit the device; a rate
# counts the bytes copied, none when nothing was; every rate is recorded
# with its threshold), and a signal mid-run still writes the JSON.
cd "$(dirname "$0")/../.." || exit 1
fake=build/tests/host/fakecuda/libcuda.so.1
if [ ! -f "$fake" ]; then
	echo "ok 1 - gpu check dry run # SKIP no $fake (built with CUDA=0)"
	exit 0
fi
mkdir -p build/bench/gpu
n=0
st=0
t() {	# t WHAT STATUS [FILE]
	n=$((n + 1))
	if [ "$2" = 0 ]; then echo "ok $n - $1"; else
		echo "not ok $n - $1"
		st=1
		[ -n "${3-}" ] && [ -f "$3" ] && tail -n 25 "$3" | sed 's/^/#   /'
	fi
}
for gpu in h100 h200; do
	json=build/bench/gpu/check-dry-$gpu.json
	log=build/bench/gpu/check-dry-$gpu.log
	rm -f "$json"
	/usr/bin/python3 -B bench/gpu/check.py --dry-run --lib "$fake" \
		--stand-in $gpu --json "$json" > "$log" 2>&1
	t "$gpu: the check runs to its end on the stand-in, every check passed" $? "$log"
	# the figures' own checks
	out=$(/usr/bin/python3 - "$json" <<'PY' 2>&1
import json, sys
fig = json.load(open(sys.argv[1]))
bad = []
plan = fig.get("plan", {})
need = sum(plan.get(k, 0) for k in ("weights", "kv", "hot"))
if not plan or need > plan.get("free", 0):
    bad.append(f"the sizes ({plan}) do not fit the device's free memory")
l1, l2 = fig.get("level1", {}), fig.get("level2", {})
w1 = l1.get("release", {}).get("per_tag", {}).get("weights", {})
if not 0 < w1.get("copied_bytes", 0) < w1.get("bytes", 0):
    bad.append("level 1 backup should count the bytes copied "
               f"({w1.get('copied_bytes')} of {w1.get('bytes')})")
if l2.get("restore_gbps", 0) is not None:
    bad.append(f"level 2 restores nothing: restore_gbps "
               f"{l2.get('restore_gbps')!r}")
# issue 34 items 5 and 6: what is left by class, the backup verified
for lv, l in (("level1", l1), ("level2", l2)):
    left = l.get("left", {})
    if set(left) != {"tags", "torch", "graphs", "other", "process",
                     "source"}:
        bad.append(f"{lv}: what is left by class not recorded: {left}")
if not l1.get("verify_backup", {}).get("bytes") or \
        l1.get("verify_restore", {}).get("bytes") != \
        l1["verify_backup"]["bytes"]:
    bad.append("level 1: the backup not checksummed and checked: "
               f"{l1.get('verify_backup')} {l1.get('verify_restore')}")
rates = fig.get("rates", {})
for k in ("kv_release_ms_per_gib", "backup_of_pinned_d2h",
          "restore_of_pinned_h2d", "wake_100gib_s"):
    r = rates.get(k)
    if not r or "value" not in r or "limit" not in r or "binding" not in r:
        bad.append(f"rate {k} not recorded with its threshold: {r}")
print("; ".join(bad) or "fine")
sys.exit(1 if bad else 0)
PY
)
	t "$gpu: the figures: sizes fit the device, rates count the bytes copied and carry their thresholds, the backup verified, what is left by class ($out)" $?
done
# a signal mid-run (as timeout(1) sends it) still writes what it has
for sig in INT TERM; do
	json=build/bench/gpu/check-dry-sig$sig.json
	log=build/bench/gpu/check-dry-sig$sig.log
	rm -f "$json"
	/usr/bin/python3 -B bench/gpu/check.py --dry-run --lib "$fake" \
		--stand-in h100 --json "$json" --selftest-signal $sig > "$log" 2>&1
	rc=$?
	[ $rc != 0 ] && /usr/bin/python3 -c '
import json, sys
fig = json.load(open(sys.argv[1]))
assert fig.get("interrupted") == "SIG" + sys.argv[2], fig.get("interrupted")
assert "level1" in fig and "plan" in fig, sorted(fig)
' "$json" "$sig" >> "$log" 2>&1
	t "SIG$sig mid-run: the JSON is written, saying so, with what was measured" $? "$log"
done
# PyTorch's cudaMallocAsync backend has no MemPools (MemPool() raises):
# detected first, refused saying so and what to do, nothing allocated
log=build/bench/gpu/check-dry-async.log
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync /usr/bin/python3 -B \
	bench/gpu/check.py --dry-run --lib "$fake" --stand-in h100 > "$log" 2>&1
rc=$?
[ $rc != 0 ] && head -n 3 "$log" | grep -q '^not ok 1 - .*cudaMallocAsync.*backend:native' &&
	! grep -q Traceback "$log"
t "backend:cudaMallocAsync: refused first, saying why and what to set" $? "$log"
echo "1..$n"
exit $st
