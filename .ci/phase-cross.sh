#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# .ci/phase-cross.sh - the unit tests built for four other Debian release
# architectures and run under qemu-user: build-aux/cross-check.sh --quick
# (-O1, static, cmocka binaries only) on armhf (32-bit ARM), ppc64el
# (weakly ordered 64-bit), i386 (32-bit x86) and s390x (big-endian).
# Contract: .ci/lib.sh. build-aux/cross-check.sh without --quick runs the
# whole make check on all six architectures and the musl build
# (doc/RELEASING.md).
#
# Time: the phase's budget is 8 minutes. A target starts only within the
# first 4 (--budget 240): on a loaded machine fewer targets run, each one
# left out reported and counted as skipped; the whole is bounded at 7
# minutes (timeout). Counts: the script's, one per test case (a case that
# cannot pass under qemu-user counts as skipped, its reason printed); a
# target that does not build counts as one failure, and so does the time
# bound.

set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
. .ci/lib.sh

src=$(ci_srcdir cross) || { echo "0 passed, 1 failed"; exit 1; }
log=$(mktemp)
timeout -k 10 420 bash "$src/build-aux/cross-check.sh" --quick \
	--budget 240 armhf ppc64el i386 s390x >"$log" 2>&1
rc=$?
cat "$log"
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" |
	tail -n 1)
rm -f "$log"
echo "== cross: phase took $(($(date +%s) - ci_start)) s"
if [[ -z $line ]]; then
	((rc == 124)) && echo "== cross: FAIL: over the time bound (420 s)"
	echo "0 passed, 1 failed"
	exit 1
fi
echo "$line"
((rc == 0))
