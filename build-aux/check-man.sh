#!/bin/sh
# SPDX-License-Identifier: MIT
# check-man.sh - lint every manual page in man/ with mandoc (TAP: one line a page).
#
# A page must be silent under "mandoc -Tlint -Wwarning". A page that is only
# a ".so" link must point at a page that exists in man/.

set -u
top_srcdir=${top_srcdir:-.}
mandir=$top_srcdir/man
MANDOC=${MANDOC-mandoc}

if test -z "$MANDOC" || ! command -v "$MANDOC" >/dev/null 2>&1; then
	echo "1..0 # SKIP mandoc not found (Debian: apt-get install mandoc)"
	exit 0
fi

pages=
n=0
for p in "$mandir"/*.[1-9]; do
	test -f "$p" || continue
	pages="$pages $p"
	n=$((n + 1))
done
if test $n -eq 0; then
	echo "1..0 # SKIP no manual pages in $mandir"
	exit 0
fi
echo "1..$n"

i=0
failed=0
for p in $pages; do
	i=$((i + 1))
	name=man/${p##*/}
	# A link page: its only request is ".so manN/target.N".
	so=$(sed -n '/^\.\\"/d; /^\.so[ \t]/{s/^\.so[ \t]*//p;q;}; q' "$p")
	if test -n "$so"; then
		if test -f "$mandir/${so##*/}"; then
			echo "ok $i - $name (.so $so)"
		else
			echo "not ok $i - $name: .so target $so is not in man/"
			failed=1
		fi
		continue
	fi
	out=$("$MANDOC" -Tlint -Wwarning "$p" 2>&1)
	rc=$?
	if test $rc -eq 0 && test -z "$out"; then
		echo "ok $i - $name"
	else
		echo "not ok $i - $name (mandoc exit status $rc)"
		printf '%s\n' "$out" | sed 's/^/# /'
		failed=1
	fi
done
exit $failed
