#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The shipped Prometheus rules: promtool check rules, then their unit tests
# (packaging/prometheus/gpusleep-rules.test.yml). Prints TAP.
cd "$(dirname "$0")/../.." || exit 1
D=packaging/prometheus
echo "TAP version 13"
if ! command -v promtool > /dev/null; then
	echo "1..0 # SKIP promtool missing (Debian package prometheus; tools/deps.sh)"
	exit 0
fi
echo "1..2"
n=0
run() {
	name=$1
	shift
	n=$((n + 1))
	if out=$("$@" 2>&1); then
		echo "ok $n $name"
	else
		echo "not ok $n $name"
		printf '%s\n' "$out" | sed 's/^/# /'
	fi
}
run "promtool check rules" promtool check rules $D/gpusleep-rules.yml
run "promtool test rules" promtool test rules $D/gpusleep-rules.test.yml
