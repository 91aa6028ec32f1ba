#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# .ci/phase-rpm.sh - the RPM packages of libtpe.spec, built from the
# "make dist" tarball with rpmbuild (Debian's rpm package; --nodeps, since
# the build dependencies are Debian packages here, not RPMs) and checked
# with rpmlint. Contract: .ci/lib.sh; runs by hand from any state of a
# checkout (bash .ci/phase-rpm.sh).
#
# Checks: 1. the tarball (make dist) and libtpe.spec's Version agree with
# it; 2. rpmbuild -ba --nocheck (the source RPM, libtpe, libtpe-devel;
# %check is make check, which the debian phase runs on the same tarball
# with the distribution's hardening flags, and the other phases with
# theirs: run here once more it only cost CI minutes); 3. rpmlint on the spec, the source RPM and the RPMs: no
# error (warnings are printed, and do not fail). libtpe.rpmlintrc filters
# the messages of openSUSE's policies that a Fedora-style spec does not
# follow, each with its reason.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.." || exit 1
top=$PWD
dir=$top/_build-rpm
ci_phase=rpm

ci_need rpm rpmlint gcc libc6-dev make pkg-config libcmocka-dev mandoc \
	autoconf automake libtool

rm -rf "$dir"
mkdir -p "$dir"
echo "== rpm: make dist"
if ! tarball=$(ci_dist "$dir/dist"); then
	ci_check "make dist" 1
	ci_finish
fi
spec_version=$(sed -n 's/^Version:[ \t]*//p' libtpe.spec)
echo "== rpm: $(basename "$tarball"); libtpe.spec Version $spec_version"
[[ $(basename "$tarball") == "libtpe-$spec_version.tar.gz" ]]
ci_check "the tarball and libtpe.spec's Version agree" $?

mkdir -p "$dir/rpmbuild/SOURCES"
cp "$tarball" "$dir/rpmbuild/SOURCES/"
echo "== rpm: rpmbuild -ba --nodeps --nocheck libtpe.spec"
timeout -k 10 900 rpmbuild -ba --nodeps --nocheck \
	--define "_topdir $dir/rpmbuild" libtpe.spec >"$dir/rpmbuild.log" 2>&1
status=$?
grep -E '^# (TOTAL|PASS|SKIP|FAIL|ERROR):|^Wrote:' "$dir/rpmbuild.log"
((status == 0)) || tail -n 80 "$dir/rpmbuild.log"
ci_check "rpmbuild -ba --nocheck" $status
((status == 0)) || ci_finish
for rpm in "$dir"/rpmbuild/RPMS/*/*.rpm; do
	echo "== rpm: rpm -qlp $(basename "$rpm")"
	rpm -qlp "$rpm"
done

echo "== rpm: rpmlint"
timeout 300 rpmlint -r libtpe.rpmlintrc libtpe.spec "$dir"/rpmbuild/SRPMS/*.rpm \
	"$dir"/rpmbuild/RPMS/*/*.rpm >"$dir/rpmlint.log" 2>&1
cat "$dir/rpmlint.log"
errors=$(sed -n 's/.* \([0-9][0-9]*\) errors, .*/\1/p' "$dir/rpmlint.log" |
	tail -n 1)
[[ -n $errors ]] && ((errors == 0))
ci_check "rpmlint: no error (${errors:-?} errors)" $?
ci_finish
