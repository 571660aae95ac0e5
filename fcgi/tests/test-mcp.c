/* Unit tests for mcp.c: versions, hosts, origins, content types, messages, answers. */
#include <stdlib.h>

#include "http/mcp.h"
#include "sink.h"
#include "tap.h"

static const char tool[] =
    "{\"name\":\"code_executor\",\"description\":\"Runs Python.\",\"input_schema\":{\"type\":"
    "\"object\",\"properties\":{\"code\":{\"type\":\"string\"}},\"required\":[\"code\"]}}";

static enum mcp_kind
kind_of(const char *body)
{
	struct mcp_message m;
	enum mcp_kind k;

	mcp_parse(body, strlen(body), &m);
	k = m.kind;
	mcp_message_free(&m);
	return k;
}

int
main(void)
{
	struct mcp_message m;
	struct run_outcome o;
	char *s;
	size_t len;
	json_t *j, *id;

	/* versions */
	ok(mcp_version_supported("2025-06-18") && mcp_version_supported("2024-11-05"),
	   "the SDK's versions are served");
	ok(!mcp_version_supported("2099-01-01") && !mcp_version_supported(NULL), "others are not");
	is_str(mcp_negotiate("2025-03-26"), "2025-03-26", "a served version is the client's");
	is_str(mcp_negotiate("1999-01-01"), mcp_versions[0], "else the newest");
	is_str(mcp_negotiate(NULL), mcp_versions[0], "none asked: the newest");

	/* hosts: loopback names with any port, listed names, nothing else */
	ok(mcp_host_allowed("127.0.0.1:8080", NULL) && mcp_host_allowed("localhost", "") &&
	       mcp_host_allowed("LOCALHOST:1", NULL) && mcp_host_allowed("[::1]:65535", NULL) &&
	       mcp_host_allowed("localhost.:8080", NULL),
	   "the loopback names are allowed, with any port or none");
	ok(!mcp_host_allowed("evil.example", NULL) && !mcp_host_allowed("evil.example:8080", ""),
	   "another name is not");
	ok(!mcp_host_allowed(NULL, "a.example") && !mcp_host_allowed("", "a.example"),
	   "no Host, or an empty one, is not");
	ok(!mcp_host_allowed("localhost.evil.example", NULL) &&
	       !mcp_host_allowed("127.0.0.1.evil.example", NULL) &&
	       !mcp_host_allowed("evil-localhost", NULL) && !mcp_host_allowed("[::2]", NULL) &&
	       !mcp_host_allowed("127.0.0.2", NULL),
	   "names that only contain a loopback name are not");
	ok(!mcp_host_allowed("localhost:", NULL) && !mcp_host_allowed("localhost:123456", NULL) &&
	       !mcp_host_allowed("localhost:80a", NULL) && !mcp_host_allowed("[::1", NULL) &&
	       !mcp_host_allowed("localhost/x", NULL) &&
	       !mcp_host_allowed("user@localhost", NULL) && !mcp_host_allowed(".localhost", NULL),
	   "a malformed Host is not");
	ok(mcp_host_allowed("codebox.example:8080", "a.example, codebox.example") &&
	       mcp_host_allowed("CODEBOX.example.", "codebox.example") &&
	       mcp_host_allowed("codebox.example", "codebox.example:443"),
	   "a listed name is allowed, with any port, without case or a trailing dot");
	ok(!mcp_host_allowed("x.codebox.example", "codebox.example") &&
	       !mcp_host_allowed("codebox.exampl", "codebox.example") &&
	       !mcp_host_allowed("codebox.example.evil", "codebox.example"),
	   "an exact entry matches that name only");
	ok(mcp_host_allowed("sb-1.codebox-agents.svc.cluster.local:8080",
	                    "*.codebox-agents.svc.cluster.local") &&
	       mcp_host_allowed("a.b.codebox-agents.svc", "x.example *.codebox-agents.svc"),
	   "a suffix entry matches any name under it");
	ok(!mcp_host_allowed("codebox-agents.svc.cluster.local",
	                     "*.codebox-agents.svc.cluster.local") &&
	       !mcp_host_allowed("evilcodebox-agents.svc.cluster.local",
	                         "*.codebox-agents.svc.cluster.local") &&
	       !mcp_host_allowed("x.example", "*.") && !mcp_host_allowed("x.example", "*"),
	   "but not the suffix itself, a name merely ending in it, or a bare star");

	/* origins */
	ok(mcp_origin_allowed(NULL, "localhost", ""), "no Origin (not a browser) is allowed");
	ok(!mcp_origin_allowed("http://evil.example", "localhost", ""),
	   "an Origin with an empty list is not");
	ok(!mcp_origin_allowed("http://evil.example", "localhost", NULL), "nor with no list");
	ok(mcp_origin_allowed("http://a.example:6274", "localhost",
	                      "http://b.example, http://a.example:6274"),
	   "a listed origin is allowed");
	ok(!mcp_origin_allowed("http://a.example:627", "localhost", "http://a.example:6274"),
	   "a prefix of a listed origin is not");
	ok(!mcp_origin_allowed("http://a.example:62745", "localhost", "http://a.example:6274"),
	   "nor a longer one");
	ok(!mcp_origin_allowed("", "localhost", "http://a.example"),
	   "an empty Origin is not listed");
	ok(mcp_origin_allowed("http://127.0.0.1:8080", "127.0.0.1:8080", NULL) &&
	       mcp_origin_allowed("https://codebox.example", "codebox.example", NULL) &&
	       mcp_origin_allowed("http://Codebox.Example:81", "codebox.example:81", NULL),
	   "the server's own origin is allowed (same-origin)");
	ok(!mcp_origin_allowed("http://codebox.example:81", "codebox.example:82", NULL) &&
	       !mcp_origin_allowed("http://codebox.example", "codebox.example:80", NULL) &&
	       !mcp_origin_allowed("http://codebox.example", NULL, NULL) &&
	       !mcp_origin_allowed("ftp://codebox.example", "codebox.example", NULL),
	   "another port, no Host or another scheme is not same-origin");
	ok(mcp_origin_allowed("http://localhost:6274", "codebox.example", NULL) &&
	       mcp_origin_allowed("http://127.0.0.1", "127.0.0.1:8080", NULL) &&
	       mcp_origin_allowed("https://[::1]:9", "localhost", NULL),
	   "a loopback origin, any port, is allowed");
	ok(!mcp_origin_allowed("http://localhost.evil.example", "localhost", NULL) &&
	       !mcp_origin_allowed("http://localhost:6274/", "localhost", NULL) &&
	       !mcp_origin_allowed("http://user@localhost", "localhost", NULL) &&
	       !mcp_origin_allowed("null", "localhost", NULL) &&
	       !mcp_origin_allowed("localhost", "localhost", NULL),
	   "a name that only contains one, a path, userinfo, null or no scheme is not");

	/* bodies */
	ok(mcp_content_type_ok("application/json") && mcp_content_type_ok("Application/JSON") &&
	       mcp_content_type_ok("application/json; charset=utf-8") &&
	       mcp_content_type_ok("application/json;charset=\"UTF-8\"") &&
	       mcp_content_type_ok("application/json ; profile=x; charset=utf-8 "),
	   "application/json is taken, with parameters");
	ok(!mcp_content_type_ok(NULL) && !mcp_content_type_ok("") &&
	       !mcp_content_type_ok("text/plain") &&
	       !mcp_content_type_ok("text/plain; a=application/json") &&
	       !mcp_content_type_ok("application/jsonx") &&
	       !mcp_content_type_ok("application/json-seq") &&
	       !mcp_content_type_ok("application/x-www-form-urlencoded") &&
	       !mcp_content_type_ok("multipart/form-data; boundary=x"),
	   "no Content-Type, or another type, is not");
	ok(!mcp_content_type_ok("application/json; charset=iso-8859-1") &&
	       !mcp_content_type_ok("application/json; charset=utf-16"),
	   "nor a charset other than UTF-8");

	/* messages */
	ok(kind_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}") == MCP_MSG_REQUEST,
	   "a request");
	ok(kind_of("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"ping\",\"params\":{}}") ==
	       MCP_MSG_REQUEST,
	   "a string id");
	ok(kind_of("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}") ==
	       MCP_MSG_NOTIFICATION,
	   "a notification");
	ok(kind_of("{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}") == MCP_MSG_RESPONSE,
	   "a client's response");
	ok(kind_of("{bad") == MCP_MSG_UNPARSABLE, "not JSON");
	ok(kind_of("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]") == MCP_MSG_INVALID,
	   "a batch");
	ok(kind_of("{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}") == MCP_MSG_INVALID,
	   "another jsonrpc");
	ok(kind_of("{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}") == MCP_MSG_INVALID,
	   "a fractional id");
	ok(kind_of("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}") == MCP_MSG_INVALID,
	   "a null id");
	ok(kind_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}") == MCP_MSG_INVALID,
	   "a method that is not a string");
	ok(kind_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":[1]}") ==
	       MCP_MSG_INVALID,
	   "positional params");
	ok(kind_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"x\"}") ==
	       MCP_MSG_UNPARSABLE,
	   "a duplicate key");
	{
		const char *b = "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\","
		                "\"params\":{\"name\":\"t\"}}";
		mcp_parse(b, strlen(b), &m);
	}
	ok(m.kind == MCP_MSG_REQUEST && strcmp(m.method, "tools/call") == 0 &&
	       json_integer_value(m.id) == 7 && json_is_object(m.params),
	   "method, id and params are read");
	mcp_message_free(&m);

	/* answers */
	id = json_string("x\"y");
	s = mcp_error(id, MCP_METHOD_NOT_FOUND, "method not found: a", &len);
	is_str(s,
	       "{\"jsonrpc\":\"2.0\",\"id\":\"x\\\"y\",\"error\":{\"code\":-32601,\"message\":"
	       "\"method not found: a\"}}",
	       "an error, with its id escaped");
	free(s);
	s = mcp_error(NULL, MCP_PARSE_ERROR, "no", &len);
	is_str(s, "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32700,\"message\":\"no\"}}",
	       "an error without id has no id key (the SDK refuses \"id\": null)");
	free(s);
	s = mcp_result(id, json_object(), &len);
	is_str(s, "{\"jsonrpc\":\"2.0\",\"id\":\"x\\\"y\",\"result\":{}}", "a result");
	ok(len == strlen(s), "its length");
	free(s);
	j = mcp_initialize("2025-03-26", "1.2.3", "Runs Python.");
	s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	is_str(s,
	       "{\"capabilities\":{\"tools\":{\"listChanged\":false}},\"instructions\":\"Runs "
	       "Python.\",\"protocolVersion\":\"2025-03-26\",\"serverInfo\":{\"name\":\"codebox\","
	       "\"title\":\"codebox Python sandbox\",\"version\":\"1.2.3\"}}",
	       "initialize's result");
	free(s);
	json_decref(j);

	j = mcp_tools(tool, strlen(tool));
	ok(json_array_size(json_object_get(j, "tools")) == 1, "one tool");
	{
		json_t *t = json_array_get(json_object_get(j, "tools"), 0);
		is_str(json_string_value(json_object_get(t, "name")), "code_executor",
		       "/tool's name");
		is_str(json_string_value(json_object_get(t, "description")), "Runs Python.",
		       "/tool's description");
		json_t *doc = json_loads(tool, 0, NULL);
		ok(json_equal(json_object_get(t, "inputSchema"),
		              json_object_get(doc, "input_schema")),
		   "/tool's input schema");
		json_decref(doc);
		ok(json_array_size(
		       json_object_get(json_object_get(t, "outputSchema"), "required")) == 8,
		   "the output schema requires /execute's eight keys");
	}
	json_decref(j);
	ok(mcp_tools("{}", 2) == NULL, "no tool from another document");

	memset(&o, 0, sizeof(o));
	capture_init(&o.out, 100);
	capture_init(&o.err, 100);
	capture_append(&o.out, "42", 2);
	capture_append(&o.err, "warn\n", 5);
	o.status = RUN_FAILED;
	o.has_exit_code = true;
	o.exit_code = 3;
	o.duration_ms = 12;
	o.result_status = RESULT_OK;
	o.result_json = strdup("{\"n\":123456789012345678901234567890}");
	o.result_len = strlen(o.result_json);
	s = mcp_call_answer(id, &o, 100, false, NULL, false, &len);
	is_str(s,
	       "{\"jsonrpc\":\"2.0\",\"id\":\"x\\\"y\",\"result\":{\"content\":[{\"type\":\"text\","
	       "\"text\":\"status: failed, exit code 3 (12 ms)\\nstdout:\\n42\\nstderr:\\nwarn\\n"
	       "result.json: {\\\"n\\\":123456789012345678901234567890}\\n\"}],"
	       "\"structuredContent\":{\"status\":\"failed\",\"exitCode\":3,\"stdout\":\"42\","
	       "\"stderr\":\"warn\\n\",\"result\":{\"n\":123456789012345678901234567890},"
	       "\"resultError\":null,\"durationMs\":12,\"truncated\":false},\"isError\":true}}",
	       "a call's answer: the text, the /execute answer (result.json spliced as written), "
	       "isError");
	{
		/* counted, then streamed in windows: the same text, of the counted length */
		struct jsonw w;
		size_t tlen;
		char *text = mcp_call_text(&o, 100, NULL, &tlen);
		struct sink k = {NULL, 0, 0, 0};
		long long counted;
		jsonw_init_count(&w);
		mcp_call_answer_write(&w, id, &o, text, tlen, 100, false, NULL, false, NULL, NULL);
		counted = jsonw_end(&w);
		jsonw_init_sink(&w, sink_put, &k);
		mcp_call_answer_write(&w, id, &o, text, tlen, 100, false, NULL, false, NULL, NULL);
		ok(jsonw_end(&w) == counted && counted == (long long)len && k.len == len &&
		       memcmp(k.buf, s, len) == 0,
		   "counted (%lld) and streamed, it is the same answer (%zu)", counted, len);
		free(k.buf);
		free(text);
	}
	free(s);
	o.status = RUN_TIMED_OUT;
	o.has_exit_code = false;
	s = mcp_call_answer(id, &o, 100, false, NULL, false, &len);
	ok(s != NULL &&
	       strstr(s, "status: timed_out (stopped at the wall-clock limit after 12 ms)"),
	   "a timeout says so");
	free(s);
	run_outcome_free(&o);
	s = mcp_call_error(id, "code must be at most 5 bytes", &len);
	is_str(s,
	       "{\"jsonrpc\":\"2.0\",\"id\":\"x\\\"y\",\"result\":{\"content\":[{\"type\":\"text\","
	       "\"text\":\"code must be at most 5 bytes\"}],\"isError\":true}}",
	       "a tool error");
	free(s);
	json_decref(id);

	/* progressToken: a bounded string or a safe integer, else refused */
	{
		char why[256], big[MCP_PROGRESS_TOKEN_MAX_BYTES + 2];
		const json_t *t = (const json_t *)1;
		json_t *p;

		ok(mcp_progress_token(NULL, &t, why, sizeof(why)) == 0 && t == NULL,
		   "no params: no token");
		p = json_pack("{s:{}}", "_meta");
		ok(mcp_progress_token(p, &t, why, sizeof(why)) == 0 && t == NULL, "no token");
		json_decref(p);
		memset(big, 'a', sizeof(big) - 1);
		big[MCP_PROGRESS_TOKEN_MAX_BYTES] = '\0';
		p = json_pack("{s:{s:s}}", "_meta", "progressToken", big);
		ok(mcp_progress_token(p, &t, why, sizeof(why)) == 0 && json_is_string(t),
		   "a string of %d bytes is a token", MCP_PROGRESS_TOKEN_MAX_BYTES);
		json_decref(p);
		big[MCP_PROGRESS_TOKEN_MAX_BYTES] = 'a';
		p = json_pack("{s:{s:s}}", "_meta", "progressToken", big);
		ok(mcp_progress_token(p, &t, why, sizeof(why)) < 0 && t == NULL &&
		       strstr(why, "at most 256 bytes") != NULL,
		   "a byte more is refused: %s", why);
		json_decref(p);
		p = json_pack("{s:{s:I}}", "_meta", "progressToken",
		              (json_int_t)-MCP_PROGRESS_TOKEN_MAX_INT);
		ok(mcp_progress_token(p, &t, why, sizeof(why)) == 0 && json_is_integer(t),
		   "-(2^53 - 1) is a token");
		json_decref(p);
		p = json_pack("{s:{s:I}}", "_meta", "progressToken",
		              (json_int_t)MCP_PROGRESS_TOKEN_MAX_INT + 1);
		ok(mcp_progress_token(p, &t, why, sizeof(why)) < 0, "2^53 is refused");
		json_decref(p);
		p = json_pack("{s:{s:f}}", "_meta", "progressToken", 1.5);
		ok(mcp_progress_token(p, &t, why, sizeof(why)) < 0, "a real number is refused");
		json_decref(p);
		p = json_pack("{s:{s:n}}", "_meta", "progressToken");
		ok(mcp_progress_token(p, &t, why, sizeof(why)) < 0, "null is refused");
		json_decref(p);
		p = json_pack("{s:{s:[s]}}", "_meta", "progressToken", "x");
		ok(mcp_progress_token(p, &t, why, sizeof(why)) < 0, "an array is refused");
		json_decref(p);
	}
	return tap_done();
}
