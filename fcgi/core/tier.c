/*
 * tier.c - which warm tier a program needs, guessed from its text.
 */
#include "core/tier.h"

#include <string.h>

static bool
ident_char(char c)
{
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') ||
	       (unsigned char)c >= 0x80; /* a non-ASCII identifier character, conservatively */
}

bool
tier_code_names(const char *code, size_t len, const char *module)
{
	size_t mlen = strcspn(module, ".");

	if (mlen == 0 || mlen > len)
		return false;
	for (size_t at = 0; at + mlen <= len;) {
		const char *p = memchr(code + at, module[0], len - mlen - at + 1);

		if (p == NULL)
			return false;
		at = (size_t)(p - code);
		if (memcmp(p, module, mlen) == 0 && (at == 0 || !ident_char(code[at - 1])) &&
		    (at + mlen == len || !ident_char(code[at + mlen])))
			return true;
		at++;
	}
	return false;
}
