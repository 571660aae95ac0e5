/*
 * stream.h - output as it happens: a run's stdout and stderr as Server-Sent Events.
 *
 * A client that sends `Accept: text/event-stream` (POST /execute, POST
 * /sessions/{id}/execute) gets, once its run is admitted, a 200 text/event-stream whose events
 * are the output as the worker drains it (`event: stdout` / `event: stderr`, data
 * {"text": ...}) and then the answer it would have had as JSON (`event: outcome`). An MCP
 * tools/call that asks for progress (params._meta.progressToken) and accepts SSE gets the
 * same output as notifications/progress (the text as the message, the bytes so far as the
 * progress), then the JSON-RPC answer, each as `event: message` (Streamable HTTP).
 *
 * SSE rather than JSON lines: one framing for both ports (MCP's Streamable HTTP is SSE), and
 * every HTTP library and curl -N read it. Each chunk is sent as valid UTF-8: a character cut
 * between two reads waits for its end (stream_utf8_cut()).
 */
#ifndef CODEBOX_STREAM_H
#define CODEBOX_STREAM_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/jsonw.h"

struct stream_sse {
	int (*put)(void *ctx, const char *s, size_t n); /* the response's body; -1: broken */
	void (*flush)(void *ctx);                       /* send what was put */
	void *ctx;
	/* NULL: a client's stdout/stderr events; else MCP notifications/progress for it */
	const json_t *progress_token;
	bool started; /* the head is sent */
	bool failed;  /* a write failed: the rest is not sent */
	unsigned char held[2][4];
	size_t held_len[2];
	unsigned long long sent; /* output bytes sent, MCP's progress */
};

/* The head of the 200 text/event-stream response (extra_header: NULL or a line without CRLF),
 * written once. */
void stream_sse_start(struct stream_sse *s, const char *extra_header);

/* n bytes the program wrote to stdout (which 0) or stderr (1), as one event. */
void stream_sse_output(struct stream_sse *s, int which, const char *p, size_t n);

/* The last event: the answer write() writes (`event: outcome`, or MCP's `event: message`),
 * after what any stream still held back. */
void stream_sse_end(struct stream_sse *s, void (*write)(struct jsonw *w, const void *ctx),
                    const void *ctx);

/* The last event when the run could not be answered: `event: error` with the error shape
 * (MCP: a JSON-RPC error with code). */
void stream_sse_error(struct stream_sse *s, const json_t *id, int code, const char *error,
                      const char *message);

/* How much of p[0..n) can be sent now: all of it but an incomplete UTF-8 sequence at its end
 * that the next bytes may complete (at most 3 bytes held back). */
size_t stream_utf8_cut(const unsigned char *p, size_t n);

/* Whether an Accept header's value asks for text/event-stream. */
bool stream_wanted(const char *accept);

#endif
