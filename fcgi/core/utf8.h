/*
 * utf8.h - the one table of well-formed UTF-8 (Unicode's table 3-7), shared by the output
 * repair (utf8_sanitize, for every text a reply carries) and the result.json reader (result.c).
 */
#ifndef CODEBOX_UTF8_H
#define CODEBOX_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/*
 * The rule a lead byte b sets: need continuation bytes follow, the first within [lo, hi]
 * (which excludes overlong forms, surrogates and code points past U+10FFFF), the others
 * within [0x80, 0xBF]. ASCII needs none. Returns false for a byte that never starts a
 * character (0x80..0xC1, 0xF5..0xFF).
 */
bool utf8_lead(unsigned char b, unsigned *need, unsigned char *lo, unsigned char *hi);

/* Length of the valid multi-byte UTF-8 sequence at p, or 0 if it is not one (ASCII, overlong,
 * surrogate, past U+10FFFF, cut short by end). */
size_t utf8_valid_len(const unsigned char *p, const unsigned char *end);

/*
 * Writes in[0..n) to out as valid UTF-8: each maximal invalid subpart (an invalid byte, or the
 * start of a sequence that stops early, e.g. cut by the limit) becomes one U+FFFD, exactly as
 * Python's bytes.decode("utf-8", "replace") does. out needs room for 3 * n bytes.
 * Returns the bytes written.
 */
size_t utf8_sanitize(const unsigned char *in, size_t n, char *out);

#endif
