/* Unit tests for limits.c: every parameter present, decimal, in range. */
#include "core/limits.h"
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
    {"CODEBOX_CPU_MILLICORES", "1000"},
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

	ok(limits_inodes(64ULL << 20) == 8192, "a 64 MiB tmpfs holds 8192 files");
	ok(limits_inodes(256ULL << 20) == 32768, "a 256 MiB workspace holds 32768 files");
	ok(limits_inodes(1 << 20) == 256 && limits_inodes(0) == 256,
	   "a small tmpfs still holds 256 files");
	ok(limits_parse(&l, get, NULL, why, sizeof(why)) == 0, "a complete set parses");
	ok(l.execution_timeout_seconds == 30 && l.max_concurrent_executions == 20 &&
	       l.max_code_bytes == 65536 && l.max_stdout_bytes == 100 &&
	       l.max_stderr_bytes == 200 && l.max_result_bytes == 300 && l.max_stdin_bytes == 0,
	   "every value lands in its field");

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
	params[0].v = "30";

	/* ceilings fixed at start-up */
	static const char all[] =
	    "CODEBOX_EXECUTION_TIMEOUT_SECONDS=30,CODEBOX_MAX_CONCURRENT_EXECUTIONS=20,"
	    "CODEBOX_MAX_CODE_BYTES=65536,CODEBOX_MAX_STDOUT_BYTES=65536,"
	    "CODEBOX_MAX_STDERR_BYTES=65536,CODEBOX_MAX_RESULT_BYTES=65536,"
	    "CODEBOX_MAX_STDIN_BYTES=65536,CODEBOX_MEMORY_BYTES=1073741824,"
	    "CODEBOX_MAX_PROCESSES=64,CODEBOX_DISK_BYTES=67108864,CODEBOX_CPU_MILLICORES=1000,"
	    "CODEBOX_MAX_BODY_BYTES=1048576";
	struct limits ceil;
	size_t body;
	char what[256];

	ok(limits_parse_ceilings(&ceil, &body, all, why, sizeof(why)) == 0 &&
	       ceil.memory_bytes == 1073741824ULL && ceil.max_processes == 64 &&
	       ceil.execution_timeout_seconds == 30 && body == 1048576,
	   "a complete list of ceilings parses");
	ok(limits_parse_ceilings(&ceil, &body, "CODEBOX_MAX_PROCESSES=64", why, sizeof(why)) < 0 &&
	       strstr(why, "no ceiling for"),
	   "an incomplete list is refused: %s", why);
	ok(limits_parse_ceilings(&ceil, &body, "CODEBOX_NOPE=1", why, sizeof(why)) < 0,
	   "an unknown name is refused: %s", why);
	ok(limits_parse_ceilings(&ceil, &body, "CODEBOX_MAX_PROCESSES=0", why, sizeof(why)) < 0,
	   "an out-of-range ceiling is refused: %s", why);
	limits_parse_ceilings(&ceil, &body, all, why, sizeof(why));
	/* a forged request: 64 GiB, 4096 processes, an hour */
	params[0].v = "3600";
	params[7].v = "68719476736";
	params[8].v = "4096";
	ok(limits_parse(&l, get, NULL, why, sizeof(why)) == 0, "the forged request parses");
	ok(limits_cap(&l, &ceil, what, sizeof(what)) == 3 && l.execution_timeout_seconds == 30 &&
	       l.memory_bytes == 1073741824ULL && l.max_processes == 64,
	   "every forged value is capped at its ceiling: %s", what);
	params[0].v = "5";
	params[7].v = "16777216";
	params[8].v = "4";
	limits_parse(&l, get, NULL, why, sizeof(why));
	ok(limits_cap(&l, &ceil, what, sizeof(what)) == 0 && l.execution_timeout_seconds == 5 &&
	       l.max_processes == 4,
	   "values below the ceilings stay as they are");
	limits_default_ceilings(&ceil, &body);
	ok(body == 1048576 && ceil.max_processes == 4096, "the default ceilings are the maxima");
	return tap_done();
}
