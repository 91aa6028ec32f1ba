#!/bin/sh
# SPDX-License-Identifier: MIT
# update-abi.sh - write the ABI description of libtpe.so (abidw, from
# libabigail: Debian's abigail-tools) to abi/libtpe.abi, the baseline the
# CI's abi phase compares each build against (doc/abi.md).
#
#   build-aux/update-abi.sh               configure and build the library in
#                                         _build-abi (debug info: -g -O2,
#                                         configure's default), then write
#                                         abi/libtpe.abi
#   build-aux/update-abi.sh DIR [OUT]     describe DIR/lib/.libs/libtpe.so,
#                                         already built, into OUT (default
#                                         abi/libtpe.abi)
#
# Run it from the top of the source tree, in the commit that changes the
# interface and the -version-info numbers in configure.ac (doc/abi.md).
# The description leaves out paths and source locations, so that it depends
# on the library only, not on where it was built, and the types that
# include/ does not define (opaque handles stay opaque).

set -eu
ABIDW=${ABIDW:-abidw}
top=$(pwd)
if ! test -f "$top/include/tpe.h"; then
	echo "update-abi.sh: run it from the top of the libtpe source tree" >&2
	exit 2
fi
if ! command -v "$ABIDW" >/dev/null 2>&1; then
	echo "update-abi.sh: $ABIDW not found (Debian: apt-get install abigail-tools)" >&2
	exit 2
fi

if test $# -ge 1; then
	dir=$1
else
	dir=_build-abi
	test -f configure || autoreconf -fi
	mkdir -p "$dir"
	(cd "$dir" && ../configure --disable-static >configure.out 2>&1) || {
		tail -n 40 "$dir/configure.out" >&2
		exit 1
	}
	make -C "$dir" lib/libtpe.la >"$dir/make.out" 2>&1 || {
		tail -n 40 "$dir/make.out" >&2
		exit 1
	}
fi
out=${2:-abi/libtpe.abi}
lib=$dir/lib/.libs/libtpe.so
if ! test -f "$lib"; then
	echo "update-abi.sh: $lib not found (built with --disable-shared?)" >&2
	exit 1
fi

"$ABIDW" --no-corpus-path --no-comp-dir-path --no-show-locs \
	--headers-dir "$top/include" --drop-private-types \
	--drop-undefined-syms --out-file "$out" "$lib"
nfun=$(grep -c '<elf-symbol name=' "$out" || true)
soname=$(sed -n "s/.* soname='\([^']*\)'.*/\1/p" "$out" | head -n 1)
echo "update-abi.sh: wrote $out ($soname, $nfun symbols)"
