#!/bin/sh
# SPDX-License-Identifier: MIT
# http.sh - examples/http_server in each strategy mode under wrk: requests
# per second, latency p50 and p99, errors; then the same with a blocking
# mix (bench/http-mix.lua), where every request must still be answered.
#
# usage: bench/http.sh [-s SERVER] [-l MIX.lua] [-d SECONDS] [-c CONNECTIONS]
#                      [-w WRK_THREADS] [-t SERVER_THREADS] [-r RESERVED]
#                      [-m "MODE ..."] [-e EVERY] [-z SLEEP_MS]
#
# "make bench-http" builds the server and runs this (options through
# TPE_BENCH_HTTP_FLAGS). It builds nothing itself. Without wrk (Debian:
# apt-get install wrk) it says so and exits 0. Each run starts the server on
# a free loopback port, loads it for a bounded time, and stops it with
# SIGTERM; a server that does not exit with status 0 fails the benchmark.
# The exit status is 1 when a run failed or a request of the mix went
# unanswered (a socket error, a timeout or a non-2xx answer), else 0.

set -u
here=$(dirname "$0")
. "$here/../build-aux/http-server.sh"
server=examples/http_server
mix=$here/http-mix.lua
duration=5
conns=32
wrk_threads=2
threads=8
reserved=1
modes="adaptive pc pec epc"
every=10
sleep_ms=20

usage() {
	sed -n 's/^# usage: //p; s/^#                      /    /p' "$0" >&2
	exit 2
}
while getopts s:l:d:c:w:t:r:m:e:z:h opt; do
	case $opt in
	s) server=$OPTARG ;;
	l) mix=$OPTARG ;;
	d) duration=$OPTARG ;;
	c) conns=$OPTARG ;;
	w) wrk_threads=$OPTARG ;;
	t) threads=$OPTARG ;;
	r) reserved=$OPTARG ;;
	m) modes=$OPTARG ;;
	e) every=$OPTARG ;;
	z) sleep_ms=$OPTARG ;;
	*) usage ;;
	esac
done

if ! command -v wrk >/dev/null 2>&1; then
	echo "skipped: bench-http (wrk not found; Debian: apt-get install wrk)"
	exit 0
fi
if test ! -x "$server"; then
	echo "http.sh: $server is not built (make bench-http builds it)" >&2
	exit 2
fi
if test ! -r "$mix"; then
	echo "http.sh: cannot read $mix" >&2
	exit 2
fi

http_tmp tpe-bench-http

# The table's row from wrk's output and the server's last words:
# requests/s, p50, p99 (in ms), errors, how the strategy ran the tasks.
row() { # row MODE
	stats=$(sed -n 's/.*strategy //p' "$http_dir/err")
	awk -v mode="$1" -v stats="$stats" '
	function ms(v) {
		if (v ~ /us$/) return v / 1000
		if (v ~ /ms$/) return v + 0
		if (v ~ /s$/) return v * 1000
		return v + 0
	}
	$1 == "50%" { p50 = ms($2) }
	$1 == "99%" { p99 = ms($2) }
	$1 == "Requests/sec:" { rps = $2 }
	/Socket errors:/ {
		for (i = 3; i <= NF; i += 2) {
			v = $(i + 1)
			sub(/,/, "", v)
			err += v
		}
	}
	/Non-2xx or 3xx responses:/ { err += $NF }
	END {
		n = split(stats, kv, /[ =]/)
		all = 0
		for (i = 1; i < n; i += 2) {
			c[kv[i]] = kv[i + 1]
			all += kv[i + 1]
		}
		if (all == 0) all = 1
		mix = sprintf("pc %.0f%% pec %.0f%% epc %.0f%% pic %.0f%%",
		    100 * c["pc"] / all, 100 * c["pec"] / all,
		    100 * c["epc"] / all, 100 * c["pic"] / all)
		printf "%-9s %12.0f %10.3f %10.3f %7d   %s\n",
		    mode, rps, p50, p99, err, mix
		exit (err > 0)
	}' "$http_dir/wrk"
}

header() {
	printf "%-9s %12s %10s %10s %7s   %s\n" mode requests/s "p50 ms" \
		"p99 ms" errors "strategy (share of the tasks)"
}

# run MODE [wrk options]: one row; 1 when something failed.
run() {
	mode=$1
	shift
	if ! http_start "$server" 100 -m "$mode" -t "$threads" \
	    -r "$reserved"; then
		printf "%-9s failed: the server did not start\n" "$mode"
		http_stop 100
		sed 's/^/    /' "$http_dir/err"
		return 1
	fi
	wrk -t "$wrk_threads" -c "$conns" -d "${duration}s" --latency "$@" \
		"http://127.0.0.1:$http_port/" >"$http_dir/wrk" 2>&1
	wrc=$?
	if ! http_stop 100; then
		printf "%-9s failed: the server's exit status was %d%s\n" \
			"$mode" $http_rc "$(test $http_killed = no ||
			echo ' (killed: no exit 10 s after SIGTERM)')"
		sed 's/^/    /' "$http_dir/err"
		return 1
	fi
	if test $wrc -ne 0 || ! grep -q '^Requests/sec:' "$http_dir/wrk"; then
		printf "%-9s failed: wrk (status %d)\n" "$mode" $wrc
		sed 's/^/    /' "$http_dir/wrk"
		return 1
	fi
	row "$mode"
}

failed=0
echo "bench-http: $server, each mode under wrk -t $wrk_threads -c $conns" \
	"-d ${duration}s, server -t $threads -r $reserved, 127.0.0.1"
echo "cpu:  $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo 2>/dev/null |
	head -n 1), $(getconf _NPROCESSORS_ONLN 2>/dev/null) online cores"
echo "load: $(cat /proc/loadavg 2>/dev/null) (at the start)"
echo "wrk:  $(wrk -v 2>&1 | head -n 1)"

echo
echo "== plain: GET /, a handler that never blocks"
header
for mode in $modes; do
	run "$mode" || failed=1
done

echo
echo "== mix: 1 request in $every blocks $sleep_ms ms in its handler" \
	"(GET /?sleep=$sleep_ms), $(basename "$mix")"
header
HTTP_MIX_EVERY=$every
HTTP_MIX_SLEEP_MS=$sleep_ms
export HTTP_MIX_EVERY HTTP_MIX_SLEEP_MS
mix_failed=0
for mode in $modes; do
	run "$mode" -s "$mix" || mix_failed=1
done
if test $mix_failed -eq 0; then
	echo "every request of the mix was answered (no socket error," \
		"timeout or non-2xx answer)"
else
	echo "NOT every request of the mix was answered (see errors above)"
	failed=1
fi
exit $failed
