/*
 * capture.h - bounded capture of one output stream of a run.
 */
#ifndef CODEBOX_CAPTURE_H
#define CODEBOX_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct capture {
	char *buf;            /* max_bytes of storage, owned */
	size_t max_bytes;     /* bytes kept at most */
	size_t len;           /* bytes kept so far */
	uint64_t total_bytes; /* bytes the program produced, kept or not */
};

/* Allocates the buffer. Returns 0, or -1 with errno set. */
int capture_init(struct capture *c, size_t max_bytes);

/* Frees the buffer; the struct may be initialised again. */
void capture_free(struct capture *c);

/* Keeps what fits under max_bytes, counts and discards the rest. */
void capture_append(struct capture *c, const char *data, size_t n);

/* True iff the program produced more than max_bytes (exactly max_bytes is not truncation). */
bool capture_truncated(const struct capture *c);

/* A newly allocated valid UTF-8 copy of what was kept, NUL-terminated; caller frees. */
char *capture_utf8(const struct capture *c, size_t *out_len);

#endif
