/*
 * sessionapi.h - the /sessions surface of port 8080: POST and GET /sessions, GET and DELETE
 * /sessions/{id}, and /sessions/{id}/{sub} by a table of sub-paths (sessionexec.h's
 * executions, sessionsnap.h's snapshots, sessionfiles.h's files, restart and interrupt); and
 * the start of a session, which MCP's tools/call shares.
 */
#ifndef CODEBOX_SESSIONAPI_H
#define CODEBOX_SESSIONAPI_H

#include <fcgiapp.h>

#include "run/session.h"
#include "http/surface.h"

/* What came of starting a session (sessionapi_start()). */
enum sessionapi_started {
	SESSIONAPI_STARTED,
	SESSIONAPI_START_OFF,         /* sessions are off here: 503 */
	SESSIONAPI_START_BUSY,        /* no execution slot: 429 */
	SESSIONAPI_START_STUCK,       /* the slots' lock: 503 */
	SESSIONAPI_START_FULL,        /* the pod holds CODEBOX_MAX_SESSIONS: 429 */
	SESSIONAPI_START_TENANT,      /* the token holds CODEBOX_MAX_SESSIONS_PER_TOKEN: 429 */
	SESSIONAPI_START_TENANT_RUNS, /* ...or CODEBOX_MAX_EXECUTIONS_PER_TOKEN slots: 429 */
	SESSIONAPI_START_MEMORY, /* the sessions' memory caps would exceed the pool's budget: 429 */
	SESSIONAPI_START_DRAINING, /* the pod is draining (SIGUSR1): 429, another pod takes it */
	SESSIONAPI_START_FAILED,   /* 503, logged */
};

/* Starts a session with the bounds idle and life and a memory cap of memory_bytes (0: the
 * runs' own), bound to auth (the token's id, or NULL), into rec. Building its box is a run's
 * start: it holds an execution slot meanwhile. */
enum sessionapi_started sessionapi_start(const struct worker_request *w, unsigned idle,
                                         unsigned life, unsigned long long memory_bytes,
                                         const char *auth, struct session_rec *rec);

/* The sentence for a session that could not start; its HTTP status in *status and, for a 429,
 * its headers in *extra (which bound refused: Codebox-Busy), else NULL. */
const char *sessionapi_start_message(enum sessionapi_started st, int *status, const char **error,
                                     const char **extra);

/*
 * Calls each(rec, a, ctx) for each of auth's open sessions (a token's own; every one where
 * tokens are off), at most CODEBOX_MAX_SESSIONS, with its init's answer to a ping in a, or a
 * NULL (its backlog is full: busy, with no word of its use); one that ended since it was
 * listed is left out. Returns 0, or -1 out of memory (nothing called).
 */
int sessionapi_each(const struct worker_request *w, const char *auth,
                    void (*each)(const struct session_rec *rec, const struct session_answer *a,
                                 void *ctx),
                    void *ctx);

/* /sessions and everything beneath it (its endpoint's handler, http.h; port: the struct
 * worker_request). */
void sessionapi_handle(void *port, FCGX_Request *req);

#endif
