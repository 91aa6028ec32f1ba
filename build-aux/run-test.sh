#!/bin/sh
# SPDX-License-Identifier: MIT
# run-test.sh - run one test program under a time bound and normalise its TAP.
#
# usage: run-test.sh [--no-tap] PROGRAM [ARG...]
#
# The program is killed after $TPE_TEST_TIMEOUT seconds (default 300) when
# timeout(1) is available. For slow build machines, TPE_TEST_TIME_SCALE, a
# whole number from 1 to 1000 (anything else counts as 1), multiplies this
# bound and the one each test binary sets itself (tu_time_bound in
# tests/helpers.h, 120 seconds), so the outer bound stays the larger.
#
# The program's standard output is rewritten for automake's
# tap-driver.sh: cmocka prints one "1..N" plan per test group and reports a
# skipped case as "not ok N # SKIP", which the driver would count as a
# failure. Here the results are numbered across groups, "not ok N # SKIP"
# becomes "ok N # SKIP", and one plan, the sum of the program's plans, is
# printed at the end: the driver still reports a program that printed no
# plan, or ran fewer or more cases than it planned, as an ERROR.
# With --no-tap the output is passed through unchanged.

tap=yes
if test "x$1" = "x--no-tap"; then
	tap=no
	shift
fi
if test $# -eq 0; then
	echo "usage: $0 [--no-tap] PROGRAM [ARG...]" >&2
	exit 99
fi

scale=${TPE_TEST_TIME_SCALE:-1}
case $scale in
[1-9] | [1-9][0-9] | [1-9][0-9][0-9] | 1000) ;;
*) scale=1 ;;
esac
secs=$((${TPE_TEST_TIMEOUT:-300} * scale))
if test -z "${TIMEOUT+set}"; then
	TIMEOUT=timeout
fi
if test -n "$TIMEOUT" && "$TIMEOUT" --version >/dev/null 2>&1; then
	set -- "$TIMEOUT" -k 10 "$secs" "$@"
fi

if test $tap = no; then
	exec "$@"
fi

normalize='
function out(s) { print s; fflush() }
/^1\.\.[0-9]+/ {
	plans++
	planned += substr($1, 4)
	if ($0 ~ /#[ \t]*[Ss][Kk][Ii][Pp]/)
		skip_plan = $0
	next
}
/^not ok [0-9]+[ \t]*#[ \t]*SKIP/ {
	sub(/^not ok [0-9]+/, "ok " ++n)
	out($0)
	next
}
/^not ok [0-9]+/ { sub(/^not ok [0-9]+/, "not ok " ++n); out($0); next }
/^ok [0-9]+/ { sub(/^ok [0-9]+/, "ok " ++n); out($0); next }
{ out($0) }
END {
	if (plans > 0 && planned == 0 && n == 0 && skip_plan != "")
		out(skip_plan)
	else if (plans > 0)
		out("1.." planned)
}'

# Keep the program's exit status across the pipe (no pipefail in sh).
exec 3>&1
status=$(
	{ { "$@" 3>&- 4>&-; echo $? >&4; } |
	    ${AWK:-awk} "$normalize" >&3 4>&-; } 4>&1
)
exec 3>&-
exit "$status"
