/* Unit tests for stream.c: the SSE events of a run's output, UTF-8 held back across reads,
 * MCP's progress notifications, the last event, and which Accept asks for a stream. */
#include "http/stream.h"
#include "sink.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

static int flushes;

static void
count_flush(void *ctx)
{
	(void)ctx;
	flushes++;
}

static void
write_answer(struct jsonw *w, const void *ctx)
{
	(void)ctx;
	jsonw_lit(w, "{\"status\":\"succeeded\"}");
}

/* what k holds from offset on, as a string (the test keeps it) */
static char *
text_from(const struct sink *k, size_t off)
{
	char *s = malloc(k->len - off + 1);

	memcpy(s, k->buf + off, k->len - off);
	s[k->len - off] = '\0';
	return s;
}

int
main(void)
{
	struct sink k = {0};
	struct stream_sse s = {.put = sink_put, .flush = count_flush, .ctx = &k};
	const unsigned char e_acute[] = {0xc3, 0xa9}, euro[] = {0xe2, 0x82, 0xac};
	size_t mark;
	char *t;

	/* the cut: whole characters go, a started one waits */
	ok(stream_utf8_cut((const unsigned char *)"abc", 3) == 3, "ASCII is all sent");
	ok(stream_utf8_cut(e_acute, 1) == 0, "a lead byte alone waits");
	ok(stream_utf8_cut(e_acute, 2) == 2, "a whole two-byte character goes");
	ok(stream_utf8_cut(euro, 2) == 0, "two bytes of a three-byte character wait");
	ok(stream_utf8_cut((const unsigned char *)"ab\xe2\x82", 4) == 2, "only the cut tail waits");
	ok(stream_utf8_cut((const unsigned char *)"a\x80\x80\x80\x80", 5) == 5,
	   "stray continuation bytes are sent (and repaired), never held forever");
	ok(stream_utf8_cut((const unsigned char *)"a\xff", 2) == 2, "an invalid byte is sent");

	stream_sse_start(&s, NULL);
	stream_sse_start(&s, NULL);
	t = text_from(&k, 0);
	is_str(t,
	       "Status: 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
	       "X-Accel-Buffering: no\r\n\r\n",
	       "the head, once, unbuffered by nginx");
	free(t);
	ok(flushes == 1, "the head is flushed");

	mark = k.len;
	stream_sse_output(&s, 0, "caf\xc3", 4);
	stream_sse_output(&s, 0, "\xa9 \"ok\"\n", 7);
	stream_sse_output(&s, 1, "boom", 4);
	t = text_from(&k, mark);
	is_str(t,
	       "event: stdout\ndata: {\"text\":\"caf\"}\n\n"
	       "event: stdout\ndata: {\"text\":\"\xc3\xa9 \\\"ok\\\"\\n\"}\n\n"
	       "event: stderr\ndata: {\"text\":\"boom\"}\n\n",
	       "a character cut between two reads arrives whole; JSON-escaped, one line each");
	free(t);

	mark = k.len;
	stream_sse_output(&s, 0, "\xe2\x82", 2);
	ok(k.len == mark, "an incomplete character alone sends nothing yet");
	stream_sse_end(&s, write_answer, NULL);
	t = text_from(&k, mark);
	is_str(t,
	       "event: stdout\ndata: {\"text\":\"\xef\xbf\xbd\"}\n\n"
	       "event: outcome\ndata: {\"status\":\"succeeded\"}\n\n",
	       "at the end what was held is sent repaired, then the answer");
	free(t);
	free(k.buf);

	/* MCP: progress notifications for the token, then the answer as a message */
	{
		struct sink m = {0};
		json_t *token = json_string("tok-1"), *id = json_integer(7);
		struct stream_sse p = {
		    .put = sink_put, .flush = count_flush, .ctx = &m, .progress_token = token};

		stream_sse_start(&p, NULL);
		mark = m.len;
		stream_sse_output(&p, 0, "line 1\n", 7);
		stream_sse_output(&p, 1, "warn\n", 5);
		stream_sse_error(&p, id, -32603, "sandbox_error", "it failed");
		t = text_from(&m, mark);
		is_str(
		    t,
		    "event: message\ndata: "
		    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
		    "\"params\":{\"progressToken\":\"tok-1\",\"progress\":7,\"message\":\"line "
		    "1\\n\"}}"
		    "\n\n"
		    "event: message\ndata: "
		    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
		    "\"params\":{\"progressToken\":\"tok-1\",\"progress\":12,\"message\":"
		    "\"warn\\n\"}}"
		    "\n\n"
		    "event: message\ndata: "
		    "{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-32603,"
		    "\"message\":\"it failed\"}}\n\n",
		    "progress counts the bytes; an error after the head is a JSON-RPC error event");
		free(t);
		free(m.buf);
		json_decref(token);
		json_decref(id);
	}

	/* a broken stream stops writing */
	{
		struct sink b = {.fail_after = 1};
		struct stream_sse f = {.put = sink_put, .flush = count_flush, .ctx = &b};

		stream_sse_start(&f, NULL);
		stream_sse_output(&f, 0, "x", 1);
		ok(f.failed, "a failed write is latched");
		mark = b.len;
		stream_sse_end(&f, write_answer, NULL);
		ok(b.len == mark, "nothing is written after it");
		free(b.buf);
	}

	ok(stream_wanted("text/event-stream"), "Accept: text/event-stream");
	ok(stream_wanted("application/json, text/event-stream"), "among others");
	ok(stream_wanted("TEXT/EVENT-STREAM;q=0.5"), "any case, with parameters");
	ok(!stream_wanted("*/*"), "*/* is not a request for a stream");
	ok(!stream_wanted("text/event-streams"), "nor a longer name");
	ok(!stream_wanted(NULL), "nor no header");
	return tap_done();
}
