/*
 * request.c - strict parsing of POST /execute bodies.
 *
 * Clients of the reference sandbox rely on strict schemas: an unknown key is an error, not a
 * silently ignored option. The order of the checks is the contract's ("first failure wins"),
 * so two bad things in one body always give the same message.
 */
#include "http/request.h"

#include "core/files.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define BODY_SHAPE "body must be {\"code\": \"<non-empty string>\"}"

/* an optional key's value, or NULL when it is absent or null */
static json_t *
optional(json_t *root, const char *key)
{
	json_t *v = json_object_get(root, key);
	return json_is_null(v) ? NULL : v;
}

/* an optional boolean into *out (left as it is when absent); -1 with the 400's message */
static int
optional_bool(json_t *root, const char *key, bool *out, char *message, size_t message_len)
{
	json_t *v = optional(root, key);

	if (v != NULL && !json_is_boolean(v)) {
		snprintf(message, message_len, "%s must be true or false (%s: bool_type)", key,
		         key);
		return -1;
	}
	if (v != NULL)
		*out = json_is_true(v);
	return 0;
}

json_t *
request_load(const char *body, size_t len, char *message, size_t message_len)
{
	json_error_t err;
	/* JSON_ALLOW_NUL: "\u0000" is legal JSON; Python itself rejects such code later.
	 * JSON_REJECT_DUPLICATES: {"code": "a", "code": "b"} is ambiguous, never last-wins */
	json_t *root = json_loadb(body, len, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &err);

	/* each message ends with where and what, as the reference sandbox's do (its validator's
	 * error types: missing, string_type, string_too_short, extra_forbidden...) */
	if (root == NULL)
		snprintf(message, message_len, "%s",
		         strstr(err.text, "duplicate") ? BODY_SHAPE
		             " (a key appears twice) (body: json_invalid)"
		                                       : BODY_SHAPE
		             " (the body is not valid UTF-8 JSON) (body: json_invalid)");
	return root;
}

int
request_parse(struct request *r, const char *body, size_t len, const struct limits *l,
              char *message, size_t message_len)
{
	json_t *root = request_load(body, len, message, message_len);

	if (root == NULL) {
		memset(r, 0, sizeof(*r));
		return -1;
	}
	return request_take(r, root, l, message, message_len);
}

int
request_take(struct request *r, json_t *root, const struct limits *l, char *message,
             size_t message_len)
{
	json_t *code, *v;
	const char *key;

	memset(r, 0, sizeof(*r));
	r->stdin_data = "";
	r->wall_ms = l->execution_timeout_seconds * 1000;
	r->root = root;
	if (!json_is_object(r->root)) {
		snprintf(message, message_len, "%s (body: model_type)", BODY_SHAPE);
		goto invalid;
	}
	code = json_object_get(r->root, "code");
	if (code == NULL || !json_is_string(code) || json_string_length(code) == 0) {
		snprintf(message, message_len, "%s (code: %s)", BODY_SHAPE,
		         code == NULL            ? "missing"
		         : !json_is_string(code) ? "string_type"
		                                 : "string_too_short");
		goto invalid;
	}
	json_object_foreach(r->root, key, v)
	{
		/* "session": null is what a strict-mode model sends for the tool's session argument
		 * (GET /tool) when it keeps no state: absent, as every optional key's null */
		if (strcmp(key, "session") == 0 && json_is_null(v))
			continue;
		if (strcmp(key, "code") != 0 && strcmp(key, "stdin") != 0 &&
		    strcmp(key, "timeoutSeconds") != 0 && strcmp(key, "details") != 0 &&
		    strcmp(key, "files") != 0 && strcmp(key, "artifacts") != 0) {
			/* the key as the client sent it, bounded and printable only */
			char shown[41];
			size_t n = 0;
			for (const char *k = key; *k && n < sizeof(shown) - 1; k++)
				shown[n++] = (*k >= 0x20 && *k < 0x7f && *k != '"') ? *k : '?';
			shown[n] = '\0';
			snprintf(message, message_len,
			         "unknown key in body; allowed keys are code, stdin, "
			         "timeoutSeconds, details, files and artifacts (%s%s: "
			         "extra_forbidden)",
			         shown, strlen(key) > n ? "..." : "");
			goto invalid;
		}
	}
	/* every optional key may be null, meaning absent (OpenAI's strict tool schemas send
	 * null for what a model leaves out) */
	v = optional(r->root, "stdin");
	if (v != NULL) {
		if (!json_is_string(v) || json_string_length(v) > l->max_stdin_bytes) {
			snprintf(message, message_len,
			         "stdin must be a string of at most %zu bytes (stdin: %s)",
			         l->max_stdin_bytes,
			         json_is_string(v) ? "string_too_long" : "string_type");
			goto invalid;
		}
		r->stdin_data = json_string_value(v);
		r->stdin_len = json_string_length(v);
	}
	v = optional(r->root, "timeoutSeconds");
	if (v != NULL) {
		double t = json_is_number(v) ? json_number_value(v) : NAN;
		if (!(t > 0) || t > (double)l->execution_timeout_seconds) {
			snprintf(message, message_len,
			         "timeoutSeconds must be a number greater than 0 and at most %ld "
			         "(timeoutSeconds: %s)",
			         l->execution_timeout_seconds,
			         !json_is_number(v) ? "float_type"
			         : t > 0            ? "less_than_equal"
			                            : "greater_than");
			goto invalid;
		}
		/* round up so that a tiny positive limit still lets the run start */
		r->wall_ms = (long)ceil(t * 1000.0);
		if (r->wall_ms < 1)
			r->wall_ms = 1;
	}
	if (optional_bool(r->root, "details", &r->details, message, message_len) < 0 ||
	    optional_bool(r->root, "artifacts", &r->artifacts, message, message_len) < 0)
		goto invalid;
	if (json_string_length(code) > l->max_code_bytes) {
		/* the reference sandbox's message, exactly (API.md part 1) */
		snprintf(message, message_len, "code must be at most %zu bytes", l->max_code_bytes);
		goto invalid;
	}
	/* last: the only check that decodes (base64) and copies, so it runs on a body that
	 * passed every cheap one */
	v = optional(r->root, "files");
	if (v != NULL && files_parse(v, files_max_bytes(l), &r->files, &r->files_len, &r->n_files,
	                             message, message_len) < 0)
		goto invalid;
	r->code = json_string_value(code);
	r->code_len = json_string_length(code);
	return 0;
invalid:
	request_free(r);
	return -1;
}

void
request_free(struct request *r)
{
	json_decref(r->root);
	free(r->files);
	memset(r, 0, sizeof(*r));
}
