#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# .ci/phase-chaos.sh - the reliability figures, bounded: the chaos stress
# (tests/chaos.c), the long run (tests/long_run.c) and the limits burst
# (tests/limits.sh), built with ASan+UBSan; the limits program also
# uninstrumented, since a sanitizer cannot run under an address-space limit;
# then the chaos stress under ThreadSanitizer. make check-stress runs the
# long versions.
#
# Bounds (environment): CHAOS_SECONDS (default 30) for the chaos stress,
# LONG_RUN_TASKS (default 10^6, where make check-stress runs 10^7) for the
# long run, CHAOS_TSAN_SECONDS (default 15) for the TSan run. Prints the
# figures and, last, "N passed, N failed".

set -uo pipefail
. "$(dirname "$0")/lib.sh"

cd "$(dirname "$0")/.."
top=$PWD
build=_build-chaos
chaos_seconds=${CHAOS_SECONDS:-30}
chaos_coop_seconds=${CHAOS_COOP_SECONDS:-15}
long_run_tasks=${LONG_RUN_TASKS:-1000000}
ci_phase=chaos

ci_need gcc make util-linux procps

# A sanitized program may need address randomisation off (see .ci/run).
prefix=""
if [[ -e /proc/sys/kernel/randomize_va_space ]] &&
    command -v setarch >/dev/null 2>&1; then
	prefix="setarch $(uname -m) -R"
fi

# .ci/run's ASan+UBSan phase leaves its build: reuse it (the same
# configuration), else configure one.
if [[ -f _build-asan/Makefile ]]; then
	build=_build-asan
	echo "== chaos: reusing $build"
else
	echo "== chaos: configure --enable-sanitizers=address,undefined"
	src=$(ci_srcdir chaos) || { ci_check "bootstrap" 1; ci_finish; }
	rm -rf "$build"
	mkdir -p "$build"
	if ! (cd "$build" && "$src/configure" --enable-sanitizers=address,undefined) \
	    >"$build.configure.log" 2>&1; then
		tail -n 40 "$build.configure.log"
		ci_check "configure" 1
		ci_finish
	fi
	rm -f "$build.configure.log"
fi
echo "== chaos: make tests/chaos tests/chaos_coop tests/long_run tests/limits"
if ! make -C "$build" tests/chaos tests/chaos_coop tests/long_run tests/limits \
    >"$build/make.log" 2>&1; then
	tail -n 60 "$build/make.log"
	ci_check "build" 1
	ci_finish
fi

export ASAN_OPTIONS="abort_on_error=0:detect_leaks=1:${ASAN_OPTIONS-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS-}"

echo "== chaos: tests/chaos $chaos_seconds (ASan+UBSan)"
# shellcheck disable=SC2086 # the prefix is words
timeout -k 10 $((chaos_seconds + 120)) $prefix "$build/tests/chaos" \
    "$chaos_seconds"
ci_check "chaos stress, $chaos_seconds s (ASan+UBSan)" $?

echo "== chaos: tests/chaos_coop $chaos_coop_seconds (ASan+UBSan)"
# shellcheck disable=SC2086 # the prefix is words
timeout -k 10 $((chaos_coop_seconds + 120)) $prefix \
    "$build/tests/chaos_coop" "$chaos_coop_seconds"
ci_check "tasklet and thpool chaos, $chaos_coop_seconds s (ASan+UBSan)" $?

echo "== chaos: tests/long_run $long_run_tasks (ASan+UBSan; make check-stress: 10^7)"
# ASan's quarantine of freed memory would count as growth: keep it small.
# shellcheck disable=SC2086
ASAN_OPTIONS="quarantine_size_mb=4:$ASAN_OPTIONS" \
    timeout -k 10 300 $prefix "$build/tests/long_run" "$long_run_tasks"
ci_check "long run, $long_run_tasks tasks (ASan+UBSan)" $?

# The limits program once more, uninstrumented: RLIMIT_AS cannot hold a
# sanitizer's shadow memory. Compiled here in one command, against the
# configured config.h.
echo "== chaos: tests/limits, uninstrumented"
if gcc -std=gnu11 -O1 -pthread -I"$build" -include "$build/config.h" \
    -Iinclude -Ilib -o "$build/limits-plain" \
    lib/*/*.c tests/limits.c -Wl,--wrap=pthread_create >"$build/plain.log" 2>&1
then
	timeout -k 10 300 bash tests/limits.sh "$build/limits-plain" \
	    >"$build/limits.log" 2>&1
	status=$?
	cat "$build/limits.log"
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$build/limits.log" |
	    tail -n 1)
	if [[ -n $line ]]; then
		read -r p _ f _ <<<"$line"
		ci_pass=$((ci_pass + p))
		ci_fail=$((ci_fail + f))
		echo "== chaos: limits: $p passed, $f failed"
	else
		ci_check "limits" $((status == 0 ? 1 : status))
	fi
else
	cat "$build/plain.log"
	ci_check "limits build" 1
fi

# Both chaos stresses once more under ThreadSanitizer, bounded
# (CHAOS_TSAN_SECONDS, default 15, for the pool's; 10 for the tasklets'),
# as tpe(7) says. .ci/run's TSan phase leaves its build: reuse it.
cd "$top" || exit 1
tsan=_build-tsan
tsan_seconds=${CHAOS_TSAN_SECONDS:-15}
tsan_ok=yes
if [[ ! -f $tsan/Makefile ]]; then
	tsan=_build-chaos-tsan
	echo "== chaos: configure --enable-sanitizers=thread"
	rm -rf "$tsan"
	mkdir -p "$tsan"
	if ! (cd "$tsan" && ../configure --enable-sanitizers=thread) \
	    >"$tsan.configure.log" 2>&1; then
		tail -n 40 "$tsan.configure.log"
		ci_check "configure (TSan)" 1
		tsan_ok=no
	fi
fi
if [[ $tsan_ok == yes ]] &&
    ! make -C "$tsan" tests/chaos tests/chaos_coop >"$tsan/make-chaos.log" 2>&1
then
	tail -n 60 "$tsan/make-chaos.log"
	ci_check "build (TSan)" 1
	tsan_ok=no
fi
if [[ $tsan_ok == yes ]]; then
	export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:${TSAN_OPTIONS-}"
	echo "== chaos: tests/chaos $tsan_seconds (TSan)"
	# shellcheck disable=SC2086 # the prefix is words
	timeout -k 10 $((tsan_seconds + 180)) $prefix "$tsan/tests/chaos" \
	    "$tsan_seconds"
	ci_check "chaos stress, $tsan_seconds s (TSan)" $?
	echo "== chaos: tests/chaos_coop 10 (TSan)"
	# shellcheck disable=SC2086 # the prefix is words
	timeout -k 10 190 $prefix "$tsan/tests/chaos_coop" 10
	ci_check "tasklet chaos stress, 10 s (TSan)" $?
fi
ci_finish
