#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# .ci/phase-mutation.sh - the mutation check: each one-line mutation of the
# concurrency-critical code in build-aux/mutations/ must be caught by
# the test named for it (build-aux/mutation-check.sh: a scratch copy of the
# tree, one build, then one incremental build and one test run per
# mutation). Fails below 100% killed. Bounded at 10 minutes
# (MUTATION_SECONDS); prints last "N passed, N failed" (killed, and
# survived or in error).

set -uo pipefail
. "$(dirname "$0")/lib.sh"

cd "$(dirname "$0")/.."
seconds=${MUTATION_SECONDS:-600}
start=$(date +%s)

ci_need gcc make perl coreutils libcmocka-dev

timeout -k 10 "$seconds" build-aux/mutation-check.sh -t 15 \
    >_build-mutation.log 2>&1
status=$?
cat _build-mutation.log
echo "== mutation: phase took $(($(date +%s) - start)) s"
if ! grep -qE '^[0-9]+ passed, [0-9]+ failed$' _build-mutation.log; then
	# Stopped before its count (the bound, or a build that failed).
	echo "0 passed, 1 failed"
	exit 1
fi
rm -f _build-mutation.log
exit "$status"
