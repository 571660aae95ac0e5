/* Unit tests for jsonw.c: escaping and failure latching. */
#include "jsonw.h"
#include "tap.h"

#include <stdlib.h>

int
main(void)
{
	struct jsonw w;
	char *s;

	jsonw_init(&w);
	jsonw_str(&w, "a\"b\\c\n\t\x01\x7f\xc3\xa9/", 12);
	s = jsonw_take(&w, NULL);
	is_str(s, "\"a\\\"b\\\\c\\n\\t\\u0001\x7f\xc3\xa9/\"",
	       "quotes, backslashes and controls escaped; DEL, non-ASCII and / kept");
	free(s);

	jsonw_init(&w);
	jsonw_str(&w, "a\0b", 3);
	s = jsonw_take(&w, NULL);
	is_str(s, "\"a\\u0000b\"", "NUL is escaped");
	free(s);

	jsonw_init(&w);
	jsonw_int(&w, -9);
	jsonw_lit(&w, ",");
	jsonw_int(&w, 1LL << 40);
	s = jsonw_take(&w, NULL);
	is_str(s, "-9,1099511627776", "integers");
	free(s);

	jsonw_init(&w);
	s = jsonw_take(&w, NULL);
	is_str(s, "", "an empty writer gives an empty string");
	free(s);

	jsonw_init(&w);
	w.failed = true;
	jsonw_lit(&w, "x");
	ok(jsonw_take(&w, NULL) == NULL, "a failed writer gives NULL");
	return tap_done();
}
