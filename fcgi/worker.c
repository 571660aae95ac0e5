/*
 * worker.c - the accept loop, and the endpoints of ports 8080 (MCP's included) and 9090 in a
 * table (http.h) that hands POST /execute to execute.c (with the run glue every surface runs
 * through), /sessions to sessionapi.c and port 8888's to agent.c.
 *
 * Shutdown without lost wake-ups: SIGTERM stays blocked except inside epoll_pwait(), which
 * unblocks it atomically while the worker waits for a connection (EPOLLEXCLUSIVE, so one
 * connection wakes one idle worker). A SIGTERM that arrives mid-request
 * stays pending until the request is answered. The listen socket is non-blocking, so when
 * several workers wake for one connection the losers get EAGAIN from libfcgi's accept() and
 * go back to waiting instead of sleeping in accept() where SIGTERM cannot reach them.
 *
 * Status codes: 200 for any outcome of the program (201 a session made, 202 a background
 * execution started, 204 a session closed); 400/404/405/413/415 for the client's mistakes,
 * 403 an MCP request from a host or origin not allowed, 409 a session already running a cell;
 * 429 (Retry-After: 1) when every execution slot or session is taken; 503 when the slots'
 * lock is not free in time, a run's init was killed from outside, or sessions are off; 500
 * misconfigured when nginx's limits are missing or malformed, 500 sandbox_error when the
 * sandbox could not run the program.
 */
#include "worker.h"

#include "agent.h"
#include "execute.h"
#include "cgroup.h"
#include "files.h"
#include "http.h"
#include "landlock.h"
#include "limits.h"
#include "log.h"
#include "mcp.h"
#include "notebook.h"
#include "metrics.h"
#include "reply.h"
#include "serve.h"
#include "request.h"
#include "session.h"
#include "sessionapi.h"
#include "sessionexec.h"
#include "sessionfiles.h"
#include "sessionsnap.h"
#include "sessionproto.h"
#include "tool.h"
#include "trace.h"
#include "slots.h"
#include "stream.h"
#include "surface.h"
#include "utf8.h"
#include "warm.h"
#include "workdir.h"
#include "workspace.h"

#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <fcgiapp.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/random.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile sig_atomic_t worker_stopping;
/* this worker's own open file description of the agent workspace's lock (flock) */
static int worker_agent_lock = -1;

static void
worker_on_term(int sig)
{
	(void)sig;
	worker_stopping = 1;
}

static const char *
worker_param(const char *name, void *ctx)
{
	FCGX_Request *req = ctx;

	return FCGX_GetParam(name, req->envp);
}

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
worker_mcp_send(FCGX_Request *req, int status, const char *extra_header, char *body, size_t len)
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
#define WORKER_MCP_SESSIONS_TOOL "sessions"

/* tools/list's tools: GET /tool's (with the "session" argument where sessions are on), and
 * where sessions are on the sessions tool */
static json_t *
worker_mcp_tools(const struct worker_request *w, const char *tool, size_t tool_len)
{
	json_t *res = mcp_tools(tool, tool_len), *t, *props;

	if (res == NULL || !surface_sessions_on(w))
		return res;
	t = json_pack(
	    "{s:s, s:s, s:s, s:{s:s, s:{s:{s:s, s:[s,s], s:s}, s:{s:s, s:s}}, s:[s], s:b},"
	    " s:{s:b, s:b, s:b, s:b}}",
	    "name", WORKER_MCP_SESSIONS_TOOL, "title", "List or close your Python sessions",
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

/* the sessions tool's "list": a line a session for the model, the documents as GET /sessions
 * has them for a program */
static void
worker_mcp_list(const struct worker_request *w, FCGX_Request *req, const json_t *id,
                const char *auth)
{
	size_t max = (size_t)w->sl.max_sessions, n = 0, len;
	struct session_rec *recs = calloc(max, sizeof(*recs));
	json_t *list = json_array(), *res;
	char *text = NULL, *answer;
	size_t tlen = 0;
	FILE *f = open_memstream(&text, &tlen);

	if (recs != NULL && list != NULL && f != NULL)
		n = session_list(w->wc->sessions_fd, auth, recs, max);
	for (size_t i = 0; f != NULL && i < n; i++) {
		struct session_answer a;
		char path[128];
		session_sock_path(w->wc->sessions_fd, recs[i].id, path, sizeof(path));
		if (run_session_ask(path, SESSION_OP_PING, &a) < 0)
			continue;
		fprintf(f, "%s: %s, %llu cells run, idle %lld s, alive %lld s\n", recs[i].id,
		        a.busy ? "a call is running" : "idle", (unsigned long long)a.executions,
		        (long long)(a.idle_ms / 1000), (long long)(a.age_ms / 1000));
		json_array_append_new(list, json_pack("{s:s,s:s,s:I}", "id", recs[i].id, "state",
		                                      a.busy ? "busy" : "idle", "executions",
		                                      (json_int_t)a.executions));
	}
	if (f != NULL) {
		if (json_array_size(list) == 0)
			fputs("no open sessions\n", f);
		fclose(f);
	}
	free(recs);
	res = text ? json_pack("{s:[{s:s,s:s}],s:{s:o}}", "content", "type", "text", "text", text,
	                       "structuredContent", "sessions", list)
	           : NULL;
	if (res == NULL)
		json_decref(list);
	free(text);
	answer = mcp_result(id, res, &len);
	worker_mcp_send(req, answer ? 200 : 500, NULL, answer, answer ? len : 0);
}

/* tools/call of the sessions tool: list, or close one */
static void
worker_mcp_sessions(const struct worker_request *w, FCGX_Request *req, const struct mcp_message *m)
{
	const char *auth = FCGX_GetParam("CODEBOX_TOKEN_ID", req->envp);
	json_t *args = json_object_get(m->params, "arguments");
	const char *action = json_string_value(json_object_get(args, "action"));
	const char *sid = json_string_value(json_object_get(args, "session"));
	struct session_rec rec;
	struct session_answer a;
	char path[128], text[160], *answer;
	size_t len;
	int lock_fd = -1;

	if (action != NULL && strcmp(action, "list") == 0) {
		worker_mcp_list(w, req, m->id, auth);
		return;
	}
	if (action == NULL || strcmp(action, "close") != 0) {
		answer = mcp_call_error(m->id, "action must be \"list\" or \"close\"", &len);
		worker_mcp_send(req, 200, NULL, answer, len);
		return;
	}
	if (sid == NULL || !session_id_valid(sid, strlen(sid)) ||
	    session_find(w->wc->sessions_fd, sid, auth, &rec, true, &lock_fd) < 0) {
		answer = mcp_call_error(m->id,
		                        "no such session: it ended already, or never was (\"list\" "
		                        "names the open ones)",
		                        &len);
		worker_mcp_send(req, 200, NULL, answer, len);
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
	worker_mcp_send(req, answer ? 200 : 500, NULL, answer, answer ? len : 0);
}

/* A tool error the model reads (isError), for tools/call. */
static void
worker_mcp_tool_error(FCGX_Request *req, const json_t *id, const char *message)
{
	size_t len;
	char *answer = mcp_call_error(id, message, &len);

	worker_mcp_send(req, 200, NULL, answer, len);
}

/*
 * tools/call's "session" argument: "new" starts a session (the pod's bounds), an id takes
 * that session (the caller's token's); either way *rec and *lock_fd (its record's lock, held
 * for the execution) are set. Returns 0, or -1 having answered a tool error the model can
 * act on.
 */
static int
worker_mcp_session(const struct worker_request *w, FCGX_Request *req, const json_t *id,
                   const char *want, struct session_rec *rec, int *lock_fd)
{
	const char *auth = FCGX_GetParam("CODEBOX_TOKEN_ID", req->envp);
	const char *message, *error, *extra;
	int status;

	*lock_fd = -1;
	if (strcmp(want, "new") == 0) {
		enum sessionapi_started st =
		    sessionapi_start(w, (unsigned)w->sl.idle_seconds,
		                     (unsigned)w->sl.max_life_seconds, 0, auth, rec);
		if (st != SESSIONAPI_STARTED) {
			message = sessionapi_start_message(st, &status, &error, &extra);
			worker_mcp_tool_error(req, id, message);
			return -1;
		}
	}
	if (session_find(w->wc->sessions_fd, strcmp(want, "new") == 0 ? rec->id : want, auth, rec,
	                 true, lock_fd) < 0) {
		worker_mcp_tool_error(req, id,
		                      "no such session: it ended (idle, too old, closed, or its "
		                      "program was killed) or never was; its state is gone. Pass "
		                      "\"session\": \"new\" to start another");
		return -1;
	}
	if (*lock_fd < 0) {
		worker_mcp_tool_error(
		    req, id,
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
worker_mcp_args(const struct worker_request *w, FCGX_Request *req, const struct mcp_message *m,
                struct request *r, char **want, const json_t **progress, bool *snap)
{
	const char *name = json_string_value(json_object_get(m->params, "name"));
	json_t *args = json_object_get(m->params, "arguments"), *sarg;
	char message[256], *text, *answer;
	size_t len;

	*want = NULL;
	if (name == NULL || strcmp(name, TOOL_NAME) != 0) {
		snprintf(message, sizeof(message), "unknown tool: %s (this server has %s)",
		         name ? name : "(none)", TOOL_NAME);
		answer = mcp_error(m->id, MCP_INVALID_PARAMS, message, &len);
		worker_mcp_send(req, 200, NULL, answer, len);
		return -1;
	}
	/* every progress notification repeats the token: a bounded one, or no run */
	if (mcp_progress_token(m->params, progress, message, sizeof(message)) < 0) {
		log_msg(LOG_INFO, "mcp: rejected: %s", message);
		answer = mcp_error(m->id, MCP_INVALID_PARAMS, message, &len);
		worker_mcp_send(req, 200, NULL, answer, len);
		return -1;
	}
	if (args != NULL && !json_is_object(args)) {
		answer = mcp_error(m->id, MCP_INVALID_PARAMS, "arguments must be an object", &len);
		worker_mcp_send(req, 200, NULL, answer, len);
		return -1;
	}
	{
		json_t *v = args ? json_object_get(args, "snapshot") : NULL;
		json_t *ses = args ? json_object_get(args, "session") : NULL;
		*snap = json_is_true(v);
		if (v != NULL && (!json_is_boolean(v) || (*snap && !json_is_string(ses)))) {
			worker_mcp_tool_error(req, m->id,
			                      "snapshot must be true or false, and true only with "
			                      "\"session\" (a session's state is what it saves)");
			return -1;
		}
	}
	sarg = args ? json_object_get(args, "session") : NULL;
	if (sarg != NULL && !json_is_null(sarg)) {
		const char *v = json_string_value(sarg);
		if (v == NULL || (strcmp(v, "new") != 0 && !session_id_valid(v, strlen(v)))) {
			worker_mcp_tool_error(req, m->id,
			                      "session must be \"new\" or the id a previous call "
			                      "answered");
			return -1;
		}
		*want = strdup(v);
		if (*want == NULL) {
			worker_mcp_send(req, 500, NULL, NULL, 0);
			return -1;
		}
	}
	if (sarg != NULL || json_object_get(args, "snapshot") != NULL) {
		json_t *copy = json_copy(args);
		json_object_del(copy, "session");
		json_object_del(copy, "snapshot");
		text = copy ? json_dumps(copy, JSON_COMPACT) : NULL;
		json_decref(copy);
	} else {
		text = args ? json_dumps(args, JSON_COMPACT) : strdup("{}");
	}
	if (text == NULL) {
		worker_mcp_send(req, 500, NULL, NULL, 0);
		goto refused;
	}
	if (request_parse(r, text, strlen(text), &w->l, message, sizeof(message)) < 0) {
		free(text);
		log_msg(LOG_INFO, "mcp: rejected: %s", message);
		answer = mcp_call_error(m->id, message, &len);
		worker_mcp_send(req, 200, NULL, answer, len);
		goto refused;
	}
	free(text);
	return 0;
refused:
	free(*want);
	*want = NULL;
	return -1;
}

/* What tools/call tells for a run that came to no outcome: a JSON-RPC error, or a tool error
 * a model can act on. Returns the answer (NULL: out of memory) and its HTTP status. */
static char *
worker_mcp_not_run(const json_t *id, enum serve_ran ran, size_t *len, int *status,
                   const char **extra)
{
	*status = 200;
	*extra = NULL;
	switch (ran) {
	case SERVE_BUSY:
		*status = 429;
		*extra = HTTP_BUSY_POOL;
		return mcp_error(id, MCP_BUSY, "all execution slots are in use; retry shortly",
		                 len);
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
worker_mcp_discard(const struct worker_request *w, struct session_rec *rec)
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
worker_mcp_snapshot(const struct worker_request *w, FCGX_Request *req, struct session_rec *rec,
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
worker_mcp_call(const struct worker_request *w, FCGX_Request *req, const struct mcp_message *m)
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

	if (worker_mcp_args(w, req, m, &r, &want, &progress, &snap) < 0)
		return;
	if (want != NULL) {
		if (worker_mcp_session(w, req, m->id, want, &rec, &lock_fd) < 0) {
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
		worker_mcp_discard(w, &rec);
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
			mr.text =
			    worker_mcp_snapshot(w, req, &rec, mr.text, &mr.text_len, &sr, &res);
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
			worker_mcp_send(req, status, NULL, NULL, 0); /* out of memory */
		goto done;
	}
	answer = worker_mcp_not_run(m->id, ran, &len, &status, &extra);
	if (streamed && sse.started && answer != NULL) {
		/* the stream's head is out: the answer is its last event */
		const struct execute_raw raw = {answer, len};
		stream_sse_end(&sse, execute_write_raw, &raw);
		free(answer);
	} else {
		worker_mcp_send(req, status, extra, answer, len);
	}
done:
	if (ses.conn >= 0)
		close(ses.conn);
	if (lock_fd >= 0)
		close(lock_fd);
	free(want);
	request_free(&r);
}

/* worker_mcp()'s refusal before any body is read: a JSON-RPC error without an id */
static void
worker_mcp_refuse(FCGX_Request *req, int status, const char *message)
{
	size_t len = 0;
	char *answer = mcp_error(NULL, MCP_INVALID_REQUEST, message, &len);

	worker_mcp_send(req, status, NULL, answer, len);
}

/* The checks of an MCP request's headers (host, origin, content type, protocol version; see
 * worker_mcp()): 0, or -1 refused. */
static int
worker_mcp_gate(FCGX_Request *req)
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
		worker_mcp_refuse(req, 403, message);
		return -1;
	}
	if (!mcp_origin_allowed(origin, host, origins) &&
	    !mcp_origin_allowed(origin, host, FCGX_GetParam("CODEBOX_MCP_ORIGINS", req->envp))) {
		log_msg(LOG_WARN, "mcp: refused the origin %.120s (403)", origin);
		snprintf(message, sizeof(message),
		         "the origin %.120s is not allowed: only this server's own, loopback ones "
		         "and those CODEBOX_MCP_ORIGINS lists",
		         origin);
		worker_mcp_refuse(req, 403, message);
		return -1;
	}
	if (!mcp_content_type_ok(type)) {
		snprintf(message, sizeof(message),
		         "the body must be Content-Type: application/json (UTF-8), not %.80s",
		         type && *type ? type : "none");
		worker_mcp_refuse(req, 415, message);
		return -1;
	}
	if (version != NULL && !mcp_version_supported(version)) {
		snprintf(message, sizeof(message),
		         "unsupported MCP-Protocol-Version %.40s; this server speaks %s to %s",
		         version, mcp_versions[0], "2024-10-07");
		worker_mcp_refuse(req, 400, message);
		return -1;
	}
	return 0;
}

/* initialize's answer: the tool's description (GET /tool's) as the server's instructions. */
static void
worker_mcp_initialize(FCGX_Request *req, const struct mcp_message *m, const char *tool,
                      size_t tool_len)
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
	worker_mcp_send(req, 200, NULL, answer, len);
}

/*
 * POST /mcp: one JSON-RPC message (mcp.h). Checked first, as the specification says: the Host
 * and the Origin (DNS rebinding: loopback names and origins, the server's own origin, and
 * those CODEBOX_MCP_HOSTS and CODEBOX_MCP_ORIGINS list, from the pool's environment or, for
 * origins, nginx.conf's fastcgi_param), then the Content-Type (a CORS "simple" request cannot
 * send application/json without a preflight) and MCP-Protocol-Version; notifications and
 * responses get 202.
 */
static void
worker_mcp(void *port, FCGX_Request *req)
{
	const struct worker_request *w = port;
	const struct worker_config *wc = w->wc;
	struct mcp_message m;
	char message[256], *body = NULL, *tool = NULL, *answer = NULL;
	size_t len = 0, tool_len = 0;
	long n;

	if (worker_mcp_gate(req) < 0)
		return;
	n = http_read_body(req, wc->max_body_bytes, &body);
	if (n < 0) {
		answer = mcp_error(NULL, MCP_INVALID_REQUEST,
		                   n == HTTP_BODY_TOO_LARGE
		                       ? "the request body is larger than this server accepts"
		                       : "the request body could not be read",
		                   &len);
		worker_mcp_send(req, n == HTTP_BODY_TOO_LARGE ? 413 : 400, NULL, answer, len);
		return;
	}
	mcp_parse(body, (size_t)n, &m);
	free(body);
	switch (m.kind) {
	case MCP_MSG_UNPARSABLE:
		answer = mcp_error(NULL, MCP_PARSE_ERROR, m.why, &len);
		worker_mcp_send(req, 400, NULL, answer, len);
		goto out;
	case MCP_MSG_INVALID:
		answer = mcp_error(m.id, MCP_INVALID_REQUEST, m.why, &len);
		worker_mcp_send(req, 400, NULL, answer, len);
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
			worker_mcp_send(req, 500, NULL, NULL, 0);
			goto out;
		}
	}
	if (strcmp(m.method, "initialize") == 0) {
		worker_mcp_initialize(req, &m, tool, tool_len);
	} else if (strcmp(m.method, "ping") == 0) {
		answer = mcp_result(m.id, json_object(), &len);
		worker_mcp_send(req, 200, NULL, answer, len);
	} else if (strcmp(m.method, "tools/list") == 0) {
		answer = mcp_result(m.id, worker_mcp_tools(w, tool, tool_len), &len);
		worker_mcp_send(req, 200, NULL, answer, len);
	} else if (strcmp(m.method, "tools/call") == 0) {
		if (m.params == NULL) {
			answer =
			    mcp_error(m.id, MCP_INVALID_PARAMS, "tools/call needs params", &len);
			worker_mcp_send(req, 200, NULL, answer, len);
		} else if (surface_sessions_on(w) &&
		           json_is_string(json_object_get(m.params, "name")) &&
		           strcmp(json_string_value(json_object_get(m.params, "name")),
		                  WORKER_MCP_SESSIONS_TOOL) == 0) {
			worker_mcp_sessions(w, req, &m);
		} else {
			worker_mcp_call(w, req, &m);
		}
	} else {
		snprintf(message, sizeof(message), "method not found: %.120s", m.method);
		answer = mcp_error(m.id, MCP_METHOD_NOT_FOUND, message, &len);
		worker_mcp_send(req, 200, NULL, answer, len);
	}
out:
	free(tool);
	mcp_message_free(&m);
}

/* GET /readyz: ready means able to admit, through the lock every run is admitted under. */
static void
worker_readyz(void *port, FCGX_Request *req)
{
	const struct worker_request *w = port;
	static const char ready[] = "{\"status\":\"ready\"}";

	if (slots_check(w->wc->slots) < 0) {
		log_msg(LOG_ERROR,
		        "readyz: the execution slots' lock was not free within %d ms (%s): "
		        "the pool cannot admit runs",
		        SLOTS_LOCK_WAIT_MS, strerror(errno));
		http_send_message(req, 503, NULL, "sandbox_unavailable",
		                  "the sandbox cannot admit runs: its admission lock is "
		                  "stuck; see the service log");
		return;
	}
	http_send(req, 200, NULL, ready, sizeof(ready) - 1);
}

/* GET /capabilities (reply_capabilities()) */
static void
worker_capabilities(void *port, FCGX_Request *req)
{
	const struct worker_request *w = port;
	size_t len;
	char *doc = reply_capabilities(w->wc->probe, &w->l, w->wc->files_contained, &len);

	http_send_doc(req, HTTP_JSON, doc, len);
}

/* GET /isolation (surface_isolation_doc()) */
static void
worker_isolation(void *port, FCGX_Request *req)
{
	size_t len;
	char *doc = surface_isolation_doc(port, &len);

	http_send_doc(req, HTTP_JSON, doc, len);
}

/* GET /tool[?format=...]: written from /capabilities and /isolation (tool.h) */
static void
worker_tool(void *port, FCGX_Request *req)
{
	size_t len = 0;
	enum tool_format format;
	char why[256], *doc;

	if (tool_parse_format(FCGX_GetParam("REQUEST_URI", req->envp), &format, why, sizeof(why)) <
	    0) {
		http_send_message(req, 400, NULL, "invalid_request", why);
		return;
	}
	doc = surface_tool_doc(port, format, &len);
	http_send_doc(req, HTTP_JSON, doc, len);
}

/* GET /metrics, port 9090's (metrics.h) */
static void
worker_metrics(void *port, FCGX_Request *req)
{
	const struct worker_request *w = port;
	size_t len;
	const struct worker_config *wc = w->wc;
	struct session_count sc;
	struct metrics_capacity cap = {.execute_slots = w->l.max_concurrent_executions};
	char *doc;

	session_count(wc->sessions_fd, &sc);
	cap.sessions_open = sc.open;
	cap.sessions_max = surface_sessions_on(w) ? w->sl.max_sessions : 0;
	cap.sessions_memory_bytes = sc.memory_bytes;
	cap.memory_budget_bytes = wc->iso->on[ISO_POOLMEMORY] ? wc->iso->pool_memory_bytes : 0;
	cap.draining = session_draining(wc->sessions_fd);
	cap.background_running = surface_sessions_on(w) ? slots_loans(wc->slots) : 0;
	doc = metrics_render(wc->nginx_busy_log, wc->probe->python_version, &cap, &len);

	http_send_doc(req, "text/plain; version=0.0.4; charset=utf-8", doc, len);
}

/* Port 8888's endpoints: agent.c's, with the worker's stream and lock for agent runs. */
static void
worker_agent(void *port, FCGX_Request *req)
{
	const struct worker_request *w = port;

	agent_handle(&w->wc->agent, w->run, &w->streams->agent, worker_agent_lock,
	             w->wc->runs_dir_fd, req, w->endpoint, &w->l);
}

/*
 * What the worker serves, by nginx.conf's CODEBOX_ENDPOINT: port 8080's endpoints and MCP,
 * port 9090's /metrics, and port 8888's (agent.c's table). Only /execute and /mcp check their
 * method here as well: a request sent to the socket directly meets the same 405 as nginx's.
 */
static const struct http_endpoint worker_endpoints[] = {
    {"execute", "POST", "use POST for /execute", execute_handle, false},
    /* no stream from the server (GET), no session to end (DELETE) */
    {"mcp", "POST", "use POST for /mcp: this server sends no stream and keeps no session",
     worker_mcp, false},
    {"sessions", NULL, NULL, sessionapi_handle, false},
    {"capabilities", NULL, NULL, worker_capabilities, false},
    {"isolation", NULL, NULL, worker_isolation, false},
    {"tool", NULL, NULL, worker_tool, false},
    {"readyz", NULL, NULL, worker_readyz, true}, /* the probe's (image/codebox-probe) */
    {"metrics", NULL, NULL, worker_metrics, false},
    {"agent_*", NULL, NULL, worker_agent, false},
    {NULL, NULL, NULL, NULL, false},
};

/* The request's limits (nginx.conf's codebox-limits.conf), capped at the pool's ceilings.
 * Returns 0, or -1 having answered 500 misconfigured. */
static int
worker_limits(struct worker_request *w, FCGX_Request *req)
{
	char why[256];

	if (limits_parse(&w->l, worker_param, req, why, sizeof(why)) < 0) {
		log_msg(LOG_ERROR, "misconfigured: %s", why);
		http_send_message(req, 500, NULL, "misconfigured",
		                  "the service is misconfigured; see the service log");
		return -1;
	}
	if (session_limits_parse(&w->sl, worker_param, req, why, sizeof(why)) < 0) {
		log_msg(LOG_ERROR, "misconfigured: %s", why);
		http_send_message(req, 500, NULL, "misconfigured",
		                  "the service is misconfigured; see the service log");
		return -1;
	}
	/* whoever reached the socket, nothing exceeds what the pool was started with */
	if (limits_cap(&w->l, w->wc->ceilings, why, sizeof(why)) > 0)
		log_msg(LOG_WARN, "a request's limits were capped: %s", why);
	return 0;
}

static void
worker_handle(const struct worker_config *wc, const struct run_config *run,
              struct worker_streams *streams, FCGX_Request *req)
{
	struct worker_request w = {
	    .wc = wc,
	    .run = run,
	    .streams = streams,
	    .endpoint = FCGX_GetParam("CODEBOX_ENDPOINT", req->envp),
	    .request_id = FCGX_GetParam("CODEBOX_REQUEST_ID", req->envp),
	};
	const struct http_endpoint *e = http_endpoint_find(worker_endpoints, w.endpoint);

	log_set_request_id(w.request_id);
	trace_set_request(FCGX_GetParam("CODEBOX_TRACEPARENT", req->envp),
	                  FCGX_GetParam("CODEBOX_SPAN_ID", req->envp),
	                  FCGX_GetParam("CODEBOX_TRACESTATE", req->envp));
	/* everything named but the probe's readyz, an unknown name included, is served only
	 * under well-formed limits */
	if (w.endpoint != NULL && (e == NULL || !e->unlimited) && worker_limits(&w, req) < 0)
		goto out;
	if (http_route(req, e))
		e->handle(&w, req);
out:
	log_set_request_id(NULL);
	trace_clear_request();
}

/* cgroup_name_sessions()'s namer: ctx is the sessions directory's fd; the session's name in
 * the logs (session_log_name()), never its id */
static bool
worker_session_of_group(const char *dir, char *name, size_t len, void *ctx)
{
	char found[SESSION_ID_LEN + 1], logname[SESSION_LOG_NAME_LEN + 1];

	if (session_of_group(*(const int *)ctx, dir, found) < 0)
		return false;
	session_log_name(found, logname);
	snprintf(name, len, "%s", logname);
	return true;
}

/* What a predecessor that died mid-run left: its run's directory and cgroup. */
static void
worker_sweep(const struct worker_config *wc, const char *name, const char *parent)
{
	char prefix[32];
	int dfd;
	DIR *d;
	struct dirent *e;

	if (wc->run.cgroup != NULL) {
		snprintf(prefix, sizeof(prefix), "w%d-run-", wc->index);
		cgroup_sweep(wc->run.cgroup, prefix);
	}
	/* listing needs read permission, which 0311 withholds from a non-root owner: grant it
	 * while no run exists, then take it back */
	if (fchmodat(wc->runs_dir_fd, name, 0711, 0) < 0)
		return;
	dfd = openat(wc->runs_dir_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (d == NULL) {
		if (dfd >= 0)
			close(dfd);
	} else {
		while ((e = readdir(d)) != NULL) {
			if (strncmp(e->d_name, "run-", 4) != 0)
				continue;
			log_msg(LOG_WARN, "removing %s/%s, left by a worker that died mid-run",
			        parent, e->d_name);
			if (workdir_remove_tree(dfd, e->d_name) < 0)
				log_msg(LOG_ERROR, "removing %s/%s failed: %s", parent, e->d_name,
				        strerror(errno));
			rewinddir(d);
		}
		closedir(d);
	}
	if (fchmodat(wc->runs_dir_fd, name, 0311, 0) < 0)
		log_msg(LOG_ERROR, "chmod(%s) failed: %s", parent, strerror(errno));
}

int
worker_prepare_run(const struct worker_config *wc, struct run_config *run)
{
	static char parent[4200];
	char name[32];

	*run = wc->run;
	snprintf(name, sizeof(name), "w%d", wc->index);
	snprintf(parent, sizeof(parent), "%s/%s", wc->runs_dir, name);
	if (mkdirat(wc->runs_dir_fd, name, 0311) < 0 && errno != EEXIST) {
		log_msg(LOG_ERROR, "mkdir(%s) failed: %s", parent, strerror(errno));
		return -1;
	}
	/* runs must not list it; write and search for the worker, search for the others */
	if (fchmodat(wc->runs_dir_fd, name, 0311, 0) < 0) {
		log_msg(LOG_ERROR, "chmod(%s) failed: %s", parent, strerror(errno));
		return -1;
	}
	run->work_parent = parent;
	/* O_PATH: the directory is 0311, unreadable even to its (non-root) owner */
	run->work_parent_fd = openat(wc->runs_dir_fd, name, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (run->work_parent_fd < 0) {
		log_msg(LOG_ERROR, "open(%s) failed: %s", parent, strerror(errno));
		return -1;
	}
	worker_sweep(wc, name, parent);
	if (wc->sessions_fd >= 0)
		cgroup_name_sessions(worker_session_of_group, (void *)&wc->sessions_fd);
	run->landlock_fd = -1;
	run->workspace_fd = -1; /* port 8080's runs never see the agent workspace */
	/* with a mount namespace, init builds each run's ruleset (run->landlock_abi) */
	if (wc->iso->on[ISO_LANDLOCK] && !wc->iso->on[ISO_MOUNTNS]) {
		const char *rw[] = {parent};
		run->landlock_fd = landlock_build(wc->iso->landlock_abi, rw, 1, run->python, true);
		if (run->landlock_fd < 0) {
			log_msg(LOG_ERROR, "worker %d could not build its Landlock ruleset",
			        wc->index);
			return -1;
		}
	}
	run->worker_index = wc->index;
	return 0;
}

noreturn void
worker_main(const struct worker_config *wc)
{
	struct run_config run;
	struct worker_streams streams;
	struct sigaction sa = {.sa_handler = worker_on_term};
	sigset_t waitmask;
	FCGX_Request req;
	int epfd;
	/* the supervisor (pool.c checked it before this worker began) */
	pid_t pool = getppid();

	log_set_component("worker");
	/* A reply's buffers (an 8 MiB artifact's report, its base64, the JSON) are freed after
	 * each request, but glibc raises its mmap threshold past the largest chunk freed, so
	 * later ones come from the heap and stay there: workers would grow to their largest
	 * reply and keep it. A fixed threshold (which stops that) gives every large buffer back
	 * to the kernel when it is freed, and the heap is trimmed past 1 MiB free at its top. */
	(void)mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	(void)mallopt(M_TRIM_THRESHOLD, 1024 * 1024);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigprocmask(SIG_SETMASK, NULL, &waitmask);
	sigdelset(&waitmask, SIGTERM);
	sigdelset(&waitmask, SIGINT);

	if (worker_prepare_run(wc, &run) < 0)
		_exit(1);
	run_stream_init(&streams.execute);
	run_stream_init(&streams.agent);
	if (wc->agent.workspace_fd >= 0) {
		worker_agent_lock = openat(wc->runs_dir_fd, "agent.lock",
		                           O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (worker_agent_lock < 0)
			log_msg(LOG_ERROR, "opening the agent workspace's lock failed: %s",
			        strerror(errno));
	}
	/* warm runs: a template of the zygote's clones init (namespace mode only) */
	run.warm = wc->warm_enabled && run.clone_flags != 0;
	if (run_init_reaper() < 0 || FCGX_Init() != 0 ||
	    FCGX_InitRequest(&req, wc->listen_fd, FCGI_FAIL_ACCEPT_ON_INTR) != 0) {
		log_msg(LOG_ERROR, "worker %d could not initialise FastCGI", wc->index);
		_exit(1);
	}
	/* EPOLLEXCLUSIVE: a connection wakes one idle worker, not all of them */
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, wc->listen_fd,
	                          &(struct epoll_event){.events = EPOLLIN | EPOLLEXCLUSIVE}) < 0) {
		log_msg(LOG_ERROR, "worker %d: epoll on the listen socket failed: %s", wc->index,
		        strerror(errno));
		_exit(1);
	}
	log_msg(LOG_INFO, "worker %d ready", wc->index);
	while (!worker_stopping) {
		struct epoll_event ev;
		int r = epoll_pwait(epfd, &ev, 1, -1, &waitmask);

		if (r < 0) {
			if (errno != EINTR) {
				log_msg(LOG_ERROR, "epoll_pwait() on the listen socket failed: %s",
				        strerror(errno));
				_exit(1);
			}
			continue;
		}
		if (FCGX_Accept_r(&req) < 0)
			continue; /* another worker took it (EAGAIN), or the peer left */
		/* libfcgi's accept() does not set close-on-exec; runs must not inherit it */
		(void)fcntl(req.ipcFd, F_SETFD, FD_CLOEXEC);
		worker_handle(wc, &run, &streams, &req);
		FCGX_Finish_r(&req);
		/* the reply is out: clean up, record, and build the next sandbox while nobody
		 * waits */
		run_stream_finish(&run, &streams.execute);
		run_stream_finish(&run, &streams.agent);
		history_flush(&wc->history);
		trace_flush();
		run_stream_build_ahead(&run, &streams.execute);
	}
	/* requests already in the socket's backlog get a clear answer, not a reset; the
	 * supervisor has removed the socket's path, so no new ones arrive */
	while (worker_stopping && FCGX_Accept_r(&req) >= 0) {
		(void)fcntl(req.ipcFd, F_SETFD, FD_CLOEXEC);
		http_send_message(&req, 503, NULL, "sandbox_unavailable",
		                  "the service is stopping; retry shortly");
		FCGX_Finish_r(&req);
	}
	run_stream_close(&run, &streams.execute);
	run_stream_close(&run, &streams.agent);
	if (getppid() != pool) {
		/* the pool died (this SIGTERM was the parent-death signal): nobody ends its
		 * sessions, whose inits are no child of any process of the pool's that is left
		 * to kill them, and whose watchers died with it. The first worker to stop does */
		log_msg(LOG_WARN, "worker %d: the pool died; ending its sessions", wc->index);
		session_close_all(wc->sessions_fd);
	}
	log_msg(LOG_INFO, "worker %d stopping", wc->index);
	_exit(0);
}
