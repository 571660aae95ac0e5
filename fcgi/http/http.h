/*
 * http.h - the FastCGI side of HTTP, for every port the workers serve (8080 with MCP, 9090's
 * /metrics, 8888's agent protocol): routing a request to its endpoint by a port's table,
 * reading its body, writing its answer, noticing a client that left.
 */
#ifndef CODEBOX_HTTP_H
#define CODEBOX_HTTP_H

#include <fcgiapp.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/jsonw.h"

#define HTTP_JSON "application/json"

/* The headers of a 429: when to retry, and which bound refused (nginx's own 429 says
 * "Codebox-Busy: nginx", codebox-errors.conf): the pool's execution or agent slots, port
 * 8888's one workspace... */
#define HTTP_BUSY_POOL "Retry-After: 1\r\nCodebox-Busy: pool"
#define HTTP_BUSY_WORKSPACE "Retry-After: 1\r\nCodebox-Busy: workspace"
/* ...the pod's sessions (CODEBOX_MAX_SESSIONS), one token's share of them
 * (CODEBOX_MAX_SESSIONS_PER_TOKEN), the pool's memory budget (sessions' caps held of it) */
#define HTTP_BUSY_SESSIONS "Retry-After: 1\r\nCodebox-Busy: sessions"
#define HTTP_BUSY_TENANT "Retry-After: 1\r\nCodebox-Busy: tenant"
#define HTTP_BUSY_MEMORY "Retry-After: 1\r\nCodebox-Busy: memory"
/* ...a pod that is draining (SIGUSR1): its sessions go on, new ones are another pod's */
#define HTTP_BUSY_DRAINING "Retry-After: 1\r\nCodebox-Busy: draining"
/* ...the event streams of background executions (CODEBOX_MAX_STREAMS, per session) */
#define HTTP_BUSY_STREAMS "Retry-After: 1\r\nCodebox-Busy: streams"

/* What http_read_body() returns when it has no body to give. */
#define HTTP_BODY_UNREADABLE -1 /* a read error, a malformed or short Content-Length */
#define HTTP_BODY_TOO_LARGE -2  /* longer than the caller accepts */

/* The reason phrase of status, as nginx passes it on; "Internal Server Error" when unknown. */
const char *http_status_text(int status);

/*
 * Writes the head of an answer: its status line, Content-Type content_type, extra_header (one
 * or more "Name: value" lines joined by "\r\n", without the last one's end; NULL: none) and
 * Content-Length len. The body, exactly len bytes, is the caller's to write next.
 */
void http_send_head(FCGX_Request *req, int status, const char *content_type,
                    const char *extra_header, unsigned long long len);

/* An answer of len bytes of content_type: http_send_head() and the body. */
void http_send_as(FCGX_Request *req, int status, const char *content_type, const char *extra_header,
                  const char *body, size_t len);

/*
 * A 200 of content_type whose body is the first size bytes of fd (a regular file, read from its
 * offset): exactly size bytes, whatever the file does meanwhile (cut or padded with zeros),
 * streamed through a 64 KiB window.
 */
void http_send_file(FCGX_Request *req, const char *content_type, const char *extra_header, int fd,
                    unsigned long long size);

/*
 * A 200 JSON answer written by write(w, ctx) twice: counted first (its Content-Length), then
 * streamed into the FastCGI stream as it is written (jsonw's sink), so a large body is never
 * held whole. Returns 0, or -1 when the counting failed and nothing was sent (the caller
 * answers); a stream that breaks midway is the client's loss, logged.
 */
int http_send_written(FCGX_Request *req, void (*write)(struct jsonw *w, const void *ctx),
                      const void *ctx);

/* A JSON answer: http_send_as() with HTTP_JSON. */
void http_send(FCGX_Request *req, int status, const char *extra_header, const char *body,
               size_t len);

/*
 * A message as JSON: {"error": error, "message": message}, API.md's error shape, or {"message":
 * message} alone when error is NULL (the agent-sandbox example runtime's answers on port 8888,
 * its upload's success among them). When the body cannot be made, the 500
 * {"error":"sandbox_error","message":"the worker is out of memory"} instead.
 */
void http_send_message(FCGX_Request *req, int status, const char *extra_header, const char *error,
                       const char *message);

/*
 * A document as a 200 of content_type, and frees it (doc is stolen). NULL (the worker ran out
 * of memory making it) is the 500 {"error":"sandbox_error","message":"out of memory"}.
 */
void http_send_doc(FCGX_Request *req, const char *content_type, char *doc, size_t len);

/* What http_uri_decode() returns when it has no path to give. */
#define HTTP_URI_MALFORMED -1 /* a bad escape, or an encoded NUL */
#define HTTP_URI_TOO_LONG -2  /* longer than out_len - 1 bytes */

/*
 * A path of a request URI as the client sent it (s: REQUEST_URI, nginx's $request_uri, past
 * the caller's prefix), up to any query, percent-decoded once, into out (NUL-ended). Not
 * nginx's $uri, whose dot segments are resolved already. Returns its length, or
 * HTTP_URI_MALFORMED or HTTP_URI_TOO_LONG.
 */
long http_uri_decode(const char *s, char *out, size_t out_len);

/*
 * The request's CONTENT_LENGTH into n: 0 when there is none. Returns 0, or -1 when it is not
 * a decimal number.
 */
int http_content_length(FCGX_Request *req, unsigned long long *n);

/*
 * Reads the whole body (CONTENT_LENGTH bytes), at most max_bytes, into *body: newly allocated,
 * NUL-terminated, the caller frees it. Returns its length, HTTP_BODY_TOO_LARGE or
 * HTTP_BODY_UNREADABLE (*body is then NULL).
 */
long http_read_body(FCGX_Request *req, size_t max_bytes, char **body);

/*
 * One endpoint of a port: the name nginx.conf gives it (fastcgi_param CODEBOX_ENDPOINT), the
 * method it serves and its handler. A port's endpoints are a table ended by an entry whose name
 * is NULL; a name ending in '*' stands for every endpoint whose name starts with the rest (a
 * port served by a table of its own).
 */
struct http_endpoint {
	const char *name;
	/* the one method served; another is answered 405 with Allow: method and wrong_method as
	 * the message. NULL: not checked here (nginx.conf's codebox-405-*.conf, where it is) */
	const char *method;
	const char *wrong_method;
	/* port: what the port's endpoints share for this request (worker.c's, agent.c's;
	 * sessionapi.c's sub-paths) */
	void (*handle)(void *port, FCGX_Request *req);
	/* served without reading the request's limits (a probe's, which must answer even when
	 * they are malformed) */
	bool unlimited;
};

/* The entry of table for endpoint, or NULL when there is none (endpoint NULL included). */
const struct http_endpoint *http_endpoint_find(const struct http_endpoint *table,
                                               const char *endpoint);

/*
 * Whether req may go to e (http_endpoint_find()'s): when e is NULL answers 404 not_found, when
 * the request's method is not e->method answers 405 method_not_allowed, and returns false; else
 * answers nothing and returns true (the caller then calls e->handle).
 */
bool http_route(FCGX_Request *req, const struct http_endpoint *e);

/*
 * Whether nginx closed the request's connection: its client hung up (nginx ends the request
 * with 499 and closes the upstream connection). Only a hang-up counts; unread bytes do not.
 */
bool http_client_gone(FCGX_Request *req);

#endif
