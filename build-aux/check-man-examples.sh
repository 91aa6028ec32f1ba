#!/bin/sh
# SPDX-License-Identifier: MIT
# check-man-examples.sh - every manual page in man/ as its reader gets it
# (TAP): each program of an EXAMPLES section compiles as printed, each page
# names the release in .Os, and man-db renders each page from the source
# tree, the link pages (thpool_*.3) included.
#
# An EXAMPLES block (.Bd -literal ... .Ed) is taken from the page source,
# its roff escapes undone (\e \- \& \(aq \(dq). A block with a main() is a
# whole program: it is compiled exactly as printed, with no header added,
# and linked against the built library when there is one. A block without
# is a fragment (functions, or statements): it is compiled after the C
# headers and <tpe.h>, at file scope, or else as the body of a function.
# Warnings are errors (-Wall -Wextra; unused static functions allowed in
# fragments, which define them for the reader to call).
#
# Environment (make check sets them): top_srcdir, top_builddir,
# TPE_CHECK_CC, TPE_CHECK_CFLAGS, TPE_CHECK_LDFLAGS.

set -u
top_srcdir=${top_srcdir:-.}
top_builddir=${top_builddir:-.}
mandir=$top_srcdir/man
cc=${TPE_CHECK_CC:-cc}
cflags=${TPE_CHECK_CFLAGS:--pthread}
ldflags=${TPE_CHECK_LDFLAGS:-}
version=$(awk '/^#define TPE_VERSION_(MAJOR|MINOR|PATCH) / {
	v = v (v == "" ? "" : ".") $3 } END { print v }' \
	"$top_srcdir/include/tpe.h")

work=$(mktemp -d "${TMPDIR:-/tmp}/tpe-man-examples.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT

# The blocks, one file each: $work/NAME.N.K.c (K counts the page's blocks).
n_blocks=0
for p in "$mandir"/*.[1-9]; do
	test -f "$p" && ! test -h "$p" || continue
	base=${p##*/}
	awk -v out="$work/$base" '
		/^\.Sh / { ex = ($2 == "EXAMPLES"); next }
		ex && /^\.\\" example-context: / {
			sub(/^\.\\" example-context: /, "")
			print > (out ".ctx")
			next
		}
		/^\.\\"/ { next }
		ex && /^\.Bd -literal/ { k++; file = out "." k ".c"; inb = 1; next }
		inb && /^\.Ed/ { inb = 0; close(file); next }
		inb { print > file }
	' "$p"
done
for f in "$work"/*.c "$work"/*.ctx; do
	test -f "$f" || continue
	case $f in *.c) n_blocks=$((n_blocks + 1)) ;; esac
	sed -e 's/\\(aq/'"'"'/g' -e 's/\\(dq/"/g' -e 's/\\&//g' \
	    -e 's/\\-/-/g' -e 's/\\e/\\/g' "$f" >"$f.tmp" && mv "$f.tmp" "$f"
done

pages=
n_pages=0
for p in "$mandir"/*.[1-9]; do
	test -f "$p" || continue
	pages="$pages $p"
	n_pages=$((n_pages + 1))
done
have_man=no
# man-db's own sandbox may not start in a build container: the pages are
# ours, no sandbox is needed to read them.
MAN_DISABLE_SECCOMP=1
export MAN_DISABLE_SECCOMP
if command -v man >/dev/null 2>&1 &&
    man --version 2>/dev/null | grep -q '^man [0-9]'; then
	have_man=yes
fi

echo "1..$((n_blocks + 2 * n_pages))"
i=0
failed=0
ok() { i=$((i + 1)); echo "ok $i - $1"; }
not_ok() { i=$((i + 1)); echo "not ok $i - $1"; failed=1; }
show() { sed 's/^/# /' "$1"; }

lib=
if test -f "$top_builddir/lib/libtpe.la" && test -x "$top_builddir/libtool"; then
	lib=$top_builddir/lib/libtpe.la
fi

# ---- EXAMPLES ---------------------------------------------------------------
warn="-Wall -Wextra -Werror"
# A fragment may define a static function for the reader to call, and
# leave an error branch as a comment: "if (...) /* handle it */;".
fragment_warn="-Wno-unused-function -Wno-empty-body"
for f in "$work"/*.c; do
	test -f "$f" || continue
	name=${f##*/}
	name=${name%.c}
	name="man/${name%.*} EXAMPLES block ${name##*.}"
	log=$f.log
	if grep -Eq '^(int[ 	]+)?main[ 	]*\(' "$f"; then
		# shellcheck disable=SC2086 # flags are words
		if ! $cc $warn $cflags -I"$top_srcdir/include" \
		    -I"$top_srcdir/include/tpe" -c -o "$f.o" "$f" >"$log" 2>&1; then
			not_ok "$name (a program) compiles as printed"
			show "$log"
		elif test -n "$lib" && ! "$top_builddir/libtool" --mode=link \
		    $cc $cflags $ldflags -o "$f.exe" "$f.o" "$lib" >"$log" 2>&1; then
			not_ok "$name (a program) links against libtpe"
			show "$log"
		else
			ok "$name (a program) compiles as printed${lib:+ and links}"
		fi
		continue
	fi
	prelude="#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <tpe.h>"
	ctx=${f%.[0-9]*.c}.ctx
	if test -f "$ctx"; then
		prelude="$prelude
$(cat "$ctx")"
	fi
	{ echo "$prelude"; echo "#line 1 \"$name\""; cat "$f"; } >"$f.top.c"
	{ echo "$prelude"; echo "void tpe_example(void);"; \
	  echo "void tpe_example(void) {"; echo "#line 1 \"$name\""; cat "$f"; \
	  echo "}"; } \
	    >"$f.body.c"
	# shellcheck disable=SC2086 # flags are words
	if $cc $warn $fragment_warn $cflags -I"$top_srcdir/include" \
	    -c -o "$f.o" "$f.top.c" >"$log" 2>&1; then
		ok "$name (definitions) compiles"
	elif $cc $warn $fragment_warn $cflags -I"$top_srcdir/include" \
	    -c -o "$f.o" "$f.body.c" >"$log.body" 2>&1; then
		ok "$name (statements) compiles in a function"
	else
		not_ok "$name (a fragment) compiles"
		echo "# at file scope:"
		show "$log"
		echo "# as a function body:"
		show "$log.body"
	fi
done

# ---- .Os: the project and its version -----------------------------------------
for p in $pages; do
	name=man/${p##*/}
	os=$(sed -n 's/^\.Os[ \t]*//p' "$p")
	if test "x$os" = "xlibtpe $version"; then
		ok "$name: .Os $os"
	else
		not_ok "$name: .Os says \"$os\", not \"libtpe $version\" (include/tpe.h)"
	fi
done

# ---- man-db renders each page from the tree -----------------------------------
for p in $pages; do
	name=man/${p##*/}
	if test $have_man = no; then
		i=$((i + 1))
		echo "ok $i # SKIP $name: man (man-db) is not installed"
		continue
	fi
	out=$(MANWIDTH=80 LC_ALL=C.UTF-8 man -l "$p" 2>&1 >"$work/page.txt")
	lines=$(wc -l <"$work/page.txt")
	if test -z "$out" && test "$lines" -gt 5 &&
	    grep -q "libtpe $version" "$work/page.txt"; then
		ok "$name: man -l renders $lines lines"
	else
		not_ok "$name: man -l (${lines} lines)"
		printf '%s\n' "$out" | sed 's/^/# /'
	fi
done
exit $failed
