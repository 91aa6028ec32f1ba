#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# .ci/phase-debian.sh - the Debian packages, built as an archive builds them.
# Contract: .ci/lib.sh. Runs by hand from any state of a checkout
# (bash .ci/phase-debian.sh): it never builds in the source tree.
#
#  1. the source package: build-aux/debian-source.sh makes the release
#     tarball with "make dist", takes it as the .orig.tar.gz and builds the
#     .dsc (dpkg-buildpackage -S);
#  2. licensecheck on the unpacked .orig.tar.gz agrees with
#     debian/copyright (.ci/check-copyright.py);
#  3. the binary packages built FROM THAT .dsc (dpkg-source -x, then
#     dpkg-buildpackage -b), with the distribution's flags
#     (dpkg-buildflags, hardening=+all) and -Werror (DEB_BUILD_OPTIONS=werror:
#     debian/rules adds --enable-werror), and nocheck: the package build's
#     make check would run the whole suite a sixth time in this CI (the
#     builtin phases run it four ways, step 7 runs the tests built from
#     this tarball against the installed packages); an archive's builder
#     runs it (dh_auto_test leaves it out only under nocheck);
#  4. lintian --pedantic -I -E on the source and the binaries: any tag that
#     is not overridden (with its reason, debian/*lintian-overrides) fails;
#  5. hardening-check on the library (control-flow protection is checked
#     in 6: Debian 12's crti.o and crtn.o carry no x86 feature note, so
#     the linker drops IBT/SHSTK from every shared object linked here);
#  6. every compilation unit of libtpe.so.0 was compiled with
#     -fstack-clash-protection and -fcf-protection (DW_AT_producer in
#     libtpe0-dbgsym);
#  7. dpkg -i of the packages, and each test of debian/tests/control run
#     against them (autopkgtest itself wants a testbed; the tests only need
#     the installed packages and the source tree): every example, the
#     cmocka tests built against /usr/lib, the HTTP server under load.
# One check a step; the last line is "N passed, N failed".
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.." || exit 1
top=$PWD
ci_phase=debian

ci_need build-essential dpkg-dev debhelper fakeroot lintian pkg-config \
	libcmocka-dev mandoc man-db devscripts licensecheck python3 \
	autoconf automake libtool binutils gcc libc6-dev

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# ---- 1. the source package ----------------------------------------------
echo "== debian: build-aux/debian-source.sh (make dist, .orig.tar.gz, .dsc)"
if dsc=$(timeout 600 build-aux/debian-source.sh "$work/src"); then
	ls -l "$work/src"/*.orig.tar.gz "$work/src"/*.dsc \
		"$work/src"/*.debian.tar.*
	ci_check "source package $(basename "$dsc")" 0
else
	ci_check "source package" 1
	ci_finish
fi
orig=$(ls "$work/src"/*.orig.tar.gz)

# ---- 2. licensecheck against debian/copyright -----------------------------
mkdir -p "$work/orig"
tar -C "$work/orig" -xzf "$orig"
echo "== debian: licensecheck -r on $(basename "$orig") against debian/copyright"
licensecheck -r --shortname-scheme=debian,spdx "$work/orig" |
	sed 's/^[^:]*: //; s/\*No copyright\* //' | sort | uniq -c | sort -rn
timeout 300 python3 .ci/check-copyright.py debian/copyright "$work/orig"/*/
ci_check "debian/copyright agrees with licensecheck" $?

# ---- 3. the binaries from the .dsc --------------------------------------
mkdir -p "$work/bin"
cp "$work/src"/*.dsc "$work/src"/*.orig.tar.gz "$work/src"/*.debian.tar.* \
	"$work/bin/"
cd "$work/bin" || exit 1
dpkg-source -x ./*.dsc pkg >"$work/extract.log" 2>&1 ||
	cat "$work/extract.log"
cd pkg || exit 1
echo "== debian: the distribution's CFLAGS (debian/rules: hardening=+all):" \
	"$(DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get CFLAGS)"
echo "== debian: dpkg-buildpackage -us -uc -b (from the .dsc; werror nocheck)"
DEB_BUILD_OPTIONS="parallel=2 werror nocheck" timeout -k 10 900 \
	dpkg-buildpackage -us -uc -b >"$work/build.log" 2>&1
status=$?
grep -E '^# (TOTAL|PASS|SKIP|FAIL|ERROR):' "$work/build.log"
grep -E -- '--enable-werror|  warnings ' "$work/build.log" | head -n 3
warnings=$(grep -cE '^[^ ]+:[0-9]+:[0-9]+: (warning|error):' "$work/build.log")
echo "== debian: compiler warnings in the build: $warnings"
((status == 0)) || tail -n 80 "$work/build.log"
ci_check "dpkg-buildpackage -b from the .dsc (distribution flags, -Werror)" $status
((status == 0)) || ci_finish
cd "$work/bin" || exit 1
for deb in *.deb; do
	echo "== debian: dpkg -c $deb"
	dpkg -c "$deb"
done

# ---- 4. lintian -----------------------------------------------------------
# Any E:, W:, I:, P: or X: line fails (an overridden tag prints nothing).
# Not --fail-on experimental: lintian 2.116 fails on experimental tags even
# when they are overridden.
echo "== debian: lintian --pedantic -I -E (source and binaries)"
lintian --pedantic -I -E --fail-on error,warning,info,pedantic \
	"$work/src"/*_source.changes "$work/bin"/*.changes >"$work/lintian.log" 2>&1
status=$?
grep -v 'running with root privileges' "$work/lintian.log"
if grep -Eq '^[EWIPX]: ' "$work/lintian.log"; then
	status=1
fi
echo "== debian: lintian: $(grep -Ec '^[EWIPX]: ' "$work/lintian.log") tags" \
	"that are not overridden"
ci_check "lintian --pedantic -I -E: no tag that is not overridden" $status

# ---- 5. and 6. hardening ------------------------------------------------
dpkg-deb -x "$(ls libtpe0_*.deb)" "$work/root"
lib=$(find "$work/root" -name 'libtpe.so.0.*' -type f)
echo "== debian: hardening-check --nocfprotection $lib"
hardening-check --nocfprotection "$lib"
ci_check "hardening-check libtpe.so.0" $?
dpkg-deb -x "$(ls libtpe0-dbgsym_*.deb)" "$work/dbg"
debug=$(find "$work/dbg" -name '*.debug' -type f)
readelf --debug-dump=info "$debug" 2>/dev/null |
	sed -n 's/.*DW_AT_producer.*: GNU C/GNU C/p' >"$work/producers"
units=$(wc -l <"$work/producers")
bad=$(awk '!/-fstack-clash-protection/ || !/-fcf-protection/' \
	"$work/producers" | wc -l)
echo "== debian: $units compilation units in libtpe.so.0;" \
	"without -fstack-clash-protection or -fcf-protection: $bad"
((units > 0 && bad == 0))
ci_check "every unit of libtpe.so.0 built with -fstack-clash-protection -fcf-protection" $?

# ---- 7. install, and the autopkgtests -------------------------------------
echo "== debian: dpkg -i"
dpkg -i libtpe0_*.deb libtpe-dev_*.deb >"$work/install.log" 2>&1
status=$?
((status == 0)) || cat "$work/install.log"
ci_check "dpkg -i libtpe0 libtpe-dev" $status
if ((status == 0)); then
	src=$work/orig/$(ls "$work/orig")
	cp -R "$work/bin/pkg/debian" "$src/"
	for t in $(sed -n 's/^Tests: *//p' "$src/debian/tests/control"); do
		echo "== debian: autopkgtest $t"
		(cd "$src" && AUTOPKGTEST_TMP=$(mktemp -d "$work/adt.XXXXXX") \
		    timeout 900 "debian/tests/$t")
		ci_check "autopkgtest $t" $?
	done
	dpkg -r libtpe-dev libtpe0 >/dev/null 2>&1
fi
cd "$top" || exit 1
ci_finish
