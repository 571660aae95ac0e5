/*
 * http.c - the FastCGI side of HTTP for every port (http.h): the one place that routes a
 * request by its port's table of endpoints, writes an answer's head, reads a body, and knows
 * the reason phrases nginx passes on.
 *
 * An answer is "Status: <code> <phrase>", Content-Type, any extra headers, Content-Length, a
 * blank line and exactly that many bytes; nginx sends it on, status line and all. Which body a port
 * answers with is its own (reply.c for port 8080's schema, agent.c for port 8888's); the error
 * shapes are reply_error()'s.
 */
#include "http/http.h"

#include "core/log.h"
#include "http/reply.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

const char *
http_status_text(int status)
{
	switch (status) {
	case 200:
		return "OK";
	case 201:
		return "Created";
	case 202:
		return "Accepted";
	case 204:
		return "No Content";
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 409:
		return "Conflict";
	case 413:
		return "Payload Too Large";
	case 429:
		return "Too Many Requests";
	case 503:
		return "Service Unavailable";
	default:
		return "Internal Server Error";
	}
}

void
http_send_head(FCGX_Request *req, int status, const char *content_type, const char *extra_header,
               unsigned long long len)
{
	char line[128];
	int n;

	/* libfcgi's own printf knows few conversions; format here */
	n = snprintf(line, sizeof(line), "Status: %d %s\r\nContent-Type: ", status,
	             http_status_text(status));
	FCGX_PutStr(line, n, req->out);
	FCGX_PutS(content_type, req->out);
	FCGX_PutS("\r\n", req->out);
	if (extra_header != NULL) {
		FCGX_PutS(extra_header, req->out);
		FCGX_PutS("\r\n", req->out);
	}
	n = snprintf(line, sizeof(line), "Content-Length: %llu\r\n\r\n", len);
	FCGX_PutStr(line, n, req->out);
}

void
http_send_as(FCGX_Request *req, int status, const char *content_type, const char *extra_header,
             const char *body, size_t len)
{
	http_send_head(req, status, content_type, extra_header, len);
	FCGX_PutStr(body, (int)len, req->out);
}

void
http_send_file(FCGX_Request *req, const char *content_type, const char *extra_header, int fd,
               unsigned long long size)
{
	static char buf[65536];

	http_send_head(req, 200, content_type, extra_header, size);
	/* exactly size bytes: a file that changes meanwhile is cut or padded, never longer */
	for (unsigned long long left = size; left > 0;) {
		size_t want = left < sizeof(buf) ? (size_t)left : sizeof(buf);
		ssize_t r = read(fd, buf, want);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			memset(buf, 0, want);
			r = (ssize_t)want;
		}
		if (FCGX_PutStr(buf, (int)r, req->out) != (int)r)
			break; /* the client is gone */
		left -= (unsigned long long)r;
	}
}

/* jsonw's sink into the FastCGI stream */
static int
http_put(void *ctx, const char *s, size_t n)
{
	FCGX_Request *req = ctx;

	while (n > 0) {
		int piece = n > (1U << 30) ? 1 << 30 : (int)n;
		if (FCGX_PutStr(s, piece, req->out) != piece)
			return -1;
		s += piece;
		n -= (size_t)piece;
	}
	return 0;
}

int
http_send_written(FCGX_Request *req, void (*write)(struct jsonw *w, const void *ctx),
                  const void *ctx)
{
	struct jsonw w;
	long long len, sent;

	jsonw_init_count(&w);
	write(&w, ctx);
	len = jsonw_end(&w);
	if (len < 0)
		return -1;
	http_send_head(req, 200, HTTP_JSON, NULL, (unsigned long long)len);
	jsonw_init_sink(&w, http_put, req);
	write(&w, ctx);
	sent = jsonw_end(&w);
	if (sent != len)
		log_msg(LOG_WARN, "a reply of %lld bytes broke off (%lld written): %s", len, sent,
		        sent < 0 ? "the stream or an allocation failed"
		                 : "its two writings differ");
	return 0;
}

void
http_send(FCGX_Request *req, int status, const char *extra_header, const char *body, size_t len)
{
	http_send_as(req, status, HTTP_JSON, extra_header, body, len);
}

void
http_send_message(FCGX_Request *req, int status, const char *extra_header, const char *error,
                  const char *message)
{
	size_t len;
	char *body = reply_error(error, message, &len);

	if (body == NULL) {
		static const char oom[] =
		    "{\"error\":\"sandbox_error\",\"message\":\"the worker is out of memory\"}";
		http_send(req, 500, NULL, oom, sizeof(oom) - 1);
		return;
	}
	http_send(req, status, extra_header, body, len);
	free(body);
}

void
http_send_doc(FCGX_Request *req, const char *content_type, char *doc, size_t len)
{
	if (doc == NULL) {
		http_send_message(req, 500, NULL, "sandbox_error", "out of memory");
		return;
	}
	http_send_as(req, 200, content_type, NULL, doc, len);
	free(doc);
}

static int
http_hex(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
	                              : -1;
}

long
http_uri_decode(const char *s, char *out, size_t out_len)
{
	size_t o = 0;

	for (const char *c = s; *c != '\0' && *c != '?'; c++) {
		char b = *c;
		if (b == '%') {
			int hi = http_hex(c[1]), lo = hi < 0 ? -1 : http_hex(c[2]);
			/* a bad escape or an encoded NUL: nginx answers 400 for both itself */
			if (lo < 0 || (hi == 0 && lo == 0))
				return HTTP_URI_MALFORMED;
			b = (char)(hi << 4 | lo);
			c += 2;
		}
		if (o + 1 >= out_len)
			return HTTP_URI_TOO_LONG;
		out[o++] = b;
	}
	out[o] = '\0';
	return (long)o;
}

int
http_content_length(FCGX_Request *req, unsigned long long *n)
{
	const char *cl = FCGX_GetParam("CONTENT_LENGTH", req->envp);
	char *end;

	*n = 0;
	if (cl == NULL || *cl == '\0')
		return 0;
	*n = strtoull(cl, &end, 10);
	return *end == '\0' ? 0 : -1;
}

long
http_read_body(FCGX_Request *req, size_t max_bytes, char **body)
{
	unsigned long long n;
	size_t got = 0;

	*body = NULL;
	if (http_content_length(req, &n) < 0)
		return HTTP_BODY_UNREADABLE;
	if (n > max_bytes)
		return HTTP_BODY_TOO_LARGE;
	*body = malloc(n + 1);
	if (*body == NULL)
		return HTTP_BODY_UNREADABLE;
	/* in pieces libfcgi's int lengths hold */
	while (got < n) {
		int r =
		    FCGX_GetStr(*body + got, (int)(n - got > 1 << 20 ? 1 << 20 : n - got), req->in);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	if (got != n) {
		free(*body);
		*body = NULL;
		return HTTP_BODY_UNREADABLE;
	}
	(*body)[n] = '\0';
	return (long)n;
}

const struct http_endpoint *
http_endpoint_find(const struct http_endpoint *table, const char *endpoint)
{
	for (const struct http_endpoint *e = table; endpoint != NULL && e->name != NULL; e++) {
		size_t n = strlen(e->name);
		if (n > 0 && e->name[n - 1] == '*' ? strncmp(endpoint, e->name, n - 1) == 0
		                                   : strcmp(endpoint, e->name) == 0)
			return e;
	}
	return NULL;
}

bool
http_route(FCGX_Request *req, const struct http_endpoint *e)
{
	const char *method = FCGX_GetParam("REQUEST_METHOD", req->envp);
	char allow[64];

	if (e == NULL) {
		http_send_message(req, 404, NULL, "not_found", "no such endpoint");
		return false;
	}
	if (e->method != NULL && (method == NULL || strcmp(method, e->method) != 0)) {
		snprintf(allow, sizeof(allow), "Allow: %s", e->method);
		http_send_message(req, 405, allow, "method_not_allowed", e->wrong_method);
		return false;
	}
	return true;
}

bool
http_client_gone(FCGX_Request *req)
{
	struct pollfd pfd = {.fd = req->ipcFd, .events = POLLRDHUP};

	return poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}
