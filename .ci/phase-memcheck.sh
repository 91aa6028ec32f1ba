#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# .ci/phase-memcheck.sh - valgrind over a subset of the unit tests:
# memcheck (invalid accesses, uninitialised values, definite and indirect
# leaks: --error-exitcode makes any of them fail the run) and helgrind
# (lock misuse, lock order, data races its model can see; suppressions in
# .ci/helgrind.supp, each explained there).
#
# Valgrind runs every thread of a program on one core, one at a time, 20
# to 50 times slower; the phase has about two minutes on a 2-core machine,
# so it runs the binaries whose cases exercise the most library code per
# second under valgrind (measured):
#   memcheck: test_attr (attributes, sized structs), test_queue (the three
#     shared queues, the lock-free inbox), test_future, test_stats,
#     test_reserved (reserved threads, try_execute), test_rejection (every
#     policy, hand-backs), test_strategy (every mode), test_failure
#     (allocation and thread-start failures: the error paths, where leaks
#     hide). Not run: test_execute, test_lifecycle, test_resize,
#     test_scale_first and test_per_worker are timing-heavy (30 s to several
#     minutes each under valgrind, mostly waits that valgrind's serialised
#     threads stretch); test_fork and test_debug cover fork and assertions,
#     not memory; the ASan phase covers them all for memory errors and
#     leaks.
#   helgrind: test_queue (its lock-free producers stress, with the inbox
#     suppressed, still checks the locked side), test_stats and
#     test_rejection (the pool's locked paths and the rejection policies,
#     which run user code outside the lock). test_future's and
#     test_execute's cases reuse task nodes across threads through the
#     node cache's atomic stack on nearly every task, which helgrind cannot
#     model (see .ci/helgrind.supp); the tsan phase checks those.
# TPE_TEST_TIME_SCALE stretches the tests' own time bounds for valgrind.
# Each binary run under each tool is one check.
set -uo pipefail

. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.." || exit 1
top=$PWD

memcheck_tests=(test_attr test_queue test_future test_stats test_reserved
	test_rejection test_strategy test_failure)
helgrind_tests=(test_queue test_stats test_rejection)

pass=0
fail=0
dir=_build-memcheck
start=$(date +%s)

ci_need valgrind

echo "== memcheck: configure and build"
src=$(ci_srcdir memcheck) || { echo "0 passed, 1 failed"; exit 1; }
mkdir -p "$dir"
targets=()
for t in "${memcheck_tests[@]}" "${helgrind_tests[@]}"; do
	targets+=("tests/$t")
done
if ! (cd "$dir" && "$src/configure" --disable-shared) >"$dir/configure.log" 2>&1 ||
	! make -C "$dir" "${targets[@]}" >"$dir/make.log" 2>&1; then
	tail -n 40 "$dir/configure.log" "$dir/make.log"
	echo "0 passed, 1 failed"
	exit 1
fi
echo "== memcheck: built in $(($(date +%s) - start)) s"

export TPE_TEST_TIME_SCALE=${TPE_TEST_TIME_SCALE:-10}
export CMOCKA_MESSAGE_OUTPUT=TAP

# check TOOL TEST VALGRIND_ARGS...: one binary under one tool, through the
# libtool wrapper; it passes when valgrind reports no error, the program
# exits 0 and no test case failed.
check() {
	local tool=$1 t=$2 log="$dir/$1-$2.log" rc t0
	shift 2
	t0=$(date +%s)
	(cd "$dir" && timeout 600 ./libtool --mode=execute valgrind -q \
		--tool="$tool" --error-exitcode=99 "$@" "tests/$t") >"$log" 2>&1
	rc=$?
	if ((rc == 0)) && ! grep -q '^not ok' "$log"; then
		pass=$((pass + 1))
		echo "ok   $tool $t ($(($(date +%s) - t0)) s)"
	else
		fail=$((fail + 1))
		echo "FAIL $tool $t (exit $rc, $(($(date +%s) - t0)) s)"
		tail -n 80 "$log"
	fi
}

for t in "${memcheck_tests[@]}"; do
	check memcheck "$t" --leak-check=full \
		--errors-for-leak-kinds=definite,indirect \
		--show-leak-kinds=definite,indirect
done
for t in "${helgrind_tests[@]}"; do
	check helgrind "$t" --suppressions="$top/.ci/helgrind.supp"
done

echo "== memcheck: phase took $(($(date +%s) - start)) s"
echo "$pass passed, $fail failed"
((fail == 0))
