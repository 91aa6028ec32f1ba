/* SPDX-License-Identifier: MIT */
/*
 * http_client.c - the client of tests/check-http-server.sh: runs one check
 * against examples/http_server and exits 0 when it passed.
 *
 *   http_client ADDR PORT CHECK
 *
 * CHECK is get, pipeline, keepalive, close, http10, malformed, order or
 * load (see checks[] at the end). What went wrong goes to stderr. Every
 * wait is bounded (10 s times TPE_TEST_TIME_SCALE), so a server that does
 * not answer fails the check instead of hanging it.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUF 65536
#define BODY_FMT "Hello from libtpe: %s\n"	/* the server's 200 body */

static const char *addr, *port;
static int wait_ms = 10000;

/* One connection and what it has read but not yet parsed. */
struct cl {
	int fd;
	size_t len;
	char buf[BUF];
};

/* One answer. */
struct resp {
	int status;
	bool close;		/* Connection: close */
	bool keep_alive;	/* Connection: keep-alive */
	size_t clen;		/* Content-Length */
	char body[BUF];		/* NUL-terminated */
};

static bool fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static bool
fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "http_client: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return false;
}

static bool
cl_open(struct cl *c)
{
	struct addrinfo hints, *ai;
	int rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	rc = getaddrinfo(addr, port, &hints, &ai);
	if (rc != 0)
		return fail("%s:%s: %s", addr, port, gai_strerror(rc));
	c->len = 0;
	c->fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
	if (c->fd < 0 || connect(c->fd, ai->ai_addr, ai->ai_addrlen) != 0) {
		rc = errno;
		freeaddrinfo(ai);
		if (c->fd >= 0)
			close(c->fd);
		c->fd = -1;
		return fail("connect: %s", strerror(rc));
	}
	freeaddrinfo(ai);
	return true;
}

static void
cl_close(struct cl *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

static bool
cl_send(struct cl *c, const char *p, size_t len)
{
	struct pollfd pfd = { c->fd, POLLOUT, 0 };
	ssize_t n;

	while (len > 0) {
		if (poll(&pfd, 1, wait_ms) <= 0)
			return fail("send: no room in %d ms", wait_ms);
		n = send(c->fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return fail("send: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
	}
	return true;
}

static bool
cl_sends(struct cl *c, const char *s)
{
	return cl_send(c, s, strlen(s));
}

/* Read more into c->buf: 1, 0 at EOF, -1 on a timeout or an error. */
static int
cl_fill(struct cl *c)
{
	struct pollfd pfd = { c->fd, POLLIN, 0 };
	ssize_t n;

	if (c->len == sizeof(c->buf)) {
		fail("an answer larger than %zu bytes", sizeof(c->buf));
		return -1;
	}
	if (poll(&pfd, 1, wait_ms) <= 0) {
		fail("no answer in %d ms", wait_ms);
		return -1;
	}
	n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
	if (n < 0) {
		fail("recv: %s", strerror(errno));
		return -1;
	}
	c->len += (size_t)n;
	return n > 0;
}

/* The value of header name in the header block [h, end), or NULL. */
static const char *
header(const char *h, const char *end, const char *name, size_t *vlen)
{
	size_t nl = strlen(name);
	const char *eol, *v;

	for (; h < end; h = eol + 2) {
		eol = strstr(h, "\r\n");
		if (eol == NULL || eol > end)
			return NULL;
		if ((size_t)(eol - h) > nl && h[nl] == ':' &&
		    strncasecmp(h, name, nl) == 0) {
			for (v = h + nl + 1; *v == ' '; v++)
				continue;
			*vlen = (size_t)(eol - v);
			return v;
		}
	}
	return NULL;
}

/* Read one answer (with no body after a HEAD). */
static bool
cl_read(struct cl *c, struct resp *r, bool head)
{
	const char *v, *end;
	size_t hlen, vlen;
	int rc;

	memset(r, 0, sizeof(*r));
	for (;;) {
		c->buf[c->len < sizeof(c->buf) ? c->len : sizeof(c->buf) - 1] =
		    '\0';
		end = c->len > 0 ? strstr(c->buf, "\r\n\r\n") : NULL;
		if (end != NULL)
			break;
		rc = cl_fill(c);
		if (rc <= 0)
			return rc == 0 ? fail("the connection closed before an "
			    "answer") : false;
	}
	hlen = (size_t)(end - c->buf) + 4;
	if (sscanf(c->buf, "HTTP/1.1 %3d ", &r->status) != 1)
		return fail("not an HTTP/1.1 status line: %.40s", c->buf);
	v = header(c->buf, end + 2, "Connection", &vlen);
	r->close = v != NULL && vlen == 5 && strncasecmp(v, "close", 5) == 0;
	r->keep_alive = v != NULL && vlen == 10 &&
	    strncasecmp(v, "keep-alive", 10) == 0;
	v = header(c->buf, end + 2, "Content-Length", &vlen);
	if (v == NULL)
		return fail("an answer without Content-Length");
	r->clen = strtoul(v, NULL, 10);
	if (r->clen >= sizeof(r->body))
		return fail("Content-Length %zu is too large", r->clen);
	memmove(c->buf, c->buf + hlen, c->len - hlen);
	c->len -= hlen;
	if (head)
		return true;
	while (c->len < r->clen) {
		rc = cl_fill(c);
		if (rc <= 0)
			return rc == 0 ? fail("the connection closed in a "
			    "body") : false;
	}
	memcpy(r->body, c->buf, r->clen);
	r->body[r->clen] = '\0';
	memmove(c->buf, c->buf + r->clen, c->len - r->clen);
	c->len -= r->clen;
	return true;
}

/* The server closed the connection: EOF, and nothing more. */
static bool
cl_expect_eof(struct cl *c)
{
	int rc;

	if (c->len > 0)
		return fail("%zu bytes more than the answers", c->len);
	rc = cl_fill(c);
	if (rc > 0)
		return fail("more bytes instead of the close");
	return rc == 0;
}

/* Read a 200 whose body names path. */
static bool
cl_expect_ok(struct cl *c, const char *path, bool head)
{
	char want[512];
	struct resp r;

	if (!cl_read(c, &r, head))
		return false;
	snprintf(want, sizeof(want), BODY_FMT, path);
	if (r.status != 200)
		return fail("%s: status %d, not 200", path, r.status);
	if (head && r.clen != strlen(want))
		return fail("HEAD %s: Content-Length %zu, not %zu", path,
		    r.clen, strlen(want));
	if (!head && strcmp(r.body, want) != 0)
		return fail("%s: body \"%s\", not \"%s\"", path, r.body, want);
	return true;
}

static bool
get(struct cl *c, const char *method, const char *path, const char *extra)
{
	char req[1024];

	snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: test\r\n%s\r\n",
	    method, path, extra);
	return cl_sends(c, req);
}

/* ---- the checks -------------------------------------------------------- */

/* GET answers 200 and the body; HEAD the same headers and no body. */
static bool
check_get(void)
{
	struct cl c;
	bool ok;

	if (!cl_open(&c))
		return false;
	ok = get(&c, "GET", "/hello", "") &&
	    cl_expect_ok(&c, "/hello", false) &&
	    get(&c, "HEAD", "/hello", "") && cl_expect_ok(&c, "/hello", true) &&
	    get(&c, "GET", "/after-head", "") &&
	    cl_expect_ok(&c, "/after-head", false);
	cl_close(&c);
	return ok;
}

/* Three requests in one write: three answers in order, the first of them
 * slow; the last asks to close. */
static bool
check_pipeline(void)
{
	static const char reqs[] =
	    "GET /first?sleep=50 HTTP/1.1\r\nHost: test\r\n\r\n"
	    "GET /second HTTP/1.1\r\nHost: test\r\n\r\n"
	    "GET /third HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n";
	struct cl c;
	bool ok;

	if (!cl_open(&c))
		return false;
	ok = cl_sends(&c, reqs) && cl_expect_ok(&c, "/first?sleep=50", false) &&
	    cl_expect_ok(&c, "/second", false) &&
	    cl_expect_ok(&c, "/third", false) && cl_expect_eof(&c);
	cl_close(&c);
	return ok;
}

/* Two requests one after the other on one connection. */
static bool
check_keepalive(void)
{
	struct cl c;
	struct resp r;
	bool ok;

	if (!cl_open(&c))
		return false;
	ok = get(&c, "GET", "/one", "") && cl_read(&c, &r, false);
	if (ok && (r.status != 200 || r.close))
		ok = fail("/one: status %d%s", r.status,
		    r.close ? ", Connection: close" : "");
	ok = ok && get(&c, "GET", "/two", "") &&
	    cl_expect_ok(&c, "/two", false);
	cl_close(&c);
	return ok;
}

/* Connection: close is honoured. */
static bool
check_close(void)
{
	struct cl c;
	struct resp r;
	bool ok;

	if (!cl_open(&c))
		return false;
	ok = get(&c, "GET", "/bye", "Connection: close\r\n") &&
	    cl_read(&c, &r, false);
	if (ok && (r.status != 200 || !r.close))
		ok = fail("/bye: status %d, %s", r.status,
		    r.close ? "closing" : "no Connection: close");
	ok = ok && cl_expect_eof(&c);
	cl_close(&c);
	return ok;
}

/* HTTP/1.0 closes unless asked to keep the connection alive. */
static bool
check_http10(void)
{
	static const char ka[] =
	    "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
	struct cl c;
	struct resp r;
	bool ok;
	int i;

	if (!cl_open(&c))
		return false;
	ok = cl_sends(&c, "GET /old HTTP/1.0\r\n\r\n") &&
	    cl_expect_ok(&c, "/old", false) && cl_expect_eof(&c);
	cl_close(&c);
	if (!ok || !cl_open(&c))
		return false;
	for (i = 0; ok && i < 2; i++) {
		ok = cl_sends(&c, ka) && cl_read(&c, &r, false);
		if (ok && (r.status != 200 || !r.keep_alive))
			ok = fail("HTTP/1.0 keep-alive: status %d, %s",
			    r.status, r.keep_alive ? "keep-alive" :
			    "no Connection: keep-alive");
	}
	cl_close(&c);
	return ok;
}

/* A NUL byte in a header value. */
#define NUL_REQ "GET / HTTP/1.1\r\nHost: x\r\nX: a\0b\r\n\r\n"

/* Bad requests get their error status and a close, never a crash. */
static bool
check_malformed(void)
{
	static const struct {
		const char *req;
		size_t len;	/* 0: strlen */
		int status;
	} bad[] = {
		{ "BLAH\r\n\r\n", 0, 400 },
		{ "GET\r\n\r\n", 0, 400 },
		{ "GET / HTTP/1.1 extra\r\nHost: x\r\n\r\n", 0, 400 },
		{ "GET  / HTTP/1.1\r\nHost: x\r\n\r\n", 0, 400 },
		{ "GET noslash HTTP/1.1\r\nHost: x\r\n\r\n", 0, 400 },
		{ "GET / HTTP/1.1\r\n\r\n", 0, 400 },	/* no Host */
		{ "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 0, 400 },
		{ "GET / HTTP/1.1\r\nHost: x\r\nno colon\r\n\r\n", 0, 400 },
		{ "GET / HTTP/1.1\r\nHost : x\r\n\r\n", 0, 400 },
		{ "GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 0, 400 },
		{ NUL_REQ, sizeof(NUL_REQ) - 1, 400 },
		{ "GET / HTTP/1.1\r\nHost: x\rX: y\r\n\r\n", 0, 400 },
		{ "\x01\x02\x03 garbage\r\n\r\n", 0, 400 },
		{ "GET /?sleep=abc HTTP/1.1\r\nHost: x\r\n\r\n", 0, 400 },
		{ "GET /?sleep=10001 HTTP/1.1\r\nHost: x\r\n\r\n", 0, 400 },
		{ "GET /?sleep= HTTP/1.1\r\nHost: x\r\n\r\n", 0, 400 },
		{ "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
		    0, 400 },
		{ "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
		    0, 400 },
		{ "GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked"
		    "\r\n\r\n", 0, 400 },
		{ "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 0, 505 },
		{ "GET / HTTPS/1.1\r\nHost: x\r\n\r\n", 0, 400 },
		{ "DELETE / HTTP/1.1\r\nHost: x\r\n\r\n", 0, 405 },
		{ NULL, 0, 431 },	/* 9000 bytes of one header */
	};
	static char big[9100];
	struct cl c;
	struct resp r;
	const char *req;
	size_t i, len;
	bool ok = true;

	for (i = 0; ok && i < sizeof(bad) / sizeof(bad[0]); i++) {
		req = bad[i].req;
		len = bad[i].len != 0 ? bad[i].len : req != NULL ?
		    strlen(req) : 0;
		if (req == NULL) {
			len = (size_t)snprintf(big, sizeof(big),
			    "GET / HTTP/1.1\r\nHost: x\r\nX-Big: ");
			memset(big + len, 'a', 9000);
			len += 9000;
			memcpy(big + len, "\r\n\r\n", 4);
			len += 4;
			req = big;
		}
		if (!cl_open(&c))
			return false;
		ok = cl_send(&c, req, len) && cl_read(&c, &r, false);
		if (ok && (r.status != bad[i].status || !r.close))
			ok = fail("status %d%s, not %d and a close", r.status,
			    r.close ? " and a close" : "", bad[i].status);
		ok = ok && cl_expect_eof(&c);
		if (!ok)
			fail("... for the request \"%.60s\"", req);
		cl_close(&c);
	}
	/* The server is still there. */
	return ok && check_get();
}

/*
 * A handler that blocks does not hold up other connections: a slow
 * request goes first, a fast one on another connection second, and the
 * fast answer must come first. No time is measured: only which arrives
 * first (the slow one sleeps 1 s, so a correct server wins by far).
 */
static bool
check_order(void)
{
	struct pollfd pfd[2];
	struct cl slow, fast;
	bool ok;
	int n;

	if (!cl_open(&slow))
		return false;
	if (!cl_open(&fast)) {
		cl_close(&slow);
		return false;
	}
	ok = get(&slow, "GET", "/slow?sleep=1000", "") &&
	    get(&fast, "GET", "/fast", "");
	pfd[0].fd = slow.fd;
	pfd[1].fd = fast.fd;
	pfd[0].events = pfd[1].events = POLLIN;
	if (ok) {
		n = poll(pfd, 2, wait_ms);
		if (n <= 0)
			ok = fail("no answer in %d ms", wait_ms);
		else if (pfd[0].revents != 0)
			ok = fail("the slow request was answered first (or "
			    "together with the fast one)");
	}
	ok = ok && cl_expect_ok(&fast, "/fast", false) &&
	    cl_expect_ok(&slow, "/slow?sleep=1000", false);
	cl_close(&slow);
	cl_close(&fast);
	return ok;
}

/* 16 keep-alive connections, 20 rounds of a request on each, one in five
 * blocking 5 ms: every answer right. */
static bool
check_load(void)
{
	enum { CONNS = 16, ROUNDS = 20 };
	static struct cl c[CONNS];
	char path[64];
	bool ok = true;
	int i, k, opened;

	for (opened = 0; ok && opened < CONNS; opened++)
		ok = cl_open(&c[opened]);
	if (!ok)
		opened--;
	for (k = 0; ok && k < ROUNDS; k++) {
		for (i = 0; ok && i < CONNS; i++) {
			snprintf(path, sizeof(path), "/load/%d/%d%s", i, k,
			    (i + k) % 5 == 0 ? "?sleep=5" : "");
			ok = get(&c[i], "GET", path, "");
		}
		for (i = 0; ok && i < CONNS; i++) {
			snprintf(path, sizeof(path), "/load/%d/%d%s", i, k,
			    (i + k) % 5 == 0 ? "?sleep=5" : "");
			ok = cl_expect_ok(&c[i], path, false);
		}
	}
	for (i = 0; i < opened; i++)
		cl_close(&c[i]);
	return ok;
}

static const struct {
	const char *name;
	bool (*fn)(void);
} checks[] = {
	{ "get", check_get },
	{ "pipeline", check_pipeline },
	{ "keepalive", check_keepalive },
	{ "close", check_close },
	{ "http10", check_http10 },
	{ "malformed", check_malformed },
	{ "order", check_order },
	{ "load", check_load },
};

int
main(int argc, char **argv)
{
	const char *e = getenv("TPE_TEST_TIME_SCALE");
	size_t i;
	long scale;

	if (argc != 4) {
		fprintf(stderr, "usage: http_client ADDR PORT CHECK\n");
		return 2;
	}
	addr = argv[1];
	port = argv[2];
	scale = e != NULL ? strtol(e, NULL, 10) : 1;
	if (scale >= 1 && scale <= 1000)
		wait_ms *= (int)scale;
	for (i = 0; i < sizeof(checks) / sizeof(checks[0]); i++)
		if (strcmp(argv[3], checks[i].name) == 0)
			return checks[i].fn() ? 0 : 1;
	fprintf(stderr, "http_client: no check named %s\n", argv[3]);
	return 2;
}
