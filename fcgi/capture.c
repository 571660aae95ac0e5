/*
 * capture.c - bounded capture of a run's stdout or stderr, and UTF-8 repair.
 *
 * The run's parent drains each pipe into a capture. Bytes past max_bytes are counted and
 * dropped, never buffered, so a flood costs CPU but no memory and the program never blocks
 * on a full pipe. The reply needs valid UTF-8; utf8_sanitize() repairs what was kept.
 */
#include "capture.h"

#include "utf8.h"

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

size_t
utf8_sanitize(const unsigned char *in, size_t n, char *out)
{
	size_t i = 0, o = 0;

	while (i < n) {
		unsigned char b = in[i], lo, hi;
		unsigned need;

		if (b < 0x80) {
			out[o++] = (char)b;
			i++;
			continue;
		}
		/* a byte that never starts a character has need 0: one U+FFFD below */
		(void)utf8_lead(b, &need, &lo, &hi);

		size_t j = i + 1;
		unsigned k = 0;
		while (k < need && j < n) {
			unsigned char cb = in[j];
			if (k == 0 ? (cb < lo || cb > hi) : (cb < 0x80 || cb > 0xBF))
				break;
			j++;
			k++;
		}
		if (need > 0 && k == need) {
			memcpy(out + o, in + i, j - i);
			o += j - i;
		} else {
			/* one U+FFFD for the maximal subpart in[i..j) */
			out[o++] = (char)0xEF;
			out[o++] = (char)0xBF;
			out[o++] = (char)0xBD;
		}
		i = j;
	}
	return o;
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
