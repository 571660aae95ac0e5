/* Unit tests for request.c: API.md's validation table, first failure wins. */
#include "http/request.h"
#include "tap.h"

static struct limits lim = {
    .execution_timeout_seconds = 30,
    .max_concurrent_executions = 20,
    .max_code_bytes = 10,
    .max_stdout_bytes = 100,
    .max_stderr_bytes = 100,
    .max_result_bytes = 100,
    .max_stdin_bytes = 5,
    .disk_bytes = 2000, /* files: at most 1000 bytes */
};

static char msg[256];

static int
parse(const char *body, struct request *r)
{
	return request_parse(r, body, strlen(body), &lim, msg, sizeof(msg));
}

static void
invalid(const char *body, const char *want_in_msg, const char *what)
{
	struct request r;
	int rc = parse(body, &r);

	ok(rc < 0 && strstr(msg, want_in_msg) != NULL, "400: %s (%s)", what,
	   rc < 0 ? msg : "accepted");
}

int
main(void)
{
	struct request r;

	ok(parse("{\"code\":\"print(1)\"}", &r) == 0 && r.code_len == 8 && r.wall_ms == 30000 &&
	       !r.details && r.stdin_len == 0,
	   "a minimal body: defaults");
	request_free(&r);
	ok(parse("{\"code\":\"0123456789\"}", &r) == 0, "code of exactly maxCodeBytes is accepted");
	request_free(&r);
	ok(parse("{\"code\":\"x\",\"stdin\":\"abcde\",\"timeoutSeconds\":0.25,\"details\":true}",
	         &r) == 0 &&
	       r.stdin_len == 5 && r.wall_ms == 250 && r.details,
	   "every optional key");
	request_free(&r);
	ok(parse("{\"code\":\"x\",\"timeoutSeconds\":30}", &r) == 0 && r.wall_ms == 30000,
	   "an integer timeout equal to the limit");
	request_free(&r);
	ok(parse("{\"code\":\"\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\"}", &r) == 0 && r.code_len == 10,
	   "the code limit counts UTF-8 bytes, not characters (10 bytes)");
	request_free(&r);

	ok(parse("{\"code\":\"x\",\"stdin\":null,\"timeoutSeconds\":null,\"details\":null,"
	         "\"files\":null,\"artifacts\":null}",
	         &r) == 0 &&
	       r.stdin_len == 0 && r.wall_ms == 30000 && !r.details && !r.artifacts &&
	       r.files == NULL,
	   "null for every optional key is the key absent");
	request_free(&r);
	ok(parse("{\"code\":\"x\",\"artifacts\":true,\"files\":[{\"path\":\"a.txt\","
	         "\"content\":\"hi\"},{\"path\":\"b/c\",\"contentBase64\":\"AAE=\"}]}",
	         &r) == 0 &&
	       r.artifacts && r.n_files == 2 && r.files != NULL && r.files_len > 0,
	   "files and artifacts");
	request_free(&r);
	invalid("{\"code\":\"x\",\"artifacts\":1}", "(artifacts: bool_type)",
	        "artifacts not a bool");
	invalid("{\"code\":\"x\",\"files\":[{\"path\":\"../x\",\"content\":\"\"}]}",
	        "(files[0].path: value_error)", "a file outside the directory");
	invalid("{\"code\":\"x\",\"files\":{}}", "(files: list_type)", "files not an array");
	invalid("{\"code\":\"x\",\"files\":[{\"path\":\"a\",\"content\":\"x\"}],\"oops\":1}",
	        "(oops: extra_forbidden)", "an unknown key is named before the files are read");
	invalid("not json", "body must be", "not JSON");
	invalid("[1]", "body must be", "not an object");
	invalid("\"code\"", "body must be", "a string");
	invalid("{\"code\":\"\\ud800\"}", "body must be", "a lone surrogate");
	invalid("{\"code\":\"\xff\"}", "body must be", "invalid UTF-8");
	invalid("{}", "body must be {\"code\": \"<non-empty string>\"} (code: missing)",
	        "code missing, named");
	invalid("{\"code\":1}", "(code: string_type)", "code not a string, named");
	invalid("{\"code\":\"\"}", "(code: string_too_short)", "code empty, named");
	invalid("{\"code\":null}", "(code: string_type)", "code null, named");
	invalid("[1]", "(body: model_type)", "not an object, named");
	invalid("not json", "(body: json_invalid)", "not JSON, named");
	invalid("{\"code\":\"x\",\"shell\":true}", "(shell: extra_forbidden)",
	        "an unknown key, named");
	invalid("{\"code\":\"x\",\"a\\\"b\":1}", "(a?b: extra_forbidden)",
	        "an unknown key, shown printable");
	invalid("{\"code\":\"x\",\"shell\":true}", "unknown key", "an unknown key");
	invalid("{\"code\":\"print(1)\",\"code\":\"print(2)\"}", "a key appears twice",
	        "a duplicate key (never last-wins)");
	invalid("{\"code\":\"x\",\"details\":true,\"details\":false}", "a key appears twice",
	        "a duplicate optional key");
	invalid("{\"code\":\"x\",\"stdin\":1}", "stdin must be", "stdin not a string");
	invalid("{\"code\":\"x\",\"stdin\":\"abcdef\"}", "stdin must be", "stdin over its limit");
	invalid("{\"code\":\"x\",\"timeoutSeconds\":0}", "timeoutSeconds", "a zero timeout");
	invalid("{\"code\":\"x\",\"timeoutSeconds\":-1}", "timeoutSeconds", "a negative timeout");
	invalid("{\"code\":\"x\",\"timeoutSeconds\":30.5}", "timeoutSeconds",
	        "a timeout over the limit");
	invalid("{\"code\":\"x\",\"timeoutSeconds\":\"5\"}", "timeoutSeconds", "a string timeout");
	invalid("{\"code\":\"x\",\"timeoutSeconds\":true}", "timeoutSeconds", "a boolean timeout");
	invalid("{\"code\":\"x\",\"details\":1}", "details must be", "details not a boolean");
	invalid("{\"code\":\"01234567890\"}", "code must be at most 10 bytes",
	        "code one byte over");
	/* first failure wins */
	invalid("{\"code\":\"\",\"shell\":1}", "body must be", "empty code beats an unknown key");
	invalid("{\"code\":\"01234567890\",\"shell\":1}", "unknown key",
	        "an unknown key beats long code");
	invalid("{\"code\":\"01234567890\",\"details\":1}", "details",
	        "a bad option beats long code");
	invalid("{\"code\":\"secret-code\",\"x\":1}", "unknown key", "the message...");
	ok(strstr(msg, "secret-code") == NULL, "...never echoes the code");
	/* a body read once (request_load()), then validated (request_take()): as request_parse() */
	{
		const char *body = "{\"code\":\"a\\u0000b\",\"details\":true}";
		json_t *root = request_load(body, strlen(body), msg, sizeof(msg));
		ok(root != NULL && request_take(&r, root, &lim, msg, sizeof(msg)) == 0 &&
		       r.code_len == 3 && r.code[1] == '\0' && r.details && r.root == root,
		   "request_load() then request_take(): the document is the request's (a NUL "
		   "kept)");
		request_free(&r);
	}
	ok(request_load("{\"code\":\"a\",\"code\":\"b\"}", 23, msg, sizeof(msg)) == NULL &&
	       strstr(msg, "a key appears twice") != NULL,
	   "request_load(): a key twice is refused with request_parse()'s sentence");
	ok(request_take(&r, json_array(), &lim, msg, sizeof(msg)) < 0 && r.root == NULL &&
	       strstr(msg, "model_type") != NULL,
	   "request_take(): not an object is refused, and the document freed");
	return tap_done();
}
