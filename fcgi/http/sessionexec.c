/*
 * sessionexec.c - a session's executions (sessionexec.h). A foreground one is POST /execute's
 * run in the session's box (execute_run()), its answer written as /execute's with the
 * session's id. A background one is run by a watcher: a copy of the worker whose parent is the
 * supervisor, holding the session's lock and an execution slot lent to it, writing the output
 * to the session's <id>.stdout and <id>.stderr as it comes and the answer to <id>.result; a
 * poll reads those files, and a stream follows them (bounded per pod, per session and per
 * token by the stream slots). Every execution that ran is appended to the session's notebook.
 */
#include "http/sessionexec.h"

#include "http/execute.h"
#include "run/history.h"
#include "http/http.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/notebook.h"
#include "http/reply.h"
#include "run/serve.h"
#include "core/slots.h"
#include "http/stream.h"
#include "run/trace.h"
#include "core/utf8.h"
#include "core/util.h"

#include <errno.h>
#include <sched.h>
#include <stdnoreturn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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

/*
 * POST /sessions/{id}/execute's body (root, read once: request_load()), with what /execute does
 * not take out of it: "background" (a boolean) into *background, and then its "timeoutSeconds"
 * (up to the background bound) into *wall_ms; both are taken out of root, which is left for
 * request_take(). Returns 0, or -1 with why.
 */
static int
sessionexec_body(json_t *root, const struct session_limits *sl, bool *background, long *wall_ms,
                 char *why, size_t why_len)
{
	json_t *b = json_is_object(root) ? json_object_get(root, "background") : NULL, *t;

	*background = false;
	*wall_ms = sl->max_execution_seconds * 1000;
	if (b == NULL)
		return 0; /* request_take() judges the body as /execute's */
	if (!json_is_boolean(b)) {
		snprintf(why, why_len, "background must be a boolean");
		return -1;
	}
	*background = json_is_true(b);
	t = json_object_get(root, "timeoutSeconds");
	if (*background && t != NULL) {
		double v = json_number_value(t);
		if (!json_is_number(t) || v <= 0 || v > (double)sl->max_execution_seconds) {
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
	return 0;
}

/* A background execution's output files, appended as the watcher drains the pipes. */
struct sessionexec_bg_out {
	int fd[2];
};

static void
sessionexec_bg_output(void *ctx, int which, const char *p, size_t n)
{
	struct sessionexec_bg_out *o = ctx;

	(void)util_write_all(o->fd[which], p, n);
}

/* The background execution's answer: {"execution", "state": "done", "outcome"} (the session
 * execution's answer, or null with "error" when the session did not take it). */
struct sessionexec_bg_result {
	const char *eid;
	const struct session_reply *sr; /* NULL: not run */
	const char *error;
};

static void
write_bg_result(struct jsonw *jw, const void *ctx)
{
	const struct sessionexec_bg_result *b = ctx;

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
sessionexec_file_put(void *ctx, const char *p, size_t n)
{
	return util_write_all(*(int *)ctx, p, n);
}

void
sessionexec_notebook_keep(int sdir, const char *id, const struct request *r,
                          const struct run_outcome *o)
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

void
sessionexec_notebook(const struct worker_request *w, FCGX_Request *req, const char *id)
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
 * is the supervisor (pool, its pid; sessionexec_background()), so that the supervisor reaps
 * it and it dies with the pool. It holds the session's lock and the execution slot its worker
 * was lent for it (loan), runs the execution as a worker would (no HTTP request), appends its
 * output to <id>.stdout and
 * <id>.stderr as it comes, writes the answer to <id>.result, and ends.
 */
static noreturn void
sessionexec_watch(const struct worker_request *w, const struct session_rec *rec,
                  const struct request *r, int conn, int lock_fd, struct sessionexec_bg_out *out,
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
	spec.on_output = sessionexec_bg_output;
	spec.output_ctx = out;
	/* admitted already: it holds the session's lock and its execution slot (the loan) */
	ran = serve_run(&p, &q, &spec, &o);
	{
		const struct session_reply sr = {
		    &o, w->l.max_result_bytes, r->details, w->request_id, r->artifacts, rec->id};
		const struct sessionexec_bg_result res = {
		    eid, ran == SERVE_RAN ? &sr : NULL,
		    ran == SERVE_RAN    ? NULL
		    : ran == SERVE_GONE ? "the session ended before the execution ran"
		    : ran == SERVE_LOST
		        ? EXECUTE_SESSION_LOST
		        : "the sandbox could not run the program; see the service log"};
		struct jsonw jw;

		session_file(rec->id, "result.tmp", tmp, sizeof(tmp));
		session_file(rec->id, "result", name, sizeof(name));
		fd = openat(wc->sessions_fd, tmp,
		            O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0) {
			jsonw_init_sink(&jw, sessionexec_file_put, &fd);
			write_bg_result(&jw, &res);
			if (jsonw_end(&jw) < 0 || close(fd) < 0 ||
			    renameat(wc->sessions_fd, tmp, wc->sessions_fd, name) < 0)
				log_msg(LOG_ERROR,
				        "writing a background execution's answer failed");
		}
	}
	if (ran == SERVE_RAN)
		sessionexec_notebook_keep(wc->sessions_fd, rec->id, r, &o);
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
sessionexec_background(const struct worker_request *w, FCGX_Request *req,
                       const struct session_rec *rec, const struct request *r, int conn,
                       int lock_fd)
{
	const struct worker_config *wc = w->wc;
	struct sessionexec_bg_out out = {{-1, -1}};
	uint8_t raw[8];
	char eid[17], name[64], line[64], answer[256];
	int fd, len, loan;
	pid_t child, pool;

	/* it runs code as a foreground execution does: it is admitted for an execution slot,
	 * lent to its watcher for as long as it runs */
	loan = surface_slot_lend(w, getpid());
	if (loan < 0) {
		close(conn);
		if (loan == SLOTS_LOAN_FULL) {
			metrics_record_busy();
			http_send_message(req, 429, HTTP_BUSY_POOL, "sandbox_busy",
			                  "all execution slots are in use; retry shortly");
		} else if (loan == SLOTS_LOAN_TENANT) {
			metrics_record_busy_tenant();
			http_send_message(req, 429, HTTP_BUSY_TENANT, "sandbox_busy",
			                  SURFACE_TENANT_BUSY);
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
		sessionexec_watch(w, rec, r, conn, lock_fd, &out, eid, loan, pool);
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
sessionexec_read(int sdir, const char *id, const char *what, size_t max, size_t *len)
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
sessionexec_last_is(int sdir, const char *id, const char *eid)
{
	size_t len = 0, n = strlen(eid);
	char *run = sessionexec_read(sdir, id, "run", 63, &len);
	bool is = run != NULL && strncmp(run, eid, n) == 0 && run[n] == ' ';

	free(run);
	return is;
}

void
sessionexec_execute(const struct worker_request *w, FCGX_Request *req,
                    const struct session_rec *rec, int lock_fd)
{
	const struct worker_config *wc = w->wc;
	const struct limits *l = &w->l;
	struct request r;
	struct run_outcome o;
	char message[256], path[128];
	char *body = NULL;
	long n;
	struct worker_session ses = {.conn = -1, .sb = &rec->sb};
	struct stream_sse sse;
	enum serve_ran ran;
	bool streamed, background;
	long wall_ms;
	json_t *root;

	if (lock_fd < 0) {
		http_send_message(req, 409, NULL, "session_busy",
		                  "an execution is running in this session; wait for it, or "
		                  "interrupt it (POST /sessions/{id}/interrupt)");
		return;
	}
	n = http_read_body(req, wc->max_body_bytes, &body);
	if (n == HTTP_BODY_TOO_LARGE || n < 0) {
		http_send_message(
		    req, n < 0 && n != HTTP_BODY_TOO_LARGE ? 400 : 413, NULL,
		    n == HTTP_BODY_TOO_LARGE ? "request_too_large" : "invalid_request",
		    n == HTTP_BODY_TOO_LARGE ? "the request body is larger than this server accepts"
		                             : "the request body could not be read");
		return;
	}
	root = request_load(body, (size_t)n, message, sizeof(message));
	free(body);
	if (root != NULL &&
	    sessionexec_body(root, &w->sl, &background, &wall_ms, message, sizeof(message)) < 0) {
		json_decref(root);
		root = NULL;
	}
	if (root == NULL || request_take(&r, root, l, message, sizeof(message)) < 0) {
		http_send_message(req, 400, NULL, "invalid_request", message);
		return;
	}
	session_sock_path(wc->sessions_fd, rec->id, path, sizeof(path));
	ses.conn = run_session_connect(path);
	if (ses.conn < 0) {
		request_free(&r);
		execute_session_unknown(req);
		return;
	}
	if (background) {
		r.wall_ms = wall_ms;
		sessionexec_background(w, req, rec, &r, ses.conn, lock_fd);
		request_free(&r);
		return;
	}
	execute_sse_init(req, &sse, NULL, &streamed);
	ran = execute_run(w, req, &r, r.artifacts ? ARTIFACTS_ALL : ARTIFACTS_NONE,
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
		execute_answer(req, ran, streamed ? &sse : NULL, write_session_reply, &sr, true);
	}
	if (ran == SERVE_RAN)
		sessionexec_notebook_keep(wc->sessions_fd, rec->id, &r, &o);
	/* it ended with this execution, whose worker holds its lock: removed now */
	if (ran == SERVE_RAN && o.session_over)
		session_remove(wc->sessions_fd, (struct session_rec *)rec, METRICS_SESSION_KILLED);
	if (ran == SERVE_RAN)
		run_outcome_free(&o);
	close(ses.conn);
	request_free(&r);
}

/*
 * Takes a stream slot for this worker: at most CODEBOX_MAX_STREAMS in the pod,
 * SESSION_STREAMS_PER_SESSION of rec's, and (with tokens) half of the pod's of one token's.
 * Returns 0, or -1 having answered 429 (Codebox-Busy: streams, or tenant) or 503.
 */
static int
sessionexec_stream_take(const struct worker_request *w, FCGX_Request *req,
                        const struct session_rec *rec)
{
	const char *auth = w->token_id;
	const unsigned tag[2] = {surface_tag(rec->id), surface_tag(auth)};
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
#define SESSIONEXEC_LOST "the execution's watcher ended without an answer"

/* The longest a stream of a background execution lasts (it holds a worker and a stream slot). */
#define SESSIONEXEC_STREAM_MS 600000

static void sessionexec_tail(const struct worker_request *w, FCGX_Request *req,
                             const struct session_rec *rec, const char *eid,
                             struct stream_sse *sse);

/* Keep-alives of a long stream, so that no proxy takes its silence for a dead peer. */
#define SESSIONEXEC_KEEPALIVE_MS 10000

void
sessionexec_poll(const struct worker_request *w, FCGX_Request *req, const struct session_rec *rec,
                 const char *eid)
{
	int sdir = w->wc->sessions_fd;
	size_t len = 0, out_len = 0, err_len = 0;
	char *res, *out, *err;
	struct stream_sse sse;
	bool streamed;

	if (!sessionexec_last_is(sdir, rec->id, eid)) {
		http_send_message(req, 404, NULL, "not_found",
		                  "no such execution: a session keeps its last background "
		                  "execution only");
		return;
	}
	execute_sse_init(req, &sse, NULL, &streamed);
	if (!streamed) {
		res = sessionexec_read(sdir, rec->id, "result", 256u << 20, &len);
		if (res != NULL) {
			http_send(req, 200, NULL, res, len);
			free(res);
			return;
		}
		/* no answer and nobody holding the session: its watcher died without one */
		bool lost = !session_locked(sdir, rec->id);
		res = sessionexec_read(sdir, rec->id, "result", 256u << 20, &len);
		if (res != NULL) { /* it ended between the two looks */
			http_send(req, 200, NULL, res, len);
			free(res);
			return;
		}
		out = sessionexec_read(sdir, rec->id, "stdout", w->l.max_stdout_bytes, &out_len);
		err = sessionexec_read(sdir, rec->id, "stderr", w->l.max_stderr_bytes, &err_len);
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
		                    err8, err8_len, "error", lost ? SESSIONEXEC_LOST : NULL)
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
	 * per pod, per session and per token, and lasts SESSIONEXEC_STREAM_MS at most */
	if (sessionexec_stream_take(w, req, rec) == 0) {
		sessionexec_tail(w, req, rec, eid, &sse);
		slots_release(w->wc->streams, w->wc->index);
	}
}

/* A look of a stream of a background execution: the files' new bytes from off[] as events
 * (*quiet: when it last sent one), and the answer if it is there (NULL if not; free() it). */
static char *
sessionexec_tail_look(int sdir, const char *id, struct stream_sse *sse, off_t off[2],
                      long long *quiet, size_t *len)
{
	char *res = sessionexec_read(sdir, id, "result", 256u << 20, len);
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
sessionexec_tail_over(int sdir, const char *id, const char *eid, const char **error)
{
	sigset_t pending;

	/* a SIGTERM stays blocked (pending) while a request is served: worker_main() */
	if (sigpending(&pending) == 0 &&
	    (sigismember(&pending, SIGTERM) == 1 || sigismember(&pending, SIGINT) == 1)) {
		*error = "sandbox_unavailable";
		return "the service is stopping, and its sessions end with it; retry shortly";
	}
	if (!sessionexec_last_is(sdir, id, eid)) {
		*error = "not_found";
		return EXECUTE_SESSION_UNKNOWN;
	}
	if (!session_locked(sdir, id)) {
		*error = "execution_lost";
		return SESSIONEXEC_LOST;
	}
	return NULL;
}

/* The stream of sessionexec_poll(), its slot taken: the files' new bytes every 100 ms,
 * then the answer, or an error event as soon as none can come (sessionexec_tail_over()). */
static void
sessionexec_tail(const struct worker_request *w, FCGX_Request *req, const struct session_rec *rec,
                 const char *eid, struct stream_sse *sse_p)
{
	int sdir = w->wc->sessions_fd;
	struct stream_sse sse = *sse_p;
	long long deadline = util_now_ms() + SESSIONEXEC_STREAM_MS;
	long long quiet = util_now_ms();
	off_t off[2] = {0, 0};

	stream_sse_start(&sse, NULL);
	for (;;) {
		const char *why = NULL, *error = NULL;
		size_t len = 0;
		char *res = sessionexec_tail_look(sdir, rec->id, &sse, off, &quiet, &len);

		if (res == NULL &&
		    (why = sessionexec_tail_over(sdir, rec->id, eid, &error)) != NULL)
			/* the answer may have come since that look: the watcher writes it, then
			 * ends */
			res = sessionexec_tail_look(sdir, rec->id, &sse, off, &quiet, &len);
		if (res != NULL) {
			const struct execute_raw raw = {res, len};
			stream_sse_end(&sse, execute_write_raw, &raw);
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
		if (util_now_ms() - quiet >= SESSIONEXEC_KEEPALIVE_MS) {
			(void)sse.put(sse.ctx, ": keep-alive\n\n", 14);
			sse.flush(sse.ctx);
			quiet = util_now_ms();
		}
		struct timespec tick = {0, 100 * 1000 * 1000};
		nanosleep(&tick, NULL);
	}
}