/* Unit tests for limits.c: every parameter present, decimal, in range. */
#include "limits.h"
#include "tap.h"

struct kv {
	const char *k, *v;
};

static struct kv params[] = {
    {"CODEBOX_EXECUTION_TIMEOUT_SECONDS", "30"},
    {"CODEBOX_MAX_CONCURRENT_EXECUTIONS", "20"},
    {"CODEBOX_MAX_CODE_BYTES", "65536"},
    {"CODEBOX_MAX_STDOUT_BYTES", "100"},
    {"CODEBOX_MAX_STDERR_BYTES", "200"},
    {"CODEBOX_MAX_RESULT_BYTES", "300"},
    {"CODEBOX_MAX_STDIN_BYTES", "0"},
    {"CODEBOX_MEMORY_BYTES", "1073741824"},
    {"CODEBOX_MAX_PROCESSES", "64"},
    {"CODEBOX_DISK_BYTES", "67108864"},
};

static const char *
get(const char *name, void *ctx)
{
	(void)ctx;
	for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); i++)
		if (params[i].v && strcmp(params[i].k, name) == 0)
			return params[i].v;
	return NULL;
}

int
main(void)
{
	struct limits l;
	char why[256];

	ok(limits_parse(&l, get, NULL, why, sizeof(why)) == 0, "a complete set parses");
	ok(l.execution_timeout_seconds == 30 && l.max_concurrent_executions == 20 &&
	       l.max_code_bytes == 65536 && l.max_stdout_bytes == 100 &&
	       l.max_stderr_bytes == 200 && l.max_result_bytes == 300 && l.max_stdin_bytes == 0,
	   "every value lands in its field");
	ok(limits_max_body_bytes(&l) >= 4 * 65536 + 1024, "the body bound admits a maximal code");

	params[2].v = NULL;
	ok(limits_parse(&l, get, NULL, why, sizeof(why)) < 0 &&
	       strstr(why, "CODEBOX_MAX_CODE_BYTES") && strstr(why, "missing"),
	   "a missing parameter is named: %s", why);
	params[2].v = "64k";
	ok(limits_parse(&l, get, NULL, why, sizeof(why)) < 0 &&
	       strstr(why, "CODEBOX_MAX_CODE_BYTES"),
	   "a malformed parameter is named: %s", why);
	params[2].v = "-1";
	ok(limits_parse(&l, get, NULL, why, sizeof(why)) < 0, "a negative value is refused");
	params[2].v = "65536";
	params[0].v = "0";
	ok(limits_parse(&l, get, NULL, why, sizeof(why)) < 0, "a zero timeout is refused");
	params[0].v = "99999999999999999999";
	ok(limits_parse(&l, get, NULL, why, sizeof(why)) < 0, "an overflowing value is refused");
	params[0].v = "";
	ok(limits_parse(&l, get, NULL, why, sizeof(why)) < 0, "an empty value is refused");
	return tap_done();
}
