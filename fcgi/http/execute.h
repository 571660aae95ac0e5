/*
 * execute.h - POST /execute, and the run glue every surface of port 8080 runs through (a
 * session's execution and MCP's tools/call as well): a request admitted by an execution slot
 * and run (serve.h), its output as an event stream when the client asks for one (stream.h),
 * and its answer.
 */
#ifndef CODEBOX_EXECUTE_H
#define CODEBOX_EXECUTE_H

#include <fcgiapp.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/files.h"
#include "core/jsonw.h"
#include "core/metrics.h"
#include "http/request.h"
#include "run/serve.h"
#include "http/stream.h"
#include "http/surface.h"

/* A session that is not there (or not the caller's): one answer for all the cases. */
#define EXECUTE_SESSION_UNKNOWN                                                                    \
	"no such session: it was never made, it ended (closed, idle or too old, or its program "   \
	"was killed, or its server stopped), or it is another token's"

/* A session whose init was killed from outside while its execution ran: as /execute's run, not
 * the program's doing, nor an unknown session's 404 (the client could not tell whether its
 * code ran); the session ended with it. */
#define EXECUTE_SESSION_LOST                                                                       \
	"the session's sandbox was killed from outside while the execution ran; the session has "  \
	"ended: start a new one and retry"

/* A text written as it is (an answer made before, as the SSE stream's last event), by
 * execute_write_raw(). */
struct execute_raw {
	const char *text;
	size_t len;
};

void execute_write_raw(struct jsonw *jw, const void *ctx);

/*
 * A client's SSE writer into req's FastCGI stream (sse), with progress_token (MCP's; NULL:
 * none); *on tells whether its Accept asks for one. When it does, a write that blocks longer
 * than a client that stopped reading is allowed to hold the worker breaks the stream.
 */
void execute_sse_init(FCGX_Request *req, struct stream_sse *sse, const json_t *progress_token,
                      bool *on);

/* An error answer: as JSON, or, once the SSE stream's head is out (sse not NULL), as its last
 * event. */
void execute_send_message(FCGX_Request *req, struct stream_sse *sse, int status,
                          const char *extra_header, const char *error, const char *message);

/* The 404 of a session that is not there (EXECUTE_SESSION_UNKNOWN). */
void execute_session_unknown(FCGX_Request *req);

/*
 * Runs r for POST /execute, a session's execution (ses not NULL) and MCP's tools/call alike
 * (serve_run()), admitted by an execution slot, its output streamed to sse when not NULL. o is
 * filled when SERVE_RAN (run_outcome_free() it).
 */
enum serve_ran execute_run(const struct worker_request *w, FCGX_Request *req,
                           const struct request *r, enum artifacts_want want,
                           enum metrics_port port, const struct worker_session *ses,
                           struct stream_sse *sse, struct run_outcome *o);

/*
 * Answers what execute_run() came to, for /execute and a session's execution (session) alike:
 * the reply (write(ctx)) as JSON or as the SSE stream's last event, or the error (an event too
 * once the stream's head is out).
 */
void execute_answer(FCGX_Request *req, enum serve_ran ran, struct stream_sse *sse,
                    void (*write)(struct jsonw *w, const void *ctx), const void *ctx, bool session);

/* POST /execute (its endpoint's handler, http.h; port: the struct worker_request). */
void execute_handle(void *port, FCGX_Request *req);

#endif
