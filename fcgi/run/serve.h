/*
 * serve.h - one request's run, for every port: its admission, the run (in a fresh box or in a
 * session's), its audit trail entry, its metrics and its log lines. What differs by port is
 * passed in (how it admits, what it calls the run, the exit codes it tells), as nginx finishes
 * every handler through one ngx_http_finalize_request(); each port writes its own answer.
 */
#ifndef CODEBOX_SERVE_H
#define CODEBOX_SERVE_H

#include "run/history.h"
#include "core/metrics.h"
#include "run/sessionrun.h"

/* What came of admitting and running one request. */
enum serve_ran {
	SERVE_RAN,          /* o holds the outcome: answer it, then run_outcome_free() it */
	SERVE_BUSY,         /* the admission was taken (a slot, the workspace): 429 */
	SERVE_BUSY_TENANT,  /* the caller's token holds its share of the slots: 429 (tenant) */
	SERVE_STUCK,        /* the admission could not be decided in time: 503 */
	SERVE_LOST,         /* the run's init was killed from outside */
	SERVE_FAILED,       /* the sandbox could not run it */
	SERVE_ABANDONED,    /* the client left: no answer */
	SERVE_GONE,         /* the session ended before it took the execution */
	SERVE_SESSION_BUSY, /* a cell of the session's is still ending */
};

/* How a port admits a run: take() at once (SERVE_RAN when taken; SERVE_BUSY when it is held,
 * never waited for; SERVE_STUCK when it cannot be told in a bounded wait), give() back the
 * moment the run is over, before its answer leaves. */
struct serve_admission {
	enum serve_ran (*take)(const void *ctx);
	void (*give)(const void *ctx);
	const void *ctx;
};

/* What a port is, to its runs. */
struct serve_port {
	enum metrics_port port; /* its metrics, and its name in the audit trail and the log */
	const struct history_config *history;
	/* the exit codes it tells for what has none of the program's, or -1: none (a timed-out
	 * run's, a run whose init was killed from outside, a run that could not start) */
	int timed_out_exit, lost_exit, failed_exit;
};

/* One request's run. */
struct serve_req {
	const struct serve_admission *admit; /* NULL: admitted already (a background execution) */
	const struct run_config *run;
	struct run_stream *stream; /* a fresh box's stream (unused with a session) */
	int session_conn;          /* >= 0: a session's execution, connected to its init */
	const struct run_session_box *sb;
	const char *request_id;
	bool in_flight; /* counted in run->worker_index's in-flight gauge while it runs */
	/* called once admitted, before the run (an event stream's head goes out), or NULL */
	void (*admitted)(void *ctx);
	void *admitted_ctx;
};

/*
 * Admits q, runs spec, and records it (audit trail, metrics, log line). o is filled when
 * SERVE_RAN, with the artifacts' types found; the admission is given back before this
 * returns. BUSY is counted as the pool's own 429.
 */
enum serve_ran serve_run(const struct serve_port *p, const struct serve_req *q,
                         const struct run_spec *spec, struct run_outcome *o);

/* The exit code p tells for o: the program's, or the port's for a timeout; false: none. */
bool serve_exit_code(const struct serve_port *p, const struct run_outcome *o, int *code);

#endif
