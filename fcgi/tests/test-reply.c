/* Unit tests for reply.c: exact keys, their order, and valid UTF-8. */
#include "http/reply.h"
#include "tap.h"

#include <signal.h>
#include <stdlib.h>

int
main(void)
{
	struct run_outcome o;
	char *s;
	size_t len;

	memset(&o, 0, sizeof(o));
	capture_init(&o.out, 4);
	capture_init(&o.err, 10);
	capture_append(&o.out, "ab\xff\ncd", 6);
	capture_append(&o.err, "e", 1);
	o.status = RUN_FAILED;
	o.has_exit_code = true;
	o.exit_code = 3;
	o.result_status = RESULT_OK;
	o.result_json = strdup("{\"a\":1}");
	o.result_len = 7;
	o.duration_ms = 12;
	s = reply_outcome(&o, 65536, false, "rid", false, &len);
	is_str(s,
	       "{\"status\":\"failed\",\"exitCode\":3,\"stdout\":\"ab\xef\xbf\xbd\\n\",\"stderr\":"
	       "\"e\","
	       "\"result\":{\"a\":1},\"resultError\":null,\"durationMs\":12,\"truncated\":true}",
	       "the eight keys in order, stdout repaired, truncated set");
	ok(s && len == strlen(s), "the length is returned");
	free(s);

	o.status = RUN_TIMED_OUT;
	o.has_exit_code = false;
	o.term_signal = SIGKILL;
	o.limit_exceeded = RUN_LIMIT_TIME;
	o.result_status = RESULT_TOO_LARGE;
	o.cpu_ms = 5;
	o.max_rss_bytes = 1024;
	s = reply_outcome(&o, 100, true, "rid-1", false, &len);
	is_str(s,
	       "{\"status\":\"timed_out\",\"exitCode\":null,\"stdout\":\"ab\xef\xbf\xbd\\n\","
	       "\"stderr\":\"e\",\"result\":null,\"resultError\":\"result.json is larger than 100 "
	       "bytes\",\"durationMs\":12,\"truncated\":true,\"details\":{\"requestId\":\"rid-1\","
	       "\"signal\":\"SIGKILL\",\"limitExceeded\":\"time\",\"cpuMs\":5,\"maxRssBytes\":1024,"
	       "\"stdoutBytes\":6,\"stderrBytes\":1}}",
	       "timed out: exitCode null, resultError, and details as the ninth key");
	free(s);
	run_outcome_free(&o);

	s = reply_error("invalid_request", "code must be at most 65536 bytes", &len);
	is_str(s,
	       "{\"error\":\"invalid_request\",\"message\":\"code must be at most 65536 bytes\"}",
	       "the error shape has exactly two keys");
	free(s);
	s = reply_error(NULL, "File 'a \"b\"' uploaded successfully.", &len);
	is_str(s, "{\"message\":\"File 'a \\\"b\\\"' uploaded successfully.\"}",
	       "without an error, the message alone (port 8888's shape)");
	free(s);

	struct probe_info pi = {.python_version = "3.11.2", .n_modules = 1};
	strcpy(pi.modules[0].import_name, "sklearn");
	strcpy(pi.modules[0].distribution, "scikit-learn");
	strcpy(pi.modules[0].version, "1.2.1");
	struct limits l = {30,    20,         65536, 65536,      65536, 1000,
	                   65536, 1ULL << 30, 64,    1ULL << 26, 1000};
	s = reply_capabilities(&pi, &l, true, &len);
	const char *prefix =
	    "{\"pythonVersion\":\"3.11.2\",\"modules\":[{\"importName\":\"sklearn\","
	    "\"distribution\":\"scikit-learn\",\"version\":\"1.2.1\"}],\"limits\":{"
	    "\"executionTimeoutSeconds\":30,\"maxCodeBytes\":65536,\"maxStdoutBytes\":65536,"
	    "\"maxStderrBytes\":65536,\"maxResultBytes\":1000,\"maxConcurrentExecutions\":20},"
	    "\"network\":";
	ok(s && strncmp(s, prefix, strlen(prefix)) == 0,
	   "capabilities: keys in order, limits as given");
	ok(s && strstr(s, "(at most 1000 bytes)"),
	   "the structuredResult sentence carries the limit");
	ok(s && strstr(s, "no files, variables or imports survive"),
	   "contained: the strong sentence");
	free(s);
	s = reply_capabilities(&pi, &l, false, &len);
	ok(s && strstr(s, "no files, variables") == NULL &&
	       strstr(s, "outside the working directory may"),
	   "not contained: the sentence does not claim it");
	free(s);
	return tap_done();
}
