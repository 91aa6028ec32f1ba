#!/bin/sh
# SPDX-License-Identifier: MIT
# quickstart.sh - install missing build dependencies (Debian), build libtpe, run examples/hello.
#
# Run it from a git checkout or an unpacked release. On Debian and its
# derivatives it installs what is missing with apt-get, as root or through
# sudo; elsewhere it says what it needs. Then it generates configure (in a
# checkout), configures, builds, and runs the hello example. Arguments are
# passed to configure.

set -e
cd "$(dirname "$0")"

packages="gcc libc6-dev make autoconf automake libtool
pkg-config libcmocka-dev mandoc"

if command -v dpkg-query >/dev/null 2>&1; then
	missing=
	for p in $packages; do
		if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null |
		    grep -q 'install ok installed'; then
			missing="$missing $p"
		fi
	done
	if test -n "$missing"; then
		if test "$(id -u)" -eq 0; then
			sudo=
		elif command -v sudo >/dev/null 2>&1; then
			sudo=sudo
		else
			echo "quickstart: please install:$missing" >&2
			exit 1
		fi
		echo "quickstart: installing$missing"
		$sudo apt-get update -q
		$sudo env DEBIAN_FRONTEND=noninteractive \
		    apt-get install -y -q --no-install-recommends $missing
	fi
else
	echo "quickstart: not a Debian system; you need a C compiler, make," \
	    "autoconf, automake, libtool, pkg-config," \
	    "cmocka (for the tests) and mandoc (for the man page lint)"
fi

if ! test -x configure || test configure.ac -nt configure; then
	autoreconf -fi
fi
if ! test -f Makefile || test $# -gt 0; then
	./configure "$@"
fi
jobs=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
make -j"$jobs"
make examples/hello
./examples/hello
