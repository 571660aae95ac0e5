/*
 * trace.h - W3C Trace Context for the request in hand, and its runs' spans, exported over
 * OTLP/HTTP JSON where a collector is configured (CODEBOX_OTLP_ENDPOINT; off by default).
 */
#ifndef CODEBOX_TRACE_H
#define CODEBOX_TRACE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/outcome.h"

#define TRACE_ID_HEX 32
#define TRACE_SPAN_HEX 16
#define TRACE_STATE_MAX 512

/* A request's place in a trace: the caller's trace and span, and codebox's span. */
struct trace_ctx {
	bool on; /* false: no (valid) traceparent */
	char trace_id[TRACE_ID_HEX + 1];
	char parent_id[TRACE_SPAN_HEX + 1]; /* the caller's span */
	char span_id[TRACE_SPAN_HEX + 1];   /* codebox's: nginx's, from $request_id */
	unsigned char flags;
	char state[TRACE_STATE_MAX + 1]; /* tracestate, passed through ("" for none) */
};

/*
 * Parses a traceparent header by the W3C Trace Context rules: version 00 is exactly
 * "00-<32 hex>-<16 hex>-<2 hex>"; a later version (not ff) is those four fields followed by
 * nothing or "-..."; hex is lowercase; the trace id and the parent id are not all zeros.
 * Returns 0 with t's trace_id, parent_id and flags set, else -1 (t unchanged).
 */
int trace_parse(const char *header, struct trace_ctx *t);

/* Whether s is n lowercase hex digits, not all zeros. */
bool trace_hex_id(const char *s, size_t n);

/*
 * The request's trace, from nginx's parameters (each validated again here): traceparent,
 * codebox's span id and tracestate. A missing or invalid traceparent or span id: no trace.
 * Later lines of the log carry its trace id (log.h).
 */
void trace_set_request(const char *traceparent, const char *span_id, const char *tracestate);

/* The request's trace (NULL: none). */
const struct trace_ctx *trace_current(void);

/* The request is over: no trace, until the next. A span recorded stays for trace_flush(). */
void trace_clear_request(void);

/* Reads CODEBOX_OTLP_ENDPOINT (unset or empty: off): http://<host>[:port]/<path>, the host
 * resolved now, once. Returns 0, or -1 with a reason in why. */
int trace_export_setup(char *why, size_t why_len);

/* A run of the request's trace begins now (its span's start), on a port ("execute", ...). */
void trace_span_begin(const char *port);

/* The run was admitted (an event of its span). */
void trace_span_admitted(void);

/* The run is over: its span is kept for trace_flush(), o NULL when it could not run. */
void trace_span_end(const struct run_outcome *o, int exit_code, bool has_exit_code);

/* Sends the span kept (if any) to the collector, within TRACE_EXPORT_TIMEOUT_MS; a failure is
 * logged, never more. Call once the reply is out. */
void trace_flush(void);

#define TRACE_EXPORT_TIMEOUT_MS 200

#endif
