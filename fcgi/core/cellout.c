/*
 * cellout.c - a session cell's structured answer, checked and rebuilt (cellout.h).
 */
#include "core/cellout.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

bool
cellout_mime_ok(const char *s, size_t n)
{
	size_t slash = 0;

	if (n == 0 || n > 100)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (c == '/') {
			if (slash != 0 || i == 0 || i + 1 == n)
				return false;
			slash = i;
		} else if (!alnum &&
		           (i == 0 || i == slash + 1 || (c != '.' && c != '+' && c != '-'))) {
			/* type and subtype begin with a letter or digit */
			return false;
		}
	}
	return slash != 0;
}

/* a MIME type whose value is JSON itself, not a string */
static bool
mime_json(const char *k)
{
	size_t n = strlen(k);
	return strcmp(k, "application/json") == 0 || (n > 5 && strcmp(k + n - 5, "+json") == 0);
}

/* A string member of o, or NULL. */
static json_t *
str_of(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_string(v) ? v : NULL;
}

/* An array of at most max strings, copied; NULL when v is anything else. */
static json_t *
lines_of(json_t *v, size_t max)
{
	json_t *a, *e;
	size_t i;

	if (!json_is_array(v) || json_array_size(v) > max)
		return NULL;
	a = json_array();
	json_array_foreach(v, i, e)
	{
		if (!json_is_string(e) || json_array_append(a, e) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* A MIME bundle: known-shaped types only (JSON types any JSON, others strings). */
static json_t *
bundle_of(json_t *v)
{
	json_t *b, *e;
	const char *k;

	if (!json_is_object(v))
		return NULL;
	b = json_object();
	json_object_foreach(v, k, e)
	{
		if (!cellout_mime_ok(k, strlen(k)))
			continue;
		if (mime_json(k) || json_is_string(e))
			json_object_set(b, k, e);
	}
	return b;
}

/* One output rebuilt, or NULL when it is not one of nbformat 4's. */
static json_t *
output_of(json_t *o)
{
	const char *type = json_string_value(json_object_get(o, "output_type"));
	json_t *r = NULL;

	if (!json_is_object(o) || type == NULL)
		return NULL;
	if (strcmp(type, "stream") == 0) {
		const char *name = json_string_value(json_object_get(o, "name"));
		json_t *text = str_of(o, "text");
		if (name == NULL || text == NULL ||
		    (strcmp(name, "stdout") != 0 && strcmp(name, "stderr") != 0))
			return NULL;
		r = json_pack("{s:s,s:s,s:O}", "output_type", "stream", "name", name, "text", text);
	} else if (strcmp(type, "display_data") == 0 || strcmp(type, "execute_result") == 0) {
		json_t *data = bundle_of(json_object_get(o, "data"));
		json_t *md = json_object_get(o, "metadata");
		json_t *count = json_object_get(o, "execution_count");
		if (data == NULL)
			return NULL;
		r = json_pack("{s:s,s:o,s:o}", "output_type", type, "data", data, "metadata",
		              json_is_object(md) ? json_incref(md) : json_object());
		if (r != NULL && type[0] == 'e')
			json_object_set_new(r, "execution_count",
			                    json_is_integer(count) && json_integer_value(count) > 0
			                        ? json_integer(json_integer_value(count))
			                        : json_null());
	} else if (strcmp(type, "error") == 0) {
		json_t *ename = str_of(o, "ename"), *evalue = str_of(o, "evalue");
		json_t *tb = lines_of(json_object_get(o, "traceback"), CELLOUT_MAX_LINES);
		if (ename == NULL || evalue == NULL || tb == NULL) {
			json_decref(tb);
			return NULL;
		}
		r = json_pack("{s:s,s:O,s:O,s:o}", "output_type", "error", "ename", ename, "evalue",
		              evalue, "traceback", tb);
	}
	return r;
}

/* The error as E2B gives it, rebuilt; null for anything but {name, value, traceback}. */
static json_t *
error_of(json_t *e)
{
	json_t *name = str_of(e, "name"), *value = str_of(e, "value");
	json_t *tb = lines_of(json_object_get(e, "traceback"), CELLOUT_MAX_LINES);

	if (!json_is_object(e) || name == NULL || value == NULL || tb == NULL) {
		json_decref(tb);
		return json_null();
	}
	return json_pack("{s:O,s:O,s:o}", "name", name, "value", value, "traceback", tb);
}

/* The program's document, rebuilt into c (count, outputs, error); -1 when it is unusable. */
static int
parse(const char *json, size_t len, json_t **count, json_t **outputs, json_t **error)
{
	json_error_t jerr;
	json_t *doc = json_loadb(json, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr), *o, *n;
	size_t i;

	if (!json_is_object(doc)) {
		json_decref(doc);
		return -1;
	}
	n = json_object_get(doc, "executionCount");
	o = json_object_get(doc, "outputs");
	if (!json_is_integer(n) || json_integer_value(n) < 1 || json_integer_value(n) > INT32_MAX ||
	    !json_is_array(o)) {
		json_decref(doc);
		return -1;
	}
	*count = json_integer(json_integer_value(n));
	*outputs = json_array();
	json_array_foreach(o, i, n)
	{
		if (json_array_size(*outputs) >= CELLOUT_MAX_OUTPUTS)
			break;
		json_t *r = output_of(n);
		if (r != NULL)
			json_array_append_new(*outputs, r);
	}
	*error = error_of(json_object_get(doc, "error"));
	json_decref(doc);
	return 0;
}

static void
add_stream(json_t *outputs, const char *name, const char *text, size_t n)
{
	if (text != NULL && n > 0)
		json_array_append_new(outputs, json_pack("{s:s,s:s,s:s%}", "output_type", "stream",
		                                         "name", name, "text", text, n));
}

char *
cellout_render(const char *json, size_t len, const char *out, size_t out_len, const char *err,
               size_t err_len, const char *note, size_t *rlen)
{
	json_t *count = NULL, *outputs = NULL, *error = NULL, *doc;
	char *s, *body = NULL;
	size_t n;

	if (json == NULL || parse(json, len, &count, &outputs, &error) < 0) {
		count = json_null();
		outputs = json_array();
		error = json_null();
		add_stream(outputs, "stdout", out, out_len);
		add_stream(outputs, "stderr", err, err_len);
		if (note != NULL)
			add_stream(outputs, "stderr", note, strlen(note));
	}
	doc =
	    json_pack("{s:o,s:o,s:o}", "executionCount", count, "outputs", outputs, "error", error);
	s = doc ? json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(doc);
	if (s == NULL)
		return NULL;
	/* the members alone: the object's braces off */
	n = strlen(s);
	if (n >= 2) {
		body = malloc(n - 1);
		if (body != NULL) {
			memcpy(body, s + 1, n - 2);
			body[n - 2] = '\0';
			*rlen = n - 2;
		}
	}
	free(s);
	return body;
}
