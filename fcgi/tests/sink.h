/* A jsonw sink for the unit tests: keeps what it is given; fails after fail_after calls when
 * that is set. */
#ifndef CODEBOX_TESTS_SINK_H
#define CODEBOX_TESTS_SINK_H

#include <stdlib.h>
#include <string.h>

struct sink {
	char *buf;
	size_t len;
	int calls;
	int fail_after;
};

static inline int
sink_put(void *ctx, const char *p, size_t n)
{
	struct sink *k = ctx;
	char *nb;

	if (k->fail_after > 0 && k->calls >= k->fail_after)
		return -1;
	nb = realloc(k->buf, k->len + n);
	if (nb == NULL)
		return -1;
	memcpy(nb + k->len, p, n);
	k->buf = nb;
	k->len += n;
	k->calls++;
	return 0;
}

#endif
