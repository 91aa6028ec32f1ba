#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# .ci/phase-mutation.sh - the mutation check: each one-line mutation of the
# concurrency-critical code in build-aux/mutations/ must be caught by
# the test named for it (build-aux/mutation-check.sh: a scratch copy of the
# tree, one build, then per mutation the objects its file goes into
# recompiled, the test program relinked and its one case run, bounded at
# 15 s; one lane per CPU). Fails below 100% killed. Bounded by
# MUTATION_SECONDS, default the phase's budget from .ci/run
# (CI_BUDGET_SECONDS, 600 s by hand) less 20 s to print what it found;
# prints last "N passed, N failed" (killed, and survived or in error).

set -uo pipefail
. "$(dirname "$0")/lib.sh"

cd "$(dirname "$0")/.."
seconds=${MUTATION_SECONDS:-$((${CI_BUDGET_SECONDS:-600} - 20))}
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
