#!/bin/sh
# SPDX-License-Identifier: MIT
# mutation-check.sh - break the concurrency-critical lines one at a time and
# check that the test named for each catches it.
#
# usage: build-aux/mutation-check.sh [-l LIST] [-r RUNS] [-t SECONDS] [ID...]
#
# LIST is a file or a directory whose *.txt files are read in name order
# (default build-aux/mutations/, one file per part of lib/). It holds one
# record per mutation, records separated by blank lines, "#" lines are
# comments; an id occurs once in the whole list:
#
#	id: reserve-leave-store
#	file: lib/pool/reserve.c
#	from: return __atomic_compare_exchange_n(&s->state, &expect, EMPTY,
#	to: return (void)expect, __atomic_store_n(&s->state, EMPTY, ...
#	test: tests/test_reserved test_reserved_time_out_against_claim
#	tries: 3
#
# "from" is the original code as text, not a line number (the file may have
# moved on): it must occur exactly once in the file, where any run of
# white space in it matches any run of white space (so it may span lines of
# the source). "to" replaces it. "test" is a test program and one of its
# cmocka cases (run alone with TPE_TEST_FILTER, tests/helpers.h).
# "tries" (optional, default 1) is for a mutation that only a race
# catches, with a known rate: the case runs up to that many times and the
# mutation is killed at the first run that fails.
#
# The source tree is copied to a scratch directory under $TMPDIR, configured
# there with --enable-debug and built once; then for each mutation the one
# file is changed, the test program rebuilt (make rebuilds that file only)
# and run RUNS times (default 1), each bounded by SECONDS (default 60); the
# file is put back before the next. A mutation is killed when every run
# failed (a run killed by the bound counts, and says so); with -r, the
# count of runs that failed is the measure of a test (tries is ignored).
# First, each named case runs once unmutated and must pass: a case that
# fails anyway kills nothing. A "from" that is not found exactly once, or
# a mutated file that does not compile, is an error: the list must be
# brought up to date.
# Prints one line per mutation, the kill rate, and last "N passed, N failed"
# (killed, and survived or in error); exits non-zero below 100%.
# Naming IDs checks only those.

set -u
top=$(cd "$(dirname "$0")/.." && pwd)
list=$top/build-aux/mutations
runs=1
runs_given=no
bound=60
while getopts l:r:t: opt; do
	case $opt in
	l) list=$(cd "$(dirname "$OPTARG")" && pwd)/$(basename "$OPTARG") ;;
	r) runs=$OPTARG; runs_given=yes ;;
	t) bound=$OPTARG ;;
	*) sed -n '5p' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
only=" $* "

if test -f "$top/config.status"; then
	echo "error: $top is configured in place; run make distclean first" >&2
	exit 2
fi
if ! test -x "$top/configure"; then
	echo "error: $top/configure is missing; run autoreconf -fi first" >&2
	exit 2
fi
if test -d "$list"; then
	set -- "$list"/*.txt
else
	set -- "$list"
fi
if ! test -r "$1"; then
	echo "error: no list $list" >&2
	exit 2
fi
TIMEOUT=
if timeout --version >/dev/null 2>&1; then
	TIMEOUT="timeout -k 5 $bound"
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/tpe-mutation.XXXXXX") || exit 2
trap 'rm -rf "$scratch"' EXIT
trap 'exit 130' INT TERM

# The records as tab-separated lines: id, file, from, to, program, case.
awk -F': ' '
function flush() {
	if (id != "")
		printf "%s\t%s\t%s\t%s\t%s\t%s\n", id, file, from, to, test,
		    tries == "" ? 1 : tries
	id = file = from = to = test = tries = ""
}
FNR == 1 { flush() }
/^#/ { next }
/^[ \t]*$/ { flush(); next }
{
	key = $1; val = substr($0, length($1) + 3)
	if (key == "id") id = val
	else if (key == "file") file = val
	else if (key == "from") from = val
	else if (key == "to") to = val
	else if (key == "test") { sub(/ /, "\t", val); test = val }
	else if (key == "tries") tries = val
	else { print "error: unknown key " key > "/dev/stderr"; exit 2 }
}
END { flush() }' "$@" >"$scratch/list.all" || exit 2
dup=$(cut -f1 "$scratch/list.all" | sort | uniq -d)
if test -n "$dup"; then
	echo "error: ids listed twice:" $dup >&2
	exit 2
fi
mv "$scratch/list.all" "$scratch/list"

if test "$only" != "  "; then
	awk -F'\t' -v only="$only" 'index(only, " " $1 " ")' \
	    "$scratch/list" >"$scratch/list.only"
	mv "$scratch/list.only" "$scratch/list"
fi
total=$(wc -l <"$scratch/list")
if test "$total" -eq 0; then
	echo "error: no mutation selected" >&2
	exit 2
fi

echo "== mutation: copy and build $top in $scratch (--enable-debug)"
mkdir "$scratch/src"
(cd "$top" && tar cf - --exclude=./.git --exclude='./_*' \
    --exclude=./autom4te.cache .) | (cd "$scratch/src" && tar xf -) || exit 2
mkdir "$scratch/src/_m"
if ! (cd "$scratch/src/_m" && ../configure --enable-debug) \
    >"$scratch/configure.log" 2>&1; then
	tail -n 40 "$scratch/configure.log"
	echo "0 passed, $total failed"
	exit 1
fi
programs=$(cut -f5 "$scratch/list" | sort -u)
# shellcheck disable=SC2086 # the programs are words
if ! make -C "$scratch/src/_m" -j2 $programs >"$scratch/make.log" 2>&1; then
	tail -n 40 "$scratch/make.log"
	echo "0 passed, $total failed"
	exit 1
fi

# run PROGRAM CASE: 0 when the case passed.
run() {
	(cd "$scratch/src/_m" && TPE_TEST_FILTER=$2 $TIMEOUT "./$1" \
	    >"$scratch/run.log" 2>&1) 2>/dev/null
}

echo "== mutation: each case unmutated"
bad=""
for pc in $(cut -f5,6 "$scratch/list" | sort -u | tr '\t' '@'); do
	prog=${pc%@*}
	case_=${pc#*@}
	if ! run "$prog" "$case_"; then
		echo "error: $prog $case_ fails on the unmutated code:"
		tail -n 20 "$scratch/run.log"
		bad="$bad $pc"
	elif case $case_ in *'*'*) false ;; *) true ;; esac &&
	    ! grep -q "^\[       OK \] $case_\$" "$scratch/run.log"; then
		echo "error: $prog has no case $case_"
		bad="$bad $pc"
	fi
done

killed=0
failed=0
tab=$(printf '\t')
while IFS=$tab read -r id file from to prog case_ tries; do
	src=$scratch/src/$file
	if ! test -f "$src"; then
		echo "ERROR    $id: no file $file"
		failed=$((failed + 1))
		continue
	fi
	case " $bad " in
	*" $prog@$case_ "*)
		echo "ERROR    $id: $prog $case_ does not pass unmutated"
		failed=$((failed + 1))
		continue ;;
	esac
	cp "$src" "$scratch/orig"
	FROM=$from TO=$to perl -0777 -e '
		my $text = <STDIN>;
		my $re = join("\\s+", map { quotemeta } split(/\s+/, $ENV{FROM}));
		my $n = () = $text =~ /$re/g;
		exit(10 + ($n > 9 ? 9 : $n)) if $n != 1;
		$text =~ s/$re/$ENV{TO}/;
		print $text;' <"$scratch/orig" >"$src"
	status=$?
	if test $status -ne 0; then
		cp "$scratch/orig" "$src"
		echo "ERROR    $id: the original text occurs $((status - 10)) times in $file"
		failed=$((failed + 1))
		continue
	fi
	if ! make -C "$scratch/src/_m" "$prog" >"$scratch/make.log" 2>&1; then
		cp "$scratch/orig" "$src"
		echo "ERROR    $id: the mutated $file does not build:"
		grep -m 5 'error' "$scratch/make.log"
		failed=$((failed + 1))
		continue
	fi
	caught=0
	how=""
	by=""
	i=0
	n=$runs
	if test $runs_given = no && test "$tries" -gt 1; then
		n=$tries
	fi
	while test $i -lt "$n"; do
		i=$((i + 1))
		run "$prog" "$case_"
		status=$?
		if test $status -ne 0; then
			caught=$((caught + 1))
			if test $status -eq 124 || test $status -eq 137; then
				how=", by the time bound"
			fi
			by=$(sed -n 's/^\[  FAILED  \] \(test_[a-z0-9_]*\)$/\1/p' \
			    "$scratch/run.log" | sort -u | tr '\n' ' ')
			# Aborted or killed: the case that was running.
			test -n "$by" || by=$(sed -n \
			    's/^\[ RUN      \] \(test_[a-z0-9_]*\)$/\1/p' \
			    "$scratch/run.log" | tail -n 1)
			# One failed try kills (tries, not -r).
			test "$n" -eq "$runs" || break
		fi
	done
	# Put the file back (a newer time, so that make rebuilds it).
	cp "$scratch/orig" "$src"
	if test $caught -eq "$runs" || { test "$n" -ne "$runs" &&
	    test $caught -gt 0; }; then
		killed=$((killed + 1))
		if test "$n" -ne "$runs"; then
			how=", at try $i of $n$how"
		else
			how=" ($caught of $runs runs$how)"
		fi
		echo "killed   $id: $file, $prog $case_$how${by:+; failed: $by}"
	else
		failed=$((failed + 1))
		echo "SURVIVED $id: $file, $prog $case_ (caught $caught of $i runs)"
	fi
done <"$scratch/list"

echo "== mutation: $killed of $total killed ($((killed * 100 / total))%)"
echo "$killed passed, $failed failed"
test "$failed" -eq 0
