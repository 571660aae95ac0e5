/*
 * utf8.c - well-formed UTF-8 (utf8.h): the lead byte's rule, the longest valid prefix, the
 * repair of what is not.
 */
#include "core/utf8.h"

#include <string.h>

bool
utf8_lead(unsigned char b, unsigned *need, unsigned char *lo, unsigned char *hi)
{
	*lo = 0x80;
	*hi = 0xBF;
	if (b < 0x80) {
		*need = 0;
	} else if (b >= 0xC2 && b <= 0xDF) {
		*need = 1;
	} else if (b >= 0xE0 && b <= 0xEF) {
		*need = 2;
		if (b == 0xE0)
			*lo = 0xA0; /* no overlong forms */
		else if (b == 0xED)
			*hi = 0x9F; /* no surrogates */
	} else if (b >= 0xF0 && b <= 0xF4) {
		*need = 3;
		if (b == 0xF0)
			*lo = 0x90; /* no overlong forms */
		else if (b == 0xF4)
			*hi = 0x8F; /* nothing past U+10FFFF */
	} else {
		*need = 0;
		return false;
	}
	return true;
}

size_t
utf8_valid_len(const unsigned char *p, const unsigned char *end)
{
	unsigned char lo, hi;
	unsigned need;

	if (!utf8_lead(p[0], &need, &lo, &hi) || need == 0)
		return 0;
	if ((size_t)(end - p) < need + 1)
		return 0;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t k = 2; k <= need; k++)
		if (p[k] < 0x80 || p[k] > 0xBF)
			return 0;
	return need + 1;
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
