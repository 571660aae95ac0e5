/*
 * sessionexec.h - a session's executions: POST /sessions/{id}/execute in the foreground or in
 * the background (under a watcher), GET /sessions/{id}/executions/{eid} (a background one's
 * state, or its output as an event stream), and the notebook they are kept in (GET
 * /sessions/{id}/notebook).
 */
#ifndef CODEBOX_SESSIONEXEC_H
#define CODEBOX_SESSIONEXEC_H

#include <fcgiapp.h>

#include "core/outcome.h"
#include "http/request.h"
#include "run/session.h"
#include "http/surface.h"

/* The executed cell into the session's notebook (notebook.h); a failure is logged only. */
void sessionexec_notebook_keep(int sdir, const char *id, const struct request *r,
                               const struct run_outcome *o);

/* GET /sessions/{id}/notebook: the cells run so far as an .ipynb */
void sessionexec_notebook(const struct worker_request *w, FCGX_Request *req, const char *id);

/*
 * POST /sessions/{id}/execute, under the session's lock (lock_fd; -1: it was not free, a cell
 * runs: answered 409 session_busy, the body unread): POST /execute's body run in
 * the session, answered as /execute's run is (as JSON, or as an event stream), and kept in its
 * notebook; with "background": true, started under a watcher that holds the lock and an
 * execution slot, and answered 202 at once (GET /sessions/{id}/executions/{eid} then tells).
 */
void sessionexec_execute(const struct worker_request *w, FCGX_Request *req,
                         const struct session_rec *rec, int lock_fd);

/*
 * GET /sessions/{id}/executions/{eid}: a background execution's state. Running: its output so
 * far; done: its answer ({"execution", "state": "done", "outcome"}). With Accept:
 * text/event-stream: its output as it comes (from the start), then the answer as the last
 * event, bounded by the execution's own bound.
 */
void sessionexec_poll(const struct worker_request *w, FCGX_Request *req,
                      const struct session_rec *rec, const char *eid);

#endif
