#!/bin/sh
# SPDX-License-Identifier: MIT
# check-thpool-pc.sh - a C-Thread-Pool program builds and runs with nothing
# but `pkg-config --cflags --libs tpe-thpool` (TAP).
#
# The built tpe-thpool.pc is copied with its includedir pointed at a scratch
# tree holding tpe/thpool.h where "make install" puts it, and its libdir at
# the built library, so that its own Cflags and Libs lines are what the
# compiler gets. examples/thpool_compat.c, which includes only "thpool.h",
# is built with them and run, and so is C-Thread-Pool's own example.c when
# it is installed (Debian: cthreadpool-dev; .ci/run installs it), or,
# with TPE_REQUIRE_UPSTREAM_EXAMPLE=yes, fails when it is not (CI's asan+debug
# phase sets it, so that this check cannot skip everywhere). TPE_CHECK_CC,
# TPE_CHECK_CFLAGS and TPE_CHECK_LDFLAGS come from make check (with the
# sanitizer flags, without which a sanitized libtpe cannot be linked).

set -u
top_srcdir=${top_srcdir:-.}
top_builddir=${top_builddir:-.}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
CC=${TPE_CHECK_CC:-cc}
pc=$top_builddir/tpe-thpool.pc
libdir=$(cd "$top_builddir/lib/.libs" 2>/dev/null && pwd)

if ! command -v "$PKG_CONFIG" >/dev/null 2>&1; then
	echo "1..0 # SKIP pkg-config not found"
	exit 0
fi
if test -z "$libdir" || ! test -f "$libdir/libtpe.so"; then
	echo "1..0 # SKIP lib/.libs/libtpe.so not built (--disable-shared?)"
	exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tpe-thpool-pc.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/pc" "$tmp/include/tpe"
cp "$top_srcdir/include/tpe/thpool.h" "$tmp/include/tpe/thpool.h"
sed -e "s|^includedir=.*|includedir=$tmp/include|" \
    -e "s|^libdir=.*|libdir=$libdir|" "$pc" >"$tmp/pc/tpe-thpool.pc"

# C-Thread-Pool's own example, when Debian's cthreadpool-dev is installed.
upstream=
for f in /usr/share/doc/cthreadpool-dev/examples/example.c; do
	test -r "$f" && upstream=$f
done

echo "1..3"
flags=$(PKG_CONFIG_PATH=$tmp/pc PKG_CONFIG_LIBDIR=$tmp/pc \
    "$PKG_CONFIG" --cflags --libs tpe-thpool)
# shellcheck disable=SC2086 # the flags are words
if $CC ${TPE_CHECK_CFLAGS:-} -o "$tmp/thpool_compat" \
    "$top_srcdir/examples/thpool_compat.c" $flags ${TPE_CHECK_LDFLAGS:-} >&2; then
	echo "ok 1 - thpool_compat.c builds with: $flags"
else
	echo "not ok 1 - thpool_compat.c does not build with: $flags"
	echo "ok 2 # SKIP not built"
	exit 1
fi
if LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
    "$tmp/thpool_compat" </dev/null >&2; then
	echo "ok 2 - thpool_compat runs"
else
	echo "not ok 2 - thpool_compat exits with status $?"
	exit 1
fi
if test -z "$upstream" && test "${TPE_REQUIRE_UPSTREAM_EXAMPLE:-}" = yes; then
	echo "not ok 3 - C-Thread-Pool's example.c is not installed (cthreadpool-dev)"
	exit 1
elif test -z "$upstream"; then
	echo "ok 3 # SKIP C-Thread-Pool's example.c not installed (cthreadpool-dev)"
elif $CC ${TPE_CHECK_CFLAGS:-} -w -o "$tmp/example" "$upstream" $flags \
    ${TPE_CHECK_LDFLAGS:-} >&2 &&
    LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
    "$tmp/example" </dev/null >&2; then
	echo "ok 3 - $upstream builds unchanged and runs"
else
	echo "not ok 3 - $upstream does not build or run"
	exit 1
fi
exit 0
