#!/bin/sh
# SPDX-License-Identifier: MIT
# check-http-metrics.sh - examples/http_server's /metrics, scraped under
# load and parsed by a real Prometheus parser (TAP).
#
# The server starts in pec mode (every request is a task of the pool, so
# the pool's tasks_run counts at least one per request) with 4 threads;
# python3 sends REQUESTS requests from 8 threads, each on a connection of
# its own, while it scrapes /metrics 5 times; then it scrapes once more,
# quiescent, and parses every answer with prometheus_client's
# text_string_to_metric_families (Debian: python3-prometheus-client). The
# checks: every scrape parses; a last one says http_requests_total ==
# the requests sent (scraped again until the server's count of the
# answers it wrote has caught up with the client, 200 tries at most); the pool ran at least that many tasks; each histogram
# has cumulative buckets that never decrease, +Inf == _count ==
# tasks_timed_total, and a _sum. Skipped (1..0 # SKIP) when python3 or
# the module is missing; CI installs it (.ci/phase-*.sh, ci_need).
#
# Every wait is bounded: 10 s for the server to start or stop, times
# TPE_TEST_TIME_SCALE, and 60 s for the client.

set -u
top_srcdir=${top_srcdir:-.}
top_builddir=${top_builddir:-.}
server=$top_builddir/examples/http_server
. "$top_srcdir/build-aux/http-server.sh"

scale=${TPE_TEST_TIME_SCALE:-1}
case $scale in
[1-9] | [1-9][0-9] | [1-9][0-9][0-9] | 1000) ;;
*) scale=1 ;;
esac
ticks=$((100 * scale))

if test ! -x "$server"; then
	echo "1..0 # SKIP $server is not built"
	exit 0
fi
# The first python3 that has the parser (PYTHON, the one on PATH, the
# system's).
py=
for cand in ${PYTHON:-} python3 /usr/bin/python3; do
	if "$cand" -c 'import prometheus_client.parser' >/dev/null 2>&1; then
		py=$cand
		break
	fi
done
if test -z "$py"; then
	echo "1..0 # SKIP python3 with prometheus_client not found" \
	    "(Debian: python3-prometheus-client)"
	exit 0
fi

echo "1..3"
http_tmp check-http-metrics
failed=0
if http_start "$server" $ticks -m pec -t 4 -r 1; then
	echo "ok 1 - the server listens on 127.0.0.1:$http_port"
else
	echo "not ok 1 - the server did not say where it listens"
	exit 1
fi

if timeout $((60 * scale)) "$py" - "$http_port" <<'EOF' >&2; then
import sys, threading, time, urllib.request
from prometheus_client.parser import text_string_to_metric_families

port = int(sys.argv[1])
base = "http://127.0.0.1:%d" % port
REQUESTS, THREADS = 400, 8
errors = []

def get(path):
    with urllib.request.urlopen(base + path, timeout=20) as r:
        if r.status != 200:
            raise RuntimeError("%s: status %d" % (path, r.status))
        return r.read().decode()

def load(n):
    try:
        for _ in range(n):
            get("/x")
    except Exception as e:
        errors.append(repr(e))

def parse(text):
    fams = {}
    for f in text_string_to_metric_families(text):
        fams[f.name] = f
    return fams

threads = [threading.Thread(target=load, args=(REQUESTS // THREADS,))
           for _ in range(THREADS)]
for t in threads:
    t.start()
for _ in range(5):          # scraped under load: must parse
    parse(get("/metrics"))
for t in threads:
    t.join()
if errors:
    sys.exit("load: " + errors[0])
def value(name, sample=None):
    for s in fams[name].samples:
        if sample is None or s.name == sample:
            return s.value
    raise KeyError(name)

# The 5 scrapes under load were requests too. The server counts a request
# once its answer is written, so the client may read an answer before the
# server has counted it: scrape again after a pause (each earlier scrape
# then counts too) until the count has caught up, 200 tries at most.
sent = REQUESTS + 5
for extra in range(200):
    fams = parse(get("/metrics"))
    if value("http_requests") == sent + extra:
        break
    time.sleep(0.01)
sent += extra

ok = True
def check(cond, what):
    global ok
    print(("ok: " if cond else "FAILED: ") + what)
    ok = ok and cond

check(value("http_requests") == sent,
      "http_requests_total %d == %d sent" % (value("http_requests"), sent))
run = value("http_pool_tasks_run")
check(run >= sent, "tasks_run_total %d >= %d requests" % (run, sent))
timed = value("http_pool_tasks_timed")
for h in ("http_pool_queue_wait_seconds", "http_pool_run_time_seconds"):
    f = fams[h]
    check(f.type == "histogram", h + " is a histogram")
    buckets = [(s.labels["le"], s.value) for s in f.samples
               if s.name == h + "_bucket"]
    counts = [v for _, v in buckets]
    check(len(buckets) == 17 and buckets[-1][0] == "+Inf",
          h + ": 16 buckets and +Inf")
    check(all(a <= b for a, b in zip(counts, counts[1:])),
          h + ": cumulative counts never decrease")
    count = [s.value for s in f.samples if s.name == h + "_count"][0]
    total = [s.value for s in f.samples if s.name == h + "_sum"][0]
    check(counts[-1] == count == timed,
          h + ": +Inf %d == _count %d == tasks_timed %d"
          % (counts[-1], count, timed))
    check(total >= 0, h + ": _sum %g" % total)
sys.exit(0 if ok else 1)
EOF
	echo "ok 2 - /metrics parses under load and adds up"
else
	echo "not ok 2 - /metrics parses under load and adds up"
	failed=1
fi

if http_stop $ticks; then
	echo "ok 3 - SIGTERM, exit status 0"
else
	echo "not ok 3 - SIGTERM (exit status $http_rc, killed $http_killed)"
	failed=1
fi
sed 's/^/[server] /' "$http_dir/err" >&2
exit $failed
