/* SPDX-License-Identifier: MIT */
/*
 * http_server.c - a small HTTP/1.1 keep-alive server whose epoll loop is
 * the producer of an eat-what-you-kill execution strategy (tpe_strategy).
 *
 *   http_server [-a ADDR] [-p PORT] [-m adaptive|pc|pec|epc] [-t THREADS]
 *               [-r RESERVED]
 *
 * GET and HEAD on any path answer 200 with a line of text; "?sleep=MS"
 * (0 to 10000) makes the handler block that long first, as a handler that
 * waits for a database would. GET /metrics answers the pool's metrics
 * (tpe_get_metrics(3)) in the Prometheus text format, and the requests
 * answered before it as http_requests_total. SIGINT or SIGTERM stops the
 * server cleanly.
 *
 * Design
 * ------
 * One epoll set holds the listening socket, a signalfd for SIGINT and
 * SIGTERM, and every connection. The selector loop is not a thread of its
 * own: it is the strategy's producer (produce() below). Each call returns
 * the next task it finds in the ready events, calling epoll_wait when it
 * has none left:
 *
 *   - the listening socket is readable: an accept task, NON_BLOCKING. It
 *     only calls accept4 and epoll_ctl, so the strategy may run it inline
 *     in the producing thread in every mode (adaptive does: PC);
 *   - a connection is readable: a request task, BLOCKING, since its
 *     handler may sleep. The adaptive strategy never runs it in a thread
 *     that still has to produce: when a reserved thread is free it hands
 *     production to that thread and runs the request here, with the
 *     events still hot in this core's cache (EPC); otherwise it gives the
 *     request to the pool and goes on producing (PEC);
 *   - the signalfd is readable: no task. The producer marks the server
 *     stopping and returns false; every later call returns false at once.
 *
 * Production moves from thread to thread (EPC), but the strategy never
 * lets two threads produce at once, so the producer's event batch needs no
 * lock. Production starts in a thread of the pool (tpe_strategy_dispatch),
 * in every mode, as Jetty's selectors run in its pool's threads: so every
 * mode has the same threads for its requests. A main thread that produced
 * itself would be one more thread in PEC mode only, which never hands
 * production on, while EPC moves production into the pool for good: in a
 * load of blocking requests PEC then served them with 8 threads and the
 * adaptive mode with 7 (bench/http.sh's mix: 3949 against 3452 requests a
 * second, 7/8). The main thread waits for the stop, then shuts the pool
 * down and frees what is left.
 *
 * Ownership. Every socket is registered with EPOLLONESHOT: an event
 * disarms it, so the one task made from that event owns the connection
 * (its buffer, its fd) until it re-arms it (EPOLL_CTL_MOD, after which it
 * must not touch it again) or closes it. A task reads what is there,
 * answers every complete request in its buffer in order (pipelining), and
 * re-arms the socket when the socket has no more for now. The kernel
 * orders the re-arm before the next event, but the thread sanitizer
 * cannot see that, so the hand-over is also an atomic state: the task
 * says ARMING before its epoll_ctl and releases ARMED after it returns,
 * its last touch of the connection; the producer, when the event arrives,
 * waits out a hand-over still ARMING (the other thread is only returning
 * from epoll_ctl: a few microseconds at most), acquires ARMED and takes
 * ownership (OWNED). An event for a connection that nobody armed would be
 * a second owner: it aborts.
 *
 * Every connection is also on the server's list (under a mutex), so that
 * the connections that are armed, and owned by no task, at the stop are
 * found and freed. A sleeping handler or one waiting to write also polls
 * an eventfd that the stop makes readable, so the stop does not wait for
 * them. The pool drains its queue on shutdown: a request task already
 * given to the pool still runs, and may re-arm its connection; the list
 * frees it afterwards.
 *
 * What a production server would add: an idle timeout per connection (a
 * timer wheel in the producer), request bodies, TLS, and accept back-off
 * with a spare descriptor. When accept4 runs out of descriptors the
 * listener stays disarmed here until a connection closes.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <tpe.h>

#define REQUEST_MAX 8192	/* request line and headers, in bytes */
#define SLEEP_MAX_MS 10000	/* the largest ?sleep= */
#define WRITE_TIMEOUT_MS 10000	/* drop a client that reads nothing this long */
#define EVENTS 64		/* events per epoll_wait */
#define READ_ROUNDS 16		/* reads per task before others get a turn */
#define ACCEPTS 64		/* connections per accept task */

enum source_kind { SOURCE_LISTENER, SOURCE_SIGNAL, SOURCE_CONN };

/* What an epoll event's data.ptr points to. */
struct source {
	enum source_kind kind;	/* I: set at creation */
	int fd;			/* I */
	/* A: OWNED, ARMING, ARMED (the design notes): ARMED is released by
	 * the task that arms the socket, acquired by the producer when the
	 * event comes. */
	_Atomic int hand;
};

enum { OWNED, ARMING, ARMED };

struct server;

/*
 * A connection. Legend: O = the task that owns it (see Ownership above);
 * L = server->lock; I = set before it is first armed.
 */
struct conn {
	struct source src;		/* first: the epoll data */
	struct server *srv;		/* I */
	struct conn *prev, *next;	/* L */
	size_t len;			/* O: bytes in buf */
	char buf[REQUEST_MAX];		/* O */
};

struct server {
	int epfd, lfd, sigfd, stopfd;	/* I */
	struct source listener;		/* I (armed: A) */
	struct source signal;		/* I */
	tpe_t *pool;			/* I */
	tpe_strategy_t *strategy;	/* I */
	_Atomic bool stopping;		/* A: set once (stop()) */
	_Atomic bool accept_paused;	/* A: out of descriptors */
	_Atomic unsigned long requests;	/* A: answered */
	_Atomic unsigned long accepted;	/* A: connections */

	/* P: the producer only (one thread at a time, the strategy orders) */
	struct epoll_event events[EVENTS];
	int nevents, next;

	pthread_mutex_t lock;
	struct conn *conns;		/* L: every open connection */
	size_t nconns;			/* L */
};

/* One parsed request: request line and headers. */
struct request {
	size_t size;		/* bytes, the blank line included */
	bool head;		/* HEAD: no body in the answer */
	const char *target;	/* the request target, not NUL-terminated */
	size_t target_len;
	int minor;		/* HTTP/1.minor */
	bool close;		/* close after the answer */
	long sleep_ms;		/* ?sleep= */
};

static void
warn_errno(const char *what)
{
	fprintf(stderr, "http_server: %s: %s\n", what, strerror(errno));
}

/* ---- parsing ---------------------------------------------------------- */

/* RFC 9110 tchar: the characters of a method or a header name. */
static bool
is_tchar(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	    (ch >= '0' && ch <= '9') || (ch != '\0' && strchr("!#$%&'*+-.^_`|~",
	    ch) != NULL);
}

/* Does the comma-separated list [s, s + n) hold the token tok? */
static bool
has_token(const char *s, size_t n, const char *tok)
{
	size_t tl = strlen(tok), i = 0, b, e;

	while (i < n) {
		while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == ','))
			i++;
		b = i;
		while (i < n && s[i] != ',')
			i++;
		e = i;
		while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t'))
			e--;
		if (e - b == tl && strncasecmp(s + b, tok, tl) == 0)
			return true;
	}
	return false;
}

/* The ?sleep= of a target: 0 and *ms, or 400. */
static int
parse_query(const char *t, size_t n, long *ms)
{
	const char *q = memchr(t, '?', n), *end = t + n, *p, *amp;
	long v;

	*ms = 0;
	for (p = q != NULL ? q + 1 : end; p < end; p = amp + 1) {
		amp = memchr(p, '&', (size_t)(end - p));
		if (amp == NULL)
			amp = end;
		if (amp - p < 6 || memcmp(p, "sleep=", 6) != 0)
			continue;
		if (amp - p == 6 || amp - p > 6 + 5)
			return 400;
		for (v = 0, p += 6; p < amp; p++) {
			if (*p < '0' || *p > '9')
				return 400;
			v = v * 10 + (*p - '0');
		}
		if (v > SLEEP_MAX_MS)
			return 400;
		*ms = v;
	}
	return 0;
}

/* "METHOD SP TARGET SP HTTP/1.x": 0, or the status to answer. */
static int
parse_request_line(const char *s, size_t n, struct request *rq, bool *allowed)
{
	const char *end = s + n, *p = s, *m;
	size_t i;

	for (m = p; p < end && is_tchar((unsigned char)*p); p++)
		continue;
	if (p == m || p == end || *p != ' ')
		return 400;
	*allowed = (p - m == 3 && memcmp(m, "GET", 3) == 0) ||
	    (p - m == 4 && memcmp(m, "HEAD", 4) == 0);
	rq->head = p - m == 4 && memcmp(m, "HEAD", 4) == 0;
	rq->target = ++p;
	while (p < end && *p > ' ' && *p < 0x7f)
		p++;
	rq->target_len = (size_t)(p - rq->target);
	if (rq->target_len == 0 || rq->target[0] != '/' || p == end ||
	    *p != ' ')
		return 400;
	p++;
	if (end - p != 8 || memcmp(p, "HTTP/", 5) != 0 || p[6] != '.')
		return 400;
	for (i = 5; i < 8; i += 2)
		if (p[i] < '0' || p[i] > '9')
			return 400;
	if (p[5] != '1' || (p[7] != '0' && p[7] != '1'))
		return 505;
	rq->minor = p[7] - '0';
	return parse_query(rq->target, rq->target_len, &rq->sleep_ms);
}

struct headers {
	int host;		/* how many Host fields */
	bool body;		/* Content-Length not 0, or Transfer-Encoding */
	bool keep_alive;	/* Connection: keep-alive */
	bool close;		/* Connection: close */
};

/* "Name: value": 0, or the status to answer. */
static int
parse_header(const char *s, size_t n, struct headers *h)
{
	const char *end = s + n, *p = s, *v;
	size_t name, i;

	while (p < end && is_tchar((unsigned char)*p))
		p++;
	name = (size_t)(p - s);
	if (name == 0 || p == end || *p != ':')
		return 400;	/* also obs-fold (a leading space) */
	for (v = p + 1; v < end && (*v == ' ' || *v == '\t'); v++)
		continue;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	for (p = v; p < end; p++)
		if (((unsigned char)*p < ' ' && *p != '\t') || *p == 0x7f)
			return 400;
	n = (size_t)(end - v);
	if (name == 4 && strncasecmp(s, "Host", 4) == 0) {
		h->host++;
	} else if (name == 10 && strncasecmp(s, "Connection", 10) == 0) {
		h->close |= has_token(v, n, "close");
		h->keep_alive |= has_token(v, n, "keep-alive");
	} else if (name == 14 && strncasecmp(s, "Content-Length", 14) == 0) {
		if (n == 0)
			return 400;
		for (i = 0; i < n; i++) {
			if (v[i] < '0' || v[i] > '9')
				return 400;
			if (v[i] != '0')
				h->body = true;
		}
	} else if (name == 17 &&
	    strncasecmp(s, "Transfer-Encoding", 17) == 0) {
		h->body = true;
	}
	return 0;
}

/*
 * Parse the request at the start of buf[0, len): 0 and *rq when it is
 * complete, -1 when more bytes are needed, or the error status to answer
 * (the connection is then closed). This server reads no request bodies: a
 * request that announces one gets 400.
 */
static int
parse_request(const char *buf, size_t len, struct request *rq)
{
	const char *p = buf, *end = buf + len, *nl;
	struct headers h = { 0, false, false, false };
	bool first = true, allowed = false;
	size_t n;
	int st;

	memset(rq, 0, sizeof(*rq));
	for (;;) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (nl == NULL)
			return -1;
		n = (size_t)(nl - p);
		if (n > 0 && p[n - 1] == '\r')
			n--;
		if (memchr(p, '\r', n) != NULL || memchr(p, '\0', n) != NULL)
			return 400;
		if (first && n == 0) {
			p = nl + 1;	/* RFC 9112 2.2: skip leading CRLFs */
			continue;
		}
		if (first)
			st = parse_request_line(p, n, rq, &allowed);
		else if (n == 0)
			break;
		else
			st = parse_header(p, n, &h);
		if (st != 0)
			return st;
		first = false;
		p = nl + 1;
	}
	rq->size = (size_t)(nl + 1 - buf);
	if (!allowed)
		return 405;
	if ((rq->minor == 1 && h.host != 1) || h.host > 1 || h.body)
		return 400;
	rq->close = rq->minor == 0 ? !h.keep_alive : h.close;
	return 0;
}

/* ---- answering -------------------------------------------------------- */

static const char *
reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 405: return "Method Not Allowed";
	case 431: return "Request Header Fields Too Large";
	case 505: return "HTTP Version Not Supported";
	default: return "Error";
	}
}

/* Wait up to ms for fd to be ready for events, or for the stop: true when
 * fd is ready (a stop with fd ready too still counts as ready). */
static bool
wait_fd(const struct server *srv, int fd, short events, int ms)
{
	struct pollfd pfd[2] = {
		{ fd, events, 0 }, { srv->stopfd, POLLIN, 0 }
	};
	int n;

	do
		n = poll(pfd, 2, ms);
	while (n < 0 && errno == EINTR);
	return n > 0 && (pfd[0].revents & (events | POLLERR | POLLHUP)) != 0;
}

/* Sleep ms milliseconds, or less when the server stops meanwhile. */
static void
sleep_ms(const struct server *srv, long ms)
{
	struct pollfd pfd = { srv->stopfd, POLLIN, 0 };
	struct timespec now, end;
	long left = ms;

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += ms / 1000;
	end.tv_nsec += (ms % 1000) * 1000000;
	if (end.tv_nsec >= 1000000000) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000;
	}
	while (left > 0 && poll(&pfd, 1, (int)left) <= 0) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		left = (long)(end.tv_sec - now.tv_sec) * 1000 +
		    (end.tv_nsec - now.tv_nsec) / 1000000;
	}
}

/* Write it all: false when the client is gone, reads too slowly, or the
 * server stops while the socket is full. */
static bool
send_all(struct conn *c, const char *p, size_t len)
{
	ssize_t n;

	while (len > 0) {
		n = send(c->src.fd, p, len, MSG_NOSIGNAL);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
		} else if (n < 0 && errno == EAGAIN) {
			if (!wait_fd(c->srv, c->src.fd, POLLOUT,
			    WRITE_TIMEOUT_MS))
				return false;
		} else if (n < 0 && errno != EINTR) {
			return false;
		}
	}
	return true;
}

/* Answer status; rq is NULL for an error, which closes the connection. */
static bool
respond(struct conn *c, int status, const struct request *rq)
{
	char out[REQUEST_MAX + 512], body[REQUEST_MAX + 64];
	const char *conn_hdr = "Connection: close\r\n";
	int blen, hlen;

	if (rq != NULL) {
		blen = snprintf(body, sizeof(body), "Hello from libtpe: %.*s\n",
		    (int)rq->target_len, rq->target);
		if (!rq->close)
			conn_hdr = rq->minor == 0 ?
			    "Connection: keep-alive\r\n" : "";
	} else {
		blen = snprintf(body, sizeof(body), "%d %s\n", status,
		    reason(status));
	}
	hlen = snprintf(out, sizeof(out), "HTTP/1.1 %d %s\r\n"
	    "Server: libtpe-example\r\n"
	    "Content-Type: text/plain; charset=utf-8\r\n"
	    "Content-Length: %d\r\n"
	    "%s%s\r\n", status, reason(status), blen,
	    status == 405 ? "Allow: GET, HEAD\r\n" : "", conn_hdr);
	if (rq == NULL || !rq->head) {
		memcpy(out + hlen, body, (size_t)blen);
		hlen += blen;
	}
	return send_all(c, out, (size_t)hlen);
}

/*
 * GET /metrics: the pool's metrics in the Prometheus text format
 * (tpe_metrics_format_prometheus(3), sized by a first call), then the
 * server's own count of the requests answered before this one. False when
 * the answer could not be made or sent (the connection is then closed).
 */
static bool
respond_metrics(struct conn *c, const struct request *rq)
{
	struct tpe_metrics *m = malloc(sizeof(*m));
	char head[256], tail[128], *text = NULL;
	size_t need = 0;
	bool ok = false;
	int hlen, tlen;

	if (m == NULL || tpe_get_metrics(c->srv->pool, m, sizeof(*m)) != 0 ||
	    tpe_metrics_format_prometheus(NULL, 0, &need, m, sizeof(*m),
	    "http_pool", NULL) != ERANGE || (text = malloc(need)) == NULL ||
	    tpe_metrics_format_prometheus(text, need, NULL, m, sizeof(*m),
	    "http_pool", NULL) != 0)
		goto out;
	tlen = snprintf(tail, sizeof(tail), "# HELP http_requests_total "
	    "Requests answered.\n# TYPE http_requests_total counter\n"
	    "http_requests_total %lu\n", atomic_load_explicit(
	    &c->srv->requests, memory_order_relaxed));
	hlen = snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\n"
	    "Server: libtpe-example\r\n"
	    "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
	    "Content-Length: %zu\r\n%s\r\n", need - 1 + (size_t)tlen,
	    rq->close ? "Connection: close\r\n" : rq->minor == 0 ?
	    "Connection: keep-alive\r\n" : "");
	ok = send_all(c, head, (size_t)hlen) && (rq->head ||
	    (send_all(c, text, need - 1) && send_all(c, tail, (size_t)tlen)));
out:
	free(text);
	free(m);
	return ok;
}

/* ---- connections ------------------------------------------------------ */

static void
listener_arm(struct server *srv)
{
	struct epoll_event ev = { EPOLLIN | EPOLLONESHOT, { &srv->listener } };

	atomic_store_explicit(&srv->listener.hand, ARMING,
	    memory_order_relaxed);
	if (epoll_ctl(srv->epfd, EPOLL_CTL_MOD, srv->lfd, &ev) != 0) {
		warn_errno("epoll_ctl (listener)");
		atomic_store_explicit(&srv->listener.hand, OWNED,
		    memory_order_relaxed);
		return;
	}
	/* Release pairs with the producer's acquire (take_event). */
	atomic_store_explicit(&srv->listener.hand, ARMED, memory_order_release);
}

/* Unlink and free c. The caller owns it, or the pool has terminated. */
static void
conn_free(struct conn *c)
{
	struct server *srv = c->srv;
	bool resume;

	pthread_mutex_lock(&srv->lock);
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		srv->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	srv->nconns--;
	pthread_mutex_unlock(&srv->lock);
	close(c->src.fd);
	free(c);
	/* A descriptor is free again: accept where we left off. */
	resume = atomic_exchange(&srv->accept_paused, false);
	if (resume && !atomic_load(&srv->stopping))
		listener_arm(srv);
}

/*
 * Close c after its last answer. Half-close first and read what the
 * client already sent, so that the close does not reset the connection
 * (and lose the answer) over unread bytes.
 */
static void
conn_close(struct conn *c)
{
	char sink[4096];
	int i;

	shutdown(c->src.fd, SHUT_WR);
	for (i = 0; i < 16 && recv(c->src.fd, sink, sizeof(sink), 0) > 0; i++)
		continue;
	conn_free(c);
}

/* Hand c back to epoll. From here on another task may own it. */
static void
conn_arm(struct conn *c)
{
	struct epoll_event ev = { EPOLLIN | EPOLLONESHOT, { c } };

	atomic_store_explicit(&c->src.hand, ARMING, memory_order_relaxed);
	if (epoll_ctl(c->srv->epfd, EPOLL_CTL_MOD, c->src.fd, &ev) != 0) {
		warn_errno("epoll_ctl (connection)");
		atomic_store_explicit(&c->src.hand, OWNED,
		    memory_order_relaxed);
		conn_close(c);
		return;
	}
	/* Release: every access of this task to c, its epoll_ctl included,
	 * happens-before the next owner's (pairs with take_event). The last
	 * touch of c: the next owner may free it from here on. */
	atomic_store_explicit(&c->src.hand, ARMED, memory_order_release);
}

/*
 * Answer every complete request in c's buffer, in order: true to go on
 * reading, false to close (an error, Connection: close, or a failed write).
 */
static bool
serve_buffered(struct conn *c)
{
	struct request rq;
	int st;

	for (;;) {
		st = parse_request(c->buf, c->len, &rq);
		if (st < 0 && c->len == sizeof(c->buf))
			st = 431;
		if (st < 0)
			return true;
		if (st > 0) {
			(void)respond(c, st, NULL);
			return false;
		}
		if (rq.sleep_ms > 0)
			sleep_ms(c->srv, rq.sleep_ms);
		if (rq.target_len == 8 && memcmp(rq.target, "/metrics", 8) == 0) {
			if (!respond_metrics(c, &rq))
				return false;
		} else if (!respond(c, 200, &rq)) {
			return false;
		}
		atomic_fetch_add_explicit(&c->srv->requests, 1,
		    memory_order_relaxed);
		if (rq.close)
			return false;
		c->len -= rq.size;
		memmove(c->buf, c->buf + rq.size, c->len);
	}
}

/* The request task (BLOCKING): read, answer, re-arm or close. */
static void
conn_task(void *arg)
{
	struct conn *c = arg;
	ssize_t n;
	int round;

	for (round = 0; round < READ_ROUNDS; round++) {
		n = recv(c->src.fd, c->buf + c->len, sizeof(c->buf) - c->len,
		    0);
		if (n > 0) {
			c->len += (size_t)n;
			if (!serve_buffered(c)) {
				conn_close(c);
				return;
			}
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && errno == EAGAIN) {
			break;
		} else {
			conn_free(c);	/* the client closed, or an error */
			return;
		}
	}
	conn_arm(c);
}

static size_t
conns_open(struct server *srv)
{
	size_t n;

	pthread_mutex_lock(&srv->lock);
	n = srv->nconns;
	pthread_mutex_unlock(&srv->lock);
	return n;
}

/* The accept task (NON_BLOCKING): accept4 and epoll_ctl, never a wait. */
static void
accept_task(void *arg)
{
	struct server *srv = arg;
	struct epoll_event ev;
	struct conn *c;
	int fd, i, one = 1;

	for (i = 0; i < ACCEPTS; i++) {
		fd = accept4(srv->lfd, NULL, NULL,
		    SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0 && (errno == EINTR || errno == ECONNABORTED))
			continue;
		if (fd < 0 && errno == EAGAIN)
			break;
		if (fd < 0) {
			/*
			 * Out of descriptors (EMFILE, ENFILE) or memory: stay
			 * disarmed until a connection closes (conn_free
			 * re-arms). Set the flag before counting, so that a
			 * close racing with this either sees the flag or is
			 * not counted. With none open, try again.
			 */
			warn_errno("accept4 (paused until a close)");
			atomic_store(&srv->accept_paused, true);
			if (conns_open(srv) > 0 ||
			    !atomic_exchange(&srv->accept_paused, false))
				return;
			break;
		}
		c = malloc(sizeof(*c));
		if (c == NULL) {
			close(fd);
			continue;
		}
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
		    sizeof(one));
		c->src.kind = SOURCE_CONN;
		c->src.fd = fd;
		atomic_init(&c->src.hand, ARMED);
		c->srv = srv;
		c->len = 0;
		c->prev = NULL;
		pthread_mutex_lock(&srv->lock);
		c->next = srv->conns;
		if (c->next != NULL)
			c->next->prev = c;
		srv->conns = c;
		srv->nconns++;
		pthread_mutex_unlock(&srv->lock);
		atomic_fetch_add_explicit(&srv->accepted, 1,
		    memory_order_relaxed);
		ev.events = EPOLLIN | EPOLLONESHOT;
		ev.data.ptr = c;
		if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
			warn_errno("epoll_ctl (new connection)");
			conn_free(c);
		}
	}
	listener_arm(srv);
}

/* ---- the producer: the selector loop --------------------------------- */

static void
stop(struct server *srv)
{
	uint64_t one = 1;

	atomic_store(&srv->stopping, true);
	if (srv->stopfd >= 0 &&
	    write(srv->stopfd, &one, sizeof(one)) != sizeof(one))
		warn_errno("write (eventfd)");
}


/*
 * An event arrived for src: take ownership of it from the task that armed
 * it. That task may still be returning from its epoll_ctl (ARMING): wait
 * it out, briefly. Acquire pairs with the release of ARMED in conn_arm and
 * listener_arm.
 */
static void
take_event(struct source *src)
{
	int hand;

	while ((hand = atomic_load_explicit(&src->hand,
	    memory_order_acquire)) == ARMING)
		sched_yield();
	if (hand != ARMED) {
		fprintf(stderr, "http_server: an event for a socket nobody "
		    "armed\n");
		abort();
	}
	atomic_store_explicit(&src->hand, OWNED, memory_order_relaxed);
}

/*
 * The strategy's producer (tpe_produce_fn): the next task from the ready
 * events, waiting in epoll_wait for more when none is left. Returns false
 * only when the server stops, so production goes on until then.
 */
static bool
produce(void *ctx, tpe_fn *fn, void **arg, enum tpe_invocation *type)
{
	struct server *srv = ctx;
	struct signalfd_siginfo si;
	struct source *src;
	int n;

	for (;;) {
		if (atomic_load(&srv->stopping))
			return false;
		while (srv->next < srv->nevents) {
			src = srv->events[srv->next++].data.ptr;
			if (src->kind == SOURCE_SIGNAL) {
				if (read(srv->sigfd, &si, sizeof(si)) ==
				    sizeof(si))
					fprintf(stderr, "http_server: %s, "
					    "stopping\n",
					    strsignal((int)si.ssi_signo));
				stop(srv);
				return false;
			}
			take_event(src);
			if (src->kind == SOURCE_LISTENER) {
				*fn = accept_task;
				*arg = srv;
				*type = TPE_NON_BLOCKING;
			} else {
				*fn = conn_task;
				*arg = src; /* its conn: src is the first member */
				*type = TPE_BLOCKING;
			}
			return true;
		}
		n = epoll_wait(srv->epfd, srv->events, EVENTS, -1);
		if (n < 0 && errno != EINTR) {
			warn_errno("epoll_wait");
			stop(srv);
			return false;
		}
		srv->nevents = n > 0 ? n : 0;
		srv->next = 0;
	}
}

/* ---- setting up and tearing down ------------------------------------- */

static int
listen_on(const char *addr, const char *port)
{
	struct addrinfo hints, *ai;
	int fd, rc, one = 1;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV;
	rc = getaddrinfo(addr, port, &hints, &ai);
	if (rc != 0) {
		fprintf(stderr, "http_server: %s port %s: %s\n", addr, port,
		    gai_strerror(rc));
		return -1;
	}
	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, ai->ai_protocol);
	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
	    listen(fd, SOMAXCONN) != 0) {
		warn_errno(fd < 0 ? "socket" : "bind/listen");
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	return fd;
}

/* Print "listening on ADDR:PORT" (flushed: a test reads it). */
static int
print_address(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[NI_MAXHOST], port[NI_MAXSERV];

	if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0 ||
	    getnameinfo((struct sockaddr *)&ss, len, host, sizeof(host), port,
	    sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV) != 0)
		return -1;
	printf(ss.ss_family == AF_INET6 ? "listening on [%s]:%s\n" :
	    "listening on %s:%s\n", host, port);
	return fflush(stdout) == 0 ? 0 : -1;
}

static int
add_source(struct server *srv, struct source *src, enum source_kind kind,
    int fd, uint32_t events)
{
	struct epoll_event ev;

	src->kind = kind;
	src->fd = fd;
	atomic_init(&src->hand, ARMED);
	ev.events = events;
	ev.data.ptr = src;
	return epoll_ctl(srv->epfd, EPOLL_CTL_ADD, fd, &ev);
}

static int
make_pool(struct server *srv, long threads, long reserved,
    enum tpe_strategy_mode mode)
{
	tpe_attr_t *attr;
	int rc;

	rc = tpe_attr_create(&attr);
	if (rc != 0)
		return rc;
	rc = tpe_attr_set_pool_size(attr, (size_t)threads, (size_t)threads);
	if (rc == 0)
		rc = tpe_attr_set_reserved_threads(attr, (int)reserved);
	if (rc == 0)
		rc = tpe_attr_set_thread_name(attr, "http");
	if (rc == 0)	/* served at /metrics */
		rc = tpe_attr_set_metrics(attr, TPE_METRICS_ON);
	if (rc == 0)
		rc = tpe_create(&srv->pool, attr);
	tpe_attr_destroy(attr);
	if (rc != 0)
		return rc;
	rc = tpe_strategy_create(&srv->strategy, srv->pool, produce, srv, mode);
	if (rc != 0) {
		tpe_destroy(srv->pool);
		srv->pool = NULL;
	}
	return rc;
}

/* After the stop: shut the pool down, then free every connection left. */
static int
teardown(struct server *srv)
{
	struct tpe_strategy_stats st;
	struct conn *c;
	int rc = 0;

	if (srv->pool != NULL) {
		if (tpe_shutdown(srv->pool) != 0 ||
		    tpe_await_termination(srv->pool, -1) != 0)
			rc = 1;
		if (tpe_strategy_get_stats(srv->strategy, &st,
		    sizeof(st)) == 0)
			fprintf(stderr, "http_server: requests %lu, "
			    "connections %lu; strategy pc=%llu pic=%llu "
			    "pec=%llu epc=%llu\n", atomic_load(&srv->requests),
			    atomic_load(&srv->accepted),
			    (unsigned long long)st.pc,
			    (unsigned long long)st.pic,
			    (unsigned long long)st.pec,
			    (unsigned long long)st.epc);
		if (tpe_strategy_destroy(srv->strategy) != 0 ||
		    tpe_destroy(srv->pool) != 0)
			rc = 1;
	}
	/* No task runs any more: the list owns what is left. */
	while ((c = srv->conns) != NULL)
		conn_free(c);
	pthread_mutex_destroy(&srv->lock);
	if (srv->lfd >= 0)
		close(srv->lfd);
	if (srv->sigfd >= 0)
		close(srv->sigfd);
	if (srv->stopfd >= 0)
		close(srv->stopfd);
	if (srv->epfd >= 0)
		close(srv->epfd);
	return rc;
}

static long
number(const char *opt, const char *s, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
		fprintf(stderr, "http_server: -%s needs a number from %ld to "
		    "%ld\n", opt, min, max);
		exit(2);
	}
	return v;
}

static void
usage(FILE *f)
{
	fprintf(f, "usage: http_server [-a ADDR] [-p PORT] "
	    "[-m adaptive|pc|pec|epc] [-t THREADS] [-r RESERVED]\n"
	    "  -a ADDR      the address to serve on (default 127.0.0.1)\n"
	    "  -p PORT      the port (default 8080; 0: any free one)\n"
	    "  -m MODE      the execution strategy (default adaptive)\n"
	    "  -t THREADS   pool threads (default 8)\n"
	    "  -r RESERVED  reserved threads, for EPC (default 1; -1: the "
	    "library's choice)\n");
}

int
main(int argc, char **argv)
{
	static const char *const modes[] = { "adaptive", "pc", "pec", "epc" };
	static const enum tpe_strategy_mode mode_of[] = {
		TPE_STRATEGY_ADAPTIVE, TPE_STRATEGY_PC, TPE_STRATEGY_PEC,
		TPE_STRATEGY_EPC
	};
	const char *addr = "127.0.0.1", *port = "8080";
	enum tpe_strategy_mode mode = TPE_STRATEGY_ADAPTIVE;
	long threads = 8, reserved = 1;
	struct server srv;
	struct pollfd pfd;
	sigset_t sigs;
	size_t i;
	int opt, rc;

	while ((opt = getopt(argc, argv, "a:p:m:t:r:h")) != -1) {
		switch (opt) {
		case 'a':
			addr = optarg;
			break;
		case 'p':
			(void)number("p", optarg, 0, 65535);
			port = optarg;
			break;
		case 'm':
			for (i = 0; i < 4 && strcmp(optarg, modes[i]) != 0; i++)
				continue;
			if (i == 4) {
				usage(stderr);
				return 2;
			}
			mode = mode_of[i];
			break;
		case 't':
			threads = number("t", optarg, 1, 4096);
			break;
		case 'r':
			reserved = number("r", optarg, -1, 4096);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}

	memset(&srv, 0, sizeof(srv));
	srv.epfd = srv.lfd = srv.sigfd = srv.stopfd = -1;
	pthread_mutex_init(&srv.lock, NULL);
	atomic_init(&srv.stopping, false);
	atomic_init(&srv.accept_paused, false);
	atomic_init(&srv.requests, 0);
	atomic_init(&srv.accepted, 0);

	/* Blocked before any thread starts, so that every thread inherits
	 * the mask and the signals only ever arrive through the signalfd. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	rc = pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	if (rc != 0) {
		errno = rc;
		warn_errno("pthread_sigmask");
		return 1;
	}
	srv.sigfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
	srv.stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	srv.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (srv.sigfd < 0 || srv.stopfd < 0 || srv.epfd < 0) {
		warn_errno("signalfd/eventfd/epoll_create1");
		goto fail;
	}
	srv.lfd = listen_on(addr, port);
	if (srv.lfd < 0)
		goto fail;
	if (add_source(&srv, &srv.signal, SOURCE_SIGNAL, srv.sigfd,
	    EPOLLIN) != 0 ||
	    add_source(&srv, &srv.listener, SOURCE_LISTENER, srv.lfd,
	    EPOLLIN | EPOLLONESHOT) != 0) {
		warn_errno("epoll_ctl");
		goto fail;
	}
	rc = make_pool(&srv, threads, reserved, mode);
	if (rc != 0) {
		fprintf(stderr, "http_server: creating the pool: %s\n",
		    strerror(rc));
		goto fail;
	}
	if (print_address(srv.lfd) != 0) {
		warn_errno("listening address");
		goto fail;
	}

	/* Production starts in a pool thread (the design notes); this
	 * thread waits for the stop. */
	rc = tpe_strategy_dispatch(srv.strategy);
	if (rc != 0) {
		fprintf(stderr, "http_server: tpe_strategy_dispatch: %s\n",
		    strerror(rc));
		stop(&srv);
	}
	pfd.fd = srv.stopfd;
	pfd.events = POLLIN;
	while (poll(&pfd, 1, -1) < 0 && errno == EINTR)
		continue;
	return teardown(&srv) != 0 || rc != 0;

fail:
	stop(&srv);
	teardown(&srv);
	return 1;
}
