#!/bin/sh
# SPDX-License-Identifier: MIT
# check-probes.sh - libtpe's USDT probes (lib/base/probe.h, tpe(7)
# "Tracing"), as an operator uses them. A TAP test:
#
#  1. the library's ELF notes list every probe (readelf -n), when configure
#     built them in (config.h: HAVE_SYS_SDT_H), and none otherwise;
#  2. examples/tpe-queue-wait.bt, attached with bpftrace to a running
#     examples/http_server that serves requests, prints a queue-wait
#     histogram for the server's pool;
#  3. examples/tpe-task-rate.bt, attached the same way, counts the tasks the
#     server ran.
# 2 and 3 skip, with the reason, where bpftrace cannot attach (not
# installed, not root, no tracefs, no probes built in). Each bpftrace run
# is bounded (its own SECONDS argument, and timeout(1)).

set -u
top_srcdir=${top_srcdir:-.}
top_builddir=${top_builddir:-.}
server=$top_builddir/examples/http_server
client=$top_builddir/tests/http_client
lib=$top_builddir/lib/.libs/libtpe.so.0
. "$top_srcdir/build-aux/http-server.sh"

http_scale # scale, and ticks: tenths of a second, 10 s times the scale

probes="task__submit task__start task__end task__reject thread__start
thread__exit block__begin block__end sched__due strategy__handover"

echo "1..3"

built=no
if grep -q '^#define HAVE_SYS_SDT_H 1' "$top_builddir/config.h" 2>/dev/null
then
	built=yes
fi

# 1. The notes.
if ! test -f "$lib"; then
	echo "ok 1 # SKIP no shared library $lib (a static build)"
elif ! command -v readelf >/dev/null 2>&1; then
	echo "ok 1 # SKIP readelf not found"
else
	notes=$(readelf -n "$lib" 2>/dev/null |
		sed -n 's/^ *Name: \([a-z_]*\)$/\1/p' | sort -u)
	missing=
	for p in $probes; do
		echo "$notes" | grep -qx "$p" || missing="$missing $p"
	done
	if test $built = yes && test -z "$missing"; then
		echo "ok 1 - libtpe.so.0 lists the $(echo $probes | wc -w) probes"
	elif test $built = no && test -z "$notes"; then
		echo "ok 1 - no probes built in (no <sys/sdt.h>, or --disable-probes)"
	else
		echo "not ok 1 - probes built in: $built; missing:${missing:- none}"
		echo "$notes" | sed 's/^/# listed: /'
	fi
fi

# Why bpftrace cannot attach here, or nothing.
why=
if test $built = no; then
	why="no probes built in"
elif ! command -v bpftrace >/dev/null 2>&1; then
	why="bpftrace not installed (Debian: apt-get install bpftrace)"
elif test "$(id -u)" != 0; then
	why="bpftrace needs root"
elif ! test -x "$server" || ! test -x "$client"; then
	why="$server or $client is not built"
elif ! test -d /sys/kernel/tracing/events &&
    ! mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null &&
    ! test -d /sys/kernel/debug/tracing/events; then
	why="no tracefs (mount -t tracefs nodev /sys/kernel/tracing failed)"
elif ! timeout 30 bpftrace -e 'BEGIN { exit(); }' >/dev/null 2>&1; then
	why="bpftrace cannot load a program here"
fi

# trace N SCRIPT PATTERN: run the server, attach SCRIPT for 3 s (times the
# scale) while a client sends requests, and check that its output has a
# line matching PATTERN.
trace() {
	_n=$1 _script=$2 _pattern=$3
	if test -n "$why"; then
		echo "ok $_n # SKIP $why"
		return
	fi
	http_tmp tpe-probes
	if ! http_start "$server" "$ticks"; then
		echo "not ok $_n - the server did not start"
		sed 's/^/# /' "$http_dir/err"
		return
	fi
	_secs=$((3 * scale))
	ulimit -l 8192 2>/dev/null
	timeout -k 5 $((_secs + 60)) bpftrace -p "$http_pid" \
		"$top_srcdir/$_script" "$_secs" >"$http_dir/bt" 2>&1 &
	_bt=$!
	# Requests until bpftrace has ended (attaching takes a moment: the
	# requests before it are not counted, the ones after are).
	_t=0
	while kill -0 "$_bt" 2>/dev/null && test $_t -lt $((_secs * 40 + 600))
	do
		"$client" 127.0.0.1 "$http_port" get >/dev/null 2>&1
		_t=$((_t + 1))
	done
	wait "$_bt"
	_rc=$?
	http_stop "$ticks"
	if test $_rc -eq 0 && grep -q "$_pattern" "$http_dir/bt"; then
		echo "ok $_n - $_script against examples/http_server"
		grep -E "$_pattern|^\[" "$http_dir/bt" | head -n 12 | sed 's/^/# /'
	else
		echo "not ok $_n - $_script against examples/http_server (bpftrace exit $_rc)"
		sed 's/^/# /' "$http_dir/bt" | head -n 40
	fi
	rm -rf "$http_dir"
}

trace 2 examples/tpe-queue-wait.bt '^@queue_wait_us\[http, [0-9]*\]:'
trace 3 examples/tpe-task-rate.bt '^@ended\[http, [0-9]*\]: [1-9]'
exit 0
