/*
 * tool.c - the tool definition an LLM agent is given, written from /capabilities.
 *
 * It reads the very document GET /capabilities answers (jansson), never the limits
 * directly, so the two cannot disagree: a module, a version, a limit or a sentence changes
 * in both at once.
 */
#include "tool.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
tool_parse_format(const char *uri, enum tool_format *format)
{
	const char *q = uri ? strchr(uri, '?') : NULL;

	*format = TOOL_ANTHROPIC;
	if (q == NULL || q[1] == '\0')
		return 0;
	if (strcmp(q + 1, "format=openai") == 0) {
		*format = TOOL_OPENAI;
		return 0;
	}
	return strcmp(q + 1, "format=anthropic") == 0 ? 0 : -1;
}

static long long
limit(json_t *caps, const char *name)
{
	return json_integer_value(json_object_get(json_object_get(caps, "limits"), name));
}

char *
tool_render(const char *capabilities, size_t len, enum tool_format format, size_t *out_len)
{
	json_t *caps = json_loadb(capabilities, len, 0, NULL), *modules, *m, *schema, *tool = NULL;
	char *desc = NULL, *out = NULL;
	size_t desc_len = 0, i;
	FILE *f;

	if (caps == NULL)
		return NULL;
	f = open_memstream(&desc, &desc_len);
	if (f == NULL)
		goto out;
	fprintf(
	    f,
	    "Runs a Python %s program in a fresh, isolated sandbox and returns what it printed. "
	    "Modules available besides the standard library:",
	    json_string_value(json_object_get(caps, "pythonVersion")));
	modules = json_object_get(caps, "modules");
	json_array_foreach(modules, i, m)
	{
		const char *imp = json_string_value(json_object_get(m, "importName"));
		const char *dist = json_string_value(json_object_get(m, "distribution"));
		fprintf(f, "%s %s %s", i ? "," : "", dist,
		        json_string_value(json_object_get(m, "version")));
		if (strcmp(imp, dist) != 0)
			fprintf(f, " (import %s)", imp);
	}
	fprintf(
	    f,
	    ". Limits: the program is stopped after %lld seconds of wall time; the code is at "
	    "most %lld bytes of UTF-8; stdout is kept up to %lld bytes and stderr up to %lld "
	    "bytes (past that, output is discarded and truncated is true); result.json is at "
	    "most %lld bytes; at most %lld programs run at once (more are refused with HTTP 429; "
	    "retry). ",
	    limit(caps, "executionTimeoutSeconds"), limit(caps, "maxCodeBytes"),
	    limit(caps, "maxStdoutBytes"), limit(caps, "maxStderrBytes"),
	    limit(caps, "maxResultBytes"), limit(caps, "maxConcurrentExecutions"));
	fprintf(f, "%s %s %s ", json_string_value(json_object_get(caps, "network")),
	        json_string_value(json_object_get(caps, "persistence")),
	        json_string_value(json_object_get(caps, "structuredResult")));
	fprintf(f,
	        "The response is a JSON object: {\"status\": \"succeeded\" | \"failed\" | "
	        "\"timed_out\", \"exitCode\": integer or null (null when timed out), \"stdout\": "
	        "string, \"stderr\": string, \"result\": the parsed result.json or null, "
	        "\"resultError\": string or null, \"durationMs\": integer, \"truncated\": "
	        "boolean}.");
	if (fclose(f) != 0)
		goto out;

	schema = json_pack(
	    "{s:s, s:{s:{s:s, s:s}, s:{s:s, s:i, s:I, s:s}}, s:[s], s:b}", "type", "object",
	    "properties", "code", "type", "string", "description",
	    "The Python program, run as main.py with python3 -I -u. Print the answer, or write "
	    "result.json.",
	    "timeoutSeconds", "type", "number", "exclusiveMinimum", 0, "maximum",
	    (json_int_t)limit(caps, "executionTimeoutSeconds"), "description",
	    "Optional: a shorter wall-clock limit for this run, in seconds.", "required", "code",
	    "additionalProperties", 0);
	if (schema == NULL)
		goto out;
	if (format == TOOL_OPENAI)
		tool = json_pack("{s:s, s:{s:s, s:s, s:o}}", "type", "function", "function", "name",
		                 TOOL_NAME, "description", desc, "parameters", schema);
	else
		tool = json_pack("{s:s, s:s, s:o}", "name", TOOL_NAME, "description", desc,
		                 "input_schema", schema);
	if (tool != NULL) {
		out = json_dumps(tool, JSON_COMPACT | JSON_PRESERVE_ORDER);
		if (out != NULL)
			*out_len = strlen(out);
	}
out:
	json_decref(tool);
	json_decref(caps);
	free(desc);
	return out;
}
