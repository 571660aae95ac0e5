/*
 * Unit tests for tool.c: the query string, and the tool rendered from synthetic /capabilities
 * and /isolation documents. OpenAI's strict-mode rules are checked mechanically, by walking the
 * schema: every object closed and all its keys required, no keyword outside strict mode's
 * subset (tool.c's top comment says where the subset comes from).
 */
#include <ctype.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>

#include "tap.h"
#include "http/tool.h"

static const char caps[] =
    "{\"pythonVersion\":\"3.11.2\",\"modules\":[{\"importName\":\"numpy\",\"distribution\":"
    "\"numpy\",\"version\":\"1.24.2\"},{\"importName\":\"sklearn\",\"distribution\":\"scikit-"
    "learn\",\"version\":\"1.2.1\"}],\"limits\":{\"executionTimeoutSeconds\":17,\"maxCodeBytes\":"
    "1111,\"maxStdoutBytes\":2222,\"maxStderrBytes\":3333,\"maxResultBytes\":4444,"
    "\"maxConcurrentExecutions\":5},\"network\":\"No network.\",\"persistence\":\"Nothing "
    "persists.\",\"structuredResult\":\"Write result.json.\"}";

/* an /isolation document: details as given, limits as given (a JSON object's members) */
static char *
iso_doc(const char *memory, const char *processes, const char *disk, const char *cpu,
        const char *more_limits)
{
	char *s;

	if (asprintf(
	        &s,
	        "{\"layers\":{},\"off\":{},\"details\":{\"memoryLimit\":\"%s\",\"processLimit\":"
	        "\"%s\",\"diskLimit\":\"%s\",\"cpuLimit\":\"%s\"},\"limits\":{\"memoryBytes\":"
	        "555555,\"maxProcesses\":66,\"diskBytes\":777777,\"maxStdinBytes\":8888,"
	        "\"cpuMillicores\":999%s},\"workspace\":null}",
	        memory, processes, disk, cpu, more_limits) < 0)
		return NULL;
	return s;
}

static const char new_limits[] =
    ",\"maxInputFiles\":12,\"maxInputBytes\":131313,\"maxArtifacts\":14,\"maxArtifactBytes\":"
    "151515";

/* the tool rendered and parsed (NULL when rendering failed) */
static json_t *
render(const char *iso, enum tool_format format)
{
	size_t len = 0;
	char *s = tool_render(caps, strlen(caps), iso, strlen(iso), format, &len);
	json_t *j = s ? json_loadb(s, len, 0, NULL) : NULL;

	free(s);
	return j;
}

static const char *
str(json_t *j, const char *key)
{
	const char *s = json_string_value(json_object_get(j, key));
	return s ? s : "";
}

/* every digit run in s that is not part of a version (next to a '.') nor of a name (after a
 * letter or '-': UTF-8, Base64) is one of the allowed numbers */
static bool
numbers_are_limits(const char *s, const long long *allowed, size_t n, char *bad, size_t bad_len)
{
	for (const char *p = s; *p; p++) {
		const char *e = p;
		bool ok = false;
		if (!isdigit((unsigned char)*p) || (p > s && isdigit((unsigned char)p[-1])))
			continue;
		while (isdigit((unsigned char)*e))
			e++;
		if ((p > s && (p[-1] == '.' || p[-1] == '-' || isalpha((unsigned char)p[-1]))) ||
		    (*e == '.' && isdigit((unsigned char)e[1])))
			continue;
		for (size_t i = 0; i < n; i++)
			ok |= strtoll(p, NULL, 10) == allowed[i];
		if (!ok) {
			snprintf(bad, bad_len, "%.*s", (int)(e - p), p);
			return false;
		}
	}
	return true;
}

/* strict mode's keywords (tool.c's top comment) */
static const char *const strict_keywords[] = {
    "type",
    "description",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "anyOf",
    "enum",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
    "pattern",
    "format",
};

static bool
is_keyword(const char *k)
{
	for (size_t i = 0; i < sizeof(strict_keywords) / sizeof(*strict_keywords); i++)
		if (strcmp(k, strict_keywords[i]) == 0)
			return true;
	return false;
}

static bool
has_type(json_t *schema, const char *type)
{
	json_t *t = json_object_get(schema, "type"), *v;
	size_t i;

	if (json_is_string(t))
		return strcmp(json_string_value(t), type) == 0;
	json_array_foreach(t, i, v) if (strcmp(json_string_value(v), type) == 0) return true;
	return false;
}

/*
 * Walks a schema by strict mode's rules; the first violation goes to why. Returns the number of
 * object schemas seen (so that a test can tell the walk reached the nested ones), or -1.
 */
static int
strict_walk(json_t *schema, const char *path, char *why, size_t why_len)
{
	const char *k;
	json_t *v, *props, *req;
	int objects = 0, n;
	size_t i;
	char sub[256];

	if (!json_is_object(schema)) {
		snprintf(why, why_len, "%s is not a schema object", path);
		return -1;
	}
	json_object_foreach(schema, k, v)
	{
		if (!is_keyword(k)) {
			snprintf(why, why_len, "%s has the keyword %s, outside strict mode's", path,
			         k);
			return -1;
		}
	}
	if (json_object_get(schema, "type") == NULL && json_object_get(schema, "anyOf") == NULL) {
		snprintf(why, why_len, "%s has neither type nor anyOf", path);
		return -1;
	}
	if (has_type(schema, "object") || json_object_get(schema, "properties") != NULL) {
		props = json_object_get(schema, "properties");
		req = json_object_get(schema, "required");
		objects++;
		if (!json_is_false(json_object_get(schema, "additionalProperties"))) {
			snprintf(why, why_len, "%s lacks additionalProperties: false", path);
			return -1;
		}
		if (!json_is_object(props) || !json_is_array(req) ||
		    json_array_size(req) != json_object_size(props)) {
			snprintf(why, why_len, "%s does not require exactly its properties", path);
			return -1;
		}
		json_array_foreach(req, i, v)
		{
			if (json_object_get(props, json_string_value(v)) == NULL) {
				snprintf(why, why_len, "%s requires %s, which it lacks", path,
				         json_string_value(v));
				return -1;
			}
		}
		json_object_foreach(props, k, v)
		{
			snprintf(sub, sizeof(sub), "%s.%s", path, k);
			if ((n = strict_walk(v, sub, why, why_len)) < 0)
				return -1;
			objects += n;
		}
	}
	if ((v = json_object_get(schema, "items")) != NULL) {
		snprintf(sub, sizeof(sub), "%s[]", path);
		if ((n = strict_walk(v, sub, why, why_len)) < 0)
			return -1;
		objects += n;
	}
	json_array_foreach(json_object_get(schema, "anyOf"), i, v)
	{
		snprintf(sub, sizeof(sub), "%s|%zu", path, i);
		if ((n = strict_walk(v, sub, why, why_len)) < 0)
			return -1;
		objects += n;
	}
	return objects;
}

static void
test_parse(void)
{
	enum tool_format f;
	char why[256] = "";

	ok(tool_parse_format("/tool", &f, why, sizeof(why)) == 0 && f == TOOL_ANTHROPIC,
	   "no query: Anthropic's form");
	ok(tool_parse_format("/tool?", &f, why, sizeof(why)) == 0 && f == TOOL_ANTHROPIC,
	   "an empty query: Anthropic's form");
	ok(tool_parse_format("/tool?format=anthropic", &f, why, sizeof(why)) == 0 &&
	       f == TOOL_ANTHROPIC,
	   "format=anthropic");
	ok(tool_parse_format("/tool?format=openai", &f, why, sizeof(why)) == 0 && f == TOOL_OPENAI,
	   "format=openai");
	ok(tool_parse_format("/tool?format=openai&strict=true", &f, why, sizeof(why)) == 0 &&
	       f == TOOL_OPENAI_STRICT,
	   "format=openai&strict=true");
	ok(tool_parse_format("/tool?strict=true&format=openai", &f, why, sizeof(why)) == 0 &&
	       f == TOOL_OPENAI_STRICT,
	   "in either order");
	ok(tool_parse_format("/tool?strict=false&format=openai&", &f, why, sizeof(why)) == 0 &&
	       f == TOOL_OPENAI,
	   "strict=false, and a trailing &");
	ok(tool_parse_format("/tool?format=anthropic&strict=false", &f, why, sizeof(why)) == 0 &&
	       f == TOOL_ANTHROPIC,
	   "strict=false with Anthropic's form");
	ok(tool_parse_format("/tool?strict=true", &f, why, sizeof(why)) < 0 &&
	       strstr(why, "format=openai") != NULL,
	   "strict=true alone (Anthropic's form) is refused, naming format=openai: %s", why);
	ok(tool_parse_format("/tool?format=anthropic&strict=true", &f, why, sizeof(why)) < 0,
	   "and with format=anthropic");
	ok(tool_parse_format("/tool?format=yaml", &f, why, sizeof(why)) < 0, "format=yaml");
	is_str(why, "format must be anthropic (the default) or openai", "its message");
	ok(tool_parse_format("/tool?format=openaix", &f, why, sizeof(why)) < 0,
	   "a value that starts like a known one");
	ok(tool_parse_format("/tool?strict=yes&format=openai", &f, why, sizeof(why)) < 0 &&
	       strstr(why, "strict must be true or false") != NULL,
	   "strict=yes: %s", why);
	ok(tool_parse_format("/tool?format=openai&pretty=1", &f, why, sizeof(why)) < 0 &&
	       strstr(why, "unknown query parameter") != NULL,
	   "an unknown parameter: %s", why);
	ok(tool_parse_format("/tool?format", &f, why, sizeof(why)) < 0, "a name without a value");
	ok(tool_parse_format("/tool?formats=openai", &f, why, sizeof(why)) < 0,
	   "a name that starts like a known one");
	ok(tool_parse_format("/tool?format=openai&format=anthropic", &f, why, sizeof(why)) < 0 &&
	       strstr(why, "twice") != NULL,
	   "a repeated parameter: %s", why);
}

static void
test_anthropic(void)
{
	char *iso = iso_doc("cgroup", "cgroup", "tmpfs", "cfs-quota", new_limits), bad[64] = "";
	json_t *t = render(iso, TOOL_ANTHROPIC), *props, *schema;
	const char *d = str(t, "description");
	static const long long allowed[] = {17,     1111, 2222, 3333, 4444,   5,  555555, 66,
	                                    777777, 8888, 999,  12,   131313, 14, 151515};

	ok(t != NULL && json_object_size(t) == 3, "Anthropic's form: name, description, schema");
	is_str(str(t, "name"), TOOL_NAME, "its name");
	ok(strstr(d, "Python 3.11.2") && strstr(d, "numpy 1.24.2") &&
	       strstr(d, "scikit-learn 1.2.1 (import sklearn)"),
	   "modules with versions");
	ok(strstr(d, "No network.") && strstr(d, "Nothing persists.") &&
	       strstr(d, "Write result.json."),
	   "the three sentences verbatim");
	ok(strstr(d, "17 seconds") && strstr(d, "1111 bytes") && strstr(d, "2222 bytes") &&
	       strstr(d, "3333 bytes") && strstr(d, "4444 bytes") &&
	       strstr(d, "at most 5 programs"),
	   "every /capabilities limit");
	ok(strstr(d, "555555 bytes of memory in all") && strstr(d, "66 processes and threads") &&
	       strstr(d, "777777 bytes of files") && strstr(d, "stdin at most 8888 bytes") &&
	       strstr(d, "999 millicores"),
	   "memory (a cgroup: in all), processes, disk (tmpfs), stdin and CPU");
	ok(strstr(d, "at most 12 files, 131313 bytes in all") &&
	       strstr(d, "at most 14 files and 151515 bytes"),
	   "the files' and the artifacts' bounds");
	ok(numbers_are_limits(d, allowed, sizeof(allowed) / sizeof(*allowed), bad, sizeof(bad)),
	   "every number in the description is a limit (%s)", bad);
	ok(!numbers_are_limits("at most 5 programs (more are refused with HTTP 429)", allowed,
	                       sizeof(allowed) / sizeof(*allowed), bad, sizeof(bad)) &&
	       strcmp(bad, "429") == 0,
	   "the number check can fail: 429 is no limit");
	ok(strstr(d, "429") == NULL && strstr(d, "HTTP") == NULL && strstr(d, "retry") == NULL &&
	       strstr(d, "Retry") == NULL,
	   "nothing for HTTP clients: no 429, no retry");
	ok(strstr(d, "\"artifacts\"") && strstr(d, "\"mimeType\"") && strstr(d, "PNG"),
	   "the artifacts' shape");

	schema = json_object_get(t, "input_schema");
	props = json_object_get(schema, "properties");
	ok(json_object_size(props) == 5 && json_object_get(props, "code") &&
	       json_object_get(props, "stdin") && json_object_get(props, "timeoutSeconds") &&
	       json_object_get(props, "files") && json_object_get(props, "artifacts"),
	   "the keys a model may send: code, stdin, timeoutSeconds, files, artifacts");
	ok(json_object_get(props, "details") == NULL, "not details (for HTTP clients)");
	ok(json_array_size(json_object_get(schema, "required")) == 1 &&
	       strcmp(json_string_value(json_array_get(json_object_get(schema, "required"), 0)),
	              "code") == 0 &&
	       json_is_false(json_object_get(schema, "additionalProperties")),
	   "only code is required; no other key");
	ok(json_integer_value(
	       json_object_get(json_object_get(props, "timeoutSeconds"), "maximum")) == 17,
	   "timeoutSeconds at most the limit");
	ok(json_integer_value(json_object_get(json_object_get(props, "files"), "maxItems")) == 12,
	   "files at most maxInputFiles");
	ok(strcmp(str(json_object_get(props, "stdin"), "type"), "string") == 0,
	   "stdin is a string, not nullable");
	json_decref(t);
	free(iso);
}

static void
test_strict(void)
{
	char *iso = iso_doc("cgroup", "cgroup", "tmpfs", "cfs-quota", new_limits), why[512] = "";
	char *old = iso_doc("cgroup", "cgroup", "tmpfs", "cfs-quota", "");
	json_t *a = render(iso, TOOL_ANTHROPIC), *t = render(iso, TOOL_OPENAI_STRICT), *f, *props;
	json_t *v, *broken;
	const char *k;
	int objects;

	f = json_object_get(t, "function");
	ok(t != NULL && strcmp(str(t, "type"), "function") == 0 &&
	       json_is_true(json_object_get(f, "strict")),
	   "the strict form: a function with strict: true");
	objects = strict_walk(json_object_get(f, "parameters"), "parameters", why, sizeof(why));
	ok(objects == 3,
	   "its schema keeps strict mode's rules (%d objects: root, two file forms) %s", objects,
	   why);
	ok(!json_is_array(json_object_get(json_object_get(f, "parameters"), "type")) &&
	       json_object_get(json_object_get(f, "parameters"), "anyOf") == NULL,
	   "its root is an object, not nullable nor anyOf");
	props = json_object_get(json_object_get(f, "parameters"), "properties");
	json_object_foreach(props, k, v)
	{
		bool nullable = has_type(v, "null");
		ok(strcmp(k, "code") == 0 ? !nullable : nullable, "%s is %snullable", k,
		   strcmp(k, "code") == 0 ? "not " : "");
	}
	ok(json_object_size(props) == 5, "it has the five keys");
	ok(strlen(str(f, "description")) <= TOOL_OPENAI_DESCRIPTION_MAX,
	   "its description fits OpenAI's %d characters (%zu)", TOOL_OPENAI_DESCRIPTION_MAX,
	   strlen(str(f, "description")));
	ok(strstr(str(json_object_get(props, "code"), "description"), "About the sandbox") &&
	       strstr(str(json_object_get(props, "code"), "description"), "\"mimeType\""),
	   "what did not fit goes on in the code's description");

	/* the walk can fail: a schema that breaks each rule */
	broken = json_deep_copy(json_object_get(f, "parameters"));
	json_array_remove(json_object_get(broken, "required"), 1);
	ok(strict_walk(broken, "p", why, sizeof(why)) < 0, "an optional key is caught: %s", why);
	json_decref(broken);
	broken = json_deep_copy(json_object_get(f, "parameters"));
	json_object_set_new(json_object_get(json_object_get(broken, "properties"), "stdin"),
	                    "maxLength", json_integer(3));
	ok(strict_walk(broken, "p", why, sizeof(why)) < 0, "a keyword outside: %s", why);
	json_decref(broken);
	broken = json_deep_copy(json_object_get(f, "parameters"));
	json_object_del(
	    json_array_get(
	        json_object_get(
	            json_object_get(json_object_get(json_object_get(broken, "properties"), "files"),
	                            "items"),
	            "anyOf"),
	        1),
	    "additionalProperties");
	ok(strict_walk(broken, "p", why, sizeof(why)) < 0, "an open nested object: %s", why);
	json_decref(broken);
	/* and the non-strict forms break them (that is what strict is for) */
	ok(strict_walk(json_object_get(a, "input_schema"), "input_schema", why, sizeof(why)) < 0,
	   "Anthropic's schema is not strict: %s", why);

	json_decref(t);
	t = render(old, TOOL_OPENAI_STRICT);
	f = json_object_get(t, "function");
	why[0] = '\0';
	ok(strict_walk(json_object_get(f, "parameters"), "parameters", why, sizeof(why)) == 1,
	   "without files and artifacts it is strict too %s", why);
	json_decref(t);
	json_decref(a);
	free(iso);
	free(old);
}

static void
test_openai(void)
{
	char *iso = iso_doc("cgroup", "cgroup", "tmpfs", "cfs-quota", new_limits);
	json_t *a = render(iso, TOOL_ANTHROPIC), *o = render(iso, TOOL_OPENAI), *f, *pa, *po;
	const char *full = str(a, "description"), *part, *code;
	char *joined = NULL;

	f = json_object_get(o, "function");
	part = str(f, "description");
	code = str(json_object_get(json_object_get(json_object_get(f, "parameters"), "properties"),
	                           "code"),
	           "description");
	ok(json_object_get(f, "strict") == NULL, "the plain OpenAI form has no strict");
	ok(strlen(part) <= TOOL_OPENAI_DESCRIPTION_MAX &&
	       strlen(full) > TOOL_OPENAI_DESCRIPTION_MAX,
	   "its description is cut to fit (%zu of %zu)", strlen(part), strlen(full));
	ok(strncmp(full, part, strlen(part)) == 0, "at a sentence: the start of Anthropic's");
	ok(strstr(code, "About the sandbox, continued: ") &&
	       asprintf(&joined, "%s %s", part,
	                strstr(code, "About the sandbox, continued: ") + 30) > 0 &&
	       strcmp(joined, full) == 0,
	   "and the rest is the code's description's end: nothing is lost");
	pa = json_deep_copy(json_object_get(a, "input_schema"));
	po = json_object_get(f, "parameters");
	json_object_set_new(json_object_get(json_object_get(pa, "properties"), "code"),
	                    "description", json_string(code));
	ok(json_equal(pa, po), "its schema is Anthropic's otherwise");
	json_decref(pa);
	free(joined);
	json_decref(a);
	json_decref(o);
	free(iso);
}

static void
test_hosts(void)
{
	char *iso, bad[64] = "";
	json_t *t;
	const char *d;
	static const long long allowed[] = {17, 1111, 2222, 3333, 4444, 5, 555555, 777777, 8888};

	/* a pod without cgroups: rlimits, no process or CPU limit enforced */
	iso = iso_doc("rlimit-as", "none", "rlimit-fsize (per file)", "none", "");
	t = render(iso, TOOL_ANTHROPIC);
	d = str(t, "description");
	ok(strstr(d, "555555 bytes of memory per process") != NULL, "rlimit-as: per process");
	ok(strstr(d, "777777 bytes in any one file") != NULL, "rlimit-fsize: per file");
	ok(strstr(d, "66") == NULL && strstr(d, "999") == NULL,
	   "no process or CPU limit is claimed where none is enforced");
	ok(numbers_are_limits(d, allowed, sizeof(allowed) / sizeof(*allowed), bad, sizeof(bad)),
	   "every number is a limit (%s)", bad);
	ok(strstr(d, "memory per process and 777777") != NULL, "two clauses: A and B");
	json_decref(t);
	free(iso);

	/* before POST /execute takes files and artifacts: neither is offered */
	iso = iso_doc("cgroup", "cgroup", "tmpfs", "cfs-quota", "");
	t = render(iso, TOOL_ANTHROPIC);
	d = str(t, "description");
	ok(t != NULL && json_object_size(
	                    json_object_get(json_object_get(t, "input_schema"), "properties")) == 3,
	   "without their bounds in /isolation: code, stdin, timeoutSeconds");
	ok(strstr(d, "files\")") == NULL && strstr(d, "artifacts") == NULL,
	   "and no sentence about files or artifacts");
	json_decref(t);
	free(iso);

	/* one of a pair alone is not enough */
	iso = iso_doc("cgroup", "cgroup", "tmpfs", "cfs-quota", ",\"maxInputFiles\":3");
	t = render(iso, TOOL_ANTHROPIC);
	ok(json_object_get(json_object_get(json_object_get(t, "input_schema"), "properties"),
	                   "files") == NULL,
	   "maxInputFiles without maxInputBytes: no files");
	json_decref(t);
	free(iso);

	/* unreadable documents */
	ok(render("{", TOOL_ANTHROPIC) == NULL, "an unreadable /isolation: NULL");
	{
		size_t len;
		ok(tool_render("nope", 4, "{}", 2, TOOL_ANTHROPIC, &len) == NULL,
		   "an unreadable /capabilities: NULL");
	}
}

/* sessions on (/isolation's "sessions"): a "session" argument, strict mode's nullable */
static void
test_sessions(void)
{
	char *iso = iso_doc("cgroup", "cgroup", "tmpfs", "cgroup", new_limits);
	char *with = NULL;
	json_t *t, *props, *req;
	size_t n = iso ? strlen(iso) : 0;

	if (iso != NULL && n > 1 &&
	    asprintf(&with,
	             "%.*s,\"sessions\":{\"maxSessions\":7,\"idleTimeoutSeconds\":61,"
	             "\"maxLifetimeSeconds\":3601}}",
	             (int)(n - 1), iso) < 0)
		with = NULL;
	t = with ? render(with, TOOL_ANTHROPIC) : NULL;
	props = json_object_get(json_object_get(t, "input_schema"), "properties");
	ok(json_is_object(json_object_get(props, "session")), "sessions on: a session argument");
	ok(strstr(str(json_object_get(props, "session"), "description"), "61 s") != NULL,
	   "its idle bound told");
	ok(strstr(str(t, "description"), "at most 7 sessions") != NULL, "and the pod's bound");
	json_decref(t);
	t = with ? render(with, TOOL_OPENAI_STRICT) : NULL;
	req = json_object_get(json_object_get(json_object_get(t, "function"), "parameters"),
	                      "required");
	char *rs = json_dumps(req, 0);
	ok(rs != NULL && strstr(rs, "\"session\"") != NULL, "strict mode requires it");
	free(rs);
	json_decref(t);
	t = iso ? render(iso, TOOL_ANTHROPIC) : NULL;
	props = json_object_get(json_object_get(t, "input_schema"), "properties");
	ok(t != NULL && json_object_get(props, "session") == NULL, "sessions off: none");
	json_decref(t);
	free(iso);
	free(with);
}

int
main(void)
{
	test_sessions();
	test_parse();
	test_anthropic();
	test_strict();
	test_openai();
	test_hosts();
	return tap_done();
}
