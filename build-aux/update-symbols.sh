#!/bin/sh
# SPDX-License-Identifier: MIT
# update-symbols.sh - write debian/libtpe0.symbols, the Debian symbols file
# of libtpe0, from a built libtpe.so.0 (dpkg-gensymbols, from dpkg-dev).
#
#   build-aux/update-symbols.sh [LIBDIR]   LIBDIR holds libtpe.so.0
#                                          (default: _b/lib/.libs, built
#                                          by configure && make in _b)
#
# Every symbol gets the upstream version that first exported it. In the
# commit that adds an interface, run it and then mark the new lines with
# the new upstream version (doc/RELEASING.md); debian/rules builds with
# dh_makeshlibs -c4, so a package whose exports differ from this file in
# any way fails to build.
set -eu
libdir=${1:-_b/lib/.libs}
version=${TPE_SYMBOLS_VERSION:-0.1.0}
if ! test -f "$libdir/libtpe.so.0"; then
	echo "update-symbols.sh: $libdir/libtpe.so.0 not found (build first)" >&2
	exit 2
fi
dpkg-gensymbols -q -plibtpe0 -v"$version" -e"$libdir/libtpe.so.0" \
	-Odebian/libtpe0.symbols
sed -i "s/ $version-[0-9]*\$/ $version/" debian/libtpe0.symbols
echo "update-symbols.sh: wrote debian/libtpe0.symbols ($(grep -c '@TPE_0' debian/libtpe0.symbols) symbols)"
