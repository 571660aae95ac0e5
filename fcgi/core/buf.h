/*
 * buf.h - the one growable byte buffer: jsonw's text, files' blobs and manifests, init's
 * report, a command's stderr with its notes. It grows by doubling (buf_reserve()) or to an
 * exact size (buf_resize()), its size's arithmetic guarded against overflow; a growth that
 * fails leaves what the buffer holds, as nginx's ngx_buf_t and redis's sds are used.
 */
#ifndef CODEBOX_BUF_H
#define CODEBOX_BUF_H

#include <stddef.h>

struct buf {
	char *p; /* owned, or NULL */
	size_t len;
	size_t cap;
};

#define BUF_EMPTY                                                                                  \
	{                                                                                          \
		NULL, 0, 0                                                                         \
	}

/* Room for n more bytes and a NUL past them (the first allocation at least 256 bytes): 0, or
 * -1 (out of memory, or a size past SIZE_MAX). */
int buf_reserve(struct buf *b, size_t n);

/* Grows to exactly cap bytes when it holds fewer (never shrinks): 0, or -1. */
int buf_resize(struct buf *b, size_t cap);

/* Appends p[0..n) and keeps a NUL past it: 0, or -1 (nothing appended). */
int buf_put(struct buf *b, const void *p, size_t n);

/* Takes the bytes (caller frees; NULL when none were ever held) and their length; b is left
 * empty. */
char *buf_take(struct buf *b, size_t *len);

void buf_free(struct buf *b);

#endif
