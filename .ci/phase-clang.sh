#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# .ci/phase-clang.sh - the library, its examples and its tests built with
# clang (warnings as errors: --enable-werror) and make check, out of tree
# in _build-clang. Contract: .ci/lib.sh.
#
# Counts: the test summary's PASS and FAIL lines (ci_counts); configure or
# the build failing counts as one failure.

set -uo pipefail
cd "$(dirname "$0")/.."
. .ci/lib.sh

ci_need clang

dir=_build-clang
start=$(date +%s)
src=$(ci_srcdir clang) || { echo "0 passed, 1 failed"; exit 1; }
rm -rf "$dir"
mkdir -p "$dir"
echo "== $(clang --version | head -n 1)"
if ! (cd "$dir" && CC=clang timeout 300 "$src/configure" --enable-werror) \
	>"$dir/configure.out" 2>&1; then
	tail -n 40 "$dir/configure.out"
	echo "0 passed, 1 failed"
	exit 1
fi
if ! timeout 600 make -C "$dir" >"$dir/make.out" 2>&1; then
	grep -E 'error|warning' "$dir/make.out" | head -n 40
	tail -n 20 "$dir/make.out"
	echo "0 passed, 1 failed"
	exit 1
fi
echo "== build $(($(date +%s) - start)) s"
ok=yes
(cd "$dir" && timeout 900 make check) >"$dir/check.out" 2>&1 || ok=no
grep -E '^# (TOTAL|PASS|SKIP|XFAIL|FAIL|XPASS|ERROR):' "$dir/check.out" || true
if [[ $ok != yes ]] && [[ -f $dir/test-suite.log ]]; then
	cat "$dir/test-suite.log"
fi
read -r p f s < <(ci_counts "$dir/test-suite.log")
if [[ $ok != yes ]] && ((f == 0)); then
	tail -n 40 "$dir/check.out"
	f=1
fi
echo "== phase time $(($(date +%s) - start)) s"
echo "$p passed, $f failed, $s skipped"
((f == 0))
