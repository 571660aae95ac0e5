/*
 * stream.c - a run's output as Server-Sent Events (stream.h).
 */
#include "http/stream.h"

#include "core/utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void
put(struct stream_sse *s, const char *p, size_t n)
{
	if (!s->failed && s->put(s->ctx, p, n) < 0)
		s->failed = true;
}

static void
put_lit(struct stream_sse *s, const char *lit)
{
	put(s, lit, strlen(lit));
}

/* jsonw's sink into the response */
static int
sse_sink(void *ctx, const char *p, size_t n)
{
	struct stream_sse *s = ctx;

	put(s, p, n);
	return s->failed ? -1 : 0;
}

void
stream_sse_start(struct stream_sse *s, const char *extra_header)
{
	if (s->started)
		return;
	s->started = true;
	/* no Content-Length: the stream ends with the request; nginx must not buffer it */
	put_lit(s, "Status: 200 OK\r\nContent-Type: text/event-stream\r\n"
	           "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n");
	if (extra_header != NULL) {
		put_lit(s, extra_header);
		put_lit(s, "\r\n");
	}
	put_lit(s, "\r\n");
	s->flush(s->ctx);
}

size_t
stream_utf8_cut(const unsigned char *p, size_t n)
{
	/* the last lead byte within the last 3, if its sequence is not complete */
	for (size_t back = 1; back <= 3 && back <= n; back++) {
		unsigned char b = p[n - back], lo, hi;
		unsigned need;

		if (b >= 0x80 && b <= 0xBF)
			continue; /* a continuation byte: look further back */
		if (utf8_lead(b, &need, &lo, &hi) && need >= back)
			return n - back; /* it needs more than what follows it */
		break;
	}
	return n;
}

/* One event of text (valid UTF-8 made of t[0..n)). */
static void
text_event(struct stream_sse *s, int which, const char *t, size_t n)
{
	struct jsonw w;
	char *clean = malloc(n * 3 + 1);
	size_t cn;

	if (clean == NULL) {
		s->failed = true;
		return;
	}
	cn = utf8_sanitize((const unsigned char *)t, n, clean);
	jsonw_init_sink(&w, sse_sink, s);
	if (s->progress_token != NULL) {
		s->sent += n;
		put_lit(s, "event: message\ndata: ");
		jsonw_lit(&w, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
		              "\"params\":{\"progressToken\":");
		{
			char *tok = json_dumps(s->progress_token, JSON_COMPACT | JSON_ENCODE_ANY);
			if (tok == NULL) {
				s->failed = true;
			} else {
				jsonw_raw(&w, tok, strlen(tok));
				free(tok);
			}
		}
		jsonw_lit(&w, ",\"progress\":");
		jsonw_int(&w, (long long)s->sent);
		jsonw_lit(&w, ",\"message\":");
		jsonw_str(&w, clean, cn);
		jsonw_lit(&w, "}}");
	} else {
		put_lit(s, which == 0 ? "event: stdout\ndata: " : "event: stderr\ndata: ");
		jsonw_lit(&w, "{\"text\":");
		jsonw_str(&w, clean, cn);
		jsonw_lit(&w, "}");
	}
	if (jsonw_end(&w) < 0)
		s->failed = true;
	put_lit(s, "\n\n");
	free(clean);
}

void
stream_sse_output(struct stream_sse *s, int which, const char *p, size_t n)
{
	size_t held = s->held_len[which], total, cut;
	char *all;

	if (n == 0 || s->failed || which < 0 || which > 1)
		return;
	total = held + n;
	all = malloc(total);
	if (all == NULL) {
		s->failed = true;
		return;
	}
	memcpy(all, s->held[which], held);
	memcpy(all + held, p, n);
	cut = stream_utf8_cut((const unsigned char *)all, total);
	if (cut > 0)
		text_event(s, which, all, cut);
	s->held_len[which] = total - cut;
	memcpy(s->held[which], all + cut, total - cut);
	free(all);
	if (cut > 0)
		s->flush(s->ctx);
}

/* what a stream held back at its end: an incomplete character, sent as it is (repaired) */
static void
flush_held(struct stream_sse *s)
{
	for (int which = 0; which < 2; which++)
		if (s->held_len[which] > 0) {
			text_event(s, which, (const char *)s->held[which], s->held_len[which]);
			s->held_len[which] = 0;
		}
}

void
stream_sse_end(struct stream_sse *s, void (*write)(struct jsonw *w, const void *ctx),
               const void *ctx)
{
	struct jsonw w;

	stream_sse_start(s, NULL);
	flush_held(s);
	put_lit(s, s->progress_token != NULL ? "event: message\ndata: " : "event: outcome\ndata: ");
	jsonw_init_sink(&w, sse_sink, s);
	write(&w, ctx);
	if (jsonw_end(&w) < 0)
		s->failed = true;
	put_lit(s, "\n\n");
	s->flush(s->ctx);
}

void
stream_sse_error(struct stream_sse *s, const json_t *id, int code, const char *error,
                 const char *message)
{
	json_t *doc;
	char *text;

	stream_sse_start(s, NULL);
	flush_held(s);
	if (s->progress_token != NULL)
		doc = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
		                id ? (json_t *)id : json_null(), "error", "code", code, "message",
		                message);
	else
		doc = json_pack("{s:s, s:s}", "error", error, "message", message);
	text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	put_lit(s, s->progress_token != NULL ? "event: message\ndata: " : "event: error\ndata: ");
	if (text == NULL)
		put_lit(s, "{\"error\":\"sandbox_error\",\"message\":\"out of memory\"}");
	else
		put_lit(s, text);
	put_lit(s, "\n\n");
	free(text);
	s->flush(s->ctx);
}

bool
stream_wanted(const char *accept)
{
	const char *p = accept;

	/* a media range of the list, exactly (parameters and spaces aside) */
	while (p != NULL && *p) {
		while (*p == ' ' || *p == ',')
			p++;
		if (strncasecmp(p, "text/event-stream", 17) == 0 &&
		    (p[17] == '\0' || p[17] == ',' || p[17] == ';' || p[17] == ' '))
			return true;
		p = strchr(p, ',');
	}
	return false;
}
