#!/bin/sh
# SPDX-License-Identifier: MIT
# debian-source.sh - build the Debian source package of libtpe from the
# release tarball, as an archive would: the "make dist" tarball becomes
# libtpe_X.Y.Z.orig.tar.gz, debian/ of this tree goes on top of it, and
# dpkg-buildpackage -S makes the .dsc, the .debian.tar.xz and a source
# .changes (unsigned).
#
#   build-aux/debian-source.sh [-t TARBALL] [OUTDIR]    (default: _debian)
#
# Without -t, the tarball is made with "make dist": in this tree when it is
# configured in place, else in OUTDIR/dist, configured from this tree
# (autoreconf -fi first when ./configure is missing). The tarball's version
# must be the upstream part of debian/changelog's. Then, to build the
# binary packages from it:
#
#   dpkg-source -x OUTDIR/libtpe_X.Y.Z-R.dsc D && cd D && dpkg-buildpackage -us -uc -b
#
# Needs dpkg-dev and debhelper (Debian: apt-get install dpkg-dev debhelper).
# Prints the path of the .dsc as its last line.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
tarball=
if test "${1:-}" = -t; then
	tarball=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
	shift 2
fi
out=${1:-_debian}
mkdir -p "$out"
out=$(cd "$out" && pwd)

say() { echo "debian-source.sh: $*" >&2; }

version=$(cd "$top" && dpkg-parsechangelog -SVersion)
upstream=${version%-*}
name=$(cd "$top" && dpkg-parsechangelog -SSource)

if test -z "$tarball"; then
	if test -f "$top/config.status"; then
		say "make dist in $top (configured in place)"
		make -C "$top" dist >"$out/dist.log" 2>&1 ||
			{ tail -n 30 "$out/dist.log" >&2; exit 1; }
		tarball=$top/$name-$upstream.tar.gz
	else
		if ! test -x "$top/configure"; then
			say "autoreconf -fi in $top"
			(cd "$top" && autoreconf -fi) >"$out/autoreconf.log" 2>&1 ||
				{ tail -n 30 "$out/autoreconf.log" >&2; exit 1; }
		fi
		say "configure and make dist in $out/dist"
		rm -rf "$out/dist"
		mkdir -p "$out/dist"
		(cd "$out/dist" && "$top/configure" && make dist) \
			>"$out/dist.log" 2>&1 ||
			{ tail -n 30 "$out/dist.log" >&2; exit 1; }
		tarball=$out/dist/$name-$upstream.tar.gz
	fi
fi
if ! test -f "$tarball"; then
	say "$tarball not found: is debian/changelog's upstream version" \
		"($upstream) the version of configure.ac?"
	exit 1
fi

# The .orig.tar.gz, and the tree it unpacks to with debian/ added.
orig=$out/${name}_$upstream.orig.tar.gz
cp "$tarball" "$orig"
rm -rf "$out/$name-$upstream"
tar -C "$out" -xzf "$orig"
if ! test -d "$out/$name-$upstream"; then
	say "$orig does not unpack to $name-$upstream/"
	exit 1
fi
# The packaging as git tracks it (a checkout may hold build leftovers).
if git -C "$top" rev-parse --git-dir >/dev/null 2>&1; then
	(cd "$top" && git ls-files -z debian) |
		(cd "$top" && xargs -0 cp --parents -P -t "$out/$name-$upstream")
else
	cp -R "$top/debian" "$out/$name-$upstream/"
fi
say "dpkg-buildpackage -S in $out/$name-$upstream"
(cd "$out/$name-$upstream" && dpkg-buildpackage -S -us -uc -d) \
	>"$out/source.log" 2>&1 || { tail -n 30 "$out/source.log" >&2; exit 1; }
dsc=$out/${name}_$version.dsc
test -f "$dsc"
echo "$dsc"
