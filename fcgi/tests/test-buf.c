/* Unit tests for buf.c: the one growable byte buffer. */
#include "core/buf.h"
#include "tap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int
main(void)
{
	struct buf b = BUF_EMPTY;
	char big[5000];
	size_t len;
	char *p;

	p = buf_take(&b, &len);
	ok(p == NULL && len == 0, "an empty buffer holds nothing and allocates nothing");

	ok(buf_put(&b, "abc", 3) == 0 && b.len == 3, "a put appends");
	is_str(b.p, "abc", "and keeps a NUL past the bytes");
	ok(b.cap >= 256, "the first allocation is at least 256 bytes (%zu)", b.cap);
	ok(buf_put(&b, "", 0) == 0 && b.len == 3 && strcmp(b.p, "abc") == 0,
	   "an empty put changes nothing");

	memset(big, 'x', sizeof(big));
	ok(buf_put(&b, big, sizeof(big)) == 0 && b.len == 3 + sizeof(big),
	   "a put larger than the room grows the buffer");
	ok(b.cap >= b.len + 1 && (b.cap & (b.cap - 1)) == 0, "by doubling (%zu)", b.cap);
	ok(memcmp(b.p, "abc", 3) == 0 && b.p[3] == 'x' && b.p[b.len - 1] == 'x' &&
	       b.p[b.len] == '\0',
	   "keeping what it held, in order");

	{
		size_t cap = b.cap, held = b.len;
		char *before = b.p;
		ok(buf_reserve(&b, SIZE_MAX - 2) < 0, "a size past SIZE_MAX is refused");
		ok(b.p == before && b.cap == cap && b.len == held,
		   "and leaves the buffer as it was");
		ok(buf_put(&b, big, SIZE_MAX - held) < 0 && b.len == held,
		   "a put whose size overflows appends nothing");
	}

	p = buf_take(&b, &len);
	ok(p != NULL && len == 3 + sizeof(big) && b.p == NULL && b.len == 0 && b.cap == 0,
	   "a take hands the bytes over and empties the buffer");
	free(p);

	ok(buf_resize(&b, 100) == 0 && b.cap == 100 && b.len == 0, "a resize grows to exactly cap");
	ok(buf_resize(&b, 50) == 0 && b.cap == 100, "and never shrinks");
	ok(buf_reserve(&b, 99) == 0 && b.cap == 100,
	   "a reserve that fits (and its NUL) does not grow");
	ok(buf_reserve(&b, 100) == 0 && b.cap == 200, "one that does not, doubles");
	buf_free(&b);
	ok(b.p == NULL && b.cap == 0, "a free empties it");
	return tap_done();
}
