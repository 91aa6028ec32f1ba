#!/bin/sh
# SPDX-License-Identifier: MIT
# check-symbols.sh - every symbol libtpe.so exports is public and documented (TAP).
#
# One line per exported symbol: it must start with tpe_, or be one of the
# thpool_ functions of the C-Thread-Pool API (include/tpe/thpool.h; anything
# else is a leak through -fvisibility=hidden), and have its page
# man/<symbol>.3. A thpool_ page is a ".so" link to tpe_thpool.3, which must
# name the function in its NAME section (.Nm), so that man(1) finds it.

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
	thpool_*)
		page=$top_srcdir/man/$s.3
		so=
		if test -f "$page"; then
			so=$(sed -n 's/^\.so[ \t]*//p' "$page")
		fi
		if ! test -f "$page"; then
			echo "not ok $i - $s is exported but man/$s.3 does not exist"
			failed=1
		elif test -n "$so" && ! grep -q "^\.Nm $s\( ,\)*\$" \
		    "$top_srcdir/man/${so##*/}" 2>/dev/null; then
			echo "not ok $i - $s: man/$s.3 links to $so, which does not name it (.Nm $s)"
			failed=1
		else
			echo "ok $i - $s (man/$s.3${so:+ -> $so})"
		fi
		;;
	*)
		echo "not ok $i - $s is exported but is neither a tpe_ nor a thpool_ name"
		failed=1
		;;
	esac
done
exit $failed
