/*
 * serve.c - one request's run, for every port (serve.h).
 */
#include "run/serve.h"

#include "core/files.h"
#include "core/log.h"
#include "run/trace.h"

#include <string.h>

bool
serve_exit_code(const struct serve_port *p, const struct run_outcome *o, int *code)
{
	if (o->has_exit_code) {
		*code = o->exit_code;
		return true;
	}
	*code = p->timed_out_exit;
	return o->status == RUN_TIMED_OUT && p->timed_out_exit >= 0;
}

/* A run that did not take place: its audit trail entry, its log line, and (unless its
 * session was gone or busy) an error in the metrics. */
static enum serve_ran
serve_not_run(const struct serve_port *p, int rc, const struct run_outcome *o, const char *why)
{
	const char *name = metrics_port_name(p->port);
	bool lost = o->fault == RUN_FAULT_LOST;
	int code = lost ? p->lost_exit : p->failed_exit;

	if (rc == RUN_SESSION_GONE || rc == RUN_SESSION_BUSY) {
		history_end(p->history, NULL, 0, false);
		log_msg(LOG_INFO, "%s: the session %s", name,
		        rc == RUN_SESSION_GONE ? "ended before it took the execution"
		                               : "was still ending a cell");
		return rc == RUN_SESSION_GONE ? SERVE_GONE : SERVE_SESSION_BUSY;
	}
	metrics_record_error(p->port);
	history_end(p->history, NULL, code, code >= 0);
	trace_span_end(NULL, code, code >= 0);
	log_msg(LOG_ERROR, "%s: the run %s: %s", name,
	        lost ? "was killed from outside" : "could not start", why);
	return lost ? SERVE_LOST : SERVE_FAILED;
}

enum serve_ran
serve_run(const struct serve_port *p, const struct serve_req *q, const struct run_spec *spec,
          struct run_outcome *o)
{
	const char *name = metrics_port_name(p->port);
	char why[512] = "";
	bool has;
	int rc, code;

	memset(o, 0, sizeof(*o));
	trace_span_begin(name);
	if (q->admit != NULL) {
		enum serve_ran taken = q->admit->take(q->admit->ctx);
		if (taken != SERVE_RAN) {
			if (taken == SERVE_BUSY)
				metrics_record_busy();
			else if (taken == SERVE_BUSY_TENANT)
				metrics_record_busy_tenant();
			return taken;
		}
	}
	trace_span_admitted();
	if (q->admitted != NULL)
		q->admitted(q->admitted_ctx);
	history_begin(p->history, name, spec->code, spec->code_len, q->request_id,
	              trace_current() != NULL ? trace_current()->trace_id : NULL);
	if (q->in_flight)
		metrics_run_begin(q->run->worker_index);
	rc = q->session_conn >= 0
	         ? run_session_execute(q->run, spec, q->session_conn, q->sb, o, why, sizeof(why))
	         : run_execute(q->run, spec, q->stream, o, why, sizeof(why));
	/* the run is over (nothing of it is alive): its admission is free before the answer
	 * leaves, so a client that sends its next request the moment it has it finds it free */
	if (q->admit != NULL)
		q->admit->give(q->admit->ctx);
	if (q->in_flight)
		metrics_run_end(q->run->worker_index);
	if (rc < 0) {
		enum serve_ran ran = serve_not_run(p, rc, o, why);
		run_outcome_free(o);
		return ran;
	}
	has = serve_exit_code(p, o, &code);
	if (o->abandoned) {
		history_end(p->history, o, code, has);
		trace_span_end(o, code, has);
		log_msg(LOG_INFO, "%s: the client left during the run; killed it after %lld ms",
		        name, o->duration_ms);
		run_outcome_free(o);
		return SERVE_ABANDONED;
	}
	metrics_record_run(p->port, o);
	history_end(p->history, o, code, has);
	trace_span_end(o, code, has);
	run_log_outcome(name, o, has, code);
	/* the files' types, found once: an answer is written twice (http_send_written()) */
	o->artifact_types = artifacts_types(o->artifacts, o->artifacts_len);
	return SERVE_RAN;
}
