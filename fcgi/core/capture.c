/*
 * capture.c - bounded capture of a run's stdout or stderr.
 *
 * The run's parent drains each pipe into a capture. Bytes past max_bytes are counted and
 * dropped, never buffered, so a flood costs CPU but no memory and the program never blocks
 * on a full pipe. The reply needs valid UTF-8; capture_utf8() repairs what was kept (utf8.c).
 */
#include "core/capture.h"

#include "core/utf8.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int
capture_init(struct capture *c, size_t max_bytes)
{
	memset(c, 0, sizeof(*c));
	/* one spare byte so a zero limit still gets a real allocation */
	c->buf = malloc(max_bytes + 1);
	if (c->buf == NULL)
		return -1;
	c->max_bytes = max_bytes;
	return 0;
}

void
capture_free(struct capture *c)
{
	free(c->buf);
	memset(c, 0, sizeof(*c));
}

void
capture_append(struct capture *c, const char *data, size_t n)
{
	size_t room = c->max_bytes - c->len;
	size_t keep = n < room ? n : room;

	if (keep > 0) {
		memcpy(c->buf + c->len, data, keep);
		c->len += keep;
	}
	c->total_bytes += n;
}

bool
capture_truncated(const struct capture *c)
{
	return c->total_bytes > c->max_bytes;
}

char *
capture_utf8(const struct capture *c, size_t *out_len)
{
	char *out = malloc(3 * c->len + 1);

	if (out == NULL)
		return NULL;
	*out_len = utf8_sanitize((const unsigned char *)c->buf, c->len, out);
	out[*out_len] = '\0';
	return out;
}
