#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# .ci/phase-debian.sh - the Debian packages: dpkg-buildpackage -us -uc -b
# (which runs the test suite) in a copy of the tree, lintian on the result
# (an E: or W: line that is not overridden fails), dpkg -i of the packages,
# and the autopkgtest's test run directly against them (autopkgtest itself
# wants a testbed; the test only needs the installed packages). One check a
# step; the last line is "N passed, N failed".
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
top=$PWD
pass=0
fail=0
start=$(date +%s)
check() {
	if (($2 == 0)); then
		pass=$((pass + 1))
		echo "== debian: PASS: $1"
	else
		fail=$((fail + 1))
		echo "== debian: FAIL: $1 (status $2)"
	fi
}
finish() {
	echo "== debian: phase took $(($(date +%s) - start)) s"
	echo "$pass passed, $fail failed"
	((fail == 0))
	exit
}

ci_need build-essential dpkg-dev debhelper fakeroot lintian pkg-config \
	libcmocka-dev mandoc

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The tracked files only: what a clone would hold (dpkg-buildpackage
# writes its results next to the tree, so the tree is a copy).
mkdir -p "$work/libtpe"
git ls-files -z | xargs -0 cp --parents -t "$work/libtpe" 2>/dev/null ||
	tar -C "$top" --exclude='./_*' --exclude=./.git -cf - . |
	tar -C "$work/libtpe" -xf -
cd "$work/libtpe" || exit 1
echo "== debian: dpkg-buildpackage -us -uc -b"
DEB_BUILD_OPTIONS=parallel=2 timeout -k 10 900 dpkg-buildpackage -us -uc -b \
	>"$work/build.log" 2>&1
status=$?
grep -E '^# (TOTAL|PASS|SKIP|FAIL|ERROR):' "$work/build.log"
((status == 0)) || tail -n 80 "$work/build.log"
check "dpkg-buildpackage (with make check)" $status
((status == 0)) || finish
cd "$work" || exit 1
for deb in *.deb; do
	echo "== debian: dpkg -c $deb"
	dpkg -c "$deb"
done
echo "== debian: lintian"
lintian --fail-on error,warning libtpe_*.changes 2>&1 |
	grep -v 'running with root privileges'
check "lintian (no error or warning)" "${PIPESTATUS[0]}"
echo "== debian: dpkg -i"
dpkg -i libtpe0_*.deb libtpe-dev_*.deb >"$work/install.log" 2>&1
status=$?
((status == 0)) || cat "$work/install.log"
check "dpkg -i libtpe0 libtpe-dev" $status
if ((status == 0)); then
	ci_need gcc libc6-dev
	for t in $(sed -n 's/^Tests: *//p' libtpe/debian/tests/control); do
		echo "== debian: autopkgtest $t"
		(cd libtpe && AUTOPKGTEST_TMP=$(mktemp -d) \
		    timeout 120 "debian/tests/$t")
		check "autopkgtest $t" $?
	done
	dpkg -r libtpe-dev libtpe0 >/dev/null 2>&1
fi
finish
