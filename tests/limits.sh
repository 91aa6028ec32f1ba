#!/bin/sh
# SPDX-License-Identifier: MIT
# limits.sh - run tests/limits under a low thread limit, then under a low
# address-space limit; says which way the thread limit was set.
#
# usage: limits.sh PROGRAM
#
# RLIMIT_NPROC counts the threads of the real user, and root bypasses it
# (without CAP_SYS_RESOURCE/CAP_SYS_ADMIN dropped). So, as root, the program
# runs as the user nobody (setpriv) with prlimit --nproc; as another user,
# with prlimit --nproc above the threads that user already runs. When that
# cannot be done (no prlimit or setpriv, or the limit did not bite), the
# program's own fallback fails pthread_create past a thread count
# (TPE_LIMITS_FAKE_NPROC). The address-space limit (prlimit --as) needs no
# privilege. A sanitizer build cannot run under RLIMIT_AS (its shadow
# memory is reserved up front): that part is skipped for it, with a note.
# Prints "N passed, N failed" last; exit status 1 when something failed.

prog=${1:?usage: limits.sh PROGRAM}
case $prog in
/*) ;;
*) prog=$PWD/$prog ;;
esac
pass=0
fail=0
nproc_limit=${TPE_LIMITS_NPROC:-200}
as_mb=${TPE_LIMITS_AS_MB:-768}

result() {
	if test "$1" -eq 0; then
		pass=$((pass + 1))
		echo "limits.sh: PASS: $2"
	else
		fail=$((fail + 1))
		echo "limits.sh: FAIL: $2 (status $1)"
	fi
}

# ---- the thread limit --------------------------------------------------
method=
status=1
if command -v prlimit >/dev/null 2>&1; then
	if test "$(id -u)" -eq 0; then
		if command -v setpriv >/dev/null 2>&1 &&
		    setpriv --reuid=nobody --regid=nogroup --clear-groups \
		    true 2>/dev/null; then
			used=$(ps -L -u nobody -o lwp= 2>/dev/null | wc -l)
			method="RLIMIT_NPROC $((used + nproc_limit)) as user nobody (setpriv + prlimit --nproc)"
			echo "limits.sh: thread limit: $method"
			setpriv --reuid=nobody --regid=nogroup --clear-groups \
			    prlimit --nproc=$((used + nproc_limit)) "$prog"
			status=$?
		fi
	else
		used=$(ps -L -u "$(id -u)" -o lwp= 2>/dev/null | wc -l)
		method="RLIMIT_NPROC $((used + nproc_limit)) (prlimit --nproc)"
		echo "limits.sh: thread limit: $method"
		prlimit --nproc=$((used + nproc_limit)) "$prog"
		status=$?
	fi
fi
case $status in
2 | 3 | 126 | 127) real_failed=yes ;; # setup, no refusal, cannot execute
*) real_failed=no ;;
esac
if test -z "$method" || test $real_failed = yes; then
	# No real limit could be set, it did not bite, or the program could
	# not run under it (a build directory that nobody may enter).
	method="fallback: pthread_create fails past $nproc_limit threads (TPE_LIMITS_FAKE_NPROC)"
	echo "limits.sh: thread limit: $method"
	TPE_LIMITS_FAKE_NPROC=$nproc_limit "$prog"
	status=$?
fi
result $status "burst under a thread limit: $method"

# ---- the address-space limit -------------------------------------------
if nm "$prog" 2>/dev/null | grep -q '__[at]san_init'; then
	echo "limits.sh: SKIP: address-space limit (sanitizer build)"
elif ! command -v prlimit >/dev/null 2>&1; then
	echo "limits.sh: SKIP: address-space limit (no prlimit)"
else
	echo "limits.sh: address-space limit: prlimit --as=${as_mb} MiB"
	prlimit --as=$((as_mb * 1024 * 1024)) "$prog"
	result $? "burst under an address-space limit of ${as_mb} MiB"
fi

echo "$pass passed, $fail failed"
test $fail -eq 0
