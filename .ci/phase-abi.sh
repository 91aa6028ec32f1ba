#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# .ci/phase-abi.sh - the library's ABI against the committed baseline
# abi/libtpe.abi (doc/abi.md). Contract: .ci/lib.sh.
#
# Builds libtpe.so in _build-abi (configure's default flags: -g -O2, with
# the debug info abidw reads), describes it with build-aux/update-abi.sh
# and compares it with abidiff. Functions the baseline does not have pass:
# they are compatible, and the baseline takes them at the release's update.
# Anything else fails: a function or variable removed, a changed soname,
# a changed signature or the layout of a public type changed.
#
# Checks: 1. configure and build; 2. the baseline exists and abidiff can
# read it; 3. no incompatible change.

set -uo pipefail
cd "$(dirname "$0")/.."
. .ci/lib.sh

ci_need abigail-tools

dir=_build-abi
pass=0
fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
not_ok() { echo "not ok - $1"; fail=$((fail + 1)); }
finish() { echo "$pass passed, $fail failed"; ((fail == 0)); exit; }

start=$(date +%s)
src=$(ci_srcdir abi) || { not_ok "bootstrap a source tree to build from"; finish; }
rm -rf "$dir"
mkdir -p "$dir"
if (cd "$dir" && timeout 300 "$src/configure" --disable-static) \
	>"$dir/configure.out" 2>&1 &&
    timeout 300 make -C "$dir" lib/libtpe.la >"$dir/make.out" 2>&1 &&
    timeout 60 build-aux/update-abi.sh "$dir" "$dir/libtpe.abi"; then
	ok "build libtpe.so and describe it ($(($(date +%s) - start)) s)"
else
	tail -n 40 "$dir/configure.out" "$dir/make.out" 2>/dev/null
	not_ok "build libtpe.so and describe it"
	finish
fi

if [[ -f abi/libtpe.abi ]] && timeout 60 abidiff abi/libtpe.abi abi/libtpe.abi \
	>/dev/null 2>&1; then
	echo "abi/libtpe.abi is a readable baseline (a precondition, not a pass)"
else
	not_ok "abi/libtpe.abi is missing or unreadable (build-aux/update-abi.sh)"
	finish
fi

# abidiff's status is a bit mask: 1 error, 2 usage, 4 a change, 8 an
# incompatible change. With --no-added-syms, added functions are no change.
timeout 60 abidiff --no-added-syms abi/libtpe.abi "$dir/libtpe.abi" \
	>"$dir/abidiff.out" 2>&1
rc=$?
if ((rc == 0)); then
	ok "no incompatible change against abi/libtpe.abi"
else
	cat "$dir/abidiff.out"
	not_ok "abidiff status $rc: an incompatible ABI change (or an abidiff" \
		"error); if intended, bump -version-info in configure.ac and run" \
		"build-aux/update-abi.sh in the same commit (doc/abi.md)"
fi
# Added functions: compatible, reported so that the release updates the
# baseline and -version-info (CURRENT++, AGE++).
timeout 60 abidiff abi/libtpe.abi "$dir/libtpe.abi" >"$dir/abidiff-all.out" 2>&1
added=$(grep -E '^\s+\[A\]' "$dir/abidiff-all.out" | wc -l)
if ((added > 0)); then
	echo "note: $added symbol(s) added since abi/libtpe.abi (compatible):"
	grep -E '^\s+\[A\]' "$dir/abidiff-all.out"
	echo "note: the release that ships them bumps -version-info and runs build-aux/update-abi.sh"
fi
echo "phase time $(($(date +%s) - start)) s"
finish
