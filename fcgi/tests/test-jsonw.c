/* Unit tests for jsonw.c: escaping and failure latching. */
#include "core/jsonw.h"
#include "sink.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

/* a text with strings to escape, a long raw piece and a long base64 */
static void
write_sample(struct jsonw *w, const char *data, size_t n)
{
	jsonw_lit(w, "{\"a\":");
	jsonw_str(w, "x\"y\n", 4);
	jsonw_lit(w, ",\"raw\":\"");
	for (size_t i = 0; i < n / 2; i += 4096) {
		static char letters[4096];
		memset(letters, 'q', sizeof(letters));
		jsonw_raw(w, letters, n / 2 - i < sizeof(letters) ? n / 2 - i : sizeof(letters));
	}
	jsonw_lit(w, "\",\"b\":");
	jsonw_base64(w, data, n);
	jsonw_lit(w, ",\"n\":");
	jsonw_int(w, 42);
	jsonw_lit(w, "}");
}

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

	/* base64: RFC 4648's vectors, padded */
	{
		static const char *const in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
		static const char *const out[] = {"\"\"",        "\"Zg==\"",     "\"Zm8=\"",
		                                  "\"Zm9v\"",    "\"Zm9vYg==\"", "\"Zm9vYmE=\"",
		                                  "\"Zm9vYmFy\""};
		for (int i = 0; i < 7; i++) {
			jsonw_init(&w);
			jsonw_base64(&w, in[i], strlen(in[i]));
			s = jsonw_take(&w, NULL);
			is_str(s, out[i], "base64 of \"%s\"", in[i]);
			free(s);
		}
	}

	/* the three kinds agree: a text of several windows, with a piece longer than one */
	{
		size_t big = 3 * JSONW_WINDOW + 5;
		char *data = malloc(big), *text;
		size_t text_len;
		struct sink k = {NULL, 0, 0, 0};
		long long counted, streamed;

		for (size_t i = 0; i < big; i++)
			data[i] = (char)(i * 31 + 7);
		jsonw_init(&w);
		write_sample(&w, data, big);
		text = jsonw_take(&w, &text_len);
		jsonw_init_count(&w);
		write_sample(&w, data, big);
		counted = jsonw_end(&w);
		jsonw_init_sink(&w, sink_put, &k);
		write_sample(&w, data, big);
		streamed = jsonw_end(&w);
		ok(text != NULL && counted == (long long)text_len && streamed == counted,
		   "counted, streamed and buffered lengths agree (%lld, %lld, %zu)", counted,
		   streamed, text_len);
		ok(k.len == text_len && memcmp(k.buf, text, text_len) == 0,
		   "the sink got the buffered text byte for byte");
		ok(k.calls >= 4, "in several pieces (%d)", k.calls);
		free(k.buf);
		k = (struct sink){NULL, 0, 0, 0};
		k.fail_after = 1;
		jsonw_init_sink(&w, sink_put, &k);
		write_sample(&w, data, big);
		ok(jsonw_end(&w) == -1, "a sink that fails fails the writer");
		free(k.buf);
		free(text);
		free(data);
	}
	return tap_done();
}
