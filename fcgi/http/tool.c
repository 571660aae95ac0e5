/*
 * tool.c - the tool definition an LLM agent is given, written from /capabilities and
 * /isolation.
 *
 * It reads the very documents GET /capabilities and GET /isolation answer (jansson), never the
 * limits directly, so they cannot disagree: a module, a version, a limit or a sentence changes
 * in all of them at once. How a limit is enforced on this host (/isolation's "details") decides
 * how it is said ("in all" under a cgroup, "per process" under an rlimit) and whether it is said
 * at all (no process or CPU limit is claimed where none is enforced). Everything in it is for a
 * model: what its program may use, what it may send, what it gets back. Nothing is for HTTP
 * clients (a model cannot retry a request or read a status; its client does).
 *
 * The keys "files" and "artifacts" are offered only when /isolation publishes their bounds
 * (maxInputFiles and maxInputBytes; maxArtifacts and maxArtifactBytes): the document says
 * whether this build of POST /execute takes them.
 *
 * The description is a list of sentences. Anthropic's form (and so MCP) carries all of them.
 * OpenAI refuses a function description longer than 1024 characters, so its forms carry the
 * sentences that fit, in order, and the rest at the end of the code parameter's description,
 * which the model reads as well.
 *
 * OpenAI's strict mode (Structured Outputs) takes only a subset of JSON Schema. What this file
 * relies on, from OpenAI's guide "Structured model outputs", sections "Supported schemas" and
 * "Supported properties" (https://platform.openai.com/docs/guides/structured-outputs
 * #supported-schemas, as quoted in pydantic/pydantic-ai#2420 and prism-php/prism#533, 2025):
 *   - "strict": true on the function; the root is an object, not anyOf;
 *   - every object has "additionalProperties": false and lists all of its properties in
 *     "required"; an optional key is made nullable with a type union with "null";
 *   - types string, number, integer, boolean, object, array, null; enum; anyOf (not at the
 *     root); description;
 *   - numbers: minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf; arrays:
 *     minItems, maxItems; strings: pattern, format.
 * minLength and maxLength are not in that list in every version of the guide (reports differ,
 * e.g. the closed pydantic/pydantic-ai#4490), so no form uses them: string bounds are said in
 * words (they are bytes, which JSON Schema cannot say anyway). The 1024-character bound on a
 * function's description is the API's answer "string_above_max_length" (e.g.
 * getsentry/sentry-mcp#106). tests/test-tool.c walks the strict schema against these rules.
 */
#include "http/tool.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* s[0..n) is exactly the word w */
static bool
word_is(const char *s, size_t n, const char *w)
{
	return n == strlen(w) && memcmp(s, w, n) == 0;
}

int
tool_parse_format(const char *uri, enum tool_format *format, char *why, size_t why_len)
{
	const char *p = uri ? strchr(uri, '?') : NULL;
	bool openai = false, strict = false, seen_format = false, seen_strict = false;

	*format = TOOL_ANTHROPIC;
	if (p == NULL)
		return 0;
	for (p++; *p != '\0';) {
		size_t len = strcspn(p, "&");
		const char *eq = memchr(p, '=', len);
		size_t name_len = eq ? (size_t)(eq - p) : len;
		const char *value = eq ? eq + 1 : NULL;
		size_t value_len = eq ? len - name_len - 1 : 0;

		if (len == 0) {
			/* "a&&b", a trailing "&" */
		} else if (word_is(p, name_len, "format") && value != NULL) {
			if (seen_format) {
				snprintf(why, why_len, "format is given twice");
				return -1;
			}
			seen_format = true;
			if (word_is(value, value_len, "openai")) {
				openai = true;
			} else if (!word_is(value, value_len, "anthropic")) {
				snprintf(why, why_len,
				         "format must be anthropic (the default) or openai");
				return -1;
			}
		} else if (word_is(p, name_len, "strict") && value != NULL) {
			if (seen_strict) {
				snprintf(why, why_len, "strict is given twice");
				return -1;
			}
			seen_strict = true;
			if (word_is(value, value_len, "true")) {
				strict = true;
			} else if (!word_is(value, value_len, "false")) {
				snprintf(why, why_len, "strict must be true or false");
				return -1;
			}
		} else {
			snprintf(
			    why, why_len,
			    "unknown query parameter: /tool takes format (anthropic or openai) "
			    "and strict (true or false)");
			return -1;
		}
		p += len;
		if (*p == '&')
			p++;
	}
	if (strict && !openai) {
		snprintf(
		    why, why_len,
		    "strict=true is OpenAI's strict mode: use it with format=openai (Anthropic's "
		    "form has no strict variant)");
		return -1;
	}
	*format = !openai ? TOOL_ANTHROPIC : strict ? TOOL_OPENAI_STRICT : TOOL_OPENAI;
	return 0;
}

/* The description, a sentence at a time (each newly allocated; a failed one marks it failed) */
#define TOOL_MAX_SENTENCES 16

struct text {
	char *sentence[TOOL_MAX_SENTENCES];
	int n;
	bool failed;
};

/* Adds s (stolen; NULL: out of memory) */
static void
text_add(struct text *t, char *s)
{
	if (s == NULL || t->n == TOOL_MAX_SENTENCES) {
		t->failed = true;
		free(s);
		return;
	}
	t->sentence[t->n++] = s;
}

/* asprintf's text, newly allocated, or NULL */
__attribute__((format(printf, 1, 2))) static char *
text_printf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

/* Adds a sentence of the caller's (the /capabilities document's), unless it is empty */
static void
text_verbatim(struct text *t, const char *s)
{
	if (s[0] != '\0')
		text_add(t, strdup(s));
}

/* Sentences [from, to) joined by spaces: newly allocated, or NULL */
static char *
text_join(const struct text *t, int from, int to)
{
	size_t len = 1;
	char *s, *w;

	for (int i = from; i < to; i++)
		len += strlen(t->sentence[i]) + 1;
	s = malloc(len);
	if (s == NULL)
		return NULL;
	w = s;
	for (int i = from; i < to; i++) {
		size_t n = strlen(t->sentence[i]);
		if (i > from)
			*w++ = ' ';
		memcpy(w, t->sentence[i], n);
		w += n;
	}
	*w = '\0';
	return s;
}

static void
text_free(struct text *t)
{
	for (int i = 0; i < t->n; i++)
		free(t->sentence[i]);
}

/* The integer doc[obj][name]; false when it is absent (a document of another build) */
static bool
doc_int(json_t *doc, const char *obj, const char *name, long long *v)
{
	json_t *x = json_object_get(json_object_get(doc, obj), name);

	if (!json_is_integer(x))
		return false;
	*v = json_integer_value(x);
	return true;
}

/* The string doc[obj][name], or "" */
static const char *
doc_str(json_t *doc, const char *obj, const char *name)
{
	const char *s = json_string_value(obj ? json_object_get(json_object_get(doc, obj), name)
	                                      : json_object_get(doc, name));
	return s ? s : "";
}

static long long
caps_limit(json_t *caps, const char *name)
{
	long long v = 0;

	doc_int(caps, "limits", name, &v);
	return v;
}

/* "Modules available besides the standard library: numpy 1.24.2, ..." */
static char *
modules_sentence(json_t *caps)
{
	json_t *modules = json_object_get(caps, "modules"), *m;
	char *s = NULL;
	size_t len = 0, i;
	FILE *f;

	if (json_array_size(modules) == 0)
		return strdup("Only the standard library is available.");
	f = open_memstream(&s, &len);
	if (f == NULL)
		return NULL;
	fputs("Modules available besides the standard library:", f);
	json_array_foreach(modules, i, m)
	{
		const char *imp = doc_str(m, NULL, "importName");
		const char *dist = doc_str(m, NULL, "distribution");
		fprintf(f, "%s %s %s", i ? "," : "", dist, doc_str(m, NULL, "version"));
		if (strcmp(imp, dist) != 0)
			fprintf(f, " (import %s)", imp);
	}
	fputc('.', f);
	if (fclose(f) != 0) {
		free(s);
		return NULL;
	}
	return s;
}

/*
 * "Each run ... may use at most M bytes of memory in all, P processes and threads, D bytes of
 * files (...) and C millicores of CPU; ..." from /isolation's limits, each said as this host
 * enforces it, and not at all where nothing enforces it. NULL with *none set when there is
 * nothing to say; NULL alone when out of memory.
 */
static char *
resources_sentence(json_t *iso, bool *none)
{
	const char *memory = doc_str(iso, "details", "memoryLimit");
	const char *processes = doc_str(iso, "details", "processLimit");
	const char *disk = doc_str(iso, "details", "diskLimit");
	const char *cpu = doc_str(iso, "details", "cpuLimit");
	char *clause[4], *s = NULL;
	int n = 0;
	long long v;

	*none = false;
	if (doc_int(iso, "limits", "memoryBytes", &v))
		clause[n++] = strcmp(memory, "cgroup") == 0
		                  ? text_printf("%lld bytes of memory in all", v)
		              : strcmp(memory, "rlimit-as") == 0
		                  ? text_printf("%lld bytes of memory per process", v)
		                  : text_printf("%lld bytes of memory", v);
	if (strcmp(processes, "none") != 0 && doc_int(iso, "limits", "maxProcesses", &v))
		clause[n++] = text_printf("%lld processes and threads", v);
	if (doc_int(iso, "limits", "diskBytes", &v))
		clause[n++] =
		    strcmp(disk, "tmpfs") == 0
		        ? text_printf(
		              "%lld bytes of files (the working directory and /tmp together)", v)
		    : strncmp(disk, "rlimit-fsize", 12) == 0
		        ? text_printf("%lld bytes in any one file it writes", v)
		        : text_printf("%lld bytes of disk", v);
	if (strcmp(cpu, "none") != 0 && doc_int(iso, "limits", "cpuMillicores", &v))
		clause[n++] = text_printf("%lld millicores of CPU (thousandths of a core)", v);
	*none = n == 0;
	for (int i = 0; i < n; i++)
		if (clause[i] == NULL)
			goto out;
	/* "A", "A and B", "A, B and C", "A, B, C and D" */
	if (n > 0)
		s = text_printf(
		    "Each run (the program and every process it starts) may use at most "
		    "%s%s%s%s%s%s%s; past a limit the program is killed or fails "
		    "(MemoryError, \"can't start new thread\", \"No space left on "
		    "device\").",
		    clause[0], n > 2 ? ", " : "", n > 2 ? clause[1] : "", n > 3 ? ", " : "",
		    n > 3 ? clause[2] : "", n > 1 ? " and " : "", n > 1 ? clause[n - 1] : "");
out:
	for (int i = 0; i < n; i++)
		free(clause[i]);
	return s;
}

/*
 * Adds props[key] = {"type": type, "description": desc}; nullable (strict mode's optional key):
 * {"type": [type, "null"], ...}. Returns it (borrowed, to add keywords to), or NULL when out of
 * memory.
 */
static json_t *
schema_prop(json_t *props, const char *key, const char *type, bool nullable, const char *desc)
{
	json_t *p = nullable ? json_pack("{s:[s,s]}", "type", type, "null")
	                     : json_pack("{s:s}", "type", type);

	if (json_object_set_new(props, key, p) < 0 || desc == NULL ||
	    json_object_set_new(p, "description", json_string(desc)) < 0)
		return NULL;
	return p;
}

/* One way to give an input file: {"path", key}, exactly (new reference, or NULL) */
static json_t *
schema_file(const char *key, const char *what)
{
	return json_pack(
	    "{s:s, s:{s:{s:s, s:s}, s:{s:s, s:s}}, s:[s,s], s:b}", "type", "object", "properties",
	    "path", "type", "string", "description",
	    "Where to write it, relative to the working directory (e.g. data/prices.csv; "
	    "not main.py or result.json)",
	    key, "type", "string", "description", what, "required", "path", key,
	    "additionalProperties", 0);
}

char *
tool_render(const char *capabilities, size_t caps_len, const char *isolation, size_t iso_len,
            enum tool_format format, size_t *out_len)
{
	static const char code_desc[] = "The Python program, run as main.py with python3 -I -u. "
	                                "Print the answer, or write result.json.";
	json_t *caps = json_loadb(capabilities, caps_len, 0, NULL);
	json_t *iso = json_loadb(isolation, iso_len, 0, NULL);
	json_t *props = json_object(), *required = json_array(), *schema = NULL, *tool = NULL, *p;
	bool strict = format == TOOL_OPENAI_STRICT, ok, none;
	long long stdin_bytes = 0, in_files = 0, in_bytes = 0, arts = 0, art_bytes = 0;
	long long max_sessions = 0, idle_s = 0, life_s = 0;
	bool has_stdin, has_files, has_artifacts, has_sessions;
	struct text t = {.n = 0};
	char *desc = NULL, *more = NULL, *code = NULL, *out = NULL, *s;
	const char *key;
	int fit;

	if (caps == NULL || iso == NULL || props == NULL || required == NULL)
		goto out;
	has_stdin = doc_int(iso, "limits", "maxStdinBytes", &stdin_bytes);
	has_files = doc_int(iso, "limits", "maxInputFiles", &in_files) &&
	            doc_int(iso, "limits", "maxInputBytes", &in_bytes);
	has_artifacts = doc_int(iso, "limits", "maxArtifacts", &arts) &&
	                doc_int(iso, "limits", "maxArtifactBytes", &art_bytes);
	has_sessions = doc_int(iso, "sessions", "maxSessions", &max_sessions) &&
	               doc_int(iso, "sessions", "idleTimeoutSeconds", &idle_s) &&
	               doc_int(iso, "sessions", "maxLifetimeSeconds", &life_s) && max_sessions > 0;

	/* the description, most important first (OpenAI's forms keep what fits) */
	text_add(&t, text_printf("Runs a Python %s program in a fresh, isolated sandbox and "
	                         "returns what it printed.",
	                         doc_str(caps, NULL, "pythonVersion")));
	text_add(&t, modules_sentence(caps));
	text_verbatim(&t, doc_str(caps, NULL, "persistence"));
	text_verbatim(&t, doc_str(caps, NULL, "network"));
	s = has_stdin ? text_printf(" and stdin at most %lld bytes", stdin_bytes) : strdup("");
	text_add(&t, s ? text_printf("Limits: the program is stopped after %lld seconds of wall "
	                             "time; the code is at most %lld bytes of UTF-8%s; stdout is "
	                             "kept up to %lld bytes and stderr up to %lld bytes (past "
	                             "that, output is discarded and truncated is true); "
	                             "result.json is at most %lld bytes.",
	                             caps_limit(caps, "executionTimeoutSeconds"),
	                             caps_limit(caps, "maxCodeBytes"), s,
	                             caps_limit(caps, "maxStdoutBytes"),
	                             caps_limit(caps, "maxStderrBytes"),
	                             caps_limit(caps, "maxResultBytes"))
	               : NULL);
	free(s);
	s = resources_sentence(iso, &none);
	if (!none)
		text_add(&t, s);
	text_add(&t, text_printf("This sandbox runs at most %lld programs at once, for all its "
	                         "users together.",
	                         caps_limit(caps, "maxConcurrentExecutions")));
	text_verbatim(&t, doc_str(caps, NULL, "structuredResult"));
	if (has_files)
		text_add(&t, text_printf("Input files (\"files\") are written into the working "
		                         "directory before the program starts: at most %lld files, "
		                         "%lld bytes in all.",
		                         in_files, in_bytes));
	text_add(&t, strdup("The response is a JSON object: {\"status\": \"succeeded\" | "
	                    "\"failed\" | \"timed_out\", \"exitCode\": integer or null (null when "
	                    "timed out), \"stdout\": string, \"stderr\": string, \"result\": the "
	                    "parsed result.json or null, \"resultError\": string or null, "
	                    "\"durationMs\": integer, \"truncated\": boolean}."));
	if (has_artifacts)
		text_add(&t,
		         text_printf("With \"artifacts\": true it also has \"artifacts\": the "
		                     "files the program created or changed in its working "
		                     "directory, each {\"path\", \"mimeType\", \"bytes\", "
		                     "\"contentBase64\": string or null, \"omitted\": null or why "
		                     "the content was not sent}; the contents of at most %lld "
		                     "files and %lld bytes in all are sent. matplotlib figures "
		                     "shown or left open come back as PNG files.",
		                     arts, art_bytes));
	if (has_sessions)
		text_add(&t,
		         text_printf("With \"session\" (\"new\", then the id it answers), "
		                     "calls share one interpreter's state, as a notebook's cells "
		                     "do; at most %lld sessions are open at once on this server.",
		                     max_sessions));
	if (t.failed)
		goto out;

	/* OpenAI's forms: the sentences that fit (bytes bound characters); the rest go on */
	fit = t.n;
	if (format != TOOL_ANTHROPIC) {
		size_t len = 0;
		for (fit = 0; fit < t.n; fit++) {
			size_t n = strlen(t.sentence[fit]) + (fit > 0);
			if (len + n > TOOL_OPENAI_DESCRIPTION_MAX)
				break;
			len += n;
		}
	}
	desc = text_join(&t, 0, fit);
	more = text_join(&t, fit, t.n);
	if (desc == NULL || more == NULL)
		goto out;
	code = text_printf("%s%s%s", code_desc, more[0] ? " About the sandbox, continued: " : "",
	                   more);

	/* the input schema: what POST /execute takes from a model ("details" is for HTTP
	 * clients); strict mode: every key required, the optional ones nullable */
	ok = schema_prop(props, "code", "string", false, code) != NULL;
	if (ok && has_stdin) {
		s = text_printf("Optional: text fed to the program's standard input, at most %lld "
		                "bytes of UTF-8 (none by default).",
		                stdin_bytes);
		ok = schema_prop(props, "stdin", "string", strict, s) != NULL;
		free(s);
	}
	p = ok ? schema_prop(props, "timeoutSeconds", "number", strict,
	                     "Optional: a shorter wall-clock limit for this run, in seconds.")
	       : NULL;
	ok = p != NULL && json_object_set_new(p, "exclusiveMinimum", json_integer(0)) == 0 &&
	     json_object_set_new(p, "maximum",
	                         json_integer(caps_limit(caps, "executionTimeoutSeconds"))) == 0;
	if (ok && has_files) {
		s = text_printf("Optional: files to write into the working directory before the "
		                "program starts, at most %lld files and %lld bytes in all; each is "
		                "{\"path\", \"content\"} with UTF-8 text or {\"path\", "
		                "\"contentBase64\"}.",
		                in_files, in_bytes);
		p = schema_prop(props, "files", "array", strict, s);
		free(s);
		ok =
		    p != NULL && json_object_set_new(p, "maxItems", json_integer(in_files)) == 0 &&
		    json_object_set_new(
		        p, "items",
		        json_pack("{s:[o,o]}", "anyOf",
		                  schema_file("content", "The file's content, as UTF-8 text"),
		                  schema_file("contentBase64", "The file's content, base64-encoded "
		                                               "(binary files)"))) == 0;
	}
	if (ok && has_artifacts)
		ok = schema_prop(props, "artifacts", "boolean", strict,
		                 "Optional: true to get back the files the program created or "
		                 "changed, and its matplotlib figures as PNG files, as the "
		                 "response's \"artifacts\".") != NULL;
	if (ok && has_sessions) {
		s = text_printf(
		    "Optional: keep state between calls, as a notebook does. \"new\" starts a "
		    "session; the answer names it (\"session: <id>\"), and later calls that pass "
		    "that "
		    "id run in the same Python interpreter, with the variables, imports and files "
		    "of "
		    "the calls before; the value of a final expression comes back as \"value\", "
		    "and "
		    "what the cell displays (tables, figures) as its outputs. Without it every "
		    "call "
		    "starts fresh. A session ends after %lld s without a call, after %lld s in "
		    "all, "
		    "or when its program is killed (a timeout it does not stop at, memory); then "
		    "start a new one. A \"new\" call that is refused (busy) leaves no session: "
		    "retry "
		    "it as it was.",
		    idle_s, life_s);
		ok = s != NULL && schema_prop(props, "session", "string", strict, s) != NULL;
		free(s);
	}
	if (!ok)
		goto out;
	json_object_foreach(props, key, p)
	{
		if ((strict || strcmp(key, "code") == 0) &&
		    json_array_append_new(required, json_string(key)) < 0)
			goto out;
	}
	schema = json_pack("{s:s, s:O, s:O, s:b}", "type", "object", "properties", props,
	                   "required", required, "additionalProperties", 0);
	if (schema == NULL)
		goto out;

	if (format == TOOL_ANTHROPIC)
		tool = json_pack("{s:s, s:s, s:O}", "name", TOOL_NAME, "description", desc,
		                 "input_schema", schema);
	else if (strict)
		tool = json_pack("{s:s, s:{s:s, s:s, s:b, s:O}}", "type", "function", "function",
		                 "name", TOOL_NAME, "description", desc, "strict", 1, "parameters",
		                 schema);
	else
		tool = json_pack("{s:s, s:{s:s, s:s, s:O}}", "type", "function", "function", "name",
		                 TOOL_NAME, "description", desc, "parameters", schema);
	if (tool != NULL) {
		out = json_dumps(tool, JSON_COMPACT | JSON_PRESERVE_ORDER);
		if (out != NULL)
			*out_len = strlen(out);
	}
out:
	json_decref(tool);
	json_decref(schema);
	json_decref(props);
	json_decref(required);
	json_decref(caps);
	json_decref(iso);
	text_free(&t);
	free(desc);
	free(more);
	free(code);
	return out;
}
