# SPDX-License-Identifier: MIT
# tpe_bench.m4 - TPE_BENCH_PEERS: find the thread pools that bench/tpe-bench
# measures libtpe against, when configure was given --enable-bench
# (enable_bench=yes); otherwise it probes nothing (no pkg-config, dpkg or
# java look-ups) and every peer is "no". Every peer is optional: one that is
# missing is only skipped by "make bench" (which says so); "make" and "make
# check" never need any of them.
#
# Sets (AM_CONDITIONAL): ENABLE_BENCH, HAVE_GLIB, HAVE_UV, HAVE_THPOOL,
#   HAVE_GNUPLOT, HAVE_JAVA.
# Substitutes: GLIB_CFLAGS/LIBS, UV_CFLAGS/LIBS, THPOOL_CFLAGS, GNUPLOT,
#   JAVAC, JAVA.
# Defines (config.h): TPE_BENCH_HAVE_GLIB, TPE_BENCH_HAVE_UV,
#   TPE_BENCH_HAVE_THPOOL, TPE_BENCH_THPOOL_C, TPE_BENCH_JAVA,
#   TPE_BENCH_CC, TPE_BENCH_CFLAGS, TPE_BENCH_PEER_VERSIONS.
# Shell variable for configure's summary: tpe_bench_summary (which peers).
# Precious: THPOOL_DIR, a directory holding C-Thread-Pool's thpool.c and
#   thpool.h (default: where Debian's cthreadpool-dev puts them).

AC_DEFUN([TPE_BENCH_PEERS], [
AC_REQUIRE([PKG_PROG_PKG_CONFIG])
AC_ARG_VAR([THPOOL_DIR],
	[directory with C-Thread-Pool's thpool.c and thpool.h, for tpe-bench])
have_glib=no
have_uv=no
have_thpool=no
have_java=no
THPOOL_CFLAGS=
AS_IF([test "x$enable_bench" = xyes], [
tpe_bench_versions=

# GLib's GThreadPool (Debian: libglib2.0-dev).
PKG_CHECK_MODULES([GLIB], [glib-2.0], [have_glib=yes], [have_glib=no])
AS_IF([test "x$have_glib" = xyes], [
	AC_DEFINE([TPE_BENCH_HAVE_GLIB], [1],
		[Define to 1 when tpe-bench measures GLib's GThreadPool.])
	tpe_bench_versions="$tpe_bench_versions glib `$PKG_CONFIG --modversion glib-2.0 2>/dev/null`,"
])

# libuv's thread pool (Debian: libuv1-dev).
PKG_CHECK_MODULES([UV], [libuv], [have_uv=yes], [have_uv=no])
AS_IF([test "x$have_uv" = xyes], [
	AC_DEFINE([TPE_BENCH_HAVE_UV], [1],
		[Define to 1 when tpe-bench measures libuv's thread pool.])
	tpe_bench_versions="$tpe_bench_versions libuv `$PKG_CONFIG --modversion libuv 2>/dev/null`,"
])

# C-Thread-Pool: no library, a thpool.c to compile in (Debian:
# cthreadpool-dev puts thpool.h in /usr/include/cthreadpool and thpool.c in
# /usr/share/cthreadpool; dpkg -L says where, if it moves).
AC_MSG_CHECKING([for C-Thread-Pool's thpool.c and thpool.h])
tpe_thpool_c=
tpe_thpool_h=
tpe_thpool_dirs="$THPOOL_DIR /usr/share/cthreadpool /usr/include/cthreadpool /usr/local/share/cthreadpool /usr/local/include/cthreadpool"
AS_IF([test -z "$THPOOL_DIR" && (dpkg-query -W cthreadpool-dev) >/dev/null 2>&1], [
	for tpe_f in `dpkg -L cthreadpool-dev 2>/dev/null | grep '/thpool\.[[ch]]$'`; do
		tpe_thpool_dirs="$tpe_thpool_dirs `dirname $tpe_f`"
	done
])
for tpe_d in $tpe_thpool_dirs; do
	AS_IF([test -z "$tpe_thpool_c" && test -r "$tpe_d/thpool.c"],
		[tpe_thpool_c=$tpe_d/thpool.c])
	AS_IF([test -z "$tpe_thpool_h" && test -r "$tpe_d/thpool.h"],
		[tpe_thpool_h=$tpe_d/thpool.h])
done
AS_IF([test -n "$tpe_thpool_c" && test -n "$tpe_thpool_h"], [
	have_thpool=yes
	AC_MSG_RESULT([$tpe_thpool_c])
	THPOOL_CFLAGS="-I`dirname $tpe_thpool_h`"
	AC_DEFINE([TPE_BENCH_HAVE_THPOOL], [1],
		[Define to 1 when tpe-bench measures C-Thread-Pool.])
	AC_DEFINE_UNQUOTED([TPE_BENCH_THPOOL_C], ["$tpe_thpool_c"],
		[C-Thread-Pool's thpool.c, compiled into tpe-bench.])
	tpe_v=`dpkg-query -W -f='${Version}' cthreadpool-dev 2>/dev/null`
	tpe_bench_versions="$tpe_bench_versions thpool ${tpe_v:-(version unknown)},"
], [
	have_thpool=no
	THPOOL_CFLAGS=
	AC_MSG_RESULT([no])
])

# gnuplot draws bench/results.png.
AC_CHECK_PROG([GNUPLOT], [gnuplot], [gnuplot])

# Java's ThreadPoolExecutor and ForkJoinPool (javac to build the runner,
# java to run it).
AC_CHECK_PROG([JAVAC], [javac], [javac])
AC_CHECK_PROG([JAVA], [java], [java])
AS_IF([test -n "$JAVAC" && test -n "$JAVA"], [
	have_java=yes
	AC_DEFINE_UNQUOTED([TPE_BENCH_JAVA], ["$JAVA"],
		[The java launcher that runs tpe-bench's Java peers.])
], [have_java=no])

# What tpe-bench prints about its build. Backslashes and double quotes
# are escaped for the C string.
tpe_bench_cc=`AS_ECHO(["$CC"]) | sed 's/[[\\"]]/\\\\&/g'`
tpe_bench_cflags=`AS_ECHO(["$CFLAGS $SANITIZER_CFLAGS"]) | sed 's/[[\\"]]/\\\\&/g'`
AC_DEFINE_UNQUOTED([TPE_BENCH_CC], ["$tpe_bench_cc"],
	[The compiler, as tpe-bench reports it.])
AC_DEFINE_UNQUOTED([TPE_BENCH_CFLAGS], ["$tpe_bench_cflags"],
	[The compiler flags, as tpe-bench reports them.])
tpe_bench_versions=`AS_ECHO(["$tpe_bench_versions"]) | sed 's/^ *//; s/,$//'`
AC_DEFINE_UNQUOTED([TPE_BENCH_PEER_VERSIONS], ["${tpe_bench_versions:-none}"],
	[The versions of tpe-bench's peers found by configure.])

# For configure's closing summary.
tpe_bench_summary="glib $have_glib, libuv $have_uv, thpool $have_thpool, java $have_java, gnuplot ${GNUPLOT:-no}"
], [
tpe_bench_summary="not probed (--enable-bench)"
])
AC_SUBST([THPOOL_CFLAGS])
AM_CONDITIONAL([ENABLE_BENCH], [test "x$enable_bench" = xyes])
AM_CONDITIONAL([HAVE_GLIB], [test "x$have_glib" = xyes])
AM_CONDITIONAL([HAVE_UV], [test "x$have_uv" = xyes])
AM_CONDITIONAL([HAVE_THPOOL], [test "x$have_thpool" = xyes])
AM_CONDITIONAL([HAVE_GNUPLOT], [test -n "$GNUPLOT"])
AM_CONDITIONAL([HAVE_JAVA], [test "x$have_java" = xyes])
])
