/*
 * worker.c - the accept loop, and the endpoints of ports 8080 (MCP's included) and 9090 in a
 * table (http.h) that hands port 8888's to agent.c.
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
#include "sessionfiles.h"
#include "sessionproto.h"
#include "tool.h"
#include "trace.h"
#include "slots.h"
#include "stream.h"
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

/* What a worker owns across requests: one run stream per port (run.h). */
struct worker_streams {
	struct run_stream execute; /* port 8080's runs, with a box built ahead for the next */
	struct run_stream agent;   /* port 8888's commands (another run config: the workspace) */
};

/* One request, as the worker's endpoints see it (their port argument, http.h). */
struct worker_request {
	const struct worker_config *wc;
	const struct run_config *run;
	struct worker_streams *streams;
	const char *endpoint;   /* CODEBOX_ENDPOINT */
	const char *request_id; /* CODEBOX_REQUEST_ID */
	struct limits l;        /* the request's, capped at the pool's ceilings (all but readyz) */
	struct session_limits sl; /* the sessions' bounds (all but readyz) */
};

/* A session's execution: where its init listens, and what of its box the worker needs. */
struct worker_session {
	int conn; /* connected to its init's socket */
	const struct run_session_box *sb;
	int op;            /* 0: code; SESSION_OP_SNAPSHOT or SESSION_OP_RESTORE (snapshots) */
	int blob_fd;       /* their memfd */
	unsigned blob_max; /* a snapshot's bound */
};

/* How long one write of an event stream may block (a client that stops reading). */
#define WORKER_SSE_SEND_TIMEOUT_S 10

/* The SSE writer's sinks into the FastCGI stream (stream.h) */
static int
worker_fcgx_put(void *ctx, const char *p, size_t n)
{
	FCGX_Request *req = ctx;

	return FCGX_PutStr(p, (int)n, req->out) == (int)n ? 0 : -1;
}

static void
worker_fcgx_flush(void *ctx)
{
	FCGX_Request *req = ctx;

	(void)FCGX_FFlush(req->out);
}

static void
worker_sse_output(void *ctx, int which, const char *p, size_t n)
{
	stream_sse_output(ctx, which, p, n);
}

/* A client's SSE writer when its Accept asks for one (else NULL through *on). */
static void
worker_sse_init(FCGX_Request *req, struct stream_sse *sse, const json_t *progress_token, bool *on)
{
	memset(sse, 0, sizeof(*sse));
	sse->put = worker_fcgx_put;
	sse->flush = worker_fcgx_flush;
	sse->ctx = req;
	sse->progress_token = progress_token;
	*on = stream_wanted(FCGX_GetParam("HTTP_ACCEPT", req->envp));
	if (*on) {
		/* a client that stops reading must not hold the worker (and so the run's deadline)
		 * in a write: past this, the stream is broken and the rest is not sent */
		struct timeval tv = {WORKER_SSE_SEND_TIMEOUT_S, 0};
		(void)setsockopt(req->ipcFd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	}
}

/* A text written as it is (an answer made before, as the SSE stream's last event). */
struct worker_raw {
	const char *text;
	size_t len;
};

static void
write_raw(struct jsonw *jw, const void *ctx)
{
	const struct worker_raw *r = ctx;

	jsonw_raw(jw, r->text, r->len);
}

/* An error answer: as JSON, or, once the SSE stream's head is out, as its last event. */
static void
worker_send_message(FCGX_Request *req, struct stream_sse *sse, int status, const char *extra_header,
                    const char *error, const char *message)
{
	if (sse != NULL && sse->started)
		stream_sse_error(sse, NULL, 0, error, message);
	else
		http_send_message(req, status, extra_header, error, message);
}

/* Port 8080's admission (serve.h): one of the pool's execution slots, which the pool, not
 * nginx, is the authority on: it knows what runs. */
static enum serve_ran
worker_slot_take(const void *ctx)
{
	const struct worker_request *w = ctx;

	switch (slots_acquire(w->wc->slots, w->wc->index, w->l.max_concurrent_executions)) {
	case SLOTS_TAKEN:
		return SERVE_RAN;
	case SLOTS_FULL:
		log_msg(LOG_INFO, "all %ld execution slots are in use: 429",
		        w->l.max_concurrent_executions);
		return SERVE_BUSY;
	case SLOTS_STUCK:
		break;
	}
	/* a bounded wait, not nginx's 504 much later: /readyz says the same meanwhile */
	log_msg(LOG_ERROR,
	        "the execution slots' lock was not free within %d ms: the pool cannot admit runs "
	        "(503)",
	        SLOTS_LOCK_WAIT_MS);
	return SERVE_STUCK;
}

static void
worker_slot_give(const void *ctx)
{
	const struct worker_request *w = ctx;

	slots_release(w->wc->slots, w->wc->index);
}

/* an event stream's head goes out once the run is admitted (stream.h) */
static void
worker_sse_admitted(void *ctx)
{
	stream_sse_start(ctx, NULL);
}

/*
 * Runs r for POST /execute, a session's execution and MCP's tools/call alike (serve_run()),
 * admitted by an execution slot, its output streamed to sse when not NULL. o is filled when
 * SERVE_RAN (run_outcome_free() it).
 */
static enum serve_ran
worker_run(const struct worker_request *w, FCGX_Request *req, const struct request *r,
           enum artifacts_want want, enum metrics_port port, const struct worker_session *ses,
           struct stream_sse *sse, struct run_outcome *o)
{
	const struct serve_admission admit = {worker_slot_take, worker_slot_give, w};
	/* port 8080's runs tell no exit code the program did not give */
	const struct serve_port p = {port, &w->wc->history, -1, -1, -1};
	struct serve_req q = {
	    .admit = &admit,
	    .run = w->run,
	    .stream = &w->streams->execute,
	    .session_conn = ses != NULL ? ses->conn : -1,
	    .sb = ses != NULL ? ses->sb : NULL,
	    .request_id = w->request_id,
	    .in_flight = true,
	};
	struct run_spec spec =
	    run_spec_from_limits(&w->l, r->code, r->code_len, r->wall_ms, req->ipcFd);

	if (sse != NULL) {
		/* admitted: the client hears the output as it comes (stream.h) */
		q.admitted = worker_sse_admitted;
		q.admitted_ctx = sse;
		spec.on_output = worker_sse_output;
		spec.output_ctx = sse;
	}
	spec.stdin_data = r->stdin_data;
	spec.stdin_len = r->stdin_len;
	spec.files = r->files;
	spec.files_len = r->files_len;
	spec.artifacts = want;
	spec.caps.heavy = w->run->warm && warm_wants_heavy(r->code, r->code_len);
	if (ses != NULL && ses->op != 0) {
		spec.session_op = ses->op;
		spec.session_blob_fd = ses->blob_fd;
		spec.session_blob_max = ses->blob_max;
	}
	return serve_run(&p, &q, &spec, o);
}

/* A run's answer on /execute, written twice by http_send_written() (counted, then streamed). */
struct execute_reply {
	const struct run_outcome *o;
	size_t max_result_bytes;
	bool details;
	const char *request_id;
	bool artifacts;
};

static void
write_execute_reply(struct jsonw *jw, const void *ctx)
{
	const struct execute_reply *e = ctx;

	reply_outcome_write(jw, e->o, e->max_result_bytes, e->details, e->request_id, e->artifacts);
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

/* A session that is not there (or not the caller's): one answer for all the cases. */
#define WORKER_SESSION_UNKNOWN                                                                     \
	"no such session: it was never made, it ended (closed, idle or too old, or its program "   \
	"was killed, or its server stopped), or it is another token's"

/* A session whose init was killed from outside while its execution ran: as /execute's run, not
 * the program's doing, nor an unknown session's 404 (the client could not tell whether its
 * code ran); the session ended with it. */
#define WORKER_SESSION_LOST                                                                        \
	"the session's sandbox was killed from outside while the execution ran; the session has "  \
	"ended: start a new one and retry"

/*
 * Answers what worker_run() came to, for /execute and a session's execution alike: the reply
 * (write(ctx)) as JSON or as the SSE stream's last event, or the error (an event too once the
 * stream's head is out).
 */
static void
worker_answer(FCGX_Request *req, enum serve_ran ran, struct stream_sse *sse,
              void (*write)(struct jsonw *w, const void *ctx), const void *ctx, bool session)
{
	switch (ran) {
	case SERVE_RAN:
		if (sse != NULL && sse->started)
			stream_sse_end(sse, write, ctx);
		else if (http_send_written(req, write, ctx) < 0)
			http_send_message(req, 500, NULL, "sandbox_error",
			                  "the worker is out of memory");
		break;
	case SERVE_BUSY:
		http_send_message(req, 429, HTTP_BUSY_POOL, "sandbox_busy",
		                  "all execution slots are in use; retry shortly");
		break;
	case SERVE_STUCK:
		http_send_message(req, 503, NULL, "sandbox_unavailable",
		                  "the sandbox cannot admit runs right now; retry shortly");
		break;
	case SERVE_GONE: /* the session ended before it took the execution: it never ran */
		worker_send_message(req, sse, 404, NULL, "not_found", WORKER_SESSION_UNKNOWN);
		break;
	case SERVE_LOST: /* not the program's doing: a new sandbox would run it */
		worker_send_message(req, sse, 503, NULL, "sandbox_unavailable",
		                    session ? WORKER_SESSION_LOST
		                            : "the run's sandbox was killed from outside; retry");
		break;
	case SERVE_SESSION_BUSY:
		worker_send_message(req, sse, 409, NULL, "session_busy",
		                    "the session is still stopping its last execution; retry in a "
		                    "moment");
		break;
	case SERVE_FAILED:
		worker_send_message(req, sse, 500, NULL, "sandbox_error",
		                    "the sandbox could not run the program; see the service log");
		break;
	case SERVE_ABANDONED:
		break;
	}
}

/* POST /execute: a request (request.h) admitted, run and answered (reply.h). */
static void
worker_execute(void *port, FCGX_Request *req)
{
	const struct worker_request *w = port;
	const struct worker_config *wc = w->wc;
	const struct limits *l = &w->l;
	struct request r;
	struct run_outcome o;
	struct stream_sse sse;
	enum serve_ran ran;
	bool streamed;
	char message[256];
	char *body = NULL;
	long n;

	/* the same bound and message as nginx's client_max_body_size (check-config.sh) */
	n = http_read_body(req, wc->max_body_bytes, &body);
	if (n == HTTP_BODY_TOO_LARGE) {
		char msg[128];
		snprintf(msg, sizeof(msg),
		         "the request body is larger than this server accepts (at most %zu bytes)",
		         wc->max_body_bytes);
		http_send_message(req, 413, NULL, "request_too_large", msg);
		return;
	}
	if (n < 0) {
		log_msg(LOG_WARN, "reading the request body failed");
		http_send_message(req, 400, NULL, "invalid_request",
		                  "the request body could not be read");
		return;
	}
	if (request_parse(&r, body, (size_t)n, l, message, sizeof(message)) < 0) {
		free(body);
		log_msg(LOG_INFO, "rejected: %s", message);
		http_send_message(req, 400, NULL, "invalid_request", message);
		return;
	}
	free(body);
	if (http_client_gone(req)) {
		/* it waited in the socket's backlog while its client left: nobody wants it */
		log_msg(LOG_INFO, "the client left before the run started; not running it");
		request_free(&r);
		return;
	}
	worker_sse_init(req, &sse, NULL, &streamed);
	ran = worker_run(w, req, &r, r.artifacts ? ARTIFACTS_ALL : ARTIFACTS_NONE,
	                 METRICS_PORT_EXECUTE, NULL, streamed ? &sse : NULL, &o);
	{
		const struct execute_reply er = {&o, l->max_result_bytes, r.details, w->request_id,
		                                 r.artifacts};
		worker_answer(req, ran, streamed ? &sse : NULL, write_execute_reply, &er, false);
	}
	if (ran == SERVE_RAN)
		run_outcome_free(&o);
	request_free(&r);
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

/* ---- sessions (session.h): POST /sessions, GET and DELETE /sessions/{id},
 * POST /sessions/{id}/execute ---- */

static void
worker_session_unknown(FCGX_Request *req)
{
	http_send_message(req, 404, NULL, "not_found", WORKER_SESSION_UNKNOWN);
}

/* A session's answer, written twice (http_send_written()). */
struct session_reply {
	const struct run_outcome *o;
	size_t max_result_bytes;
	bool details;
	const char *request_id;
	bool artifacts;
	const char *id;
};

static void
write_session_reply(struct jsonw *jw, const void *ctx)
{
	const struct session_reply *e = ctx;

	reply_session_outcome_write(jw, e->o, e->max_result_bytes, e->details, e->request_id,
	                            e->artifacts, e->id);
}

/* The session's state and bounds, as GET answers them, into jw; with restored (a restore's
 * 201), what it loaded. */
static void
worker_session_state_write(struct jsonw *jw, const struct session_rec *rec,
                           const struct session_answer *a, bool busy, const struct limits *l,
                           const char *restored)
{
	jsonw_lit(jw, "{\"id\":");
	jsonw_cstr(jw, rec->id);
	jsonw_lit(jw, ",\"state\":");
	jsonw_cstr(jw, busy ? "busy" : "idle");
	jsonw_lit(jw, ",\"executions\":");
	jsonw_int(jw, a ? (long long)a->executions : 0);
	jsonw_lit(jw, ",\"ageSeconds\":");
	/* its age since it was made, across restarts (each a new box, which counts from 0) */
	jsonw_int(jw, ((a ? a->age_ms : 0) + rec->age_before_ms) / 1000);
	jsonw_lit(jw, ",\"idleSeconds\":");
	jsonw_int(jw, a ? a->idle_ms / 1000 : 0);
	jsonw_lit(jw, ",\"idleTimeoutSeconds\":");
	jsonw_int(jw, rec->idle_seconds);
	jsonw_lit(jw, ",\"maxLifetimeSeconds\":");
	jsonw_int(jw, rec->life_seconds);
	jsonw_lit(jw, ",\"timeoutSeconds\":");
	jsonw_int(jw, l->execution_timeout_seconds);
	jsonw_lit(jw, ",\"memoryBytes\":");
	jsonw_int(jw, (long long)rec->memory_bytes);
	jsonw_lit(jw, ",\"diskBytes\":");
	jsonw_int(jw, (long long)rec->disk_bytes);
	if (restored != NULL) {
		/* what a restore loaded (worker_blob_summary(): checked JSON) */
		jsonw_lit(jw, ",\"restored\":");
		jsonw_raw(jw, restored, strlen(restored));
	}
	jsonw_lit(jw, "}");
}

/* The session's state and bounds, as GET answers and POST /sessions' 201 says. */
static void
worker_session_state(FCGX_Request *req, int status, const struct session_rec *rec,
                     const struct session_answer *a, bool busy, const struct limits *l,
                     const char *restored)
{
	struct jsonw jw;
	size_t len;
	char *doc;

	jsonw_init(&jw);
	worker_session_state_write(&jw, rec, a, busy, l, restored);
	doc = jsonw_take(&jw, &len);
	if (doc == NULL) {
		http_send_message(req, 500, NULL, "sandbox_error", "the worker is out of memory");
		return;
	}
	http_send(req, status, NULL, doc, len);
	free(doc);
}

/* A bound from POST /sessions' body: absent (the pod's), or an integer from 1 to max. */
static int
session_body_bound(json_t *root, const char *key, long max, unsigned *out, char *why,
                   size_t why_len)
{
	json_t *v = json_object_get(root, key);

	*out = (unsigned)max;
	if (v == NULL)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > max) {
		snprintf(why, why_len, "%s must be an integer from 1 to %ld", key, max);
		return -1;
	}
	*out = (unsigned)json_integer_value(v);
	return 0;
}

/* POST /sessions' "memoryBytes": an integer from 16 MiB to the runs' own cap max, into *out
 * (absent: 0, the runs' own). Returns 0, or -1 with why. */
static int
worker_session_memory(json_t *root, unsigned long long max, unsigned long long *out, char *why,
                      size_t why_len)
{
	const unsigned long long min = 16ULL << 20;
	json_t *v = json_object_get(root, "memoryBytes");

	*out = 0;
	if (v == NULL)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < (json_int_t)min ||
	    (unsigned long long)json_integer_value(v) > max) {
		snprintf(why, why_len, "memoryBytes must be an integer from %llu to %llu", min,
		         max);
		return -1;
	}
	*out = (unsigned long long)json_integer_value(v);
	return 0;
}

/* Whether this pool serves sessions (for this request's bounds). */
static bool
worker_sessions_on(const struct worker_request *w)
{
	/* a session's files must be out of every other's reach: its own mount namespace */
	return w->wc->sessions_fd >= 0 && w->sl.max_sessions > 0 && w->run->warm &&
	       (w->run->clone_flags & CLONE_NEWNS);
}

/* What came of starting a session (worker_session_start()). */
enum worker_started {
	WORKER_STARTED,
	WORKER_START_OFF,      /* sessions are off here: 503 */
	WORKER_START_BUSY,     /* no execution slot: 429 */
	WORKER_START_STUCK,    /* the slots' lock: 503 */
	WORKER_START_FULL,     /* the pod holds CODEBOX_MAX_SESSIONS: 429 */
	WORKER_START_TENANT,   /* the token holds CODEBOX_MAX_SESSIONS_PER_TOKEN: 429 */
	WORKER_START_MEMORY,   /* the sessions' memory caps would exceed the pool's budget: 429 */
	WORKER_START_DRAINING, /* the pod is draining (SIGUSR1): 429, another pod takes it */
	WORKER_START_FAILED,   /* 503, logged */
};

/* Starts a session with the bounds idle and life and a memory cap of memory_bytes (0: the
 * runs' own), bound to auth (the token's id, or NULL), into rec. Building its box is a run's
 * start: it holds an execution slot meanwhile. */
static enum worker_started
worker_session_start(const struct worker_request *w, unsigned idle, unsigned life,
                     unsigned long long memory_bytes, const char *auth, struct session_rec *rec)
{
	const struct worker_config *wc = w->wc;
	char why[512], path[128];
	struct run_spec spec;
	struct run_config scfg;
	int listen_fd, rc;
	const struct session_ask ask = {
	    .max = w->sl.max_sessions,
	    .per_token = w->sl.max_per_token,
	    .auth = auth,
	    .uids = &wc->session_uids,
	    .memory_bytes = memory_bytes > 0 ? memory_bytes : w->l.memory_bytes,
	    .budget_bytes = wc->iso->on[ISO_POOLMEMORY] ? wc->iso->pool_memory_bytes : 0,
	    .ordinal = wc->pod_ordinal};

	if (!worker_sessions_on(w))
		return WORKER_START_OFF;
	/* its sessions go on answering; new ones are another pod's (the router retries a 429) */
	if (session_draining(wc->sessions_fd))
		return WORKER_START_DRAINING;
	switch (slots_acquire(wc->slots, wc->index, w->l.max_concurrent_executions)) {
	case SLOTS_TAKEN:
		break;
	case SLOTS_FULL:
		metrics_record_busy();
		return WORKER_START_BUSY;
	case SLOTS_STUCK:
		return WORKER_START_STUCK;
	}
	why[0] = '\0';
	rc = session_reserve(wc->sessions_fd, &ask, rec, &listen_fd, why, sizeof(why));
	if (rc != 0) {
		slots_release(wc->slots, wc->index);
		if (rc < 0)
			log_msg(LOG_ERROR, "session: %s", why);
		else if (why[0] != '\0' && wc->session_uids.count < (uint32_t)w->sl.max_sessions)
			log_msg(LOG_WARN, "session refused: %s", why); /* the operator's to fix */
		return rc == SESSION_FULL          ? WORKER_START_FULL
		       : rc == SESSION_FULL_TENANT ? WORKER_START_TENANT
		       : rc == SESSION_FULL_MEMORY ? WORKER_START_MEMORY
		                                   : WORKER_START_FAILED;
	}
	/* its box, directory, tmpfs and cells under its own host uid (a root pool's) */
	scfg = *w->run;
	if (rec->uid != 0) {
		scfg.run_uid = rec->uid;
		scfg.run_gid = (gid_t)rec->uid;
	}
	spec = run_spec_from_limits(&w->l, "", 0, w->l.execution_timeout_seconds * 1000L, -1);
	spec.caps.memory_bytes = ask.memory_bytes;
	spec.session = true;
	/* a session outlives many imports: the heavy tier's template has them all (the light
	 * one takes it when the heavy one cannot) */
	spec.caps.heavy = true;
	spec.session_idle_seconds = idle;
	spec.session_life_seconds = life;
	rec->idle_seconds = idle;
	rec->life_seconds = life;
	rec->disk_bytes = w->l.disk_bytes;
	session_sock_path(wc->sessions_fd, rec->id, path, sizeof(path));
	rc = run_session_create(&scfg, &spec, listen_fd, path, wc->sessions_fd, wc->sessions_dir,
	                        &rec->sb, why, sizeof(why));
	close(listen_fd);
	slots_release(wc->slots, wc->index);
	if (rc == 0 && session_commit(wc->sessions_fd, rec) < 0) {
		struct session_answer a;
		(void)run_session_ask(path, SESSION_OP_CLOSE, &a);
		snprintf(why, sizeof(why), "writing its record: %s", strerror(errno));
		rc = -1;
	}
	if (rc < 0) {
		session_remove(wc->sessions_fd, rec, METRICS_SESSION_NOT_MADE);
		log_msg(LOG_ERROR, "session: %s", why);
		return WORKER_START_FAILED;
	}
	session_log_name(rec->id, why);
	log_msg(LOG_INFO, "session %s made (idle %u s, life %u s)", why, idle, life);
	metrics_session_made();
	return WORKER_STARTED;
}

/* The sentence for a session that could not start; its HTTP status in *status and, for a 429,
 * its headers in *extra (which bound refused: Codebox-Busy), else NULL. */
static const char *
worker_start_message(enum worker_started st, int *status, const char **error, const char **extra)
{
	*error = "sandbox_unavailable";
	*status = 503;
	*extra = NULL;
	switch (st) {
	case WORKER_STARTED:
		return "";
	case WORKER_START_OFF:
		return "sessions are off on this server (they need warm interpreters and "
		       "CODEBOX_MAX_SESSIONS above 0)";
	case WORKER_START_BUSY:
		*status = 429;
		*error = "sandbox_busy";
		*extra = HTTP_BUSY_POOL;
		return "all execution slots are in use; retry shortly";
	case WORKER_START_STUCK:
		return "the sandbox cannot admit runs right now; retry shortly";
	case WORKER_START_FULL:
		*status = 429;
		*error = "sandbox_busy";
		*extra = HTTP_BUSY_SESSIONS;
		return "this server holds as many sessions as it may; close one (DELETE "
		       "/sessions/{id}) or retry later";
	case WORKER_START_TENANT:
		*status = 429;
		*error = "sandbox_busy";
		*extra = HTTP_BUSY_TENANT;
		return "this token holds as many sessions as one token may on this server; close "
		       "one of them (DELETE /sessions/{id}) first";
	case WORKER_START_MEMORY:
		*status = 429;
		*error = "sandbox_busy";
		*extra = HTTP_BUSY_MEMORY;
		return "the open sessions hold the server's memory budget; close one, ask for less "
		       "(memoryBytes), or retry later";
	case WORKER_START_DRAINING:
		*status = 429;
		*error = "sandbox_busy";
		*extra = HTTP_BUSY_DRAINING;
		return "this server is draining: it makes no new session (its open sessions go on "
		       "until it stops); retry, and another server takes it";
	case WORKER_START_FAILED:
		break;
	}
	return "the session could not be started; retry shortly";
}

/* ---- snapshots (snapshot.h): POST /sessions/{id}/snapshot, and POST /sessions' restore ---- */

/* A snapshot's bound for a session of memory_bytes: CODEBOX_SNAPSHOT_MAX_BYTES, and never
 * more than its memory (which holds its state, and the memfd the program writes). */
static size_t
worker_snapshot_max(const struct worker_request *w, unsigned long long memory_bytes)
{
	unsigned long long max = (unsigned long long)w->sl.snapshot_max_bytes;

	return (size_t)(memory_bytes > 0 && memory_bytes < max ? memory_bytes : max);
}

/* A session's snapshot or restore (op), run as worker_run() runs a cell: no code, its memfd
 * blob_fd as the program's fd 0, the session's execution timeout as its deadline. */
static enum serve_ran
worker_session_blob(const struct worker_request *w, FCGX_Request *req,
                    const struct session_rec *rec, int op, int blob_fd, size_t blob_max,
                    struct run_outcome *o)
{
	struct request r = {
	    .code = "", .stdin_data = "", .wall_ms = w->l.execution_timeout_seconds * 1000L};
	struct worker_session ses = {.conn = -1,
	                             .sb = &rec->sb,
	                             .op = op,
	                             .blob_fd = blob_fd,
	                             .blob_max = (unsigned)blob_max};
	char path[128];
	enum serve_ran ran;

	session_sock_path(w->wc->sessions_fd, rec->id, path, sizeof(path));
	ses.conn = run_session_connect(path);
	if (ses.conn < 0)
		return SERVE_GONE;
	ran = worker_run(w, req, &r, ARTIFACTS_NONE, METRICS_PORT_EXECUTE, &ses, NULL, o);
	close(ses.conn);
	return ran;
}

/* Why a snapshot or a restore was not made: an HTTP status (0: the client left, no answer),
 * its error and sentence; a tool error's text over MCP. */
struct worker_refusal {
	int status;
	const char *error;
	const char *extra_header;
	char message[512];
};

static void
worker_refuse(struct worker_refusal *f, int status, const char *error, const char *message)
{
	f->status = status;
	f->error = error;
	f->extra_header = status == 429 ? HTTP_BUSY_POOL : NULL;
	snprintf(f->message, sizeof(f->message), "%s", message);
}

static void
worker_refusal_send(FCGX_Request *req, const struct worker_refusal *f)
{
	if (f->status != 0)
		http_send_message(req, f->status, f->extra_header, f->error, f->message);
}

/* A cell that came to no outcome (ran), as a refusal. */
static void
worker_refuse_not_run(struct worker_refusal *f, enum serve_ran ran)
{
	switch (ran) {
	case SERVE_BUSY:
		worker_refuse(f, 429, "sandbox_busy",
		              "all execution slots are in use; retry shortly");
		return;
	case SERVE_STUCK:
		worker_refuse(f, 503, "sandbox_unavailable",
		              "the sandbox cannot admit runs right now; retry shortly");
		return;
	case SERVE_GONE:
		worker_refuse(f, 404, "not_found", WORKER_SESSION_UNKNOWN);
		return;
	case SERVE_LOST:
		worker_refuse(f, 503, "sandbox_unavailable", WORKER_SESSION_LOST);
		return;
	case SERVE_SESSION_BUSY:
		worker_refuse(
		    f, 409, "session_busy",
		    "the session is still stopping its last execution; retry in a moment");
		return;
	case SERVE_ABANDONED:
		f->status = 0;
		return;
	case SERVE_RAN:
	case SERVE_FAILED:
		break;
	}
	worker_refuse(f, 500, "sandbox_error", "the sandbox could not run it; see the service log");
}

/*
 * What a snapshot's or a restore's cell (what: "snapshot", "restore") came to: 0 with its
 * summary (the program's JSON object, untrusted: parsed, and only as members of the answer's
 * object; free() it) in *members, or -1 with the refusal in f. *over: the session ended.
 */
static int
worker_blob_outcome(enum serve_ran ran, const struct run_outcome *o, const char *what,
                    long timeout_s, char **members, bool *over, struct worker_refusal *f)
{
	json_error_t err;
	json_t *sum = NULL;
	const char *said = NULL;
	char message[512];
	bool snap = strcmp(what, "snapshot") == 0;

	*members = NULL;
	*over = ran == SERVE_RAN && o->session_over;
	if (ran != SERVE_RAN) {
		worker_refuse_not_run(f, ran);
		return -1;
	}
	if (o->has_value)
		sum = json_loadb(o->value, o->value_len, JSON_REJECT_DUPLICATES, &err);
	if (json_is_object(sum))
		said = json_string_value(json_object_get(sum, "error"));
	if (o->session_over) {
		snprintf(message, sizeof(message),
		         "the session ended while its %s ran (%s): its state is gone", what,
		         o->limit_exceeded != RUN_LIMIT_NONE ? run_limit_string(o->limit_exceeded)
		                                             : "killed");
		worker_refuse(f, 503, "sandbox_unavailable", message);
	} else if (o->status == RUN_TIMED_OUT) {
		snprintf(
		    message, sizeof(message),
		    "the %s did not finish within %ld s (the session's timeoutSeconds) and was "
		    "interrupted; the session lives on",
		    what, timeout_s);
		worker_refuse(f, 504, "timed_out", message);
	} else if (o->exit_code == 2 && snap) {
		worker_refuse(f, 413, "snapshot_too_large",
		              said ? said : "the session is larger than the snapshot bound");
	} else if (o->exit_code != 0 || !json_is_object(sum)) {
		snprintf(message, sizeof(message), "the %s failed: %s", what,
		         said ? said : "the session's program gave no account of it");
		worker_refuse(f, 422, snap ? "snapshot_failed" : "restore_failed", message);
	} else {
		/* the answer's own keys are the worker's */
		json_object_del(sum, "snapshot");
		json_object_del(sum, "bytes");
		json_object_del(sum, "payloadBytes");
		*members = json_dumps(sum, JSON_COMPACT);
		json_decref(sum);
		if (*members == NULL) {
			worker_refuse(f, 500, "sandbox_error", "the worker is out of memory");
			return -1;
		}
		return 0;
	}
	json_decref(sum);
	return -1;
}

/* A snapshot taken (worker_snapshot_take()): {"snapshot", "bytes", the summary's members}. */
struct snapshot_reply {
	char *b64;
	size_t b64_len;
	size_t bytes;
	char *members; /* a JSON object's text, "{...}" */
	char uri[96];  /* MCP's resource's */
};

static void
write_snapshot_reply(struct jsonw *jw, const void *ctx)
{
	const struct snapshot_reply *e = ctx;
	size_t n = strlen(e->members);

	jsonw_lit(jw, "{\"snapshot\":\"");
	jsonw_raw(jw, e->b64, e->b64_len); /* base64: nothing to escape */
	jsonw_lit(jw, "\",\"bytes\":");
	jsonw_int(jw, (long long)e->bytes);
	if (n > 2) {
		jsonw_lit(jw, ",");
		jsonw_raw(jw, e->members + 1, n - 2);
	}
	jsonw_lit(jw, "}");
}

/* The memfd's bytes, at most max + 1 of them whatever its size says (the program wrote it):
 * NULL when out of memory or unreadable. */
static unsigned char *
worker_blob_read(int fd, size_t max, size_t *len)
{
	struct stat st;
	size_t want = max + 1;
	unsigned char *buf;
	ssize_t r;

	if (fstat(fd, &st) == 0 && (unsigned long long)st.st_size < want)
		want = (size_t)st.st_size;
	buf = malloc(want + 1);
	if (buf == NULL || lseek(fd, 0, SEEK_SET) < 0) {
		free(buf);
		return NULL;
	}
	r = util_read_max(fd, (char *)buf, want);
	if (r < 0) {
		free(buf);
		return NULL;
	}
	*len = (size_t)r;
	return buf;
}

/* The memfd's payload sealed into sr (snapshot.h); 0, or -1 with the refusal in f. */
static int
worker_snapshot_seal(const struct worker_request *w, int fd, size_t max, struct snapshot_reply *sr,
                     struct worker_refusal *f)
{
	size_t len = 0;
	unsigned char *payload = worker_blob_read(fd, max, &len);
	char message[256];

	if (payload != NULL && len > max) {
		free(payload);
		snprintf(message, sizeof(message),
		         "the session is larger than the snapshot bound of %zu bytes", max);
		worker_refuse(f, 413, "snapshot_too_large", message);
		return -1;
	}
	if (payload != NULL && len > 0)
		sr->b64 = snapshot_seal(&w->wc->snapshot_key, w->wc->probe->python_version, payload,
		                        len, &sr->b64_len);
	free(payload);
	if (sr->b64 == NULL) {
		log_msg(LOG_ERROR, "snapshot: %s",
		        payload != NULL && len == 0 ? "the session's program wrote nothing"
		                                    : "out of memory, or its memfd unreadable");
		worker_refuse(f, 500, "sandbox_error",
		              "the snapshot could not be made; see the service log");
		return -1;
	}
	sr->bytes = len;
	return 0;
}

/*
 * A snapshot of session rec (its lock held): its state, serialized by its own interpreter into
 * a memfd, read within the bound, sealed (snapshot.h): 0 with sr filled (free its b64 and
 * members), or -1 with the refusal in f (the session removed if it ended meanwhile).
 */
static int
worker_snapshot_take(const struct worker_request *w, FCGX_Request *req, struct session_rec *rec,
                     struct snapshot_reply *sr, struct worker_refusal *f)
{
	size_t max = worker_snapshot_max(w, rec->memory_bytes);
	char name[SESSION_LOG_NAME_LEN + 1];
	struct run_outcome o;
	enum serve_ran ran;
	bool over = false;
	int fd, rc = -1;

	memset(sr, 0, sizeof(*sr));
	fd = memfd_create("codebox-snapshot", MFD_CLOEXEC);
	if (fd < 0) {
		log_msg(LOG_ERROR, "snapshot: memfd_create() failed: %s", strerror(errno));
		worker_refuse(f, 503, "sandbox_unavailable",
		              "the snapshot could not be made; retry shortly");
		return -1;
	}
	ran = worker_session_blob(w, req, rec, SESSION_OP_SNAPSHOT, fd, max, &o);
	session_log_name(rec->id, name);
	if (worker_blob_outcome(ran, &o, "snapshot", w->l.execution_timeout_seconds, &sr->members,
	                        &over, f) == 0 &&
	    worker_snapshot_seal(w, fd, max, sr, f) == 0) {
		log_msg(LOG_INFO, "session %s: a snapshot of %zu bytes taken in %lld ms", name,
		        sr->bytes, o.duration_ms);
		metrics_session_snapshot();
		rc = 0;
	}
	if (over)
		session_remove(w->wc->sessions_fd, rec, METRICS_SESSION_KILLED);
	if (ran == SERVE_RAN)
		run_outcome_free(&o);
	close(fd);
	if (rc < 0) {
		free(sr->members);
		sr->members = NULL;
	}
	return rc;
}

/* POST /sessions/{id}/snapshot (its lock held): worker_snapshot_take(), answered. */
static void
worker_session_snapshot(const struct worker_request *w, FCGX_Request *req, struct session_rec *rec)
{
	char *body = NULL;
	long n = http_read_body(req, 4096, &body);
	struct snapshot_reply sr;
	struct worker_refusal f;

	free(body);
	if (n < 0) {
		http_send_message(req, n == HTTP_BODY_TOO_LARGE ? 413 : 400, NULL,
		                  n == HTTP_BODY_TOO_LARGE ? "request_too_large"
		                                           : "invalid_request",
		                  "POST /sessions/{id}/snapshot takes no body (or an empty one)");
		return;
	}
	if (worker_snapshot_take(w, req, rec, &sr, &f) < 0) {
		worker_refusal_send(req, &f);
		return;
	}
	if (http_send_written(req, write_snapshot_reply, &sr) < 0)
		http_send_message(req, 500, NULL, "sandbox_error", "the worker is out of memory");
	free(sr.b64);
	free(sr.members);
}

/* A memfd of p[0..n), sealed: the restore's program can only read it. -1 on failure. */
static int
worker_blob_memfd(const unsigned char *p, size_t n)
{
	int fd = memfd_create("codebox-restore", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return -1;
	if (util_write_all(fd, p, n) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * A new session (rec, just made: no one knows its id) loads payload, a checked snapshot:
 * 0 with the restore's summary (free() it) in *members, or -1 answered, the session closed
 * and removed (nothing of it left).
 */
static int
worker_session_restore(const struct worker_request *w, FCGX_Request *req, struct session_rec *rec,
                       const char *auth, const unsigned char *payload, size_t len, char **members)
{
	struct session_answer a;
	struct run_outcome o;
	enum serve_ran ran = SERVE_FAILED;
	char path[128], name[SESSION_LOG_NAME_LEN + 1];
	int fd = worker_blob_memfd(payload, len), lock_fd = -1, rc;
	bool over = false;
	struct worker_refusal f;

	*members = NULL;
	if (fd < 0)
		log_msg(LOG_ERROR, "restore: the snapshot's memfd: %s", strerror(errno));
	else if (session_find(w->wc->sessions_fd, rec->id, auth, rec, true, &lock_fd) < 0 ||
	         lock_fd < 0)
		ran = SERVE_GONE;
	else
		ran = worker_session_blob(w, req, rec, SESSION_OP_RESTORE, fd, 0, &o);
	if (fd >= 0)
		close(fd);
	rc = worker_blob_outcome(ran, &o, "restore", w->l.execution_timeout_seconds, members, &over,
	                         &f);
	if (rc < 0)
		worker_refusal_send(req, &f);
	if (ran == SERVE_RAN)
		run_outcome_free(&o);
	session_log_name(rec->id, name);
	if (rc < 0) {
		/* nothing of a failed restore stays: its session is closed and removed */
		session_sock_path(w->wc->sessions_fd, rec->id, path, sizeof(path));
		(void)run_session_ask(path, SESSION_OP_CLOSE, &a);
		if (lock_fd >= 0 || over)
			session_remove(w->wc->sessions_fd, rec, METRICS_SESSION_FAILED);
		log_msg(LOG_INFO, "session %s closed: its restore failed", name);
	} else {
		log_msg(LOG_INFO, "session %s restored from a snapshot of %zu bytes", name, len);
	}
	if (lock_fd >= 0)
		close(lock_fd);
	return rc;
}

/* POST /sessions' "snapshot": checked whole (snapshot_open()) before anything is made; 0 with
 * its payload (free() it), or -1 answered (400, 413, 422). */
static int
worker_snapshot_check(const struct worker_request *w, FCGX_Request *req, json_t *snap, size_t max,
                      unsigned char **payload, size_t *len)
{
	char why[512];
	enum snapshot_check c;

	*payload = NULL;
	if (!json_is_string(snap)) {
		http_send_message(req, 400, NULL, "invalid_snapshot",
		                  "snapshot must be a string: the base64 a POST "
		                  "/sessions/{id}/snapshot answered");
		return -1;
	}
	c = snapshot_open(&w->wc->snapshot_key, w->wc->probe->python_version,
	                  json_string_value(snap), json_string_length(snap), max, payload, len, why,
	                  sizeof(why));
	switch (c) {
	case SNAPSHOT_OK:
		return 0;
	case SNAPSHOT_MALFORMED:
		http_send_message(req, 400, NULL, "invalid_snapshot", why);
		break;
	case SNAPSHOT_TOO_LARGE:
		http_send_message(req, 413, NULL, "snapshot_too_large", why);
		break;
	case SNAPSHOT_VERSION_MISMATCH:
	case SNAPSHOT_FORGED:
		http_send_message(req, 422, NULL, "snapshot_rejected", why);
		break;
	case SNAPSHOT_NO_MEMORY:
		http_send_message(req, 503, NULL, "sandbox_unavailable",
		                  "the worker is out of memory; retry shortly");
		break;
	}
	log_msg(LOG_INFO, "restore refused: %s", why);
	return -1;
}

/* POST /sessions' body: its bounds (the pod's when absent) and, for a restore, its snapshot
 * checked whole (*payload; NULL: none). Returns 0, or -1 answered. */
static int
worker_session_create_body(const struct worker_request *w, FCGX_Request *req, unsigned *idle,
                           unsigned *life, unsigned long long *memory, unsigned char **payload,
                           size_t *len)
{
	/* a restore's body holds a snapshot of the bound, as base64 */
	size_t max_body = 4096 + snapshot_b64_max((size_t)w->sl.snapshot_max_bytes);
	char *body = NULL, why[512];
	long n = http_read_body(req, max_body, &body);
	json_t *root = NULL, *snap;
	json_error_t err;
	const char *key;
	json_t *v;

	*payload = NULL;
	if (n < 0) {
		snprintf(why, sizeof(why),
		         "the body of POST /sessions is at most %zu bytes of JSON (a snapshot of "
		         "CODEBOX_SNAPSHOT_MAX_BYTES, %ld bytes, as base64)",
		         max_body, w->sl.snapshot_max_bytes);
		http_send_message(
		    req, n == HTTP_BODY_TOO_LARGE ? 413 : 400, NULL,
		    n == HTTP_BODY_TOO_LARGE ? "request_too_large" : "invalid_request", why);
		return -1;
	}
	root = n > 0 ? json_loadb(body, (size_t)n, JSON_REJECT_DUPLICATES, &err) : json_object();
	free(body);
	if (root == NULL || !json_is_object(root)) {
		json_decref(root);
		http_send_message(req, 400, NULL, "invalid_request",
		                  "the body must be a JSON object (or empty)");
		return -1;
	}
	json_object_foreach(root, key, v)
	{
		if (strcmp(key, "idleTimeoutSeconds") != 0 &&
		    strcmp(key, "maxLifetimeSeconds") != 0 && strcmp(key, "memoryBytes") != 0 &&
		    strcmp(key, "snapshot") != 0) {
			json_decref(root);
			http_send_message(req, 400, NULL, "invalid_request",
			                  "unknown field; allowed: idleTimeoutSeconds, "
			                  "maxLifetimeSeconds, memoryBytes, snapshot");
			return -1;
		}
	}
	if (session_body_bound(root, "idleTimeoutSeconds", w->sl.idle_seconds, idle, why,
	                       sizeof(why)) < 0 ||
	    session_body_bound(root, "maxLifetimeSeconds", w->sl.max_life_seconds, life, why,
	                       sizeof(why)) < 0 ||
	    worker_session_memory(root, w->l.memory_bytes, memory, why, sizeof(why)) < 0) {
		json_decref(root);
		http_send_message(req, 400, NULL, "invalid_request", why);
		return -1;
	}
	snap = json_object_get(root, "snapshot");
	if (snap != NULL &&
	    worker_snapshot_check(w, req, snap,
	                          worker_snapshot_max(w, *memory ? *memory : w->l.memory_bytes),
	                          payload, len) < 0) {
		json_decref(root);
		return -1;
	}
	json_decref(root);
	return 0;
}

static void
worker_session_create(const struct worker_request *w, FCGX_Request *req, const char *auth)
{
	unsigned idle, life;
	unsigned long long memory;
	unsigned char *payload = NULL;
	size_t len = 0;
	char *restored = NULL;
	struct session_rec rec;
	enum worker_started st;
	const char *message, *error, *extra;
	int status;

	if (worker_session_create_body(w, req, &idle, &life, &memory, &payload, &len) < 0)
		return;
	st = worker_session_start(w, idle, life, memory, auth, &rec);
	if (st != WORKER_STARTED) {
		free(payload);
		message = worker_start_message(st, &status, &error, &extra);
		http_send_message(req, status, extra, error, message);
		return;
	}
	if (payload != NULL) {
		int rc = worker_session_restore(w, req, &rec, auth, payload, len, &restored);
		free(payload);
		if (rc < 0)
			return;
	}
	if (restored != NULL)
		metrics_session_restored();
	worker_session_state(req, 201, &rec, NULL, false, &w->l, restored);
	free(restored);
}

/*
 * POST /sessions/{id}/execute's body, with what /execute does not take out of it: "background"
 * (a boolean) into *background, and then its "timeoutSeconds" (up to the background bound)
 * into *wall_ms. *body and *n are replaced by the rest. Returns 0, or -1 with why.
 */
static int
worker_session_body(char **body, long *n, const struct session_limits *sl, bool *background,
                    long *wall_ms, char *why, size_t why_len)
{
	json_error_t err;
	json_t *root = json_loadb(*body, (size_t)*n, JSON_REJECT_DUPLICATES, &err), *b, *t;
	char *rest;

	*background = false;
	*wall_ms = sl->max_execution_seconds * 1000;
	b = json_is_object(root) ? json_object_get(root, "background") : NULL;
	if (b == NULL) {
		json_decref(root); /* request_parse() judges the body as /execute's */
		return 0;
	}
	if (!json_is_boolean(b)) {
		json_decref(root);
		snprintf(why, why_len, "background must be a boolean");
		return -1;
	}
	*background = json_is_true(b);
	t = json_object_get(root, "timeoutSeconds");
	if (*background && t != NULL) {
		double v = json_number_value(t);
		if (!json_is_number(t) || v <= 0 || v > (double)sl->max_execution_seconds) {
			json_decref(root);
			snprintf(
			    why, why_len,
			    "timeoutSeconds of a background execution must be a number above 0 "
			    "and at most %ld",
			    sl->max_execution_seconds);
			return -1;
		}
		*wall_ms = (long)(v * 1000.0 + 0.999);
		json_object_del(root, "timeoutSeconds");
	}
	json_object_del(root, "background");
	rest = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	if (rest == NULL) {
		snprintf(why, why_len, "out of memory");
		return -1;
	}
	free(*body);
	*body = rest;
	*n = (long)strlen(rest);
	return 0;
}

/* A background execution's output files, appended as the watcher drains the pipes. */
struct worker_bg_out {
	int fd[2];
};

static void
worker_bg_output(void *ctx, int which, const char *p, size_t n)
{
	struct worker_bg_out *o = ctx;

	(void)util_write_all(o->fd[which], p, n);
}

/* The background execution's answer: {"execution", "state": "done", "outcome"} (the session
 * execution's answer, or null with "error" when the session did not take it). */
struct worker_bg_result {
	const char *eid;
	const struct session_reply *sr; /* NULL: not run */
	const char *error;
};

static void
write_bg_result(struct jsonw *jw, const void *ctx)
{
	const struct worker_bg_result *b = ctx;

	jsonw_lit(jw, "{\"execution\":");
	jsonw_cstr(jw, b->eid);
	jsonw_lit(jw, ",\"state\":\"done\",\"outcome\":");
	if (b->sr != NULL)
		write_session_reply(jw, b->sr);
	else
		jsonw_lit(jw, "null");
	jsonw_lit(jw, ",\"error\":");
	if (b->error != NULL)
		jsonw_cstr(jw, b->error);
	else
		jsonw_lit(jw, "null");
	jsonw_lit(jw, "}");
}

static int
worker_file_put(void *ctx, const char *p, size_t n)
{
	return util_write_all(*(int *)ctx, p, n);
}

/* The executed cell into the session's notebook (notebook.h); a failure is logged only. */
static void
worker_notebook_keep(int sdir, const char *id, const struct request *r, const struct run_outcome *o)
{
	char name[64];

	session_file(id, "cells", name, sizeof(name));
	if (notebook_append(sdir, name, r->code, r->code_len, o->cell_doc, o->cell_doc_len) < 0 &&
	    errno != EFBIG) {
		char log_name[SESSION_LOG_NAME_LEN + 1];
		session_log_name(id, log_name);
		log_msg(LOG_WARN, "session %s: its notebook lacks a cell: %s", log_name,
		        strerror(errno));
	}
}

/* GET /sessions/{id}/notebook: the cells run so far as an .ipynb */
static void
worker_session_notebook(const struct worker_request *w, FCGX_Request *req, const char *id)
{
	char name[64], disposition[96];
	size_t len = 0;
	char *doc;

	session_file(id, "cells", name, sizeof(name));
	doc = notebook_render(w->wc->sessions_fd, name, w->wc->probe->python_version, &len);
	if (doc == NULL) {
		log_msg(LOG_ERROR, "rendering a session's notebook failed: %s", strerror(errno));
		http_send_message(req, 500, NULL, "sandbox_error",
		                  "the session's notebook could not be read");
		return;
	}
	snprintf(disposition, sizeof(disposition),
	         "Content-Disposition: attachment; filename=\"session-%.12s.ipynb\"", id);
	http_send(req, 200, disposition, doc, len);
	free(doc);
}

/*
 * The watcher of a background execution: a copy of the worker (a guard, like it) whose parent
 * is the supervisor (pool, its pid; worker_session_background()), so that the supervisor reaps
 * it and it dies with the pool. It holds the session's lock and the execution slot its worker
 * was lent for it (loan), runs the execution as a worker would (no HTTP request), appends its
 * output to <id>.stdout and
 * <id>.stderr as it comes, writes the answer to <id>.result, and ends.
 */
static noreturn void
worker_session_watch(const struct worker_request *w, const struct session_rec *rec,
                     const struct request *r, int conn, int lock_fd, struct worker_bg_out *out,
                     const char *eid, int loan, pid_t pool)
{
	const struct worker_config *wc = w->wc;
	int keep[] = {conn, lock_fd, out->fd[0], out->fd[1], wc->sessions_fd, wc->history.dir_fd};
	const struct serve_port p = {METRICS_PORT_EXECUTE, &wc->history, -1, -1, -1};
	const struct serve_req q = {
	    .run = w->run, .session_conn = conn, .sb = &rec->sb, .request_id = w->request_id};
	struct run_spec spec;
	struct run_outcome o;
	enum serve_ran ran;
	char name[64], tmp[80];
	int fd;

	(void)util_close_fds_except(keep, 6);
	/* the execution slot its worker took for it is this process's while it runs */
	slots_lend_to(wc->slots, loan, getpid());
	log_set_component("background");
	/* a pool that died ends its sessions (worker_main()); nothing would read this answer */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != pool) {
		slots_return(wc->slots, loan, getpid());
		_exit(1);
	}
	spec = run_spec_from_limits(&w->l, r->code, r->code_len, r->wall_ms, -1);
	spec.stdin_data = r->stdin_data;
	spec.stdin_len = r->stdin_len;
	spec.files = r->files;
	spec.files_len = r->files_len;
	spec.artifacts = r->artifacts ? ARTIFACTS_ALL : ARTIFACTS_NONE;
	spec.on_output = worker_bg_output;
	spec.output_ctx = out;
	/* admitted already: it holds the session's lock and its execution slot (the loan) */
	ran = serve_run(&p, &q, &spec, &o);
	{
		const struct session_reply sr = {
		    &o, w->l.max_result_bytes, r->details, w->request_id, r->artifacts, rec->id};
		const struct worker_bg_result res = {
		    eid, ran == SERVE_RAN ? &sr : NULL,
		    ran == SERVE_RAN    ? NULL
		    : ran == SERVE_GONE ? "the session ended before the execution ran"
		    : ran == SERVE_LOST
		        ? WORKER_SESSION_LOST
		        : "the sandbox could not run the program; see the service log"};
		struct jsonw jw;

		session_file(rec->id, "result.tmp", tmp, sizeof(tmp));
		session_file(rec->id, "result", name, sizeof(name));
		fd = openat(wc->sessions_fd, tmp,
		            O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0) {
			jsonw_init_sink(&jw, worker_file_put, &fd);
			write_bg_result(&jw, &res);
			if (jsonw_end(&jw) < 0 || close(fd) < 0 ||
			    renameat(wc->sessions_fd, tmp, wc->sessions_fd, name) < 0)
				log_msg(LOG_ERROR,
				        "writing a background execution's answer failed");
		}
	}
	if (ran == SERVE_RAN)
		worker_notebook_keep(wc->sessions_fd, rec->id, r, &o);
	if (ran == SERVE_RAN && o.session_over) /* it holds the lock: nobody else removes it */
		session_remove(wc->sessions_fd, (struct session_rec *)rec, METRICS_SESSION_KILLED);
	if (ran == SERVE_RAN)
		run_outcome_free(&o);
	slots_return(wc->slots, loan, getpid());
	/* the audit trail's entry, as a worker writes it after its reply */
	history_flush(&wc->history);
	trace_flush();
	_exit(0);
}

/* Starts a background execution of r in the session (conn: connected to it; lock_fd: its
 * lock, which the watcher takes over) and answers 202 with its id. */
static void
worker_session_background(const struct worker_request *w, FCGX_Request *req,
                          const struct session_rec *rec, const struct request *r, int conn,
                          int lock_fd)
{
	const struct worker_config *wc = w->wc;
	struct worker_bg_out out = {{-1, -1}};
	uint8_t raw[8];
	char eid[17], name[64], line[64], answer[256];
	int fd, len, loan;
	pid_t child, pool;

	/* it runs code as a foreground execution does: it is admitted for an execution slot,
	 * lent to its watcher for as long as it runs */
	loan = slots_lend(wc->slots, w->l.max_concurrent_executions, getpid());
	if (loan < 0) {
		close(conn);
		if (loan == SLOTS_LOAN_FULL) {
			metrics_record_busy();
			http_send_message(req, 429, HTTP_BUSY_POOL, "sandbox_busy",
			                  "all execution slots are in use; retry shortly");
		} else {
			http_send_message(req, 503, NULL, "sandbox_unavailable",
			                  "the sandbox cannot admit runs right now; retry shortly");
		}
		return;
	}
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
		slots_return(wc->slots, loan, getpid());
		close(conn);
		http_send_message(req, 500, NULL, "sandbox_error", "getrandom() failed");
		return;
	}
	for (int i = 0; i < 8; i++)
		snprintf(eid + 2 * i, 3, "%02x", raw[i]);
	session_file(rec->id, "result", name, sizeof(name));
	(void)unlinkat(wc->sessions_fd, name, 0);
	for (int i = 0; i < 2; i++) {
		session_file(rec->id, i == 0 ? "stdout" : "stderr", name, sizeof(name));
		out.fd[i] =
		    openat(wc->sessions_fd, name,
		           O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	}
	session_file(rec->id, "run", name, sizeof(name));
	fd = openat(wc->sessions_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
	            0600);
	len = snprintf(line, sizeof(line), "%s %lld\n", eid, util_now_ms());
	if (out.fd[0] < 0 || out.fd[1] < 0 || fd < 0 || util_write_all(fd, line, (size_t)len) < 0) {
		if (fd >= 0)
			close(fd);
		for (int i = 0; i < 2; i++)
			if (out.fd[i] >= 0)
				close(out.fd[i]);
		slots_return(wc->slots, loan, getpid());
		close(conn);
		http_send_message(req, 500, NULL, "sandbox_error",
		                  "the background execution's files could not be made");
		return;
	}
	close(fd);
	/* the supervisor's child (CLONE_PARENT), not this worker's: the supervisor reaps every
	 * child it did not start (pool.c), where an orphan of a double fork would be adopted by
	 * this worker (a child subreaper) and never reaped; and no sweep of this worker's
	 * children after a run can take it for one of the run's */
	pool = getppid();
	child = (pid_t)syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0);
	if (child == 0)
		worker_session_watch(w, rec, r, conn, lock_fd, &out, eid, loan, pool);
	close(conn);
	close(out.fd[0]);
	close(out.fd[1]);
	if (child < 0) {
		/* no watcher: the poll sees the lock free and no answer, and says lost */
		log_msg(LOG_ERROR, "clone() of a background execution's watcher failed: %s",
		        strerror(errno));
		slots_return(wc->slots, loan, getpid());
		http_send_message(req, 503, NULL, "sandbox_unavailable",
		                  "the background execution could not start; retry shortly");
		return;
	}
	session_log_name(rec->id, name);
	log_msg(LOG_INFO, "session %s: background execution %s started (at most %ld ms)", name, eid,
	        r->wall_ms);
	len = snprintf(answer, sizeof(answer),
	               "{\"id\":\"%s\",\"execution\":\"%s\",\"state\":\"running\","
	               "\"timeoutSeconds\":%ld}",
	               rec->id, eid, (r->wall_ms + 999) / 1000);
	http_send(req, 202, NULL, answer, (size_t)len);
}

/* A bounded read of a session's file (at most max bytes); NULL when it is not there. */
static char *
worker_session_read(int sdir, const char *id, const char *what, size_t max, size_t *len)
{
	char name[64];
	int fd;

	session_file(id, what, name, sizeof(name));
	fd = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat st;
	if (fstat(fd, &st) == 0 && (size_t)st.st_size < max)
		max = (size_t)st.st_size; /* what it holds now; a later append waits for the next */
	char *buf = malloc(max + 1);
	ssize_t r = buf ? util_read_max(fd, buf, max) : -1;
	close(fd);
	if (r < 0) {
		free(buf);
		return NULL;
	}
	buf[r] = '\0';
	*len = (size_t)r;
	return buf;
}

/* Whether the session's last background execution (its <id>.run) is eid. */
static bool
worker_session_last_is(int sdir, const char *id, const char *eid)
{
	size_t len = 0, n = strlen(eid);
	char *run = worker_session_read(sdir, id, "run", 63, &len);
	bool is = run != NULL && strncmp(run, eid, n) == 0 && run[n] == ' ';

	free(run);
	return is;
}

static void
worker_session_execute(const struct worker_request *w, FCGX_Request *req,
                       const struct session_rec *rec, int lock_fd)
{
	const struct worker_config *wc = w->wc;
	const struct limits *l = &w->l;
	struct request r;
	struct run_outcome o;
	char message[256], path[128];
	char *body = NULL;
	long n = http_read_body(req, wc->max_body_bytes, &body);
	struct worker_session ses = {.conn = -1, .sb = &rec->sb};
	struct stream_sse sse;
	enum serve_ran ran;
	bool streamed, background;
	long wall_ms;

	if (n == HTTP_BODY_TOO_LARGE || n < 0) {
		http_send_message(
		    req, n < 0 && n != HTTP_BODY_TOO_LARGE ? 400 : 413, NULL,
		    n == HTTP_BODY_TOO_LARGE ? "request_too_large" : "invalid_request",
		    n == HTTP_BODY_TOO_LARGE ? "the request body is larger than this server accepts"
		                             : "the request body could not be read");
		return;
	}
	if (worker_session_body(&body, &n, &w->sl, &background, &wall_ms, message,
	                        sizeof(message)) < 0 ||
	    request_parse(&r, body, (size_t)n, l, message, sizeof(message)) < 0) {
		free(body);
		http_send_message(req, 400, NULL, "invalid_request", message);
		return;
	}
	free(body);
	session_sock_path(wc->sessions_fd, rec->id, path, sizeof(path));
	ses.conn = run_session_connect(path);
	if (ses.conn < 0) {
		request_free(&r);
		worker_session_unknown(req);
		return;
	}
	if (background) {
		r.wall_ms = wall_ms;
		worker_session_background(w, req, rec, &r, ses.conn, lock_fd);
		request_free(&r);
		return;
	}
	worker_sse_init(req, &sse, NULL, &streamed);
	ran = worker_run(w, req, &r, r.artifacts ? ARTIFACTS_ALL : ARTIFACTS_NONE,
	                 METRICS_PORT_EXECUTE, &ses, streamed ? &sse : NULL, &o);
	if (ran == SERVE_RAN && o.session_over) {
		char name[SESSION_LOG_NAME_LEN + 1];
		session_log_name(rec->id, name);
		log_msg(LOG_INFO, "session %s ended with its execution (%s)", name,
		        run_status_string(o.status));
	}
	{
		const struct session_reply sr = {
		    &o, l->max_result_bytes, r.details, w->request_id, r.artifacts, rec->id};
		worker_answer(req, ran, streamed ? &sse : NULL, write_session_reply, &sr, true);
	}
	if (ran == SERVE_RAN)
		worker_notebook_keep(wc->sessions_fd, rec->id, &r, &o);
	/* it ended with this execution, whose worker holds its lock: removed now */
	if (ran == SERVE_RAN && o.session_over)
		session_remove(wc->sessions_fd, (struct session_rec *)rec, METRICS_SESSION_KILLED);
	if (ran == SERVE_RAN)
		run_outcome_free(&o);
	close(ses.conn);
	request_free(&r);
}

/* A 32-bit tag of s (FNV-1a), never 0; 0 for NULL or "" (no token). */
static unsigned
worker_tag(const char *s)
{
	uint32_t h = 0x811c9dc5u;

	if (s == NULL || *s == '\0')
		return 0;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x01000193u;
	return h | 1;
}

/*
 * Takes a stream slot for this worker: at most CODEBOX_MAX_STREAMS in the pod,
 * SESSION_STREAMS_PER_SESSION of rec's, and (with tokens) half of the pod's of one token's.
 * Returns 0, or -1 having answered 429 (Codebox-Busy: streams, or tenant) or 503.
 */
static int
worker_stream_take(const struct worker_request *w, FCGX_Request *req, const struct session_rec *rec)
{
	const char *auth = FCGX_GetParam("CODEBOX_TOKEN_ID", req->envp);
	const unsigned tag[2] = {worker_tag(rec->id), worker_tag(auth)};
	const long limit[2] = {SESSION_STREAMS_PER_SESSION, (w->sl.max_streams + 1) / 2};
	int which = 0;

	switch (slots_acquire_tagged(w->wc->streams, w->wc->index, w->sl.max_streams, tag, limit,
	                             &which)) {
	case SLOTS_TAKEN:
		return 0;
	case SLOTS_FULL:
		metrics_record_busy();
		http_send_message(
		    req, 429, which == 2 ? HTTP_BUSY_TENANT : HTTP_BUSY_STREAMS, "sandbox_busy",
		    which == 1   ? "this execution has as many streams as it may; poll "
		                   "without a stream, or close one"
		    : which == 2 ? "this token has as many streams open as it may; poll "
		                   "without a stream, or close one"
		                 : "the server has as many streams open as it may; poll "
		                   "without a stream, or retry");
		return -1;
	case SLOTS_STUCK:
		break;
	}
	http_send_message(req, 503, NULL, "sandbox_unavailable",
	                  "the sandbox cannot admit streams right now; retry shortly");
	return -1;
}

/* What a poll or a stream says of a background execution whose watcher died without an
 * answer (its state "lost") */
#define WORKER_EXECUTION_LOST "the execution's watcher ended without an answer"

/* The longest a stream of a background execution lasts (it holds a worker and a stream slot). */
#define WORKER_POLL_STREAM_MS 600000

static void worker_session_tail(const struct worker_request *w, FCGX_Request *req,
                                const struct session_rec *rec, const char *eid,
                                struct stream_sse *sse);

/* Keep-alives of a long stream, so that no proxy takes its silence for a dead peer. */
#define WORKER_SSE_KEEPALIVE_MS 10000

/*
 * GET /sessions/{id}/executions/{eid}: a background execution's state. Running: its output so
 * far; done: its answer ({"execution", "state": "done", "outcome"}). With Accept:
 * text/event-stream: its output as it comes (from the start), then the answer as the last
 * event, bounded by the execution's own bound.
 */
static void
worker_session_poll(const struct worker_request *w, FCGX_Request *req,
                    const struct session_rec *rec, const char *eid)
{
	int sdir = w->wc->sessions_fd;
	size_t len = 0, out_len = 0, err_len = 0;
	char *res, *out, *err;
	struct stream_sse sse;
	bool streamed;

	if (!worker_session_last_is(sdir, rec->id, eid)) {
		http_send_message(req, 404, NULL, "not_found",
		                  "no such execution: a session keeps its last background "
		                  "execution only");
		return;
	}
	worker_sse_init(req, &sse, NULL, &streamed);
	if (!streamed) {
		res = worker_session_read(sdir, rec->id, "result", 256u << 20, &len);
		if (res != NULL) {
			http_send(req, 200, NULL, res, len);
			free(res);
			return;
		}
		/* no answer and nobody holding the session: its watcher died without one */
		bool lost = !session_locked(sdir, rec->id);
		res = worker_session_read(sdir, rec->id, "result", 256u << 20, &len);
		if (res != NULL) { /* it ended between the two looks */
			http_send(req, 200, NULL, res, len);
			free(res);
			return;
		}
		out = worker_session_read(sdir, rec->id, "stdout", w->l.max_stdout_bytes, &out_len);
		err = worker_session_read(sdir, rec->id, "stderr", w->l.max_stderr_bytes, &err_len);
		/* the output so far as valid UTF-8: a character may be cut at its end */
		char *out8 = malloc(out_len * 3 + 1), *err8 = malloc(err_len * 3 + 1);
		size_t out8_len =
		    out8 && out ? utf8_sanitize((unsigned char *)out, out_len, out8) : 0;
		size_t err8_len =
		    err8 && err ? utf8_sanitize((unsigned char *)err, err_len, err8) : 0;
		json_t *doc =
		    out8 && err8
		        ? json_pack("{s:s, s:s, s:s%, s:s%, s:s?}", "execution", eid, "state",
		                    lost ? "lost" : "running", "stdout", out8, out8_len, "stderr",
		                    err8, err8_len, "error", lost ? WORKER_EXECUTION_LOST : NULL)
		        : NULL;
		free(out8);
		free(err8);
		char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
		if (text == NULL)
			http_send_message(req, 500, NULL, "sandbox_error",
			                  "the worker is out of memory");
		else
			http_send(req, 200, NULL, text, strlen(text));
		json_decref(doc);
		free(text);
		free(out);
		free(err);
		return;
	}
	/* the stream: the files' new bytes every 100 ms, until the answer is there. It holds a
	 * worker, not an execution slot: a stream slot (the pool has a worker for each), bounded
	 * per pod, per session and per token, and lasts WORKER_POLL_STREAM_MS at most */
	if (worker_stream_take(w, req, rec) == 0) {
		worker_session_tail(w, req, rec, eid, &sse);
		slots_release(w->wc->streams, w->wc->index);
	}
}

/* A look of a stream of a background execution: the files' new bytes from off[] as events
 * (*quiet: when it last sent one), and the answer if it is there (NULL if not; free() it). */
static char *
worker_tail_look(int sdir, const char *id, struct stream_sse *sse, off_t off[2], long long *quiet,
                 size_t *len)
{
	char *res = worker_session_read(sdir, id, "result", 256u << 20, len);
	char buf[65536], name[64];

	/* read after the answer: all the output is in the files once it is there */
	for (int i = 0; i < 2; i++) {
		ssize_t r;
		int fd;

		session_file(id, i == 0 ? "stdout" : "stderr", name, sizeof(name));
		fd = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		while (fd >= 0 && (r = pread(fd, buf, sizeof(buf), off[i])) > 0) {
			stream_sse_output(sse, i, buf, (size_t)r);
			off[i] += r;
			*quiet = util_now_ms();
		}
		if (fd >= 0)
			close(fd);
	}
	return res;
}

/*
 * Why a stream of a background execution without its answer yet cannot wait for one, or NULL:
 * the pool stops (its SIGTERM waits, blocked, for this request's end, and the sessions end
 * with the pool), the session ended or holds another execution, or nobody holds the session's
 * lock, so its watcher died without an answer (the poll's "lost"). *error: the event's code.
 */
static const char *
worker_tail_over(int sdir, const char *id, const char *eid, const char **error)
{
	sigset_t pending;

	if (worker_stopping ||
	    (sigpending(&pending) == 0 &&
	     (sigismember(&pending, SIGTERM) == 1 || sigismember(&pending, SIGINT) == 1))) {
		*error = "sandbox_unavailable";
		return "the service is stopping, and its sessions end with it; retry shortly";
	}
	if (!worker_session_last_is(sdir, id, eid)) {
		*error = "not_found";
		return WORKER_SESSION_UNKNOWN;
	}
	if (!session_locked(sdir, id)) {
		*error = "execution_lost";
		return WORKER_EXECUTION_LOST;
	}
	return NULL;
}

/* The stream of worker_session_poll(), its slot taken: the files' new bytes every 100 ms,
 * then the answer, or an error event as soon as none can come (worker_tail_over()). */
static void
worker_session_tail(const struct worker_request *w, FCGX_Request *req,
                    const struct session_rec *rec, const char *eid, struct stream_sse *sse_p)
{
	int sdir = w->wc->sessions_fd;
	struct stream_sse sse = *sse_p;
	long long deadline = util_now_ms() + WORKER_POLL_STREAM_MS;
	long long quiet = util_now_ms();
	off_t off[2] = {0, 0};

	stream_sse_start(&sse, NULL);
	for (;;) {
		const char *why = NULL, *error = NULL;
		size_t len = 0;
		char *res = worker_tail_look(sdir, rec->id, &sse, off, &quiet, &len);

		if (res == NULL && (why = worker_tail_over(sdir, rec->id, eid, &error)) != NULL)
			/* the answer may have come since that look: the watcher writes it, then
			 * ends */
			res = worker_tail_look(sdir, rec->id, &sse, off, &quiet, &len);
		if (res != NULL) {
			const struct worker_raw raw = {res, len};
			stream_sse_end(&sse, write_raw, &raw);
			free(res);
			return;
		}
		if (why != NULL) {
			char logname[SESSION_LOG_NAME_LEN + 1];
			session_log_name(rec->id, logname);
			log_msg(LOG_INFO, "session %s: a stream of execution %s ends: %s", logname,
			        eid, error);
			stream_sse_error(&sse, NULL, 0, error, why);
			return;
		}
		if (sse.failed || http_client_gone(req))
			return;
		if (util_now_ms() >= deadline) {
			stream_sse_error(&sse, NULL, 0, "stream_limit",
			                 "this stream has lasted its longest; ask again to go "
			                 "on (the output starts from the beginning)");
			return;
		}
		if (util_now_ms() - quiet >= WORKER_SSE_KEEPALIVE_MS) {
			(void)worker_fcgx_put(req, ": keep-alive\n\n", 14);
			worker_fcgx_flush(req);
			quiet = util_now_ms();
		}
		struct timespec tick = {0, 100 * 1000 * 1000};
		nanosleep(&tick, NULL);
	}
}

/* /sessions/{id}[/{sub}]: the id (a valid one) and what follows it checked against method,
 * from rest (past "/sessions/"): 0, or -1 answered. */
static int
worker_session_route(FCGX_Request *req, const char *method, const char *rest,
                     char id[SESSION_ID_LEN + 1], const char **sub)
{
	const char *slash;
	size_t idlen;

	slash = strchr(rest, '/');
	idlen = slash ? (size_t)(slash - rest) : strlen(rest);
	if (!session_id_valid(rest, idlen)) {
		worker_session_unknown(req);
		return -1;
	}
	memcpy(id, rest, idlen);
	id[idlen] = '\0';
	*sub = NULL;
	if (slash != NULL) {
		*sub = slash + 1;
		/* the files' methods are sessionfiles_handle()'s to check */
		if (sessionfiles_route(*sub))
			return 0;
		const char *allow =
		    strcmp(*sub, "execute") == 0 || strcmp(*sub, "interrupt") == 0 ||
		            strcmp(*sub, "restart") == 0 || strcmp(*sub, "snapshot") == 0
		        ? "POST"
		    : strncmp(*sub, "executions/", 11) == 0 || strcmp(*sub, "notebook") == 0 ? "GET"
		                                                                             : NULL;
		if (allow == NULL) {
			http_send_message(req, 404, NULL, "not_found", "no such endpoint");
			return -1;
		}
		if (strcmp(method, allow) != 0) {
			char hdr[32];
			snprintf(hdr, sizeof(hdr), "Allow: %s", allow);
			http_send_message(req, 405, hdr, "method_not_allowed",
			                  "use POST /sessions/{id}/execute, /interrupt, /restart "
			                  "or /snapshot, GET "
			                  "/sessions/{id}/executions/{execution} or /notebook");
			return -1;
		}
	} else if (strcmp(method, "GET") != 0 && strcmp(method, "DELETE") != 0) {
		http_send_message(req, 405, "Allow: GET, DELETE", "method_not_allowed",
		                  "use GET or DELETE /sessions/{id}");
		return -1;
	}
	return 0;
}

/*
 * DELETE /sessions/{id}: the session's init kills it, a cell running or not; what it leaves is
 * removed now, or (an execution still reporting) by whoever finds it ended. *lock_fd is the
 * session's lock when it was free (-1 if not); it may be taken here. The caller closes it.
 */
static void
worker_session_close(const struct worker_request *w, FCGX_Request *req, const char *id,
                     const char *auth, struct session_rec *rec, const char *path, int *lock_fd)
{
	struct session_answer a;

	if (run_session_ask(path, SESSION_OP_CLOSE, &a) < 0 && *lock_fd >= 0 && errno == EBUSY) {
		/* not answered, not gone (a full backlog): left for its bounds to end */
		http_send_message(req, 409, NULL, "session_busy",
		                  "the session did not answer; retry in a moment");
		return;
	}
	for (int i = 0; *lock_fd < 0 && i < 250; i++) {
		struct timespec ms = {0, 20 * 1000 * 1000};
		nanosleep(&ms, NULL);
		if (session_find(w->wc->sessions_fd, id, auth, rec, true, lock_fd) < 0)
			break; /* ended: removed by session_find(), or being reported */
	}
	if (*lock_fd >= 0)
		session_remove(w->wc->sessions_fd, rec, METRICS_SESSION_DELETED);
	{
		char name[SESSION_LOG_NAME_LEN + 1];
		session_log_name(id, name);
		log_msg(LOG_INFO, "session %s closed", name);
	}
	http_send(req, 204, NULL, "", 0);
}

/* GET /sessions: the caller's own sessions (its token's; all of them where tokens are off),
 * each as GET /sessions/{id} answers it, at most CODEBOX_MAX_SESSIONS of them. */
static void
worker_session_list(const struct worker_request *w, FCGX_Request *req, const char *auth)
{
	size_t max = w->sl.max_sessions > 0 ? (size_t)w->sl.max_sessions : 0, n = 0, len;
	struct session_rec *recs = max > 0 ? calloc(max, sizeof(*recs)) : NULL;
	struct jsonw jw;
	char *doc;

	if (max > 0 && recs == NULL) {
		http_send_message(req, 500, NULL, "sandbox_error", "the worker is out of memory");
		return;
	}
	if (w->wc->sessions_fd >= 0 && max > 0)
		n = session_list(w->wc->sessions_fd, auth, recs, max);
	jsonw_init(&jw);
	jsonw_lit(&jw, "{\"sessions\":[");
	for (size_t i = 0, shown = 0; i < n; i++) {
		struct session_answer a;
		char path[128];
		int rc;
		session_sock_path(w->wc->sessions_fd, recs[i].id, path, sizeof(path));
		rc = run_session_ask(path, SESSION_OP_PING, &a);
		/* one that ended since it was listed is left out; one whose backlog is full is
		 * busy, with no word of its use */
		if (rc < 0 && errno != EBUSY)
			continue;
		if (shown++ > 0)
			jsonw_lit(&jw, ",");
		worker_session_state_write(&jw, &recs[i], rc == 0 ? &a : NULL,
		                           rc < 0 || a.busy != 0, &w->l, NULL);
	}
	jsonw_lit(&jw, "]}");
	free(recs);
	doc = jsonw_take(&jw, &len);
	http_send_doc(req, HTTP_JSON, doc, len);
}

/* What came of renewing a session's box (worker_session_renew()). */
enum worker_renewed {
	WORKER_RENEWED,
	WORKER_RENEW_GONE,   /* the session ended meanwhile: 404 */
	WORKER_RENEW_OLD,    /* its lifetime is (nearly) over: 409 */
	WORKER_RENEW_BUSY,   /* no execution slot: 429 */
	WORKER_RENEW_FAILED, /* 503, logged; the session is as it was */
};

/* Renewal's new box, for rec's session: bound to a socket beside its own (next, its path),
 * with rec's bounds and life_s of lifetime left. Holds an execution slot while it is built, as
 * a session's creation does. */
static enum worker_renewed
worker_session_box(const struct worker_request *w, const struct session_rec *rec, long life_s,
                   struct session_rec *next, char *next_path, size_t next_len)
{
	const struct worker_config *wc = w->wc;
	struct run_config scfg = *w->run;
	struct run_spec spec;
	char why[512];
	int listen_fd, rc;

	switch (slots_acquire(wc->slots, wc->index, w->l.max_concurrent_executions)) {
	case SLOTS_TAKEN:
		break;
	case SLOTS_FULL:
		metrics_record_busy();
		return WORKER_RENEW_BUSY;
	case SLOTS_STUCK:
		return WORKER_RENEW_FAILED;
	}
	listen_fd = session_rebind(wc->sessions_fd, rec->id, next_path, next_len);
	if (listen_fd < 0) {
		slots_release(wc->slots, wc->index);
		log_msg(LOG_ERROR, "session restart: its new socket: %s", strerror(errno));
		return WORKER_RENEW_FAILED;
	}
	/* exactly the session's own: its uid, caps and bounds, as worker_session_start() */
	if (rec->uid != 0) {
		scfg.run_uid = rec->uid;
		scfg.run_gid = (gid_t)rec->uid;
	}
	spec = run_spec_from_limits(&w->l, "", 0, w->l.execution_timeout_seconds * 1000L, -1);
	spec.caps.memory_bytes = rec->memory_bytes;
	spec.caps.disk_bytes = rec->disk_bytes;
	spec.session = true;
	spec.caps.heavy = true;
	spec.session_idle_seconds = rec->idle_seconds;
	spec.session_life_seconds = (unsigned)life_s;
	*next = *rec;
	rc = run_session_create(&scfg, &spec, listen_fd, next_path, wc->sessions_fd,
	                        wc->sessions_dir, &next->sb, why, sizeof(why));
	close(listen_fd);
	slots_release(wc->slots, wc->index);
	if (rc < 0) {
		log_msg(LOG_ERROR, "session restart: %s", why);
		return WORKER_RENEW_FAILED;
	}
	return WORKER_RENEWED;
}

/*
 * A restart's work, under the session's lock: a new box for the session (a fresh interpreter
 * from the heavy template, every step of a session's start), its working directory's files
 * copied into it from the old one's, then the new box put in the old one's place (its socket,
 * its record) and the old one closed and removed. Until the switch the session is as it was:
 * any failure before it leaves it so. Its lifetime goes on (the new box gets what is left of
 * it); its idle time and executions start again. rec becomes the new one's.
 */
static enum worker_renewed
worker_session_renew(const struct worker_request *w, struct session_rec *rec, const char *path)
{
	int sdir = w->wc->sessions_fd, old_dir, new_dir = -1, old_conn = -1;
	struct session_answer a, b;
	struct session_rec next;
	char next_path[128];
	enum worker_renewed r;
	long long age_ms;

	old_dir = run_session_workdir(path, &a);
	if (old_dir < 0)
		return WORKER_RENEW_GONE;
	age_ms = rec->age_before_ms + a.age_ms;
	if (sessionfiles_check_dir(old_dir, rec) < 0) {
		close(old_dir);
		session_log_name(rec->id, next_path);
		log_msg(LOG_ERROR,
		        "session %s: its init sent a working directory that is not its tmpfs",
		        next_path);
		return WORKER_RENEW_FAILED;
	}
	if ((long long)rec->life_seconds * 1000 - age_ms < 2000) {
		close(old_dir);
		return WORKER_RENEW_OLD;
	}
	r = worker_session_box(w, rec, ((long long)rec->life_seconds * 1000 - age_ms) / 1000, &next,
	                       next_path, sizeof(next_path));
	if (r != WORKER_RENEWED) {
		close(old_dir);
		return r;
	}
	new_dir = run_session_workdir(next_path, &b);
	if (new_dir < 0 || sessionfiles_check_dir(new_dir, &next) < 0 ||
	    sessionfiles_copy(old_dir, new_dir, rec->uid) < 0) {
		log_msg(LOG_ERROR, "session restart: its files could not be carried over: %s",
		        strerror(errno));
		r = WORKER_RENEW_FAILED;
	}
	/* connected before the switch: the old init is told to close once the new one serves */
	if (r == WORKER_RENEWED && (old_conn = run_session_connect(path)) < 0)
		r = WORKER_RENEW_GONE;
	next.age_before_ms = age_ms;
	if (r == WORKER_RENEWED && session_switch(sdir, &next) < 0) {
		log_msg(LOG_ERROR, "session restart: the switch: %s", strerror(errno));
		r = WORKER_RENEW_FAILED;
	}
	close(old_dir);
	if (new_dir >= 0)
		close(new_dir);
	if (r != WORKER_RENEWED) {
		/* the session stays as it was; the new box goes */
		(void)run_session_ask(next_path, SESSION_OP_CLOSE, &b);
		run_session_remove(sdir, &next.sb);
		(void)unlinkat(sdir, strrchr(next_path, '/') + 1, 0);
		if (old_conn >= 0)
			close(old_conn);
		return r;
	}
	(void)run_session_ask_on(old_conn, SESSION_OP_CLOSE, &a);
	close(old_conn);
	run_session_remove(sdir, &rec->sb);
	*rec = next;
	return WORKER_RENEWED;
}

/*
 * POST /sessions/{id}/restart: a fresh interpreter in the same session (id, token, bounds,
 * files), as Jupyter restarts a kernel. A running cell is interrupted first (KeyboardInterrupt)
 * and waited for, a bounded time (then 409). Answers the session's state, as GET does.
 */
static void
worker_session_restart(const struct worker_request *w, FCGX_Request *req, const char *auth,
                       struct session_rec *rec, const char *path, int *lock_fd)
{
	struct session_answer a;
	char name[SESSION_LOG_NAME_LEN + 1], id[SESSION_ID_LEN + 1];
	enum worker_renewed r;

	memcpy(id, rec->id, sizeof(id));
	if (*lock_fd < 0)
		(void)run_session_ask(path, SESSION_OP_INTERRUPT, &a);
	/* the cell's worker answers its client and lets go of the lock */
	for (int i = 0; *lock_fd < 0 && i < 200; i++) {
		struct timespec ms = {0, 20 * 1000 * 1000};
		nanosleep(&ms, NULL);
		if (session_find(w->wc->sessions_fd, id, auth, rec, true, lock_fd) < 0) {
			worker_session_unknown(req);
			return;
		}
	}
	if (*lock_fd < 0) {
		http_send_message(req, 409, NULL, "session_busy",
		                  "the running cell did not end when interrupted; retry, or close "
		                  "the session (DELETE /sessions/{id})");
		return;
	}
	r = worker_session_renew(w, rec, path);
	session_log_name(id, name);
	if (r == WORKER_RENEWED)
		log_msg(LOG_INFO, "session %s restarted", name);
	switch (r) {
	case WORKER_RENEWED:
		if (run_session_ask(path, SESSION_OP_PING, &a) < 0)
			worker_session_unknown(req);
		else
			worker_session_state(req, 200, rec, &a, false, &w->l, NULL);
		return;
	case WORKER_RENEW_GONE:
		worker_session_unknown(req);
		return;
	case WORKER_RENEW_OLD:
		http_send_message(req, 409, NULL, "session_ending",
		                  "the session's lifetime is (nearly) over: make a new session");
		return;
	case WORKER_RENEW_BUSY:
		http_send_message(req, 429, HTTP_BUSY_POOL, "sandbox_busy",
		                  "all execution slots are in use; retry shortly");
		return;
	case WORKER_RENEW_FAILED:
		break;
	}
	http_send_message(req, 503, NULL, "sandbox_unavailable",
	                  "the session could not be restarted; it is as it was");
}

static void
worker_sessions(void *port, FCGX_Request *req)
{
	const struct worker_request *w = port;
	const struct worker_config *wc = w->wc;
	const char *method = FCGX_GetParam("REQUEST_METHOD", req->envp);
	const char *uri = FCGX_GetParam("SCRIPT_NAME", req->envp);
	const char *auth = FCGX_GetParam("CODEBOX_TOKEN_ID", req->envp);
	struct session_rec rec;
	struct session_answer a;
	char id[SESSION_ID_LEN + 1], path[128];
	const char *rest, *sub = NULL;
	int lock_fd = -1;

	method = method ? method : "";
	if (uri == NULL || strncmp(uri, "/sessions", 9) != 0) {
		http_send_message(req, 404, NULL, "not_found", "no such endpoint");
		return;
	}
	rest = uri + 9;
	if (*rest == '\0' || strcmp(rest, "/") == 0) {
		if (strcmp(method, "GET") == 0) {
			worker_session_list(w, req, auth);
			return;
		}
		if (strcmp(method, "POST") != 0) {
			http_send_message(
			    req, 405, "Allow: GET, POST", "method_not_allowed",
			    "use POST /sessions to make a session, GET /sessions to list "
			    "yours");
			return;
		}
		worker_session_create(w, req, auth);
		return;
	}
	if (worker_session_route(req, method, rest + 1, id, &sub) < 0)
		return;
	/* executions, restarts, snapshots and DELETE take the session's lock; reading it, its
	 * files and interrupting do not */
	bool take = sub != NULL ? strcmp(sub, "execute") == 0 || strcmp(sub, "restart") == 0 ||
	                              strcmp(sub, "snapshot") == 0
	                        : strcmp(method, "DELETE") == 0;
	if (session_find(wc->sessions_fd, id, auth, &rec, take, &lock_fd) < 0) {
		worker_session_unknown(req);
		return;
	}
	session_sock_path(wc->sessions_fd, id, path, sizeof(path));
	if (sub != NULL && sessionfiles_route(sub)) {
		sessionfiles_handle(req, method, &rec, path);
	} else if (sub != NULL && strcmp(sub, "restart") == 0) {
		worker_session_restart(w, req, auth, &rec, path, &lock_fd);
	} else if (sub != NULL && strcmp(sub, "execute") == 0) {
		if (lock_fd < 0)
			http_send_message(
			    req, 409, NULL, "session_busy",
			    "an execution is running in this session; wait for it, or "
			    "interrupt it (POST /sessions/{id}/interrupt)");
		else
			worker_session_execute(w, req, &rec, lock_fd);
	} else if (sub != NULL && strcmp(sub, "snapshot") == 0) {
		if (lock_fd < 0)
			http_send_message(
			    req, 409, NULL, "session_busy",
			    "an execution is running in this session; a snapshot waits "
			    "for it to end (or interrupt it: POST "
			    "/sessions/{id}/interrupt)");
		else
			worker_session_snapshot(w, req, &rec);
	} else if (sub != NULL && strcmp(sub, "interrupt") == 0) {
		/* KeyboardInterrupt into the running cell; the session keeps its state */
		if (run_session_ask(path, SESSION_OP_INTERRUPT, &a) < 0) {
			worker_session_unknown(req);
		} else {
			char body[64];
			int n = snprintf(body, sizeof(body), "{\"interrupted\":%s}",
			                 a.interrupted ? "true" : "false");
			http_send(req, 200, NULL, body, (size_t)n);
		}
	} else if (sub != NULL && strcmp(sub, "notebook") == 0) {
		worker_session_notebook(w, req, id);
	} else if (sub != NULL) {
		const char *eid = sub + 11;
		if (strlen(eid) != 16 || strspn(eid, "0123456789abcdef") != 16)
			http_send_message(req, 404, NULL, "not_found", "no such execution");
		else
			worker_session_poll(w, req, &rec, eid);
	} else if (strcmp(method, "GET") == 0) {
		if (run_session_ask(path, SESSION_OP_PING, &a) < 0)
			worker_session_unknown(req);
		else
			worker_session_state(req, 200, &rec, &a, a.busy != 0, &w->l, NULL);
	} else {
		worker_session_close(w, req, id, auth, &rec, path, &lock_fd);
	}
	if (lock_fd >= 0)
		close(lock_fd);
}

/* MCP's second tool, where sessions are on: a model lists and closes its sessions */
#define WORKER_MCP_SESSIONS_TOOL "sessions"

/* tools/list's tools: GET /tool's (with the "session" argument where sessions are on), and
 * where sessions are on the sessions tool */
static json_t *
worker_mcp_tools(const struct worker_request *w, const char *tool, size_t tool_len)
{
	json_t *res = mcp_tools(tool, tool_len), *t, *props;

	if (res == NULL || !worker_sessions_on(w))
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
		enum worker_started st =
		    worker_session_start(w, (unsigned)w->sl.idle_seconds,
		                         (unsigned)w->sl.max_life_seconds, 0, auth, rec);
		if (st != WORKER_STARTED) {
			message = worker_start_message(st, &status, &error, &extra);
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

/* tools/call's "snapshot": the session's snapshot after the call (worker_snapshot_take()) into
 * sr and res, and a sentence on it appended to text (which it takes; NULL: out of memory). */
static char *
worker_mcp_snapshot(const struct worker_request *w, FCGX_Request *req, struct session_rec *rec,
                    char *text, size_t *text_len, struct snapshot_reply *sr,
                    struct mcp_resource *res)
{
	struct worker_refusal f;
	char *more = NULL;
	int n;

	if (worker_snapshot_take(w, req, rec, sr, &f) < 0) {
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
	worker_sse_init(req, &sse, progress, &streamed);
	/* a client that asks for progress, and takes SSE, hears the output as it comes */
	streamed = streamed && progress != NULL;
	ran =
	    want != NULL && ses.conn < 0
	        ? SERVE_GONE
	        : worker_run(w, req, &r, asked ? ARTIFACTS_ALL : ARTIFACTS_IMAGES, METRICS_PORT_MCP,
	                     want != NULL ? &ses : NULL, streamed ? &sse : NULL, &o);
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
		struct snapshot_reply sr = {0};
		struct mcp_resource res = {0};
		if (want != NULL)
			worker_notebook_keep(w->wc->sessions_fd, rec.id, &r, &o);
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
		const struct worker_raw raw = {answer, len};
		stream_sse_end(&sse, write_raw, &raw);
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

/* The /isolation document (reply_isolation()) for this request's limits: GET /isolation's
 * answer, and what /tool and MCP's tool are written from. Newly allocated, or NULL. */
static char *
worker_isolation_doc(const struct worker_request *w, size_t *len)
{
	const struct worker_config *wc = w->wc;
	bool agent_on = wc->agent.workspace_fd >= 0;
	unsigned long long ws_bytes = agent_on ? wc->agent.workspace_bytes : 0;

	/* sessions' bounds (session.h): /capabilities' keys are the lab contract's, fixed */
	json_t *sessions =
	    worker_sessions_on(w)
	        ? json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s}",
	                    "maxSessions", (json_int_t)w->sl.max_sessions, "maxSessionsPerToken",
	                    (json_int_t)w->sl.max_per_token, "maxStreams",
	                    (json_int_t)w->sl.max_streams, "idleTimeoutSeconds",
	                    (json_int_t)w->sl.idle_seconds, "maxLifetimeSeconds",
	                    (json_int_t)w->sl.max_life_seconds, "executionTimeoutSeconds",
	                    (json_int_t)w->l.execution_timeout_seconds, "maxExecutionSeconds",
	                    (json_int_t)w->sl.max_execution_seconds, "memoryBytes",
	                    (json_int_t)w->l.memory_bytes, "diskBytes", (json_int_t)w->l.disk_bytes,
	                    "snapshotMaxBytes", (json_int_t)w->sl.snapshot_max_bytes,
	                    /* whose key signs the snapshots: where they restore (snapshot.h) */
	                    "snapshotKey", wc->snapshot_key.fleet ? "fleet" : "pod")
	        : NULL;

	return reply_isolation(wc->iso, &w->l, w->run->warm && warm_serving(),
	                       warm_one_copy() ? "one-copy" : "copy", ws_bytes,
	                       agent_on ? workspace_inodes(ws_bytes) : 0, sessions, len);
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
	char message[256], *body = NULL, *caps = NULL, *iso = NULL, *tool = NULL, *answer = NULL;
	size_t len = 0, caps_len, iso_len, tool_len = 0;
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
		caps = reply_capabilities(wc->probe, &w->l, wc->files_contained, &caps_len);
		iso = worker_isolation_doc(w, &iso_len);
		tool = caps && iso
		           ? tool_render(caps, caps_len, iso, iso_len, TOOL_ANTHROPIC, &tool_len)
		           : NULL;
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
		} else if (worker_sessions_on(w) &&
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
	free(caps);
	free(iso);
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

/* GET /isolation (worker_isolation_doc()) */
static void
worker_isolation(void *port, FCGX_Request *req)
{
	size_t len;
	char *doc = worker_isolation_doc(port, &len);

	http_send_doc(req, HTTP_JSON, doc, len);
}

/* GET /tool[?format=...]: written from /capabilities and /isolation (tool.h) */
static void
worker_tool(void *port, FCGX_Request *req)
{
	const struct worker_request *w = port;
	size_t len, iso_len, tool_len = 0;
	enum tool_format format;
	char why[256], *caps, *iso, *doc;

	if (tool_parse_format(FCGX_GetParam("REQUEST_URI", req->envp), &format, why, sizeof(why)) <
	    0) {
		http_send_message(req, 400, NULL, "invalid_request", why);
		return;
	}
	caps = reply_capabilities(w->wc->probe, &w->l, w->wc->files_contained, &len);
	iso = worker_isolation_doc(w, &iso_len);
	doc = caps && iso ? tool_render(caps, len, iso, iso_len, format, &tool_len) : NULL;
	http_send_doc(req, HTTP_JSON, doc, tool_len);
	free(caps);
	free(iso);
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
	cap.sessions_max = worker_sessions_on(w) ? w->sl.max_sessions : 0;
	cap.sessions_memory_bytes = sc.memory_bytes;
	cap.memory_budget_bytes = wc->iso->on[ISO_POOLMEMORY] ? wc->iso->pool_memory_bytes : 0;
	cap.draining = session_draining(wc->sessions_fd);
	cap.background_running = worker_sessions_on(w) ? slots_loans(wc->slots) : 0;
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
    {"execute", "POST", "use POST for /execute", worker_execute, false},
    /* no stream from the server (GET), no session to end (DELETE) */
    {"mcp", "POST", "use POST for /mcp: this server sends no stream and keeps no session",
     worker_mcp, false},
    {"sessions", NULL, NULL, worker_sessions, false},
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
