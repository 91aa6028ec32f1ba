#!/bin/sh
# SPDX-License-Identifier: MIT
# check-symbols.sh - every symbol libtpe.so exports is public, documented and
# versioned (TAP).
#
# One line per exported symbol: it must start with tpe_, or be one of the
# thpool_ functions of the C-Thread-Pool API (include/tpe/thpool.h; anything
# else is a leak through -fvisibility=hidden), have its page man/<symbol>.3
# (a thpool_ page is a symbolic link to tpe_thpool.3, which must name the
# function in its NAME section, .Nm, so that man(1) finds it), and carry a
# version that lib/libtpe.map defines (TPE_0; a later release adds nodes,
# doc/abi.md), when the library was linked with it (configure's "version
# script" result, TPE_VERSION_SCRIPT=yes|no).

set -u
top_srcdir=${top_srcdir:-.}
top_builddir=${top_builddir:-.}
lib=$top_builddir/lib/.libs/libtpe.so
NM=${NM:-nm}
TPE_VERSION_SCRIPT=${TPE_VERSION_SCRIPT:-yes}
# The version nodes: "TPE_0 {", "TPE_1 {", ... at the start of a line.
versions=" $(sed -n 's/^\(TPE_[0-9][0-9]*\) *{.*/\1/p' \
	"$top_srcdir/lib/libtpe.map" | tr '\n' ' ')"

if ! test -f "$lib"; then
	echo "1..0 # SKIP $lib not built (configured with --disable-shared?)"
	exit 0
fi

# "VALUE TYPE NAME[@@VERSION]", versions shown by binutils >= 2.35 (and
# asked for with --with-symbol-versions before that); print "NAME VERSION",
# VERSION "-" when there is none. An absolute symbol (type A) is a version's
# own definition (TPE_0), not a symbol of the interface.
list=$($NM -D --defined-only --with-symbol-versions "$lib" 2>/dev/null ||
	$NM -D --defined-only "$lib")
syms=$(echo "$list" | awk 'NF >= 3 {
	name = $3; ver = "-"
	if ((i = index(name, "@")) > 0) {
		ver = substr(name, i); sub(/^@+/, "", ver)
		name = substr(name, 1, i - 1)
	}
	if ($2 == "A")
		next
	print name, ver
}' | sort -u)
if test -z "$syms"; then
	echo "1..1"
	echo "not ok 1 - $lib exports nothing"
	exit 1
fi

n=$(echo "$syms" | wc -l)
echo "1..$n"

i=0
failed=0
echo "$syms" | {
	while read -r s v; do
		i=$((i + 1))
		page=$top_srcdir/man/$s.3
		so=
		case $s in
		tpe_*) ;;
		thpool_*)
			if test -h "$page"; then
				so=$(readlink "$page")
			elif test -f "$page"; then
				so=$(sed -n 's/^\.so[ \t]*//p' "$page")
			fi
			;;
		*)
			echo "not ok $i - $s is exported but is neither a tpe_ nor a thpool_ name"
			failed=1
			continue
			;;
		esac
		if ! test -f "$page"; then
			echo "not ok $i - $s is exported but man/$s.3 does not exist"
			failed=1
		elif test -n "$so" && ! grep -q "^\.Nm $s\( ,\)*\$" \
		    "$top_srcdir/man/${so##*/}" 2>/dev/null; then
			echo "not ok $i - $s: man/$s.3 links to $so, which does not name it (.Nm $s)"
			failed=1
		elif test "$TPE_VERSION_SCRIPT" = yes &&
		    case $versions in *" $v "*) false ;; *) true ;; esac; then
			echo "not ok $i - $s has version $v, not one of$versions(lib/libtpe.map)"
			failed=1
		else
			echo "ok $i - $s (man/$s.3${so:+ -> $so}, version $v)"
		fi
	done
	exit $failed
}
