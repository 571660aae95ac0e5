/*
 * jsonw.h - a small writer of compact JSON text into a growable buffer.
 */
#ifndef CODEBOX_JSONW_H
#define CODEBOX_JSONW_H

#include <stdbool.h>
#include <stddef.h>

struct jsonw {
	char *buf; /* owned; NUL-terminated when not failed */
	size_t len;
	size_t cap;
	bool failed; /* an allocation failed; every later call is a no-op */
};

void jsonw_init(struct jsonw *w);
void jsonw_free(struct jsonw *w);

/* Appends raw bytes, which the caller promises are valid JSON text in context. */
void jsonw_raw(struct jsonw *w, const char *s, size_t n);
void jsonw_lit(struct jsonw *w, const char *s);

/* Appends s[0..n) as a JSON string. s must be valid UTF-8: non-ASCII is written as is, control
 * characters, '"' and '\\' are escaped. */
void jsonw_str(struct jsonw *w, const char *s, size_t n);
void jsonw_cstr(struct jsonw *w, const char *s);

void jsonw_int(struct jsonw *w, long long v);

/* Takes the text: returns the buffer (caller frees) and its length, or NULL if anything
 * failed. The writer is left empty. */
char *jsonw_take(struct jsonw *w, size_t *len);

#endif
