/*
 * trace.c - W3C Trace Context (https://www.w3.org/TR/trace-context/) and OTLP/HTTP JSON export.
 *
 * nginx validates a request's traceparent (nginx.conf's maps), answers it with codebox's span
 * and passes it on as CODEBOX_TRACEPARENT, with the span's id (CODEBOX_SPAN_ID) and tracestate
 * (CODEBOX_TRACESTATE). The worker validates them again (a request may reach the socket
 * directly), names the trace in the request's log lines and audit trail entry, and, where
 * CODEBOX_OTLP_ENDPOINT names a collector, sends it one span per run once the reply is out: a
 * POST of at most a few KiB, over a connection that gets TRACE_EXPORT_TIMEOUT_MS in all. The
 * collector's answer is read only as far as its status line; a failure is logged (once a
 * minute at most), never more.
 */
#include "run/trace.h"

#include "core/jsonw.h"
#include "core/log.h"
#include "core/util.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef CODEBOX_VERSION
#define CODEBOX_VERSION "dev"
#endif

static struct trace_ctx trace_req;

/* The collector (trace_export_setup()). */
static struct {
	bool on;
	struct sockaddr_storage addr;
	socklen_t addr_len;
	char host[256]; /* the Host header: as configured */
	char path[512];
	long long last_warn; /* CLOCK_MONOTONIC seconds of the last failure logged */
} trace_export;

/* The span of the run in hand (trace_span_begin() to trace_flush()). */
static struct {
	bool begun, ended;
	struct trace_ctx ctx;
	char name[16];
	long long start_ns, admitted_ns, end_ns;
	char status[24];
	bool has_exit_code;
	int exit_code;
	char tier[8];
	char limit[16]; /* "" for none */
	bool error;     /* the sandbox could not run it */
} trace_span;

bool
trace_hex_id(const char *s, size_t n)
{
	bool nonzero = false;

	for (size_t i = 0; i < n; i++) {
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
		nonzero |= s[i] != '0';
	}
	return nonzero;
}

static bool
trace_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

int
trace_parse(const char *h, struct trace_ctx *t)
{
	/* version(2) - trace-id(32) - parent-id(16) - flags(2) */
	const size_t len = h != NULL ? strlen(h) : 0;

	if (len < 55 || !trace_hex(h, 2) || h[2] != '-' || h[35] != '-' || h[52] != '-')
		return -1;
	if (strncmp(h, "ff", 2) == 0)
		return -1;
	/* version 00 has nothing after its flags; a later one may, after a '-' */
	if (strncmp(h, "00", 2) == 0 ? len != 55 : len > 55 && h[55] != '-')
		return -1;
	if (!trace_hex_id(h + 3, TRACE_ID_HEX) || !trace_hex_id(h + 36, TRACE_SPAN_HEX) ||
	    !trace_hex(h + 53, 2))
		return -1;
	memcpy(t->trace_id, h + 3, TRACE_ID_HEX);
	t->trace_id[TRACE_ID_HEX] = '\0';
	memcpy(t->parent_id, h + 36, TRACE_SPAN_HEX);
	t->parent_id[TRACE_SPAN_HEX] = '\0';
	t->flags = (unsigned char)strtoul((char[]){h[53], h[54], '\0'}, NULL, 16);
	return 0;
}

/* tracestate as passed on: printable ASCII, at most TRACE_STATE_MAX bytes (else dropped) */
static bool
trace_state_ok(const char *s)
{
	size_t n = 0;

	for (; s[n] != '\0'; n++)
		if (s[n] < 0x20 || s[n] > 0x7e || n >= TRACE_STATE_MAX)
			return false;
	return true;
}

void
trace_set_request(const char *traceparent, const char *span_id, const char *tracestate)
{
	memset(&trace_req, 0, sizeof(trace_req));
	if (trace_parse(traceparent, &trace_req) == 0 && span_id != NULL &&
	    strlen(span_id) == TRACE_SPAN_HEX && trace_hex_id(span_id, TRACE_SPAN_HEX)) {
		memcpy(trace_req.span_id, span_id, TRACE_SPAN_HEX + 1);
		if (tracestate != NULL && trace_state_ok(tracestate))
			snprintf(trace_req.state, sizeof(trace_req.state), "%s", tracestate);
		trace_req.on = true;
	}
	log_set_trace_id(trace_req.on ? trace_req.trace_id : NULL);
}

const struct trace_ctx *
trace_current(void)
{
	return trace_req.on ? &trace_req : NULL;
}

void
trace_clear_request(void)
{
	memset(&trace_req, 0, sizeof(trace_req));
	log_set_trace_id(NULL);
}

/* "http://host[:port]/path": host a name, an IPv4 address or [an IPv6 one] */
static int
trace_endpoint_parse(const char *url, char *host, size_t host_len, char *port, size_t port_len,
                     char *path, size_t path_len)
{
	const char *h, *end, *slash;

	if (strncmp(url, "http://", 7) != 0)
		return -1;
	h = url + 7;
	slash = strchr(h, '/');
	if (slash == NULL || slash == h || strlen(slash) >= path_len ||
	    (size_t)(slash - h) >= host_len)
		return -1;
	snprintf(path, path_len, "%s", slash);
	snprintf(port, port_len, "80");
	if (*h == '[') {
		end = memchr(h, ']', (size_t)(slash - h));
		if (end == NULL)
			return -1;
		snprintf(host, host_len, "%.*s", (int)(end - h - 1), h + 1);
		end++;
	} else {
		for (end = h; end < slash && *end != ':'; end++) {
			/* the name */
		}
		snprintf(host, host_len, "%.*s", (int)(end - h), h);
	}
	if (end < slash) {
		if (*end != ':' || slash - end < 2 || slash - end > 6)
			return -1;
		snprintf(port, port_len, "%.*s", (int)(slash - end - 1), end + 1);
		if (strspn(port, "0123456789") != strlen(port))
			return -1;
	}
	return host[0] != '\0' ? 0 : -1;
}

int
trace_export_setup(char *why, size_t why_len)
{
	const char *url = getenv("CODEBOX_OTLP_ENDPOINT");
	char host[256], port[8];
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
	int rc;

	trace_export.on = false;
	if (url == NULL || *url == '\0')
		return 0;
	if (trace_endpoint_parse(url, host, sizeof(host), port, sizeof(port), trace_export.path,
	                         sizeof(trace_export.path)) < 0) {
		snprintf(why, why_len,
		         "CODEBOX_OTLP_ENDPOINT must be http://<host>[:<port>]/<path> "
		         "(e.g. http://127.0.0.1:4318/v1/traces), not \"%.200s\"",
		         url);
		return -1;
	}
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc != 0) {
		snprintf(why, why_len, "CODEBOX_OTLP_ENDPOINT: %s: %s", host, gai_strerror(rc));
		return -1;
	}
	memcpy(&trace_export.addr, ai->ai_addr, ai->ai_addrlen);
	trace_export.addr_len = ai->ai_addrlen;
	freeaddrinfo(ai);
	snprintf(trace_export.host, sizeof(trace_export.host), "%.*s",
	         (int)(strchr(url + 7, '/') - (url + 7)), url + 7);
	trace_export.on = true;
	log_msg(LOG_INFO, "traces: one span per traced run is exported to %s", url);
	return 0;
}

static long long
trace_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void
trace_span_begin(const char *port)
{
	memset(&trace_span, 0, sizeof(trace_span));
	if (!trace_export.on || !trace_req.on)
		return;
	trace_span.ctx = trace_req;
	snprintf(trace_span.name, sizeof(trace_span.name), "%s", port);
	trace_span.start_ns = trace_now_ns();
	trace_span.begun = true;
}

void
trace_span_admitted(void)
{
	if (trace_span.begun)
		trace_span.admitted_ns = trace_now_ns();
}

void
trace_span_end(const struct run_outcome *o, int exit_code, bool has_exit_code)
{
	const char *limit = o != NULL ? run_limit_string(o->limit_exceeded) : NULL;

	if (!trace_span.begun || trace_span.ended)
		return;
	trace_span.end_ns = trace_now_ns();
	trace_span.ended = true;
	trace_span.error = o == NULL;
	snprintf(trace_span.status, sizeof(trace_span.status), "%s",
	         o != NULL ? run_status_string(o->status) : "error");
	trace_span.has_exit_code = has_exit_code;
	trace_span.exit_code = exit_code;
	snprintf(trace_span.tier, sizeof(trace_span.tier), "%s",
	         o != NULL ? run_tier_string(o->tier) : "");
	snprintf(trace_span.limit, sizeof(trace_span.limit), "%s", limit ? limit : "");
}

/* {"key":key,"value":{"stringValue":v}} */
static void
trace_attr(struct jsonw *w, bool first, const char *key, const char *v)
{
	jsonw_lit(w, first ? "{\"key\":" : ",{\"key\":");
	jsonw_cstr(w, key);
	jsonw_lit(w, ",\"value\":{\"stringValue\":");
	jsonw_cstr(w, v);
	jsonw_lit(w, "}}");
}

static void
trace_event(struct jsonw *w, bool first, const char *name, long long ns)
{
	jsonw_lit(w, first ? "{\"name\":" : ",{\"name\":");
	jsonw_cstr(w, name);
	jsonw_lit(w, ",\"timeUnixNano\":\"");
	jsonw_int(w, ns);
	jsonw_lit(w, "\"}");
}

/* The OTLP/HTTP JSON body of the span kept: one resourceSpans, one scopeSpans, one span. */
static char *
trace_span_json(size_t *len)
{
	struct jsonw w;

	jsonw_init(&w);
	jsonw_lit(&w, "{\"resourceSpans\":[{\"resource\":{\"attributes\":[");
	trace_attr(&w, true, "service.name", "codebox");
	trace_attr(&w, false, "service.version", CODEBOX_VERSION);
	jsonw_lit(&w, "]},\"scopeSpans\":[{\"scope\":{\"name\":\"codebox\",\"version\":");
	jsonw_cstr(&w, CODEBOX_VERSION);
	jsonw_lit(&w, "},\"spans\":[{\"traceId\":");
	jsonw_cstr(&w, trace_span.ctx.trace_id);
	jsonw_lit(&w, ",\"spanId\":");
	jsonw_cstr(&w, trace_span.ctx.span_id);
	jsonw_lit(&w, ",\"parentSpanId\":");
	jsonw_cstr(&w, trace_span.ctx.parent_id);
	jsonw_lit(&w, ",\"traceState\":");
	jsonw_cstr(&w, trace_span.ctx.state);
	jsonw_lit(&w, ",\"flags\":");
	jsonw_int(&w, trace_span.ctx.flags);
	jsonw_lit(&w, ",\"name\":");
	jsonw_cstr(&w, trace_span.name);
	jsonw_lit(&w, ",\"kind\":2,\"startTimeUnixNano\":\""); /* SPAN_KIND_SERVER */
	jsonw_int(&w, trace_span.start_ns);
	jsonw_lit(&w, "\",\"endTimeUnixNano\":\"");
	jsonw_int(&w, trace_span.end_ns);
	jsonw_lit(&w, "\",\"attributes\":[");
	trace_attr(&w, true, "codebox.status", trace_span.status);
	if (trace_span.tier[0])
		trace_attr(&w, false, "codebox.tier", trace_span.tier);
	if (trace_span.limit[0])
		trace_attr(&w, false, "codebox.limit_exceeded", trace_span.limit);
	if (trace_span.has_exit_code) {
		jsonw_lit(&w, ",{\"key\":\"codebox.exit_code\",\"value\":{\"intValue\":\"");
		jsonw_int(&w, trace_span.exit_code);
		jsonw_lit(&w, "\"}}");
	}
	jsonw_lit(&w, "],\"events\":[");
	trace_event(&w, true, "admitted",
	            trace_span.admitted_ns ? trace_span.admitted_ns : trace_span.start_ns);
	trace_event(&w, false, trace_span.error ? "not_run" : "ran", trace_span.end_ns);
	/* STATUS_CODE_ERROR where the sandbox failed; a program's own failure is not codebox's */
	jsonw_lit(&w, trace_span.error ? "],\"status\":{\"code\":2}}]}]}]}"
	                               : "],\"status\":{\"code\":0}}]}]}]}");
	return jsonw_take(&w, len);
}

/* Waits for fd to be ready for events until deadline (CLOCK_MONOTONIC ms): 0, or -1. */
static int
trace_wait(int fd, short events, long long deadline)
{
	for (;;) {
		long long left = deadline - util_now_ms();
		struct pollfd p = {.fd = fd, .events = events};
		int r;

		if (left <= 0)
			return -1;
		r = poll(&p, 1, (int)left);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -1;
	}
}

/* POSTs body to the collector within the timeout; 0 when it answered 2xx, else -1 with why. */
static int
trace_post(const char *body, size_t body_len, char *why, size_t why_len)
{
	long long deadline = util_now_ms() + TRACE_EXPORT_TIMEOUT_MS;
	char head[1024], answer[64];
	int fd, hl, err = 0;
	size_t off = 0, got = 0;

	hl = snprintf(head, sizeof(head),
	              "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
	              "Content-Length: %zu\r\nConnection: close\r\n\r\n",
	              trace_export.path, trace_export.host, body_len);
	fd = socket(trace_export.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		snprintf(why, why_len, "socket: %s", strerror(errno));
		return -1;
	}
	if (connect(fd, (const struct sockaddr *)&trace_export.addr, trace_export.addr_len) < 0 &&
	    errno != EINPROGRESS)
		err = errno;
	/* the head, then the body */
	while (err == 0 && off < (size_t)hl + body_len) {
		const char *p = off < (size_t)hl ? head + off : body + (off - (size_t)hl);
		size_t n = off < (size_t)hl ? (size_t)hl - off : body_len - (off - (size_t)hl);
		ssize_t s;

		if (trace_wait(fd, POLLOUT, deadline) < 0) {
			err = ETIMEDOUT;
			break;
		}
		s = send(fd, p, n, MSG_NOSIGNAL);
		if (s < 0 && errno != EAGAIN && errno != EINTR)
			err = errno;
		else if (s > 0)
			off += (size_t)s;
	}
	/* "HTTP/1.1 200": the status line's start is all that is read */
	while (err == 0 && got < 12) {
		ssize_t r;

		if (trace_wait(fd, POLLIN, deadline) < 0) {
			err = ETIMEDOUT;
			break;
		}
		r = recv(fd, answer + got, sizeof(answer) - 1 - got, 0);
		if (r == 0)
			err = ECONNRESET;
		else if (r < 0 && errno != EAGAIN && errno != EINTR)
			err = errno;
		else if (r > 0)
			got += (size_t)r;
	}
	close(fd);
	if (err != 0) {
		snprintf(why, why_len, "%s", strerror(err));
		return -1;
	}
	answer[got] = '\0';
	if (strncmp(answer, "HTTP/1.", 7) != 0 || answer[9] != '2') {
		snprintf(why, why_len, "the collector answered \"%.12s\"", answer);
		return -1;
	}
	return 0;
}

void
trace_flush(void)
{
	char why[256], *body;
	size_t len;
	long long now;

	if (!trace_span.ended) {
		memset(&trace_span, 0, sizeof(trace_span));
		return;
	}
	body = trace_span_json(&len);
	memset(&trace_span, 0, sizeof(trace_span));
	if (body == NULL)
		return;
	if (trace_post(body, len, why, sizeof(why)) < 0) {
		now = util_now_ms() / 1000;
		if (trace_export.last_warn == 0 || now - trace_export.last_warn >= 60) {
			trace_export.last_warn = now;
			log_msg(LOG_WARN,
			        "traces: exporting a span failed (logged once a minute): %s", why);
		}
	}
	free(body);
}
