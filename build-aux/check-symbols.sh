#!/bin/sh
# SPDX-License-Identifier: MIT
# check-symbols.sh - every symbol libtpe.so exports is public and documented (TAP).
#
# One line per exported symbol: it must start with tpe_ (anything else is a
# leak through -fvisibility=hidden) and have its page man/<symbol>.3.

set -u
top_srcdir=${top_srcdir:-.}
top_builddir=${top_builddir:-.}
lib=$top_builddir/lib/.libs/libtpe.so
NM=${NM:-nm}

if ! test -f "$lib"; then
	echo "1..0 # SKIP $lib not built (configured with --disable-shared?)"
	exit 0
fi

# "VALUE TYPE NAME[@VERSION]"; keep the name.
syms=$($NM -D --defined-only "$lib" | awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }' | sort -u)
if test -z "$syms"; then
	echo "1..1"
	echo "not ok 1 - $lib exports nothing"
	exit 1
fi

n=0
for s in $syms; do
	n=$((n + 1))
done
echo "1..$n"

i=0
failed=0
for s in $syms; do
	i=$((i + 1))
	case $s in
	tpe_*)
		if test -f "$top_srcdir/man/$s.3"; then
			echo "ok $i - $s (man/$s.3)"
		else
			echo "not ok $i - $s is exported but man/$s.3 does not exist"
			failed=1
		fi
		;;
	*)
		echo "not ok $i - $s is exported but is not a tpe_ name"
		failed=1
		;;
	esac
done
exit $failed
