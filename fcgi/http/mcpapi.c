/*
 * mcpapi.c - POST /mcp (mcpapi.h): the Model Context Protocol over port 8080, one JSON-RPC
 * message a request (Streamable HTTP, stateless). What the protocol says is mcp.c's; this file
 * is its FastCGI side: the request's headers checked (Host, Origin, Content-Type, protocol
 * version), its body read and parsed once, and its methods answered: initialize and
 * tools/list from GET /tool's description (surface.h), tools/call of the tool as POST
 * /execute's run (execute.h), in a session where sessions are on ("session": "new" or an id,
 * sessionapi.h; "snapshot": true, sessionsnap.h), and of the sessions tool (list, close).
 */
#include "http/mcpapi.h"

#include "http/execute.h"
#include "http/http.h"
#include "core/log.h"
#include "http/mcp.h"
#include "core/metrics.h"
#include "http/request.h"
#include "http/sessionapi.h"
#include "http/sessionexec.h"
#include "core/sessionproto.h"
#include "http/sessionsnap.h"
#include "http/stream.h"
#include "http/surface.h"
#include "http/tool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A run's answer to tools/call, the same way; its text is made once, before. */
struct mcp_reply {
	const json_t *id;
	const struct run_outcome *o;
	char *text;
	size_t text_len;
	size_t max_result_bytes;
	bool details;
	const char *request_id;
	bool files;
	const char *session_id;         /* a session's execution, or NULL */
	const struct mcp_resource *res; /* its snapshot ("snapshot": true), or NULL */
};

static void
write_mcp_reply(struct jsonw *jw, const void *ctx)
{
	const struct mcp_reply *m = ctx;

	mcp_call_answer_write(jw, m->id, m->o, m->text, m->text_len, m->max_result_bytes,
	                      m->details, m->request_id, m->files, m->session_id, m->res);
}

/* an MCP answer, as JSON (a JSON-RPC error when out of memory) */
static void
mcpapi_send(FCGX_Request *req, int status, const char *extra_header, char *body, size_t len)
{
	static const char oom[] =
	    "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32603,\"message\":\"the "
	    "worker is out of memory\"}}";

	if (body == NULL)
		http_send(req, 500, NULL, oom, sizeof(oom) - 1);
	else
		http_send(req, status, extra_header, body, len);
	free(body);
}

/* MCP's second tool, where sessions are on: a model lists and closes its sessions */
#define MCPAPI_SESSIONS_TOOL "sessions"

/* tools/list's tools: GET /tool's (with the "session" argument where sessions are on), and
 * where sessions are on the sessions tool */
static json_t *
mcpapi_tools(const struct worker_request *w, const char *tool, size_t tool_len)
{
	json_t *res = mcp_tools(tool, tool_len), *t, *props;

	if (res == NULL || !surface_sessions_on(w))
		return res;
	t = json_pack(
	    "{s:s, s:s, s:s, s:{s:s, s:{s:{s:s, s:[s,s], s:s}, s:{s:s, s:s}}, s:[s], s:b},"
	    " s:{s:b, s:b, s:b, s:b}}",
	    "name", MCPAPI_SESSIONS_TOOL, "title", "List or close your Python sessions",
	    "description",
	    "Your sessions of " TOOL_NAME " (made with \"session\": \"new\"). \"list\" tells "
	    "each open session's id, whether a call runs in it, how many cells it ran, and how "
	    "long it has been idle and alive. \"close\" ends the session named by \"session\" "
	    "and frees what it holds (its variables and files are gone): close a session once "
	    "you no longer need its state, since the server holds few at once.",
	    "inputSchema", "type", "object", "properties", "action", "type", "string", "enum",
	    "list", "close", "description", "list, or close one session", "session", "type",
	    "string", "description", "the session to close (its id)", "required", "action",
	    "additionalProperties", 0, "annotations", "readOnlyHint", 0, "destructiveHint", 1,
	    "idempotentHint", 1, "openWorldHint", 0);
	/* MCP's own argument (a snapshot comes back as an embedded resource; /execute has none) */
	props = json_object_get(
	    json_object_get(json_array_get(json_object_get(res, "tools"), 0), "inputSchema"),
	    "properties");
	if (t == NULL || json_array_append_new(json_object_get(res, "tools"), t) < 0 ||
	    !json_is_object(props) ||
	    json_object_set_new(
	        props, "snapshot",
	        json_pack("{s:s, s:s}", "type", "boolean", "description",
	                  "Optional, with \"session\": true returns, after this call's code "
	                  "(\"pass\" for none), a snapshot of the session's state: its "
	                  "variables, functions and classes, imports and files, as an embedded "
	                  "resource. A session ends when idle or old and its state with it: take "
	                  "one before a long pause or a long task elsewhere, and keep it; a new "
	                  "session restored from it (POST /sessions {\"snapshot\": ...}) holds "
	                  "that state. What cannot be saved (open files, sockets, generators, "
	                  "locks) is listed as skipped.")) < 0) {
		json_decref(res);
		return NULL;
	}
	return res;
}

/* the sessions tool's "list" as it is written: a line a session for the model, the documents
 * as GET /sessions has them for a program */
struct mcpapi_lister {
	FILE *text;
	json_t *list;
};

static void
mcpapi_list_one(const struct session_rec *rec, const struct session_answer *a, void *ctx)
{
	struct mcpapi_lister *ls = ctx;

	if (a == NULL) /* its backlog is full: no word of it */
		return;
	fprintf(ls->text, "%s: %s, %llu cells run, idle %lld s, alive %lld s\n", rec->id,
	        a->busy ? "a call is running" : "idle", (unsigned long long)a->executions,
	        (long long)(a->idle_ms / 1000), (long long)(a->age_ms / 1000));
	json_array_append_new(ls->list, json_pack("{s:s,s:s,s:I}", "id", rec->id, "state",
	                                          a->busy ? "busy" : "idle", "executions",
	                                          (json_int_t)a->executions));
}

/* the sessions tool's "list" (sessionapi_each()) */
static void
mcpapi_list(const struct worker_request *w, FCGX_Request *req, const json_t *id, const char *auth)
{
	char *text = NULL, *answer;
	size_t tlen = 0, len;
	struct mcpapi_lister ls = {open_memstream(&text, &tlen), json_array()};
	json_t *res;

	if (ls.text != NULL && ls.list != NULL)
		(void)sessionapi_each(w, auth, mcpapi_list_one, &ls);
	if (ls.text != NULL) {
		if (json_array_size(ls.list) == 0)
			fputs("no open sessions\n", ls.text);
		fclose(ls.text);
	}
	res = text ? json_pack("{s:[{s:s,s:s}],s:{s:o}}", "content", "type", "text", "text", text,
	                       "structuredContent", "sessions", ls.list)
	           : NULL;
	if (res == NULL)
		json_decref(ls.list);
	free(text);
	answer = mcp_result(id, res, &len);
	mcpapi_send(req, answer ? 200 : 500, NULL, answer, answer ? len : 0);
}

/* tools/call of the sessions tool: list, or close one */
static void
mcpapi_sessions(const struct worker_request *w, FCGX_Request *req, const struct mcp_message *m)
{
	const char *auth = w->token_id;
	json_t *args = json_object_get(m->params, "arguments");
	const char *action = json_string_value(json_object_get(args, "action"));
	const char *sid = json_string_value(json_object_get(args, "session"));
	struct session_rec rec;
	struct session_answer a;
	char path[128], text[160], *answer;
	size_t len;
	int lock_fd = -1;

	if (action != NULL && strcmp(action, "list") == 0) {
		mcpapi_list(w, req, m->id, auth);
		return;
	}
	if (action == NULL || strcmp(action, "close") != 0) {
		answer = mcp_call_error(m->id, "action must be \"list\" or \"close\"", &len);
		mcpapi_send(req, 200, NULL, answer, len);
		return;
	}
	if (sid == NULL || !session_id_valid(sid, strlen(sid)) ||
	    session_find(w->wc->sessions_fd, sid, auth, &rec, true, &lock_fd) < 0) {
		answer = mcp_call_error(m->id,
		                        "no such session: it ended already, or never was (\"list\" "
		                        "names the open ones)",
		                        &len);
		mcpapi_send(req, 200, NULL, answer, len);
		return;
	}
	session_sock_path(w->wc->sessions_fd, rec.id, path, sizeof(path));
	(void)run_session_ask(path, SESSION_OP_CLOSE, &a);
	/* a running call's worker holds the lock: it removes what is left once it answers */
	if (lock_fd >= 0) {
		session_remove(w->wc->sessions_fd, &rec, METRICS_SESSION_DELETED);
		close(lock_fd);
	}
	{
		char name[SESSION_LOG_NAME_LEN + 1];
		session_log_name(rec.id, name);
		log_msg(LOG_INFO, "session %s closed (mcp)", name);
	}
	snprintf(text, sizeof(text), "session %s closed", rec.id);
	answer = mcp_result(
	    m->id, json_pack("{s:[{s:s,s:s}]}", "content", "type", "text", "text", text), &len);
	mcpapi_send(req, answer ? 200 : 500, NULL, answer, answer ? len : 0);
}

/* A tool error the model reads (isError), for tools/call. */
static void
mcpapi_tool_error(FCGX_Request *req, const json_t *id, const char *message)
{
	size_t len;
	char *answer = mcp_call_error(id, message, &len);

	mcpapi_send(req, 200, NULL, answer, len);
}

/*
 * tools/call's "session" argument: "new" starts a session (the pod's bounds), an id takes
 * that session (the caller's token's); either way *rec and *lock_fd (its record's lock, held
 * for the execution) are set. Returns 0, or -1 having answered a tool error the model can
 * act on.
 */
static int
mcpapi_session(const struct worker_request *w, FCGX_Request *req, const json_t *id,
               const char *want, struct session_rec *rec, int *lock_fd)
{
	const char *auth = w->token_id;
	const char *message, *error, *extra;
	int status;

	*lock_fd = -1;
	if (strcmp(want, "new") == 0) {
		enum sessionapi_started st =
		    sessionapi_start(w, (unsigned)w->sl.idle_seconds,
		                     (unsigned)w->sl.max_life_seconds, 0, auth, rec);
		if (st != SESSIONAPI_STARTED) {
			message = sessionapi_start_message(st, &status, &error, &extra);
			mcpapi_tool_error(req, id, message);
			return -1;
		}
	}
	if (session_find(w->wc->sessions_fd, strcmp(want, "new") == 0 ? rec->id : want, auth, rec,
	                 true, lock_fd) < 0) {
		mcpapi_tool_error(req, id,
		                  "no such session: it ended (idle, too old, closed, or its "
		                  "program was killed) or never was; its state is gone. Pass "
		                  "\"session\": \"new\" to start another");
		return -1;
	}
	if (*lock_fd < 0) {
		mcpapi_tool_error(req, id,
		                  "this session is running another call; wait for it to answer, "
		                  "then call again");
		return -1;
	}
	return 0;
}

/*
 * tools/call's arguments, as POST /execute's body: 0 with r parsed (request_free() it), *want
 * the session asked for ("new", an id, or NULL: none; free() it) and *progress the
 * progressToken (borrowed from m; NULL: none), or -1 answered. The same checks and messages
 * as /execute's: a model can act on them. Nothing is made or run before they pass.
 */
static int
mcpapi_args(const struct worker_request *w, FCGX_Request *req, const struct mcp_message *m,
            struct request *r, char **want, const json_t **progress, bool *snap)
{
	const char *name = json_string_value(json_object_get(m->params, "name"));
	json_t *args = json_object_get(m->params, "arguments"), *sarg, *copy;
	char message[256], *answer;
	size_t len;

	*want = NULL;
	if (name == NULL || strcmp(name, TOOL_NAME) != 0) {
		snprintf(message, sizeof(message), "unknown tool: %s (this server has %s)",
		         name ? name : "(none)", TOOL_NAME);
		answer = mcp_error(m->id, MCP_INVALID_PARAMS, message, &len);
		mcpapi_send(req, 200, NULL, answer, len);
		return -1;
	}
	/* every progress notification repeats the token: a bounded one, or no run */
	if (mcp_progress_token(m->params, progress, message, sizeof(message)) < 0) {
		log_msg(LOG_INFO, "mcp: rejected: %s", message);
		answer = mcp_error(m->id, MCP_INVALID_PARAMS, message, &len);
		mcpapi_send(req, 200, NULL, answer, len);
		return -1;
	}
	if (args != NULL && !json_is_object(args)) {
		answer = mcp_error(m->id, MCP_INVALID_PARAMS, "arguments must be an object", &len);
		mcpapi_send(req, 200, NULL, answer, len);
		return -1;
	}
	{
		json_t *v = args ? json_object_get(args, "snapshot") : NULL;
		json_t *ses = args ? json_object_get(args, "session") : NULL;
		*snap = json_is_true(v);
		if (v != NULL && (!json_is_boolean(v) || (*snap && !json_is_string(ses)))) {
			mcpapi_tool_error(req, m->id,
			                  "snapshot must be true or false, and true only with "
			                  "\"session\" (a session's state is what it saves)");
			return -1;
		}
	}
	sarg = args ? json_object_get(args, "session") : NULL;
	if (sarg != NULL && !json_is_null(sarg)) {
		const char *v = json_string_value(sarg);
		if (v == NULL || (strcmp(v, "new") != 0 && !session_id_valid(v, strlen(v)))) {
			mcpapi_tool_error(req, m->id,
			                  "session must be \"new\" or the id a previous call "
			                  "answered");
			return -1;
		}
		*want = strdup(v);
		if (*want == NULL) {
			mcpapi_send(req, 500, NULL, NULL, 0);
			return -1;
		}
	}
	/* the arguments, read once with the body, are /execute's body but for MCP's own: a copy
	 * without them (the values shared, not copied) */
	copy = args ? json_copy(args) : json_object();
	if (copy == NULL) {
		mcpapi_send(req, 500, NULL, NULL, 0);
		goto refused;
	}
	json_object_del(copy, "session");
	json_object_del(copy, "snapshot");
	if (request_take(r, copy, &w->l, message, sizeof(message)) < 0) {
		log_msg(LOG_INFO, "mcp: rejected: %s", message);
		answer = mcp_call_error(m->id, message, &len);
		mcpapi_send(req, 200, NULL, answer, len);
		goto refused;
	}
	return 0;
refused:
	free(*want);
	*want = NULL;
	return -1;
}

/* What tools/call tells for a run that came to no outcome: a JSON-RPC error, or a tool error
 * a model can act on. Returns the answer (NULL: out of memory) and its HTTP status. */
static char *
mcpapi_not_run(const json_t *id, enum serve_ran ran, size_t *len, int *status, const char **extra)
{
	*status = 200;
	*extra = NULL;
	switch (ran) {
	case SERVE_BUSY:
		*status = 429;
		*extra = HTTP_BUSY_POOL;
		return mcp_error(id, MCP_BUSY, "all execution slots are in use; retry shortly",
		                 len);
	case SERVE_BUSY_TENANT:
		*status = 429;
		*extra = HTTP_BUSY_TENANT;
		return mcp_error(id, MCP_BUSY, SURFACE_TENANT_BUSY, len);
	case SERVE_STUCK:
		*status = 503;
		return mcp_error(id, MCP_BUSY,
		                 "the sandbox cannot admit runs right now; retry shortly", len);
	case SERVE_GONE:
		return mcp_call_error(id,
		                      "the session ended before this call ran; its state is gone. "
		                      "Pass \"session\": \"new\" to start another",
		                      len);
	case SERVE_SESSION_BUSY:
		return mcp_call_error(
		    id, "the session is still stopping its last call; call again in a moment", len);
	case SERVE_LOST:
		*status = 503;
		return mcp_error(id, MCP_BUSY, "the run's sandbox was killed from outside; retry",
		                 len);
	case SERVE_RAN:
	case SERVE_ABANDONED:
	case SERVE_FAILED:
		break;
	}
	*status = 500;
	return mcp_error(id, -32603, "the sandbox could not run the program; see the service log",
	                 len);
}

/* A session started for a tools/call that then did not run (its slot taken meanwhile, the
 * sandbox failing, its client gone): no one was told its id, so it is closed now rather than
 * held, unreachable, until its idle bound. Its record's lock is the caller's; no connection to
 * its init is open (init serves one at a time). */
static void
mcpapi_discard(const struct worker_request *w, struct session_rec *rec)
{
	char path[128], name[SESSION_LOG_NAME_LEN + 1];
	struct session_answer a;

	session_sock_path(w->wc->sessions_fd, rec->id, path, sizeof(path));
	(void)run_session_ask(path, SESSION_OP_CLOSE, &a);
	session_remove(w->wc->sessions_fd, rec, METRICS_SESSION_FAILED);
	session_log_name(rec->id, name);
	log_msg(LOG_INFO, "session %s closed: the call it was made for did not run", name);
}

/* tools/call's "snapshot": the session's snapshot after the call (sessionsnap_take()) into
 * sr and res, and a sentence on it appended to text (which it takes; NULL: out of memory). */
static char *
mcpapi_snapshot(const struct worker_request *w, FCGX_Request *req, struct session_rec *rec,
                char *text, size_t *text_len, struct sessionsnap_reply *sr,
                struct mcp_resource *res)
{
	struct sessionsnap_refusal f;
	char *more = NULL;
	int n;

	if (sessionsnap_take(w, req, rec, sr, &f) < 0) {
		n = asprintf(&more, "%s\nsnapshot: not taken: %s", text,
		             f.status != 0 ? f.message : "the client left");
	} else {
		snprintf(sr->uri, sizeof(sr->uri), "codebox://sessions/%s/snapshot", rec->id);
		*res = (struct mcp_resource){sr->uri, "application/vnd.codebox.snapshot+base64",
		                             sr->b64, sr->b64_len};
		n = asprintf(&more,
		             "%s\nsnapshot: %zu bytes, attached as a resource (keep it to restore "
		             "this state in a new session); what it holds: %s",
		             text, sr->bytes, sr->members);
	}
	free(text);
	if (n < 0)
		return NULL;
	*text_len = (size_t)n;
	return more;
}

/* tools/call: the tool's arguments are POST /execute's body, admitted and run the same way
 * (serve_run()); "session" (sessions on) runs it in a session instead of a fresh interpreter */
static void
mcpapi_call(const struct worker_request *w, FCGX_Request *req, const struct mcp_message *m)
{
	struct request r;
	struct run_outcome o;
	char *answer, *want, path[128];
	size_t len;
	struct session_rec rec;
	struct worker_session ses = {.conn = -1, .sb = &rec.sb};
	int lock_fd = -1, status = 200;
	struct stream_sse sse;
	const json_t *progress;
	enum serve_ran ran;
	bool streamed, asked, snap;
	const char *extra;

	if (mcpapi_args(w, req, m, &r, &want, &progress, &snap) < 0)
		return;
	if (want != NULL) {
		if (mcpapi_session(w, req, m->id, want, &rec, &lock_fd) < 0) {
			free(want);
			request_free(&r);
			return;
		}
		session_sock_path(w->wc->sessions_fd, rec.id, path, sizeof(path));
		ses.conn = run_session_connect(path);
	}
	/* a model sees the pictures a run makes whether it asked for files or not: only those are
	 * collected unless it did, and the answer lists files only when it did */
	asked = r.artifacts;
	execute_sse_init(req, &sse, progress, &streamed);
	/* a client that asks for progress, and takes SSE, hears the output as it comes */
	streamed = streamed && progress != NULL;
	ran = want != NULL && ses.conn < 0
	          ? SERVE_GONE
	          : execute_run(w, req, &r, asked ? ARTIFACTS_ALL : ARTIFACTS_IMAGES,
	                        METRICS_PORT_MCP, want != NULL ? &ses : NULL,
	                        streamed ? &sse : NULL, &o);
	if (ran != SERVE_RAN && want != NULL && strcmp(want, "new") == 0) {
		if (ses.conn >= 0)
			close(ses.conn);
		ses.conn = -1;
		mcpapi_discard(w, &rec);
	}
	if (ran == SERVE_ABANDONED)
		goto done;
	if (ran == SERVE_RAN) {
		struct mcp_reply mr = {m->id,
		                       &o,
		                       NULL,
		                       0,
		                       w->l.max_result_bytes,
		                       r.details,
		                       w->request_id,
		                       asked,
		                       want != NULL ? rec.id : NULL,
		                       NULL};
		struct sessionsnap_reply sr = {0};
		struct mcp_resource res = {0};
		if (want != NULL)
			sessionexec_notebook_keep(w->wc->sessions_fd, rec.id, &r, &o);
		mr.text = mcp_call_text(&o, w->l.max_result_bytes, mr.session_id, &mr.text_len);
		if (snap && !o.session_over && mr.text != NULL) {
			if (ses.conn >= 0)
				close(ses.conn); /* its init serves one connection at a time */
			ses.conn = -1;
			mr.text = mcpapi_snapshot(w, req, &rec, mr.text, &mr.text_len, &sr, &res);
			mr.res = sr.b64 != NULL ? &res : NULL;
		}
		if (mr.text != NULL && streamed && sse.started)
			stream_sse_end(&sse, write_mcp_reply, &mr);
		else if (mr.text == NULL && streamed && sse.started)
			stream_sse_error(&sse, m->id, -32603, "sandbox_error",
			                 "the worker is out of memory");
		else if (mr.text == NULL || http_send_written(req, write_mcp_reply, &mr) < 0)
			status = 500;
		free(mr.text);
		free(sr.b64);
		free(sr.members);
		run_outcome_free(&o);
		if (status != 200)
			mcpapi_send(req, status, NULL, NULL, 0); /* out of memory */
		goto done;
	}
	answer = mcpapi_not_run(m->id, ran, &len, &status, &extra);
	if (streamed && sse.started && answer != NULL) {
		/* the stream's head is out: the answer is its last event */
		const struct execute_raw raw = {answer, len};
		stream_sse_end(&sse, execute_write_raw, &raw);
		free(answer);
	} else {
		mcpapi_send(req, status, extra, answer, len);
	}
done:
	if (ses.conn >= 0)
		close(ses.conn);
	if (lock_fd >= 0)
		close(lock_fd);
	free(want);
	request_free(&r);
}

/* mcpapi_handle()'s refusal before any body is read: a JSON-RPC error without an id */
static void
mcpapi_refuse(FCGX_Request *req, int status, const char *message)
{
	size_t len = 0;
	char *answer = mcp_error(NULL, MCP_INVALID_REQUEST, message, &len);

	mcpapi_send(req, status, NULL, answer, len);
}

/* The checks of an MCP request's headers (host, origin, content type, protocol version; see
 * mcpapi_handle()): 0, or -1 refused. */
static int
mcpapi_gate(FCGX_Request *req)
{
	const char *host = FCGX_GetParam("HTTP_HOST", req->envp);
	const char *origin = FCGX_GetParam("HTTP_ORIGIN", req->envp);
	const char *type = FCGX_GetParam("CONTENT_TYPE", req->envp);
	const char *version = FCGX_GetParam("HTTP_MCP_PROTOCOL_VERSION", req->envp);
	const char *hosts = getenv("CODEBOX_MCP_HOSTS"), *origins = getenv("CODEBOX_MCP_ORIGINS");
	char message[256];

	if (!mcp_host_allowed(host, hosts)) {
		log_msg(LOG_WARN, "mcp: refused the host %.120s (403)", host ? host : "(none)");
		if (host == NULL)
			snprintf(message, sizeof(message),
			         "a request without a Host header is not "
			         "allowed");
		else
			snprintf(message, sizeof(message),
			         "the host %.120s is not allowed: use a loopback name or one "
			         "CODEBOX_MCP_HOSTS lists",
			         host);
		mcpapi_refuse(req, 403, message);
		return -1;
	}
	if (!mcp_origin_allowed(origin, host, origins) &&
	    !mcp_origin_allowed(origin, host, FCGX_GetParam("CODEBOX_MCP_ORIGINS", req->envp))) {
		log_msg(LOG_WARN, "mcp: refused the origin %.120s (403)", origin);
		snprintf(message, sizeof(message),
		         "the origin %.120s is not allowed: only this server's own, loopback ones "
		         "and those CODEBOX_MCP_ORIGINS lists",
		         origin);
		mcpapi_refuse(req, 403, message);
		return -1;
	}
	if (!mcp_content_type_ok(type)) {
		snprintf(message, sizeof(message),
		         "the body must be Content-Type: application/json (UTF-8), not %.80s",
		         type && *type ? type : "none");
		mcpapi_refuse(req, 415, message);
		return -1;
	}
	if (version != NULL && !mcp_version_supported(version)) {
		snprintf(message, sizeof(message),
		         "unsupported MCP-Protocol-Version %.40s; this server speaks %s to %s",
		         version, mcp_versions[0], "2024-10-07");
		mcpapi_refuse(req, 400, message);
		return -1;
	}
	return 0;
}

/* initialize's answer: the tool's description (GET /tool's) as the server's instructions. */
static void
mcpapi_initialize(FCGX_Request *req, const struct mcp_message *m, const char *tool, size_t tool_len)
{
	json_t *d = json_loadb(tool, tool_len, 0, NULL);
	const char *desc = json_string_value(json_object_get(d, "description"));
	const char *want = json_string_value(json_object_get(m->params, "protocolVersion"));
	char *instructions = NULL, *answer;
	size_t len = 0;

	if (desc != NULL &&
	    asprintf(&instructions,
	             "codebox runs Python programs in isolated sandboxes. Its one tool, %s: %s",
	             TOOL_NAME, desc) < 0)
		instructions = NULL;
	answer = instructions
	             ? mcp_result(m->id, mcp_initialize(want, CODEBOX_VERSION, instructions), &len)
	             : NULL;
	free(instructions);
	json_decref(d);
	mcpapi_send(req, 200, NULL, answer, len);
}

void
mcpapi_handle(void *port, FCGX_Request *req)
{
	const struct worker_request *w = port;
	const struct worker_config *wc = w->wc;
	struct mcp_message m;
	char message[256], *body = NULL, *tool = NULL, *answer = NULL;
	size_t len = 0, tool_len = 0;
	long n;

	if (mcpapi_gate(req) < 0)
		return;
	n = http_read_body(req, wc->max_body_bytes, &body);
	if (n < 0) {
		answer = mcp_error(NULL, MCP_INVALID_REQUEST,
		                   n == HTTP_BODY_TOO_LARGE
		                       ? "the request body is larger than this server accepts"
		                       : "the request body could not be read",
		                   &len);
		mcpapi_send(req, n == HTTP_BODY_TOO_LARGE ? 413 : 400, NULL, answer, len);
		return;
	}
	mcp_parse(body, (size_t)n, &m);
	free(body);
	switch (m.kind) {
	case MCP_MSG_UNPARSABLE:
		answer = mcp_error(NULL, MCP_PARSE_ERROR, m.why, &len);
		mcpapi_send(req, 400, NULL, answer, len);
		goto out;
	case MCP_MSG_INVALID:
		answer = mcp_error(m.id, MCP_INVALID_REQUEST, m.why, &len);
		mcpapi_send(req, 400, NULL, answer, len);
		goto out;
	case MCP_MSG_NOTIFICATION:
	case MCP_MSG_RESPONSE:
		http_send(req, 202, NULL, "", 0);
		goto out;
	case MCP_MSG_REQUEST:
		break;
	}
	/* the tool is GET /tool's: one description everywhere, rendered only where it is
	 * answered (initialize, tools/list), never on a call's way to its run */
	if (strcmp(m.method, "initialize") == 0 || strcmp(m.method, "tools/list") == 0) {
		tool = surface_tool_doc(w, TOOL_ANTHROPIC, &tool_len);
		if (tool == NULL) {
			mcpapi_send(req, 500, NULL, NULL, 0);
			goto out;
		}
	}
	if (strcmp(m.method, "initialize") == 0) {
		mcpapi_initialize(req, &m, tool, tool_len);
	} else if (strcmp(m.method, "ping") == 0) {
		answer = mcp_result(m.id, json_object(), &len);
		mcpapi_send(req, 200, NULL, answer, len);
	} else if (strcmp(m.method, "tools/list") == 0) {
		answer = mcp_result(m.id, mcpapi_tools(w, tool, tool_len), &len);
		mcpapi_send(req, 200, NULL, answer, len);
	} else if (strcmp(m.method, "tools/call") == 0) {
		if (m.params == NULL) {
			answer =
			    mcp_error(m.id, MCP_INVALID_PARAMS, "tools/call needs params", &len);
			mcpapi_send(req, 200, NULL, answer, len);
		} else if (surface_sessions_on(w) &&
		           json_is_string(json_object_get(m.params, "name")) &&
		           strcmp(json_string_value(json_object_get(m.params, "name")),
		                  MCPAPI_SESSIONS_TOOL) == 0) {
			mcpapi_sessions(w, req, &m);
		} else {
			mcpapi_call(w, req, &m);
		}
	} else {
		snprintf(message, sizeof(message), "method not found: %.120s", m.method);
		answer = mcp_error(m.id, MCP_METHOD_NOT_FOUND, message, &len);
		mcpapi_send(req, 200, NULL, answer, len);
	}
out:
	free(tool);
	mcp_message_free(&m);
}