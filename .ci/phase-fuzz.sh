#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# .ci/phase-fuzz.sh - the libFuzzer harness fuzz/fuzz_api.c: build it
# (build-aux/build-fuzz.sh, clang with ASan + UBSan), run the committed
# corpus fuzz/corpus/ as a regression test, then fuzz for a bounded time
# (FUZZ_SECONDS, default 30: with the build, the phase stays
# within 90 s) from that corpus. A crash, a broken promise of
# the model (abort), a leak or a timeout fails the phase; the input is
# saved under _build-fuzz/ and printed here (hex and base64), so that it
# can be added to fuzz/corpus/ as a regression test.
#
# Checks counted: each corpus file replayed, and the fuzzing run.
set -uo pipefail

. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.." || exit 1

pass=0
fail=0
seconds=${FUZZ_SECONDS:-30}
dir=_build-fuzz

# Debian's clang package leaves libFuzzer's runtime to libclang-rt-dev.
ci_need clang libclang-rt-dev

start=$(date +%s)
echo "== fuzz: build"
src=$(ci_srcdir fuzz) || { echo "0 passed, 1 failed"; exit 1; }
if ! exe=$(timeout 900 "$src/build-aux/build-fuzz.sh" "$dir"); then
	echo "0 passed, 1 failed"
	exit 1
fi
echo "== fuzz: built in $(($(date +%s) - start)) s"

# show_artifacts: print every crash/leak/timeout input libFuzzer saved.
show_artifacts() {
	local f
	for f in "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-*; do
		[[ -e $f ]] || continue
		echo "== fuzz: input that failed: $f"
		od -A d -t x1 "$f"
		echo "base64: $(base64 -w0 "$f")"
	done
}

# Sanitizer reports on stderr; leaks are checked per input.
opts=(-timeout=30 -rss_limit_mb=2048 -artifact_prefix="$dir/")

echo "== fuzz: corpus regression"
rm -f "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-*
n=$(find fuzz/corpus -type f | wc -l)
if timeout 300 "$exe" "${opts[@]}" -runs=0 fuzz/corpus >"$dir/regress.log" 2>&1; then
	pass=$((pass + 1)) # one check, however many files
	echo "== fuzz: $n corpus files replayed"
	tail -n 1 "$dir/regress.log"
else
	tail -n 40 "$dir/regress.log"
	show_artifacts
	fail=$((fail + 1))
fi

echo "== fuzz: fuzzing for $seconds s"
rm -rf "$dir/corpus"
mkdir -p "$dir/corpus"
cp fuzz/corpus/* "$dir/corpus/"
rm -f "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-*
if timeout $((seconds + 120)) "$exe" "${opts[@]}" -max_total_time="$seconds" \
	-max_len=256 -print_final_stats=1 "$dir/corpus" >"$dir/fuzz.log" 2>&1; then
	pass=$((pass + 1))
else
	tail -n 60 "$dir/fuzz.log"
	show_artifacts
	fail=$((fail + 1))
fi
grep -E '^stat::number_of_executed_units|^fuzz_api:|DONE' "$dir/fuzz.log" || true
echo "== fuzz: phase took $(($(date +%s) - start)) s"
echo "$pass passed, $fail failed"
((fail == 0))
