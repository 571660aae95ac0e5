/*
 * mcp.c - the Model Context Protocol's messages (mcp.h).
 *
 * Stateless Streamable HTTP: every POST carries one JSON-RPC message and gets one JSON answer
 * (or 202 for a notification or a response); no session id, no server-initiated stream (GET
 * and DELETE are 405, as the specification allows). The one tool is GET /tool's, so that its
 * description and input schema never drift from the sandbox; its output schema is POST
 * /execute's answer, which a call returns as structuredContent, spliced in as written (a
 * result.json number is never re-encoded).
 */
#include "http/mcp.h"

#include "core/capture.h"
#include "core/files.h"
#include "core/jsonw.h"
#include "http/reply.h"
#include "core/result.h"
#include "core/utf8.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *const mcp_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26",
                                    "2024-11-05", "2024-10-07", NULL};

bool
mcp_version_supported(const char *v)
{
	for (int i = 0; v != NULL && mcp_versions[i] != NULL; i++)
		if (strcmp(v, mcp_versions[i]) == 0)
			return true;
	return false;
}

const char *
mcp_negotiate(const char *requested)
{
	return mcp_version_supported(requested) ? requested : mcp_versions[0];
}

/* The name of an authority (a Host header, or an origin after its scheme): a[0..n) is a
 * name of letters, digits, '.', '-' and '_', or "[" an IPv6 literal "]", then nothing or ':'
 * and 1 to 5 digits. Its length, a trailing dot left out; 0 when malformed. */
static size_t
authority_name(const char *a, size_t n)
{
	size_t k, digits;

	if (n > 0 && a[0] == '[') {
		for (k = 1; k < n && a[k] != ']'; k++)
			if (strchr("0123456789abcdefABCDEF:.", a[k]) == NULL)
				return 0;
		if (k >= n || k == 1)
			return 0;
		k++;
	} else {
		for (k = 0; k < n && a[k] != ':'; k++)
			if (!isalnum((unsigned char)a[k]) && strchr(".-_", a[k]) == NULL)
				return 0;
	}
	if (k < n) {
		digits = n - k - 1;
		if (a[k] != ':' || digits < 1 || digits > 5)
			return 0;
		for (size_t i = k + 1; i < n; i++)
			if (!isdigit((unsigned char)a[i]))
				return 0;
	}
	if (k > 1 && a[0] != '[' && a[k - 1] == '.')
		k--;
	return k > 0 && a[0] != '.' ? k : 0;
}

static bool
name_is(const char *name, size_t n, const char *want)
{
	return strlen(want) == n && strncasecmp(name, want, n) == 0;
}

/* localhost, 127.0.0.1, [::1]: names no one else can make a browser resolve to this host */
static bool
name_is_loopback(const char *name, size_t n)
{
	return name_is(name, n, "localhost") || name_is(name, n, "127.0.0.1") ||
	       name_is(name, n, "[::1]");
}

/* The next entry of a list of the operator's (CODEBOX_MCP_HOSTS, CODEBOX_MCP_ORIGINS:
 * separated by spaces, commas or tabs) at *list, its length in *len; NULL at the end. */
static const char *
list_next(const char **list, size_t *len)
{
	const char *entry;

	if (*list == NULL)
		return NULL;
	*list += strspn(*list, " ,\t");
	if (**list == '\0')
		return NULL;
	entry = *list;
	*len = strcspn(entry, " ,\t");
	*list += *len;
	return entry;
}

/* whether the name (n bytes) is one of allowed's entries (mcp_host_allowed()) */
static bool
name_listed(const char *name, size_t n, const char *allowed)
{
	const char *item;
	size_t k;

	while ((item = list_next(&allowed, &k)) != NULL) {
		bool suffix = k > 2 && item[0] == '*' && item[1] == '.';
		const char *entry = suffix ? item + 2 : item;
		size_t e = authority_name(entry, k - (size_t)(entry - item));

		if (e > 0 && !suffix && e == n && strncasecmp(entry, name, n) == 0)
			return true;
		/* "*.x": a name that ends in ".x", with at least one label before it */
		if (e > 0 && suffix && n > e + 1 && name[n - e - 1] == '.' &&
		    strncasecmp(name + n - e, entry, e) == 0)
			return true;
	}
	return false;
}

bool
mcp_host_allowed(const char *host, const char *allowed)
{
	size_t n = host ? authority_name(host, strlen(host)) : 0;

	if (n == 0)
		return false;
	return name_is_loopback(host, n) || name_listed(host, n, allowed);
}

bool
mcp_origin_allowed(const char *origin, const char *host, const char *allowed)
{
	const char *list = allowed, *auth, *item;
	size_t n = origin ? strlen(origin) : 0, name, k;

	if (origin == NULL)
		return true;
	while ((item = list_next(&list, &k)) != NULL)
		if (k == n && n > 0 && strncmp(item, origin, n) == 0)
			return true;
	if (strncasecmp(origin, "http://", 7) == 0)
		auth = origin + 7;
	else if (strncasecmp(origin, "https://", 8) == 0)
		auth = origin + 8;
	else
		return false;
	name = authority_name(auth, strlen(auth));
	if (name == 0)
		return false;
	if (name_is_loopback(auth, name))
		return true;
	/* same-origin: the page was served by this very name and port */
	return host != NULL && strcasecmp(auth, host) == 0;
}

bool
mcp_content_type_ok(const char *content_type)
{
	const char *p = content_type;

	if (p == NULL || strncasecmp(p, "application/json", 16) != 0)
		return false;
	p += 16;
	p += strspn(p, " \t");
	if (*p != '\0' && *p != ';')
		return false;
	/* parameters: JSON is UTF-8 (RFC 8259), so a charset, when given, must say so */
	while (*p == ';') {
		p++;
		p += strspn(p, " \t");
		if (strncasecmp(p, "charset=", 8) == 0) {
			const char *v = p + 8;
			size_t k = strcspn(v, ";");
			while (k > 0 && (v[k - 1] == ' ' || v[k - 1] == '\t'))
				k--;
			if (k >= 2 && v[0] == '"' && v[k - 1] == '"') {
				v++;
				k -= 2;
			}
			if (!name_is(v, k, "utf-8"))
				return false;
		}
		p += strcspn(p, ";");
	}
	return true;
}

void
mcp_parse(const char *body, size_t len, struct mcp_message *m)
{
	json_error_t err;
	json_t *v, *method;

	memset(m, 0, sizeof(*m));
	m->root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &err);
	if (m->root == NULL) {
		m->kind = MCP_MSG_UNPARSABLE;
		snprintf(m->why, sizeof(m->why), "the body is not JSON: %.120s", err.text);
		return;
	}
	m->kind = MCP_MSG_INVALID;
	if (json_is_array(m->root)) {
		snprintf(m->why, sizeof(m->why), "batches are not supported: send one message");
		return;
	}
	if (!json_is_object(m->root)) {
		snprintf(m->why, sizeof(m->why), "a message is a JSON object");
		return;
	}
	v = json_object_get(m->root, "id");
	if (v != NULL && (json_is_string(v) || json_is_integer(v)))
		m->id = v;
	v = json_object_get(m->root, "jsonrpc");
	if (!json_is_string(v) || strcmp(json_string_value(v), "2.0") != 0) {
		snprintf(m->why, sizeof(m->why), "jsonrpc must be \"2.0\"");
		return;
	}
	method = json_object_get(m->root, "method");
	if (method == NULL) {
		if (m->id != NULL && (json_object_get(m->root, "result") != NULL ||
		                      json_object_get(m->root, "error") != NULL)) {
			m->kind = MCP_MSG_RESPONSE;
			return;
		}
		snprintf(m->why, sizeof(m->why), "a request has a method");
		return;
	}
	if (!json_is_string(method)) {
		snprintf(m->why, sizeof(m->why), "method must be a string");
		return;
	}
	v = json_object_get(m->root, "id");
	if (v != NULL && m->id == NULL) {
		snprintf(m->why, sizeof(m->why), "id must be a string or an integer");
		return;
	}
	m->params = json_object_get(m->root, "params");
	if (m->params != NULL && !json_is_object(m->params)) {
		snprintf(m->why, sizeof(m->why), "params must be an object");
		m->params = NULL;
		return;
	}
	m->method = json_string_value(method);
	m->kind = m->id != NULL ? MCP_MSG_REQUEST : MCP_MSG_NOTIFICATION;
}

void
mcp_message_free(struct mcp_message *m)
{
	json_decref(m->root);
	memset(m, 0, sizeof(*m));
}

int
mcp_progress_token(const json_t *params, const json_t **token, char *why, size_t why_len)
{
	const json_t *t = json_object_get(json_object_get(params, "_meta"), "progressToken");

	*token = NULL;
	if (t == NULL)
		return 0;
	if (json_is_string(t) && json_string_length(t) <= MCP_PROGRESS_TOKEN_MAX_BYTES) {
		*token = t;
		return 0;
	}
	if (json_is_integer(t) && json_integer_value(t) <= MCP_PROGRESS_TOKEN_MAX_INT &&
	    json_integer_value(t) >= -MCP_PROGRESS_TOKEN_MAX_INT) {
		*token = t;
		return 0;
	}
	snprintf(why, why_len,
	         "_meta.progressToken must be a string of at most %d bytes or an integer within "
	         "+-%lld; nothing was run",
	         MCP_PROGRESS_TOKEN_MAX_BYTES, MCP_PROGRESS_TOKEN_MAX_INT);
	return -1;
}

/* {"jsonrpc":"2.0","id":<id>, into w; no id when none could be read (the specification's
 * form: the official SDK refuses "id": null) */
static void
put_head(struct jsonw *w, const json_t *id)
{
	char *s = id ? json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;

	jsonw_lit(w, "{\"jsonrpc\":\"2.0\"");
	if (id == NULL)
		return;
	if (s == NULL)
		w->failed = true;
	jsonw_lit(w, ",\"id\":");
	jsonw_lit(w, s ? s : "null");
	free(s);
}

char *
mcp_error(const json_t *id, int code, const char *message, size_t *len)
{
	struct jsonw w;

	jsonw_init(&w);
	put_head(&w, id);
	jsonw_lit(&w, ",\"error\":{\"code\":");
	jsonw_int(&w, code);
	jsonw_lit(&w, ",\"message\":");
	jsonw_cstr(&w, message);
	jsonw_lit(&w, "}}");
	return jsonw_take(&w, len);
}

char *
mcp_result(const json_t *id, json_t *result, size_t *len)
{
	struct jsonw w;
	char *s = result ? json_dumps(result, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;

	json_decref(result);
	if (s == NULL)
		return NULL;
	jsonw_init(&w);
	put_head(&w, id);
	jsonw_lit(&w, ",\"result\":");
	jsonw_lit(&w, s);
	jsonw_lit(&w, "}");
	free(s);
	return jsonw_take(&w, len);
}

json_t *
mcp_initialize(const char *requested_version, const char *server_version, const char *instructions)
{
	return json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion",
	                 mcp_negotiate(requested_version), "capabilities", "tools", "listChanged",
	                 0, "serverInfo", "name", "codebox", "title", "codebox Python sandbox",
	                 "version", server_version, "instructions", instructions);
}

/* POST /execute's answer, as JSON Schema: the eight keys (details and artifacts may follow) */
static json_t *
output_schema(void)
{
	return json_pack(
	    "{s:s, s:{s:{s:s, s:[s,s,s]}, s:{s:[s,s]}, s:{s:s}, s:{s:s}, s:{}, s:{s:[s,s]}, "
	    "s:{s:s, s:i}, s:{s:s}, s:{s:s}, s:{s:s, s:{s:s}}, s:{s:[s,s]}, s:{s:s}}, "
	    "s:[s,s,s,s,s,s,s,s]}",
	    "type", "object", "properties", "status", "type", "string", "enum", "succeeded",
	    "failed", "timed_out", "exitCode", "type", "integer", "null", "stdout", "type",
	    "string", "stderr", "type", "string", "result", "resultError", "type", "string", "null",
	    "durationMs", "type", "integer", "minimum", 0, "truncated", "type", "boolean",
	    "details", "type", "object", "artifacts", "type", "array", "items", "type", "object",
	    /* a session's execution: the final expression's repr, and the session */
	    "value", "type", "string", "null", "session", "type", "object", "required", "status",
	    "exitCode", "stdout", "stderr", "result", "resultError", "durationMs", "truncated");
}

json_t *
mcp_tools(const char *tool, size_t len)
{
	json_t *t = json_loadb(tool, len, 0, NULL), *out = NULL;
	json_t *name = json_object_get(t, "name"), *desc = json_object_get(t, "description");
	json_t *schema = json_object_get(t, "input_schema");

	if (json_is_string(name) && json_is_string(desc) && json_is_object(schema))
		out = json_pack("{s:[{s:O, s:s, s:O, s:O, s:o, s:{s:b, s:b, s:b, s:b}}]}", "tools",
		                "name", name, "title", "Run Python in a sandbox", "description",
		                desc, "inputSchema", schema, "outputSchema", output_schema(),
		                "annotations", "readOnlyHint", 0, "destructiveHint", 0,
		                "idempotentHint", 0, "openWorldHint", 0);
	json_decref(t);
	return out;
}

/* one captured stream into f, under its name */
static int
put_stream(FILE *f, const char *name, const struct capture *c)
{
	size_t n;
	char *s = capture_utf8(c, &n);

	if (s == NULL)
		return -1;
	if (n == 0) {
		fprintf(f, "%s: (empty)\n", name);
	} else {
		fprintf(f, "%s:\n", name);
		fwrite(s, 1, n, f);
		if (s[n - 1] != '\n')
			fputc('\n', f);
	}
	free(s);
	return 0;
}

/* The text a model reads: what happened, then each stream, then the result, then a line per
 * file of the run's artifacts. */
char *
mcp_call_text(const struct run_outcome *o, size_t max_result_bytes, const char *session_id,
              size_t *len)
{
	char *text = NULL, errbuf[128];
	const char *rerr;
	FILE *f = open_memstream(&text, len);
	struct artifact_view a;
	size_t off = 0, count = 0;
	int bad = 0;

	if (f == NULL)
		return NULL;
	if (o->status == RUN_TIMED_OUT)
		fprintf(f, "status: timed_out (stopped at the wall-clock limit after %lld ms)\n",
		        o->duration_ms);
	else
		fprintf(f, "status: %s, exit code %d (%lld ms)\n", run_status_string(o->status),
		        o->exit_code, o->duration_ms);
	bad |= put_stream(f, "stdout", &o->out);
	bad |= put_stream(f, "stderr", &o->err);
	if (capture_truncated(&o->out) || capture_truncated(&o->err))
		fprintf(f, "(output past the limit was discarded: truncated)\n");
	if (o->result_status == RESULT_OK && o->result_json != NULL) {
		fprintf(f, "result.json: ");
		fwrite(o->result_json, 1, o->result_len, f);
		fputc('\n', f);
	}
	rerr = result_error_string(o->result_status, max_result_bytes, errbuf, sizeof(errbuf));
	if (rerr != NULL)
		fprintf(f, "result.json was not accepted: %s\n", rerr);
	while (
	    artifacts_next(o->artifacts, o->artifacts_len, o->artifact_types, &off, &count, &a)) {
		const char *omitted = artifacts_omit_string(a.omitted);
		char name[3 * FILES_MAX_PATH + 1];
		size_t name_len = utf8_sanitize((const unsigned char *)a.path, a.path_len, name);

		fprintf(f, "file: %.*s (%s, %lld bytes%s%s)\n", (int)name_len, name, a.type,
		        (long long)a.bytes, omitted ? "; not sent: " : "", omitted ? omitted : "");
	}
	if (session_id != NULL) {
		if (o->has_value && o->value != NULL) {
			char *v = malloc(o->value_len * 3 + 1);
			size_t vn =
			    v ? utf8_sanitize((const unsigned char *)o->value, o->value_len, v) : 0;
			bad |= v == NULL;
			fputs("value: ", f);
			fwrite(v ? v : "", 1, vn, f); /* a NUL in a repr is text too */
			fputc('\n', f);
			free(v);
		}
		if (o->session_over)
			fprintf(f,
			        "session %s has ended: its state is gone; pass \"new\" to start "
			        "another\n",
			        session_id);
		else
			fprintf(f,
			        "session: %s (its variables, imports and files are kept for the "
			        "next call that passes it)\n",
			        session_id);
	}
	if (fclose(f) != 0 || bad) {
		free(text);
		return NULL;
	}
	return text;
}

void
mcp_call_answer_write(struct jsonw *w, const json_t *id, const struct run_outcome *o,
                      const char *text, size_t text_len, size_t max_result_bytes, bool details,
                      const char *request_id, bool files, const char *session_id,
                      const struct mcp_resource *res)
{
	struct artifact_view a;
	size_t off = 0, count = 0;

	put_head(w, id);
	jsonw_lit(w, ",\"result\":{\"content\":[{\"type\":\"text\",\"text\":");
	jsonw_str(w, text, text_len);
	jsonw_lit(w, "}");
	/* pictures the run made (a figure it showed or left open, a file it saved) are images
	 * the model sees: encoded straight from the run's report into the answer */
	while (
	    artifacts_next(o->artifacts, o->artifacts_len, o->artifact_types, &off, &count, &a)) {
		if (!artifacts_is_image(a.type) || a.omitted != ARTIFACT_SENT)
			continue;
		jsonw_lit(w, ",{\"type\":\"image\",\"data\":");
		jsonw_base64(w, a.data, a.data_len);
		jsonw_lit(w, ",\"mimeType\":");
		jsonw_cstr(w, a.type);
		jsonw_lit(w, "}");
	}
	if (res != NULL) {
		jsonw_lit(w, ",{\"type\":\"resource\",\"resource\":{\"uri\":");
		jsonw_cstr(w, res->uri);
		jsonw_lit(w, ",\"mimeType\":");
		jsonw_cstr(w, res->mime_type);
		jsonw_lit(w, ",\"blob\":\"");
		jsonw_raw(w, res->blob, res->blob_len); /* base64: nothing to escape */
		jsonw_lit(w, "\"}}");
	}
	jsonw_lit(w, "],\"structuredContent\":");
	if (session_id != NULL)
		reply_session_outcome_write(w, o, max_result_bytes, details, request_id, files,
		                            session_id);
	else
		reply_outcome_write(w, o, max_result_bytes, details, request_id, files);
	jsonw_lit(w, ",\"isError\":");
	jsonw_lit(w, o->status == RUN_SUCCEEDED ? "false" : "true");
	jsonw_lit(w, "}}");
}

char *
mcp_call_answer(const json_t *id, const struct run_outcome *o, size_t max_result_bytes,
                bool details, const char *request_id, bool files, size_t *len)
{
	struct jsonw w;
	size_t tlen;
	char *text = mcp_call_text(o, max_result_bytes, NULL, &tlen);

	if (text == NULL)
		return NULL;
	jsonw_init(&w);
	mcp_call_answer_write(&w, id, o, text, tlen, max_result_bytes, details, request_id, files,
	                      NULL, NULL);
	free(text);
	return jsonw_take(&w, len);
}

char *
mcp_call_error(const json_t *id, const char *text, size_t *len)
{
	struct jsonw w;

	jsonw_init(&w);
	put_head(&w, id);
	jsonw_lit(&w, ",\"result\":{\"content\":[{\"type\":\"text\",\"text\":");
	jsonw_cstr(&w, text);
	jsonw_lit(&w, "}],\"isError\":true}}");
	return jsonw_take(&w, len);
}
