#!/bin/sh
# SPDX-License-Identifier: MIT
# check-examples.sh - run each example program (TAP: one line per example).
#
# The examples exit 0 when they worked. $TPE_EXAMPLES lists them, relative to
# the build directory; "make check" sets it and builds them first.

set -u
top_builddir=${top_builddir:-.}

if test -z "${TPE_EXAMPLES:-}"; then
	echo "1..0 # SKIP TPE_EXAMPLES is empty"
	exit 0
fi

n=0
for ex in $TPE_EXAMPLES; do
	n=$((n + 1))
done
echo "1..$n"

i=0
failed=0
for ex in $TPE_EXAMPLES; do
	i=$((i + 1))
	# The examples' own output goes to the log, never into the TAP stream.
	if "$top_builddir/$ex" </dev/null >&2; then
		echo "ok $i - $ex"
	else
		rc=$?
		echo "not ok $i - $ex (exit status $rc)"
		failed=1
	fi
done
exit $failed
