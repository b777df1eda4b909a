#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# tools/demo.sh: the RL loop end to end, as a user sees it (docs/demo.md).
# `make demo` runs it inside the VM with gpusleep.ko loaded; it needs
# /dev/gpusleep and the binaries `make` builds.
#
# Usage: tools/demo.sh [--weights-mib N] [--kv-mib N] [--steps N]
#                      [--abort-step N] [--bucket-mib N] [--serve N]
#                      [--max-inflight N] [--timeout-s S] [--json]
#                      [--fault stale-prefix|bad-push] [--lease-steps N]
#   (through make: make demo DEMO_ARGS="--weights-mib 128 --json")
#
# Starts, in order: the engine (build/demo/engine: scheduler, gs_agent on
# the host backend, weights BACKUP, kv_cache DISCARD), the watcher
# (`gpusleepctl -j monitor -t`, when built), and the trainer
# (build/demo/trainer), which drives the steps and prints the timeline. The
# watcher's events are shown as they happen and checked at the end; the
# trainer runs `gpusleepctl status` before the engine quits. A second
# watcher (`gpusleepctl -j monitor --timeline`) records each operation's
# steps for the picture.
# Then the second part (docs/arbiter.md): two engines, policy (priority 0)
# and reward (priority -10), and a trainer (tools/demo/leases.py) that
# takes the memory it needs with gpusleep.acquire() for each of its
# --lease-steps steps (default 2; 0: no second part) and gives it back,
# waking both engines; each then checks its weights.
#
# Environment: BUILD (default REPO/build), GPUSLEEPCTL (default
# BUILD/bin/gpusleepctl; when it is not there the demo runs without the
# watcher and the status, and says so).
# Files, in $GPUSLEEP_OUT (the VM's results dir, build/vm/demo) or a fresh
# directory under /tmp: engine.log, events.jsonl, timeline.jsonl (each
# operation's steps), monitor.err, rows.jsonl (the trainer's timeline rows),
# policy.log, reward.log and leases.jsonl (the second part's rows)
# and demo.svg (tools/demo/plot.py: the engine's and the trainer's memory
# over the steps, the release timeline and the steps of each operation;
# written when python3 is there).
# Exit status: 0 when every check passed, 1 on a mismatch, 2 on bad usage
# or a missing prerequisite.
set -u

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$REPO/build}
ENGINE=$BUILD/demo/engine
TRAINER=$BUILD/demo/trainer
CTL=${GPUSLEEPCTL:-$BUILD/bin/gpusleepctl}

ENGINE_ARGS=""
TRAINER_ARGS=""
JSON=0
LEASE_STEPS=2

note() {
	# Human notes: stdout for the table, stderr when stdout is JSON.
	if [ "$JSON" = 1 ]; then echo "demo: $*" >&2; else echo "$*"; fi
}

die() {
	echo "demo: $*" >&2
	exit 2
}

usage() {
	sed -n '/^# Usage:/,/^#   (through/s/^# \{0,1\}//p' "$0"
}

while [ $# -gt 0 ]; do
	case "$1" in
	--weights-mib|--kv-mib|--max-inflight|--fault)
		[ $# -ge 2 ] || die "$1 needs a value"
		ENGINE_ARGS="$ENGINE_ARGS $1 $2"; shift 2 ;;
	--steps|--abort-step|--bucket-mib|--serve|--timeout-s)
		[ $# -ge 2 ] || die "$1 needs a value"
		TRAINER_ARGS="$TRAINER_ARGS $1 $2"; shift 2 ;;
	--lease-steps)
		[ $# -ge 2 ] || die "$1 needs a value"
		LEASE_STEPS=$2; shift 2 ;;
	--json)
		JSON=1; TRAINER_ARGS="$TRAINER_ARGS --json"; shift ;;
	-h|--help)
		usage; exit 0 ;;
	*)
		usage >&2; die "unknown option: $1" ;;
	esac
done

[ -x "$ENGINE" ] && [ -x "$TRAINER" ] ||
	die "$ENGINE or $TRAINER missing: run make first (make demo builds them)"
[ -c /dev/gpusleep ] ||
	die "/dev/gpusleep does not exist: load gpusleep.ko first (make demo runs this script in a VM with the module loaded)"

if [ -n "${GPUSLEEP_OUT:-}" ]; then
	OUT=$GPUSLEEP_OUT
else
	OUT=$(mktemp -d /tmp/gpusleep-demo.XXXXXX) || die "mktemp failed"
fi
RUN=$(mktemp -d /tmp/gpusleep-demo-run.XXXXXX) || die "mktemp failed"
SOCK=$RUN/engine.sock
ENGINE_PID=""
MON_PID=""
VIEW_PID=""
LEASE_PIDS=""

# A watcher is subscribed once its first dump (into FILE) shows up.
subscribed() {
	i=0
	until grep -q '"event":"snapshot"' "$1" 2>/dev/null; do
		i=$((i + 1))
		if [ "$i" -gt 100 ]; then
			echo "demo: FAIL: gpusleepctl $2 printed no snapshot in 10 s:" >&2
			cat "$OUT/monitor.err" >&2
			exit 1
		fi
		sleep 0.1
	done
}

cleanup() {
	[ -n "$ENGINE_PID" ] && kill "$ENGINE_PID" 2>/dev/null
	for p in $LEASE_PIDS; do kill "$p" 2>/dev/null; done
	[ -f "$RUN/monitor.pid" ] && kill "$(cat "$RUN/monitor.pid")" 2>/dev/null
	[ -f "$RUN/timeline.pid" ] && kill "$(cat "$RUN/timeline.pid")" 2>/dev/null
	[ -n "$VIEW_PID" ] && wait "$VIEW_PID" 2>/dev/null
	rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

note "gpusleep demo: engine${ENGINE_ARGS:- (defaults)}; trainer${TRAINER_ARGS:- (defaults)}"
note "kernel $(uname -r), $(($(sed -n 's/^MemTotal: *\([0-9]*\) kB/\1/p' /proc/meminfo) / 1024)) MiB of memory, gpusleep.ko loaded"

# The engine: fills its weights and KV cache, creates the domain, listens.
"$ENGINE" --socket "$SOCK" $ENGINE_ARGS 2> "$OUT/engine.log" &
ENGINE_PID=$!
i=0
while [ ! -S "$SOCK" ]; do
	if ! kill -0 "$ENGINE_PID" 2>/dev/null; then
		echo "demo: FAIL: the engine exited before it was ready:" >&2
		sed 's/^/  /' "$OUT/engine.log" >&2
		ENGINE_PID=""
		exit 1
	fi
	i=$((i + 1))
	[ "$i" -le 3000 ] || { echo "demo: FAIL: the engine is not ready after 300 s" >&2; exit 1; }
	sleep 0.1
done

# The watcher: netlink events, saved and shown as they happen.
EVENTS_ARG=""
if [ -x "$CTL" ]; then
	(
		"$CTL" -j monitor -t 2> "$OUT/monitor.err" &
		echo $! > "$RUN/monitor.pid"
		wait
	) | tee "$OUT/events.jsonl" | if [ "$JSON" = 1 ]; then cat; else
		sed -u -n '/"event":"transition"/{
			s/^.*"domain":{"id":\([0-9]*\).*"from":"\([a-z]*\)","to":"\([a-z]*\)","op":\([0-9]*\),"released_tags":\[\([^]]*\)\]/NL \1 \4 \2 \3 [\5]/
			s/,"result":{"op":[0-9]*,"kind":"\([a-z]*\)".*"error":0,.*$/  => \1 done/
			s/,"result":{"op":[0-9]*,"kind":"\([a-z]*\)".*"error":\(-[0-9]*\),"reason":"\([a-z_]*\)".*$/  => \1 FAILED \2 \3/
			s/}$//
			s/"//g
			s/^NL \([0-9]*\) \([0-9]*\) \([a-z]*\) \([a-z]*\) /      netlink: domain \1 op \2: \3 -> \4, released /
			s/released \[\]/released -/
			p
		}'
	fi &
	VIEW_PID=$!
	subscribed "$OUT/events.jsonl" monitor
	# The steps of each operation, for the picture.
	"$CTL" -j monitor --timeline > "$OUT/timeline.jsonl" 2>> "$OUT/monitor.err" &
	echo $! > "$RUN/timeline.pid"
	subscribed "$OUT/timeline.jsonl" "monitor --timeline"
	EVENTS_ARG="--events $OUT/events.jsonl"
	STATUS_ARG="$CTL status"
	note "watcher: $CTL -j monitor -t (events in $OUT/events.jsonl)"
else
	STATUS_ARG=""
	note "watcher: $CTL is not built yet: no netlink events, no status at the end (the rest of the demo runs)"
fi
[ "$JSON" = 1 ] || echo

if [ -n "$STATUS_ARG" ]; then
	"$TRAINER" --socket "$SOCK" --engine-pid "$ENGINE_PID" $TRAINER_ARGS \
		--rows "$OUT/rows.jsonl" $EVENTS_ARG --status-cmd "$STATUS_ARG"
else
	"$TRAINER" --socket "$SOCK" --engine-pid "$ENGINE_PID" $TRAINER_ARGS \
		--rows "$OUT/rows.jsonl"
fi
status=$?

wait "$ENGINE_PID"
estatus=$?
ENGINE_PID=""
if [ "$JSON" = 0 ]; then
	echo
	echo "engine log ($OUT/engine.log):"
	sed 's/^/  /' "$OUT/engine.log"
fi
if [ "$estatus" != 0 ]; then
	echo "demo: FAIL: the engine exited with status $estatus (see $OUT/engine.log)" >&2
	[ "$status" = 0 ] && status=1
fi

# Part 2: two engines and a trainer sharing one GPU through leases.
: > "$OUT/leases.jsonl"
if [ "$LEASE_STEPS" != 0 ] && ! command -v python3 > /dev/null; then
	note "part 2 (leases) skipped: it needs python3 (gpusleep's Python package)"
elif [ "$LEASE_STEPS" != 0 ]; then
	[ "$JSON" = 1 ] || echo
	note "part 2: two engines, policy (priority 0) and reward (priority -10), and a trainer sharing one GPU through leases"
	for e in "policy 0 48" "reward -10 32"; do
		set -- $e
		"$ENGINE" --socket "$RUN/$1.sock" --name "$1" --priority "$2" \
			--weights-mib "$3" --kv-mib "$3" 2> "$OUT/$1.log" &
		LEASE_PIDS="$LEASE_PIDS $!"
	done
	for s in policy reward; do
		i=0
		until [ -S "$RUN/$s.sock" ]; do
			i=$((i + 1))
			[ "$i" -le 3000 ] || { echo "demo: FAIL: engine $s not ready after 300 s" >&2; exit 1; }
			sleep 0.1
		done
	done
	LJSON=""
	[ "$JSON" = 1 ] && LJSON="--json"
	python3 "$REPO/tools/demo/leases.py" --steps "$LEASE_STEPS" \
		--engine "policy=$RUN/policy.sock" --engine "reward=$RUN/reward.sock" \
		--rows "$OUT/leases.jsonl" $LJSON
	lstatus=$?
	# its end told the engines to quit; on a failure they may not know
	[ "$lstatus" = 0 ] || for p in $LEASE_PIDS; do kill "$p" 2>/dev/null; done
	for p in $LEASE_PIDS; do
		wait "$p" || lstatus=1
	done
	LEASE_PIDS=""
	if [ "$lstatus" != 0 ]; then
		echo "demo: FAIL: the leases part (see $OUT/policy.log, $OUT/reward.log)" >&2
		[ "$status" = 0 ] && status=1
	fi
fi

if command -v python3 > /dev/null; then
	if python3 "$REPO/tools/demo/plot.py" "$OUT/rows.jsonl" \
		"$OUT/events.jsonl" "$OUT/demo.svg" "$OUT/timeline.jsonl" \
		"$OUT/leases.jsonl"; then
		note "picture: $OUT/demo.svg (memory over the steps, release timeline, steps, leases)"
	else
		note "picture: tools/demo/plot.py failed"
	fi
fi
exit "$status"
