#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The first hour's traps, closed (README, Quickstart): a tree under /tmp,
# which the test VM cannot see, is refused by make check, make demo and
# make vm-shell before anything is built, with where to clone instead; and
# make demo installs only the demo's packages (tools/deps.sh --demo), none
# of those only make check needs. Prints TAP.
cd "$(dirname "$0")/../.." || exit 1
REPO=$PWD
echo "TAP version 13"
echo "1..4"
n=0
verdict() {
	# $1: 0 when it held, $2: name, $3: what to show otherwise
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n $2"
	else
		echo "not ok $n $2"
		printf '%s\n' "$3" | sed 's/^/# /'
	fi
}

# A tree under /tmp: make is run there (its CURDIR), on this Makefile.
tmp=$(mktemp -d /tmp/gpusleep-quickstart.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
for goal in check demo; do
	out=$(cd "$tmp" && make -f "$REPO/Makefile" "$goal" 2>&1)
	rc=$?
	left=$(ls -A "$tmp")
	[ "$rc" != 0 ] && [ -z "$left" ] &&
		printf '%s' "$out" | grep -q 'under /tmp' &&
		printf '%s' "$out" | grep -q "Clone it elsewhere"
	verdict $? "make $goal in a tree under /tmp stops before building, saying where to clone" \
		"status $rc; left in the tree: ${left:-nothing}; output: $out"
done

demo=" $(tools/deps.sh --demo --list) "
full=" $(tools/deps.sh --list) "
bad=""
for p in prometheus prometheus-node-exporter dkms linux-source-6.1; do
	case "$demo" in *" $p "*) bad="$bad $p" ;; esac
done
[ -z "$bad" ]
verdict $? "the demo's packages leave out what only make check needs" "in the demo set:$bad"
missing=""
for p in $demo prometheus dkms linux-source-6.1 sparse; do
	case "$full" in *" $p "*) ;; *) missing="$missing $p" ;; esac
done
[ -z "$missing" ]
verdict $? "make check's packages are the demo's and the rest" "not in the full set:$missing"
