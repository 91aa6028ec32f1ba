#!/bin/sh
# SPDX-License-Identifier: MIT
# check-http-server.sh - examples/http_server in each strategy mode, checked
# by tests/http_client (TAP: one line per check).
#
# For each mode (adaptive, pc, pec, epc) the server starts on a free
# loopback port (-p 0; it prints the port), the client runs its checks
# against it (tests/http_client.c says what each one does), and SIGTERM must
# stop it with exit status 0. "order" (a blocking handler does not hold up
# another connection) is not run in pc mode, where the producing thread
# runs every handler itself and so must hold them up, nor in forced epc
# mode, which hands production on even when no reserved thread is free:
# then through the pool's queue, where it may wait behind the blocked
# handler (tpe_strategy_create(3): forced EPC can starve; seen here under
# TSan, 1 run in 5). adaptive and pec must pass it.
#
# Every wait is bounded: 10 s for the server to start or stop, times
# TPE_TEST_TIME_SCALE, and the client's own bounds.

set -u
top_srcdir=${top_srcdir:-.}
top_builddir=${top_builddir:-.}
server=$top_builddir/examples/http_server
client=$top_builddir/tests/http_client
modes="adaptive pc pec epc"
checks="get pipeline keepalive close http10 malformed order load"
. "$top_srcdir/build-aux/http-server.sh"

http_scale # scale, and ticks: tenths of a second, 10 s times the scale

if test ! -x "$server" || test ! -x "$client"; then
	echo "1..0 # SKIP $server or $client is not built"
	exit 0
fi

# skipped MODE CHECK: the checks a mode does not promise (above).
skipped() {
	case $1:$2 in
	pc:order | epc:order) return 0 ;;
	esac
	return 1
}

# The plan: per mode, the start, the checks, the stop.
n=0
for mode in $modes; do
	for check in start $checks stop; do
		if ! skipped "$mode" "$check"; then
			n=$((n + 1))
		fi
	done
done
echo "1..$n"

http_tmp check-http-server
i=0
failed=0
result() { # result OK DESCRIPTION
	i=$((i + 1))
	if test "$1" = yes; then
		echo "ok $i - $2"
	else
		echo "not ok $i - $2"
		failed=1
	fi
}

for mode in $modes; do
	if http_start "$server" $ticks -m "$mode" -t 4 -r 1; then
		result yes "$mode: the server listens on 127.0.0.1:$http_port"
	else
		result no "$mode: the server did not say where it listens"
	fi
	for check in $checks; do
		if skipped "$mode" "$check"; then
			continue
		fi
		ok=no
		if test -n "$http_port" && "$client" 127.0.0.1 "$http_port" \
		    "$check" >&2 </dev/null; then
			ok=yes
		fi
		result $ok "$mode: $check"
	done

	# SIGTERM: a clean stop, exit status 0, within the bound.
	if http_stop $ticks; then
		result yes "$mode: SIGTERM, exit status 0"
	elif test $http_killed = yes; then
		result no "$mode: SIGTERM did not stop the server in time"
	else
		result no "$mode: SIGTERM, exit status $http_rc"
	fi
	# The server's own words go to the log, never into the TAP stream.
	sed "s/^/[$mode] /" "$http_dir/err" >&2
done
exit $failed
