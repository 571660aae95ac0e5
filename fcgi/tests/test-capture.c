/* Unit tests for capture.c: the byte bound and Python-compatible UTF-8 repair. */
#include "core/capture.h"
#include "core/utf8.h"
#include "tap.h"

#include <stdlib.h>

static void
check_sanitize(const char *in, size_t n, const char *want, const char *what)
{
	char out[256];
	size_t len = utf8_sanitize((const unsigned char *)in, n, out);

	out[len] = '\0';
	ok(len == strlen(want) && memcmp(out, want, len) == 0, "utf8: %s", what);
}

int
main(void)
{
	struct capture c;
	char *s;
	size_t n;

	capture_init(&c, 4);
	capture_append(&c, "abcd", 4);
	ok(c.len == 4 && !capture_truncated(&c), "exactly the limit is not truncation");
	capture_append(&c, "e", 1);
	ok(c.len == 4 && c.total_bytes == 5 && capture_truncated(&c),
	   "one byte over the limit is truncation and is counted, not kept");
	capture_append(&c, "fghij", 5);
	ok(c.total_bytes == 10 && memcmp(c.buf, "abcd", 4) == 0, "later bytes are discarded");
	capture_free(&c);

	capture_init(&c, 0);
	capture_append(&c, "x", 1);
	ok(c.len == 0 && capture_truncated(&c), "a zero limit keeps nothing");
	capture_free(&c);

	/* the cases Python's bytes.decode("utf-8", "replace") defines */
	check_sanitize("plain", 5, "plain", "ASCII passes through");
	check_sanitize("caf\xc3\xa9", 5, "caf\xc3\xa9", "valid two-byte sequence");
	check_sanitize("\xf0\x9f\x98\x80", 4, "\xf0\x9f\x98\x80", "valid four-byte sequence");
	check_sanitize("a\xffz", 3, "a\xef\xbf\xbdz", "an invalid byte becomes U+FFFD");
	check_sanitize("\xe2\x82", 2, "\xef\xbf\xbd", "a sequence cut at the end is one U+FFFD");
	check_sanitize("\xe2\x82z", 3, "\xef\xbf\xbdz", "a sequence cut early is one U+FFFD");
	check_sanitize("\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd", "overlong: two U+FFFD");
	check_sanitize("\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd",
	               "an encoded surrogate: three U+FFFD");
	check_sanitize("\xf4\x90\x80\x80", 4, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd",
	               "past U+10FFFF: four U+FFFD");
	{
		char out[8];
		ok(utf8_sanitize((const unsigned char *)"a\0b", 3, out) == 3 &&
		       memcmp(out, "a\0b", 3) == 0,
		   "utf8: NUL is valid UTF-8");
	}

	/* a character cut by the limit */
	capture_init(&c, 2);
	capture_append(&c, "a\xc3\xa9", 3);
	s = capture_utf8(&c, &n);
	is_str(s, "a\xef\xbf\xbd", "a character cut at the limit becomes U+FFFD");
	free(s);
	capture_free(&c);
	return tap_done();
}
