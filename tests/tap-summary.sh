#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tests/tap-summary.sh [FILE...]: read TAP result lines (stdin or FILEs),
# print them numbered 1..N in order, pass "#" comments through, turn any
# other text into "# " comments, and end with exactly one summary line:
#   N passed, N failed[, N skipped]
# "ok ... # SKIP ..." counts as skipped, "not ok" as failed. Exit status 1
# when any test failed or when there was no test at all, else 0.

n=0
passed=0
failed=0
skipped=0
re='^(not ok|ok)( +[0-9]+)?( +-)?( +(.*))?$'

while IFS= read -r line || [ -n "$line" ]; do
	if [[ $line =~ $re ]]; then
		verdict=${BASH_REMATCH[1]}
		desc=${BASH_REMATCH[5]}
		n=$((n + 1))
		if [ "$verdict" = "not ok" ]; then
			failed=$((failed + 1))
		elif [[ $desc =~ \#[[:space:]]*[Ss][Kk][Ii][Pp] ]]; then
			skipped=$((skipped + 1))
		else
			passed=$((passed + 1))
		fi
		echo "$verdict $n${desc:+ $desc}"
	elif [[ $line =~ ^TAP\ version || $line =~ ^1\.\.[0-9]+ ]]; then
		continue
	elif [[ $line =~ ^# || -z $line ]]; then
		echo "$line"
	else
		echo "# $line"
	fi
done < <(cat "$@")

summary="$passed passed, $failed failed"
[ "$skipped" -gt 0 ] && summary="$summary, $skipped skipped"
echo "$summary"
[ "$failed" -eq 0 ] && [ "$n" -gt 0 ]
