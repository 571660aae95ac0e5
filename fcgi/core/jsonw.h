/*
 * jsonw.h - a small writer of compact JSON text into a growable buffer.
 */
#ifndef CODEBOX_JSONW_H
#define CODEBOX_JSONW_H

#include "core/buf.h"

#include <stdbool.h>
#include <stddef.h>

/*
 * Three kinds of writer: into a growable buffer (jsonw_init(), jsonw_take()); into a sink
 * (jsonw_init_sink(): the text goes out through put() as it is written, buf a window of at
 * most JSONW_WINDOW bytes, and a piece at least that long is handed over without a copy); or
 * counting only (jsonw_init_count(): nothing is stored, a reply's length is known before it is
 * written, so a body can be streamed after its Content-Length). The same writing code serves
 * all three.
 */
#define JSONW_WINDOW (64U << 10)

struct jsonw {
	struct buf b; /* NUL-terminated when not failed (buffer kind); the window (sink kind) */
	bool failed;  /* an allocation or the sink failed; every later call is a no-op */
	/* the sink and its context (sink kind), or counting (count kind) */
	int (*put)(void *ctx, const char *s, size_t n);
	void *ctx;
	bool counting;
	unsigned long long out; /* bytes handed to put(), or counted */
};

void jsonw_init(struct jsonw *w);
void jsonw_init_sink(struct jsonw *w, int (*put)(void *ctx, const char *s, size_t n), void *ctx);
void jsonw_init_count(struct jsonw *w);
void jsonw_free(struct jsonw *w);

/* Sink and count kinds: hands over what the window holds; returns the text's whole length,
 * or -1 if anything failed. The writer is left empty. */
long long jsonw_end(struct jsonw *w);

/* Appends raw bytes, which the caller promises are valid JSON text in context. */
void jsonw_raw(struct jsonw *w, const char *s, size_t n);
void jsonw_lit(struct jsonw *w, const char *s);

/* Appends s[0..n) as a JSON string. s must be valid UTF-8: non-ASCII is written as is, control
 * characters, '"' and '\\' are escaped. */
void jsonw_str(struct jsonw *w, const char *s, size_t n);
void jsonw_cstr(struct jsonw *w, const char *s);

void jsonw_int(struct jsonw *w, long long v);

/* Appends data[0..n) as a JSON string of its base64 (RFC 4648, padded), encoded piece by piece
 * straight into the text: no copy of the whole encoding is made. */
void jsonw_base64(struct jsonw *w, const char *data, size_t n);

/* Takes the text: returns the buffer (caller frees) and its length, or NULL if anything
 * failed. The writer is left empty. */
char *jsonw_take(struct jsonw *w, size_t *len);

#endif
