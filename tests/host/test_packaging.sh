#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# What packaging/ ships for monitoring: the Prometheus rules (promtool
# check rules, then their unit tests, gpusleep-rules.test.yml) and the
# systemd unit of the exporter (filled in as `make install` does, then
# systemd-analyze verify). Prints TAP.
cd "$(dirname "$0")/../.." || exit 1
D=packaging/prometheus
echo "TAP version 13"
echo "1..3"
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
skip() {
	n=$((n + 1))
	echo "ok $n $1 # SKIP $2"
}
if command -v promtool > /dev/null; then
	run "promtool check rules" promtool check rules $D/gpusleep-rules.yml
	run "promtool test rules" promtool test rules $D/gpusleep-rules.test.yml
else
	skip "promtool check rules" "promtool missing (package prometheus)"
	skip "promtool test rules" "promtool missing (package prometheus)"
fi
if command -v systemd-analyze > /dev/null; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	# the unit as make install writes it, with this tree's gpusleepctl
	sed -e "s|@BINDIR@|$PWD/build/bin|g" -e "s|@TEXTFILEDIR@|$tmp/textfile|g" \
		packaging/gpusleep-exporter.service.in > "$tmp/gpusleep-exporter.service"
	run "systemd-analyze verify gpusleep-exporter.service" \
		systemd-analyze verify --man=no "$tmp/gpusleep-exporter.service"
else
	skip "systemd-analyze verify gpusleep-exporter.service" "no systemd-analyze"
fi
