/* Unit tests for http.c: routing by a table, the bytes of an answer, reading a body, a client
 * gone. */
#include "http/http.h"
#include "tap.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* A request whose answer is written to out (1 MiB, plenty) and whose body is read from in. */
static unsigned char out[1 << 20];
static FCGX_Stream out_stream, in_stream;
static FCGX_Request req;

static void
no_more(FCGX_Stream *s)
{
	s->isClosed = 1;
}

static void
no_room(FCGX_Stream *s, int close)
{
	(void)close;
	s->isClosed = 1;
}

/* A fresh request: params (NULL-terminated "NAME=value"), body the request's body. */
static void
request(char **params, const char *body)
{
	out_stream =
	    (FCGX_Stream){.wrNext = out, .stop = out + sizeof(out) - 1, .emptyBuffProc = no_room};
	in_stream = (FCGX_Stream){.rdNext = (unsigned char *)body,
	                          .stop = (unsigned char *)body + (body ? strlen(body) : 0),
	                          .isReader = 1,
	                          .fillBuffProc = no_more};
	req = (FCGX_Request){.in = &in_stream, .out = &out_stream, .envp = params, .ipcFd = -1};
}

static int handled;

static void
handle(void *port, FCGX_Request *r)
{
	(void)r;
	handled = *(int *)port;
}

static const struct http_endpoint table[] = {
    {"execute", "POST", "use POST for /execute", handle, false},
    {"readyz", NULL, NULL, handle, true},
    {"agent_*", NULL, NULL, handle, false},
    {NULL, NULL, NULL, NULL, false},
};

/* What was answered, as a C string. */
static const char *
answer(void)
{
	*out_stream.wrNext = '\0';
	return (const char *)out;
}

int
main(void)
{
	char *none[] = {NULL};
	char *body;
	long n;
	int sv[2];

	is_str(http_status_text(200), "OK", "200 OK");
	is_str(http_status_text(202), "Accepted", "202 Accepted (MCP's notifications)");
	is_str(http_status_text(403), "Forbidden", "403 Forbidden (both ports)");
	is_str(http_status_text(405), "Method Not Allowed", "405");
	is_str(http_status_text(429), "Too Many Requests", "429");
	is_str(http_status_text(500), "Internal Server Error", "500");
	is_str(http_status_text(418), "Internal Server Error", "an unknown status is a 500's");

	request(none, NULL);
	http_send(&req, 200, NULL, "{\"a\":1}", 7);
	is_str(answer(),
	       "Status: 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n"
	       "{\"a\":1}",
	       "a JSON answer: status, type, length, body");

	request(none, NULL);
	http_send_as(&req, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, "x 1\n", 4);
	is_str(answer(),
	       "Status: 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
	       "Content-Length: 4\r\n\r\nx 1\n",
	       "another content type");

	request(none, NULL);
	http_send(&req, 202, NULL, "", 0);
	is_str(
	    answer(),
	    "Status: 202 Accepted\r\nContent-Type: application/json\r\nContent-Length: 0\r\n\r\n",
	    "an empty answer");

	request(none, NULL);
	http_send_message(&req, 405, "Allow: POST", "method_not_allowed", "use POST for /execute");
	is_str(answer(),
	       "Status: 405 Method Not Allowed\r\nContent-Type: application/json\r\nAllow: POST\r\n"
	       "Content-Length: 64\r\n\r\n"
	       "{\"error\":\"method_not_allowed\",\"message\":\"use POST for /execute\"}",
	       "an error with an extra header, in API.md's shape");

	request(none, NULL);
	http_send_message(&req, 429, "Retry-After: 1", "sandbox_busy", "retry \"soon\"");
	is_str(answer(),
	       "Status: 429 Too Many Requests\r\nContent-Type: application/json\r\n"
	       "Retry-After: 1\r\nContent-Length: 51\r\n\r\n"
	       "{\"error\":\"sandbox_busy\",\"message\":\"retry \\\"soon\\\"\"}",
	       "the message is escaped");

	request(none, NULL);
	http_send_message(&req, 403, NULL, NULL, "Access denied");
	is_str(
	    answer(),
	    "Status: 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: 27\r\n\r\n"
	    "{\"message\":\"Access denied\"}",
	    "without an error, the message alone (port 8888's shape)");

	request(none, NULL);
	http_send_doc(&req, HTTP_JSON, strdup("[1,2]"), 5);
	is_str(answer(),
	       "Status: 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\n[1,2]",
	       "a document is a 200 (and freed: the sanitizers would say)");

	request(none, NULL);
	http_send_doc(&req, HTTP_JSON, NULL, 0);
	is_str(answer(),
	       "Status: 500 Internal Server Error\r\nContent-Type: application/json\r\n"
	       "Content-Length: 51\r\n\r\n"
	       "{\"error\":\"sandbox_error\",\"message\":\"out of memory\"}",
	       "no document (out of memory making it) is a 500");

	request(none, NULL);
	http_send_head(&req, 200, "application/octet-stream",
	               "Content-Disposition: attachment; filename=\"a/b.txt\"", 5000000000ULL);
	is_str(answer(),
	       "Status: 200 OK\r\nContent-Type: application/octet-stream\r\n"
	       "Content-Disposition: attachment; filename=\"a/b.txt\"\r\n"
	       "Content-Length: 5000000000\r\n\r\n",
	       "a head alone, for a body streamed after it, longer than 4 GiB");

	{
		char *p[] = {"CONTENT_LENGTH=5", NULL};
		request(p, "hello");
		n = http_read_body(&req, 5, &body);
		ok(n == 5 && body && strcmp(body, "hello") == 0,
		   "a body of exactly max_bytes is read");
		free(body);
		request(p, "hello");
		n = http_read_body(&req, 4, &body);
		ok(n == HTTP_BODY_TOO_LARGE && body == NULL, "one byte more is too large");
		request(p, "hell");
		n = http_read_body(&req, 10, &body);
		ok(n == HTTP_BODY_UNREADABLE && body == NULL,
		   "a body shorter than its Content-Length is unreadable");
	}
	{
		char *p[] = {"CONTENT_LENGTH=5x", NULL};
		unsigned long long cl;
		request(p, "hello");
		ok(http_content_length(&req, &cl) < 0, "a malformed Content-Length is refused");
		n = http_read_body(&req, 10, &body);
		ok(n == HTTP_BODY_UNREADABLE && body == NULL, "...and its body is unreadable");
	}
	{
		char *p[] = {"CONTENT_LENGTH=", NULL};
		unsigned long long cl = 7;
		request(p, "");
		ok(http_content_length(&req, &cl) == 0 && cl == 0, "an empty Content-Length is 0");
		request(none, "");
		ok(http_content_length(&req, &cl) == 0 && cl == 0, "no Content-Length is 0");
		n = http_read_body(&req, 10, &body);
		ok(n == 0 && body && body[0] == '\0', "no body is an empty one");
		free(body);
	}

	ok(http_endpoint_find(table, "execute") == &table[0], "an endpoint is found by its name");
	ok(http_endpoint_find(table, "execute2") == NULL &&
	       http_endpoint_find(table, "exec") == NULL,
	   "...by its whole name");
	ok(http_endpoint_find(table, "agent_list") == &table[2] &&
	       http_endpoint_find(table, "agent_") == &table[2],
	   "a name ending in '*' stands for every name it starts");
	ok(http_endpoint_find(table, "agent") == NULL, "...and not for less");
	ok(http_endpoint_find(table, NULL) == NULL, "no endpoint named: none found");
	{
		char *post[] = {"REQUEST_METHOD=POST", NULL}, *get[] = {"REQUEST_METHOD=GET", NULL};
		int port = 7;
		request(post, NULL);
		ok(http_route(&req, &table[0]) && answer()[0] == '\0',
		   "the endpoint's method: routed, nothing answered");
		table[0].handle(&port, &req);
		ok(handled == 7, "the handler gets the port's state");
		request(get, NULL);
		ok(!http_route(&req, &table[0]), "another method is not routed");
		is_str(answer(),
		       "Status: 405 Method Not Allowed\r\nContent-Type: application/json\r\n"
		       "Allow: POST\r\nContent-Length: 64\r\n\r\n"
		       "{\"error\":\"method_not_allowed\",\"message\":\"use POST for /execute\"}",
		       "...but answered 405 with Allow and the endpoint's message");
		request(none, NULL);
		ok(!http_route(&req, &table[0]), "no method at all is another method");
		request(none, NULL);
		ok(http_route(&req, &table[1]) && answer()[0] == '\0',
		   "an endpoint of any method takes none (the probe's readyz)");
		request(get, NULL);
		ok(!http_route(&req, NULL), "no endpoint is not routed");
		is_str(answer(),
		       "Status: 404 Not Found\r\nContent-Type: application/json\r\n"
		       "Content-Length: 50\r\n\r\n"
		       "{\"error\":\"not_found\",\"message\":\"no such endpoint\"}",
		       "...but answered 404 not_found");
	}

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return 1;
	request(none, NULL);
	req.ipcFd = sv[0];
	ok(!http_client_gone(&req), "a connection still open: the client is there");
	ok(write(sv[1], "x", 1) == 1 && !http_client_gone(&req), "unread bytes are not a hang-up");
	close(sv[1]);
	ok(http_client_gone(&req), "nginx closed the connection: the client is gone");
	close(sv[0]);

	return tap_done();
}
