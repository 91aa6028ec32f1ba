#!/bin/sh
# SPDX-License-Identifier: MIT
# mutation-check.sh - break the concurrency-critical lines one at a time and
# check that the test named for each catches it.
#
# usage: build-aux/mutation-check.sh [-j LANES] [-l LIST] [-r RUNS] [-t SECONDS] [ID...]
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
# The source tree is copied to a scratch directory under $TMPDIR,
# configured there with --enable-debug --disable-shared CFLAGS=-O2 (the
# debug build's code without debug info; the tests link the library's
# static convenience archive anyway) and the named programs built once.
# The entries are then taken one at a time by LANES lanes (default: the
# number of online CPUs), each in its own copy of that build, working at
# the same time, each taking the next entry when it is done with one. For each mutation a lane changes the one file,
# recompiles the objects of the program whose dependency files (gcc -MD)
# name it, with the compiler commands of the first build, re-creates the
# library's archive with ar, links the program with the command of the
# first build (no make, no libtool: their run per mutation cost ten times
# the rest), runs the case RUNS times (default 1), each bounded by SECONDS
# (default 15: a correct case takes well under a second, a mutation that
# makes it hang is caught by the bound), and puts the file and objects
# back. A mutation is killed when every run failed; a run killed by the
# bound counts, and the line and the summary say so (such a case should
# fail on an assertion about state where a state can be observed). With
# -r, the count of runs that failed is the measure of a test (tries is
# ignored). Before its first mutation of a case, a lane runs the case once
# unmutated (bound 4 x SECONDS), and it must pass: a case that fails anyway
# kills nothing.
# A "from" that is not found exactly once, a mutated file that does not
# compile or that the program is not built from, is an error: the list
# must be brought up to date.
# Prints one line per mutation as it ends (with its time), the kill rate,
# and last "N passed, N failed" (killed, and survived or in error); exits
# non-zero below 100%. Naming IDs checks only those.

set -u
top=$(cd "$(dirname "$0")/.." && pwd)
list=$top/build-aux/mutations
runs=1
runs_given=no
bound=15
lanes=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
while getopts j:l:r:t: opt; do
	case $opt in
	j) lanes=$OPTARG ;;
	l) list=$(cd "$(dirname "$OPTARG")" && pwd)/$(basename "$OPTARG") ;;
	r) runs=$OPTARG; runs_given=yes ;;
	t) bound=$OPTARG ;;
	*) sed -n '6p' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
only=" $* "
case $lanes in
'' | *[!0-9]* | 0) lanes=1 ;;
esac

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
set -f # a case may be a glob ("*"): never expanded here
TIMEOUT=
PRE_TIMEOUT=
if timeout --version >/dev/null 2>&1; then
	TIMEOUT="timeout -k 5 $bound"
	PRE_TIMEOUT="timeout -k 5 $((bound * 4))"
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
if test "$lanes" -gt "$total"; then
	lanes=$total
fi

# ---- the one build -------------------------------------------------------

start=$(date +%s)
echo "== mutation: copy and build $top in $scratch" \
    "(--enable-debug --disable-shared CFLAGS=-O2)"
mkdir "$scratch/src"
(cd "$top" && tar cf - --exclude=./.git --exclude='./_*' \
    --exclude=./autom4te.cache .) | (cd "$scratch/src" && tar xf -) || exit 2
mkdir "$scratch/src/_m"
if ! (cd "$scratch/src/_m" && ../configure --enable-debug --disable-shared \
    CFLAGS=-O2) >"$scratch/configure.log" 2>&1; then
	tail -n 40 "$scratch/configure.log"
	echo "0 passed, $total failed"
	exit 1
fi
programs=$(cut -f5 "$scratch/list" | sort -u)
# shellcheck disable=SC2086 # the programs are words
if ! make -C "$scratch/src/_m" -j"$lanes" V=1 $programs \
    >"$scratch/make.log" 2>&1; then
	tail -n 40 "$scratch/make.log"
	echo "0 passed, $total failed"
	exit 1
fi

# The commands of that build, from its V=1 log, to run again without make
# and libtool: "OBJECT<tab>COMMAND" for each compiled object (libtool
# prints the compiler command it runs; the dependency-file options are
# dropped, the dependencies do not change), "PROGRAM<tab>COMMAND" for each
# link of a program; and the objects of the library's archive.
m=$scratch/src/_m
# cmd_of NAME TABLE: the command that makes NAME.
cmd_of() {
	awk -F'\t' -v name="$1" '$1 == name { print $2 }' "$2"
}
cc=$(sed -n 's/^CC = //p' "$m/Makefile")
AR=$(sed -n 's/^AR = //p' "$m/Makefile")
RANLIB=$(sed -n 's/^RANLIB = //p' "$m/Makefile")
awk -v cc="$cc" -v dir="$m" '
{
	line = $0
	sub(/^libtool: (compile|link): +/, "", line)
	if (index(line, cc " ") != 1)
		next
	sub(/[ \t]*&&[ \t]*\\$/, "", line)
	gsub(/ -MT [^ ]+ -MD -MP -MF [^ ]+/, "", line)
	n = split(line, w, /[ \t]+/)
	out = ""
	for (i = 1; i < n; i++)
		if (w[i] == "-o")
			out = w[i + 1]
	if (out != "")
		print out "\t" line > (dir (line ~ / -c / ? "/compile" : "/link"))
}' "$scratch/make.log"
core=$(printf 'tpe-mutation-objects:\n\t@echo $(lib_libtpe_core_la_OBJECTS)\n' |
    make -s --no-print-directory -C "$m" -f Makefile -f - \
    tpe-mutation-objects | sed 's/\.lo\>/.o/g')
for o in $core; do
	if ! cmd_of "$o" "$m/compile" | grep -q .; then
		echo "error: no compiler command for $o in the build's log" >&2
		echo "0 passed, $total failed"
		exit 1
	fi
done
printf '%s\n' $core >"$m/core"
for p in $programs; do
	if ! cmd_of "$p" "$m/link" | grep -q .; then
		echo "error: no link command for $p in the build's log" >&2
		echo "0 passed, $total failed"
		exit 1
	fi
done
echo "== mutation: built in $(($(date +%s) - start)) s;" \
    "$total mutations in $lanes lanes"

# ---- the lanes -----------------------------------------------------------

# run DIR PROGRAM CASE [TIMEOUT]: 0 when the case passed; its output in
# DIR/run.log. (The exit keeps the subshell from becoming the program, so
# that it, not the lane, reports a program that died of a signal, to
# /dev/null: the case's line says what happened.)
run() {
	(cd "$1/_m" && TPE_TEST_FILTER=$3 ${4-$TIMEOUT} "./$2" \
	    >"$1/run.log" 2>&1; exit $?) 2>/dev/null
}

# rebuild DIR PROGRAM FILE: in the build DIR/src/_m, recompile the objects
# of PROGRAM that FILE goes into (listed in DIR/objects, each kept as
# OBJECT.orig), re-create the archive and link PROGRAM; 1 when nothing of
# PROGRAM is built from FILE, 2 when a command failed (its output in
# DIR/make.log).
rebuild() {
	(
		cd "$1/src/_m" || exit 2
		: >"$1/objects"
		for d in $(grep -rlE "(^| )\.\./$3( |\$)" --include='*.Po' \
		    --include='*.Plo' .); do
			o=$(sed -n '1s/\.l\{0,1\}o:.*/.o/p' "$d")
			if grep -qxF "$o" core ||
			    cmd_of "$2" link | grep -qF " $o "; then
				echo "$o" >>"$1/objects"
			fi
		done
		test -s "$1/objects" || exit 1
		for o in $(cat "$1/objects"); do
			cp -p "$o" "$o.orig"
			sh -c "$(cmd_of "$o" compile)" || exit 2
		done
		# Appended (q), not replaced (r): two objects share a name.
		rm -f lib/.libs/libtpe_core.a
		$AR cq lib/.libs/libtpe_core.a $(cat core) &&
		    $RANLIB lib/.libs/libtpe_core.a || exit 2
		sh -c "$(cmd_of "$2" link)" || exit 2
	) >"$1/make.log" 2>&1
}

# restore DIR FILE PROGRAM: the original file, objects and program back
# (the program as the first build linked it: a case later run unmutated in
# this lane must not run the last mutation's link).
restore() {
	cp -p "$1/orig" "$1/src/$2"
	for o in $(cat "$1/objects" 2>/dev/null); do
		if test -f "$1/src/_m/$o.orig"; then
			mv "$1/src/_m/$o.orig" "$1/src/_m/$o"
		fi
	done
	: >"$1/objects"
	cp -p "$1/src/_m/$3.pristine" "$1/src/_m/$3"
}

# verified DIR PROGRAM CASE: 0 when the case passes unmutated in the lane
# DIR (run once a lane, the first time one of its entries needs it, bound
# PRE_TIMEOUT; the verdict kept in DIR/verdicts), 1 when it fails (printed
# once), or 2 when PROGRAM has no such case.
verified() {
	v=$(grep -F "$2@$3 " "$1/verdicts" 2>/dev/null | head -n 1)
	if test -z "$v"; then
		if ! run "$1/src" "$2" "$3" "$PRE_TIMEOUT"; then
			echo "error: $2 $3 fails on the unmutated code:"
			tail -n 20 "$1/src/run.log"
			v="$2@$3 1"
		elif case $3 in *'*'*) false ;; *) true ;; esac &&
		    ! grep -q "^\[       OK \] $3\$" "$1/src/run.log"; then
			echo "error: $2 has no case $3"
			v="$2@$3 2"
		else
			v="$2@$3 0"
		fi
		echo "$v" >>"$1/verdicts"
	fi
	return "${v##* }"
}

# lane K: takes the next entry of the list nobody took yet (a claim is a
# mkdir, which one lane alone wins), until none is left, in
# $scratch/lane.K/src (a copy of the build): the lanes stay busy to the
# end whatever each entry costs (a fixed share left one lane running
# alone behind entries the time bound kills). Each result line is printed
# and kept in $scratch/lane.K/results.
lane() {
	dir=$scratch/lane.$1
	: >"$dir/results"
	: >"$dir/verdicts"
	nr=0
	tab=$(printf '\t')
	while IFS=$tab read -r id file from to prog case_ tries; do
		nr=$((nr + 1))
		mkdir "$scratch/claims/$nr" 2>/dev/null || continue
		t0=$(date +%s)
		src=$dir/src/$file
		if ! test -f "$src"; then
			echo "ERROR    $id: no file $file" | tee -a "$dir/results"
			continue
		fi
		if ! verified "$dir" "$prog" "$case_"; then
			echo "ERROR    $id: $prog $case_ does not pass unmutated" |
			    tee -a "$dir/results"
			continue
		fi
		cp -p "$src" "$dir/orig"
		FROM=$from TO=$to perl -0777 -e '
			my $text = <STDIN>;
			my $re = join("\\s+", map { quotemeta } split(/\s+/, $ENV{FROM}));
			my $n = () = $text =~ /$re/g;
			exit(10 + ($n > 9 ? 9 : $n)) if $n != 1;
			$text =~ s/$re/$ENV{TO}/;
			print $text;' <"$dir/orig" >"$src"
		status=$?
		if test $status -ne 0; then
			cp -p "$dir/orig" "$src"
			echo "ERROR    $id: the original text occurs" \
			    "$((status - 10)) times in $file" | tee -a "$dir/results"
			continue
		fi
		rebuild "$dir" "$prog" "$file"
		status=$?
		if test $status -ne 0; then
			restore "$dir" "$file" "$prog"
			if test $status -eq 1; then
				echo "ERROR    $id: $prog is not built from $file" |
				    tee -a "$dir/results"
			else
				echo "ERROR    $id: the mutated $file does not build:" |
				    tee -a "$dir/results"
				grep -m 5 'error' "$dir/make.log"
			fi
			continue
		fi
		caught=0
		bounded=0
		by=""
		i=0
		n=$runs
		if test $runs_given = no && test "$tries" -gt 1; then
			n=$tries
		fi
		while test $i -lt "$n"; do
			i=$((i + 1))
			run "$dir/src" "$prog" "$case_"
			status=$?
			if test $status -ne 0; then
				caught=$((caught + 1))
				if test $status -eq 124 || test $status -eq 137; then
					bounded=$((bounded + 1))
				fi
				by=$(sed -n 's/^\[  FAILED  \] \(test_[a-z0-9_]*\)$/\1/p' \
				    "$dir/src/run.log" | sort -u | tr '\n' ' ')
				# Aborted or killed: the case that was running.
				test -n "$by" || by=$(sed -n \
				    's/^\[ RUN      \] \(test_[a-z0-9_]*\)$/\1/p' \
				    "$dir/src/run.log" | tail -n 1)
				# One failed try kills (tries, not -r).
				test "$n" -eq "$runs" || break
			fi
		done
		restore "$dir" "$file" "$prog"
		how=""
		if test $bounded -gt 0; then
			how=", by the time bound ($bound s)"
		fi
		secs=$(($(date +%s) - t0))
		if test $caught -eq "$runs" || { test "$n" -ne "$runs" &&
		    test $caught -gt 0; }; then
			if test "$n" -ne "$runs"; then
				how=", at try $i of $n$how"
			else
				how=" ($caught of $runs runs$how)"
			fi
			echo "killed   $id: $file, $prog $case_$how${by:+; failed: $by}" \
			    "[$secs s]" | tee -a "$dir/results"
		else
			echo "SURVIVED $id: $file, $prog $case_" \
			    "(caught $caught of $i runs) [$secs s]" |
			    tee -a "$dir/results"
		fi
	done <"$scratch/list"
}

# Each program as the first build linked it (restore).
for p in $programs; do
	cp -p "$scratch/src/_m/$p" "$scratch/src/_m/$p.pristine"
done
k=0
while test $k -lt "$lanes"; do
	mkdir "$scratch/lane.$k"
	if test $k -eq 0; then
		mv "$scratch/src" "$scratch/lane.0/src"
	else
		cp -pR "$scratch/lane.0/src" "$scratch/lane.$k/src"
	fi
	k=$((k + 1))
done
mkdir "$scratch/claims"
k=0
pids=""
trap 'kill $pids 2>/dev/null; exit 130' INT TERM
while test $k -lt "$lanes"; do
	lane $k &
	pids="$pids $!"
	k=$((k + 1))
done
wait

k=0
while test $k -lt "$lanes"; do
	cat "$scratch/lane.$k/results"
	k=$((k + 1))
done >"$scratch/results"
killed=$(grep -c '^killed ' "$scratch/results")
failed=$((total - killed))
bounded=$(grep '^killed .*by the time bound' "$scratch/results" |
    sed 's/^killed *\([^:]*\):.*/\1/')
if test -n "$bounded"; then
	echo "== mutation: killed only by the time bound (the case hung" \
	    "instead of failing an assertion):" $bounded
fi
echo "== mutation: $killed of $total killed ($((killed * 100 / total))%)" \
    "in $(($(date +%s) - start)) s"
echo "$killed passed, $failed failed"
test "$failed" -eq 0
