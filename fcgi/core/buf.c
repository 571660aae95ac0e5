/*
 * buf.c - the one growable byte buffer (buf.h).
 */
#include "core/buf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BUF_FIRST 256

int
buf_resize(struct buf *b, size_t cap)
{
	char *p;

	if (cap <= b->cap)
		return 0;
	p = realloc(b->p, cap);
	if (p == NULL)
		return -1;
	b->p = p;
	b->cap = cap;
	return 0;
}

int
buf_reserve(struct buf *b, size_t n)
{
	size_t cap = b->cap ? b->cap : BUF_FIRST;

	if (n > SIZE_MAX - b->len - 1)
		return -1;
	if (b->len + n + 1 <= b->cap)
		return 0;
	while (cap < b->len + n + 1) {
		if (cap > SIZE_MAX / 2)
			return -1;
		cap *= 2;
	}
	return buf_resize(b, cap);
}

int
buf_put(struct buf *b, const void *p, size_t n)
{
	if (buf_reserve(b, n) < 0)
		return -1;
	if (n > 0)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

char *
buf_take(struct buf *b, size_t *len)
{
	char *p = b->p;

	*len = b->len;
	*b = (struct buf)BUF_EMPTY;
	return p;
}

void
buf_free(struct buf *b)
{
	free(b->p);
	*b = (struct buf)BUF_EMPTY;
}
