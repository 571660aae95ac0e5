/*
 * jsonw.c - compact JSON text writer.
 *
 * The response schema is written by hand (reply.c) because result.json's normalised text is
 * spliced in verbatim; this file owns only the mechanics: escaping, the three kinds of writer,
 * failure latching (its buffer's growth is buf.c's).
 */
#include "core/jsonw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
jsonw_init(struct jsonw *w)
{
	memset(w, 0, sizeof(*w));
}

void
jsonw_init_sink(struct jsonw *w, int (*put)(void *ctx, const char *s, size_t n), void *ctx)
{
	memset(w, 0, sizeof(*w));
	w->put = put;
	w->ctx = ctx;
}

void
jsonw_init_count(struct jsonw *w)
{
	memset(w, 0, sizeof(*w));
	w->counting = true;
}

void
jsonw_free(struct jsonw *w)
{
	buf_free(&w->b);
	memset(w, 0, sizeof(*w));
}

/* the sink kind: hands the window over */
static void
jsonw_flush(struct jsonw *w)
{
	if (w->failed || w->b.len == 0)
		return;
	if (w->put(w->ctx, w->b.p, w->b.len) < 0)
		w->failed = true;
	w->out += w->b.len;
	w->b.len = 0;
}

long long
jsonw_end(struct jsonw *w)
{
	long long total;

	if (w->put != NULL)
		jsonw_flush(w);
	total = w->failed ? -1 : (long long)(w->out + w->b.len);
	jsonw_free(w);
	return total;
}

void
jsonw_raw(struct jsonw *w, const char *s, size_t n)
{
	if (w->failed)
		return;
	if (w->counting) {
		w->out += n;
		return;
	}
	if (w->put != NULL) {
		if (w->b.len + n > JSONW_WINDOW)
			jsonw_flush(w);
		if (n >= JSONW_WINDOW) {
			/* a long piece goes out as it is */
			if (!w->failed && w->put(w->ctx, s, n) < 0)
				w->failed = true;
			w->out += n;
			return;
		}
	}
	if (w->failed || buf_put(&w->b, s, n) < 0)
		w->failed = true;
}

void
jsonw_lit(struct jsonw *w, const char *s)
{
	jsonw_raw(w, s, strlen(s));
}

void
jsonw_str(struct jsonw *w, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t run = 0; /* start of the pending span that needs no escaping */

	jsonw_raw(w, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[6];
		size_t elen = 2;

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		jsonw_raw(w, s + run, i - run);
		run = i + 1;
		esc[0] = '\\';
		switch (c) {
		case '"':
			esc[1] = '"';
			break;
		case '\\':
			esc[1] = '\\';
			break;
		case '\n':
			esc[1] = 'n';
			break;
		case '\r':
			esc[1] = 'r';
			break;
		case '\t':
			esc[1] = 't';
			break;
		case '\b':
			esc[1] = 'b';
			break;
		case '\f':
			esc[1] = 'f';
			break;
		default:
			esc[1] = 'u';
			esc[2] = '0';
			esc[3] = '0';
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 0xF];
			elen = 6;
			break;
		}
		jsonw_raw(w, esc, elen);
	}
	jsonw_raw(w, s + run, n - run);
	jsonw_raw(w, "\"", 1);
}

void
jsonw_cstr(struct jsonw *w, const char *s)
{
	jsonw_str(w, s, strlen(s));
}

void
jsonw_int(struct jsonw *w, long long v)
{
	char num[32];
	int n = snprintf(num, sizeof(num), "%lld", v);

	jsonw_raw(w, num, (size_t)n);
}

void
jsonw_base64(struct jsonw *w, const char *data, size_t n)
{
	static const char b64[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *in = (const unsigned char *)data;
	char piece[4096]; /* 1024 groups of four */
	size_t o = 0;

	jsonw_raw(w, "\"", 1);
	if (w->counting) {
		w->out += (n + 2) / 3 * 4;
		n = 0;
	}
	for (size_t i = 0; i < n && !w->failed; i += 3) {
		unsigned v = (unsigned)in[i] << 16;
		if (i + 1 < n)
			v |= (unsigned)in[i + 1] << 8;
		if (i + 2 < n)
			v |= in[i + 2];
		piece[o++] = b64[(v >> 18) & 63];
		piece[o++] = b64[(v >> 12) & 63];
		piece[o++] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
		piece[o++] = i + 2 < n ? b64[v & 63] : '=';
		if (o == sizeof(piece)) {
			jsonw_raw(w, piece, o);
			o = 0;
		}
	}
	jsonw_raw(w, piece, o);
	jsonw_raw(w, "\"", 1);
}

char *
jsonw_take(struct jsonw *w, size_t *len)
{
	char *out;
	size_t n;

	if (!w->failed && w->b.p == NULL)
		jsonw_raw(w, "", 0);
	if (w->failed) {
		jsonw_free(w);
		return NULL;
	}
	out = buf_take(&w->b, &n);
	if (len != NULL)
		*len = n;
	memset(w, 0, sizeof(*w));
	return out;
}
