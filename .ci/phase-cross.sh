#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# .ci/phase-cross.sh - a part of the unit tests built for two other Debian
# release architectures and run under qemu-user: build-aux/cross-check.sh
# --quick (-O1, static, cmocka binaries only) on armhf (32-bit: time_t,
# 64-bit counters and atomics on a 32-bit CPU) and s390x (big-endian).
# Contract: .ci/lib.sh. build-aux/cross-check.sh without --quick runs the
# whole make check on all six architectures (arm64, armhf, i386, ppc64el,
# riscv64, s390x) and the musl build before each release (doc/RELEASING.md).
#
# The part (TESTS below): the programs whose code depends on the word size
# or the byte order (the stacks, the park's futex and its time, the node
# chunks, the queues, the counters and histograms, the ring, the timer's
# arithmetic) and the engines' exactly-once runs; left out are those whose
# logic is the same on every CPU, the costliest under emulation among them
# (fault_sweep, test_resize, test_coop, test_reserved, test_thpool,
# test_scale_first: more than half the time of a whole run under qemu). qemu-user runs the
# guest's threads in the host's memory order, so no run here can find a
# missing barrier (tpe(7), PORTABILITY): the targets are for the data
# layout, which two of them cover.
#
# Time: about 2 minutes a target on a quiet machine; the budget (.ci/run)
# is 10 minutes. The second target starts only within the first 5
# (--budget 300): on a loaded machine it is reported as not run and counted
# as skipped; the whole is bounded at 9 minutes (timeout). Counts: the
# script's, one per test case (a case that cannot pass under qemu-user
# counts as skipped, its reason printed); a target that does not build
# counts as one failure, and so does the time bound.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
. .ci/lib.sh

src=$(ci_srcdir cross) || { echo "0 passed, 1 failed"; exit 1; }
log=$(mktemp)
# Longest first: test_sched takes a third of the part under emulation.
tests="tests/test_sched tests/test_execute tests/test_per_worker
tests/test_future tests/test_ring tests/test_execute_wait tests/test_metrics
tests/test_blocking tests/test_conformance tests/test_base tests/test_strategy
tests/test_node_cache tests/test_queue tests/test_stats tests/test_park"
timeout -k 10 540 bash "$src/build-aux/cross-check.sh" --quick \
	--budget 300 --tests "$(echo $tests)" armhf s390x >"$log" 2>&1
rc=$?
cat "$log"
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" |
	tail -n 1)
rm -f "$log"
echo "== cross: phase took $(($(date +%s) - ci_start)) s"
if [[ -z $line ]]; then
	((rc == 124)) && echo "== cross: FAIL: over the time bound (540 s)"
	echo "0 passed, 1 failed"
	exit 1
fi
echo "$line"
((rc == 0))
