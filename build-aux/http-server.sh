# SPDX-License-Identifier: MIT
# http-server.sh - start and stop examples/http_server from a script.
# Sourced (POSIX sh) by tests/check-http-server.sh and bench/http.sh.
#
#   http_tmp NAME            make the directory $http_dir; it is removed,
#                            and a server still running is killed, when
#                            the script exits
#   http_start SERVER TICKS [ARG...]
#                            start SERVER -a 127.0.0.1 -p 0 ARG..., its
#                            output in $http_dir/out and $http_dir/err;
#                            wait up to TICKS tenths of a second for the
#                            port it prints. Sets http_pid and http_port;
#                            returns 0 when it listens
#   http_stop TICKS          SIGTERM, then wait up to TICKS tenths of a
#                            second (after that, SIGKILL). Sets http_rc
#                            (the exit status) and http_killed (yes or
#                            no); returns 0 when it exited 0 in time

http_pid=

# http_scale: sets scale (TPE_TEST_TIME_SCALE, a whole number from 1 to
# 1000, else 1) and ticks (tenths of a second: 10 s times the scale).
http_scale() {
	scale=${TPE_TEST_TIME_SCALE:-1}
	case $scale in
	[1-9] | [1-9][0-9] | [1-9][0-9][0-9] | 1000) ;;
	*) scale=1 ;;
	esac
	ticks=$((100 * scale))
}

http_tmp() {
	http_dir=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || exit 99
	trap http_cleanup EXIT
	trap 'exit 1' INT TERM
}

http_cleanup() {
	if test -n "$http_pid"; then
		kill -KILL "$http_pid" 2>/dev/null
	fi
	rm -rf "$http_dir"
}

http_start() {
	_server=$1
	_ticks=$2
	shift 2
	: >"$http_dir/out"
	: >"$http_dir/err"
	"$_server" -a 127.0.0.1 -p 0 "$@" \
		>"$http_dir/out" 2>"$http_dir/err" </dev/null &
	http_pid=$!
	http_port=
	_t=0
	while test $_t -lt "$_ticks"; do
		http_port=$(sed -n \
			's/^listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' \
			"$http_dir/out")
		if test -n "$http_port" || ! kill -0 "$http_pid" 2>/dev/null
		then
			break
		fi
		sleep 0.1
		_t=$((_t + 1))
	done
	test -n "$http_port"
}

http_stop() {
	kill -TERM "$http_pid" 2>/dev/null
	_t=0
	while kill -0 "$http_pid" 2>/dev/null && test $_t -lt "$1"; do
		sleep 0.1
		_t=$((_t + 1))
	done
	http_killed=no
	if kill -0 "$http_pid" 2>/dev/null; then
		kill -KILL "$http_pid" 2>/dev/null
		http_killed=yes
	fi
	wait "$http_pid"
	http_rc=$?
	http_pid=
	test $http_killed = no && test $http_rc -eq 0
}
