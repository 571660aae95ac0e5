/*
 * execute.c - POST /execute, and the run glue every surface of port 8080 runs through: a
 * request admitted by one of the pool's execution slots (the pool, not nginx, is the
 * authority on them: it knows what runs), run by serve_run() in a fresh box or in a session's,
 * its output streamed as Server-Sent Events when the client's Accept asks for them, and its
 * answer (reply.h) as JSON or as the stream's last event.
 */
#include "http/execute.h"
#include "warm/warm.h"

#include "http/http.h"
#include "core/log.h"
#include "http/reply.h"
#include "core/slots.h"

#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>

/* How long one write of an event stream may block (a client that stops reading). */
#define EXECUTE_SSE_SEND_TIMEOUT_S 10

/* The SSE writer's sinks into the FastCGI stream (stream.h) */
static int
execute_fcgx_put(void *ctx, const char *p, size_t n)
{
	FCGX_Request *req = ctx;

	return FCGX_PutStr(p, (int)n, req->out) == (int)n ? 0 : -1;
}

static void
execute_fcgx_flush(void *ctx)
{
	FCGX_Request *req = ctx;

	(void)FCGX_FFlush(req->out);
}

static void
execute_sse_output(void *ctx, int which, const char *p, size_t n)
{
	stream_sse_output(ctx, which, p, n);
}

void
execute_sse_init(FCGX_Request *req, struct stream_sse *sse, const json_t *progress_token, bool *on)
{
	memset(sse, 0, sizeof(*sse));
	sse->put = execute_fcgx_put;
	sse->flush = execute_fcgx_flush;
	sse->ctx = req;
	sse->progress_token = progress_token;
	*on = stream_wanted(FCGX_GetParam("HTTP_ACCEPT", req->envp));
	if (*on) {
		/* a client that stops reading must not hold the worker (and so the run's deadline)
		 * in a write: past this, the stream is broken and the rest is not sent */
		struct timeval tv = {EXECUTE_SSE_SEND_TIMEOUT_S, 0};
		(void)setsockopt(req->ipcFd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	}
}

void
execute_write_raw(struct jsonw *jw, const void *ctx)
{
	const struct execute_raw *r = ctx;

	jsonw_raw(jw, r->text, r->len);
}

void
execute_send_message(FCGX_Request *req, struct stream_sse *sse, int status,
                     const char *extra_header, const char *error, const char *message)
{
	if (sse != NULL && sse->started)
		stream_sse_error(sse, NULL, 0, error, message);
	else
		http_send_message(req, status, extra_header, error, message);
}

/* Port 8080's admission (serve.h): one of the pool's execution slots, which the pool, not
 * nginx, is the authority on: it knows what runs. */
static enum serve_ran
execute_slot_take(const void *ctx)
{
	const struct worker_request *w = ctx;
	bool tenant;

	switch (surface_slot_take(w, &tenant)) {
	case SLOTS_TAKEN:
		return SERVE_RAN;
	case SLOTS_FULL:
		if (tenant)
			return SERVE_BUSY_TENANT;
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
execute_slot_give(const void *ctx)
{
	const struct worker_request *w = ctx;

	slots_release(w->wc->slots, w->wc->index);
}

/* an event stream's head goes out once the run is admitted (stream.h) */
static void
execute_sse_admitted(void *ctx)
{
	stream_sse_start(ctx, NULL);
}

enum serve_ran
execute_run(const struct worker_request *w, FCGX_Request *req, const struct request *r,
            enum artifacts_want want, enum metrics_port port, const struct worker_session *ses,
            struct stream_sse *sse, struct run_outcome *o)
{
	const struct serve_admission admit = {execute_slot_take, execute_slot_give, w};
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
		q.admitted = execute_sse_admitted;
		q.admitted_ctx = sse;
		spec.on_output = execute_sse_output;
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

void
execute_answer(FCGX_Request *req, enum serve_ran ran, struct stream_sse *sse,
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
	case SERVE_BUSY_TENANT:
		http_send_message(req, 429, HTTP_BUSY_TENANT, "sandbox_busy", SURFACE_TENANT_BUSY);
		break;
	case SERVE_STUCK:
		http_send_message(req, 503, NULL, "sandbox_unavailable",
		                  "the sandbox cannot admit runs right now; retry shortly");
		break;
	case SERVE_GONE: /* the session ended before it took the execution: it never ran */
		execute_send_message(req, sse, 404, NULL, "not_found", EXECUTE_SESSION_UNKNOWN);
		break;
	case SERVE_LOST: /* not the program's doing: a new sandbox would run it */
		execute_send_message(req, sse, 503, NULL, "sandbox_unavailable",
		                     session ? EXECUTE_SESSION_LOST
		                             : "the run's sandbox was killed from outside; retry");
		break;
	case SERVE_SESSION_BUSY:
		execute_send_message(req, sse, 409, NULL, "session_busy",
		                     "the session is still stopping its last execution; retry in a "
		                     "moment");
		break;
	case SERVE_FAILED:
		execute_send_message(req, sse, 500, NULL, "sandbox_error",
		                     "the sandbox could not run the program; see the service log");
		break;
	case SERVE_ABANDONED:
		break;
	}
}

void
execute_session_unknown(FCGX_Request *req)
{
	http_send_message(req, 404, NULL, "not_found", EXECUTE_SESSION_UNKNOWN);
}

/* POST /execute: a request (request.h) admitted, run and answered (reply.h). */
void
execute_handle(void *port, FCGX_Request *req)
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
	execute_sse_init(req, &sse, NULL, &streamed);
	ran = execute_run(w, req, &r, r.artifacts ? ARTIFACTS_ALL : ARTIFACTS_NONE,
	                  METRICS_PORT_EXECUTE, NULL, streamed ? &sse : NULL, &o);
	{
		const struct execute_reply er = {&o, l->max_result_bytes, r.details, w->request_id,
		                                 r.artifacts};
		execute_answer(req, ran, streamed ? &sse : NULL, write_execute_reply, &er, false);
	}
	if (ran == SERVE_RAN)
		run_outcome_free(&o);
	request_free(&r);
}
