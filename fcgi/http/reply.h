/*
 * reply.h - every response body the worker writes.
 */
#ifndef CODEBOX_REPLY_H
#define CODEBOX_REPLY_H

#include <stdbool.h>
#include <stddef.h>

#include "core/isolation.h"
#include "core/jsonw.h"
#include <jansson.h>

#include "core/limits.h"
#include "core/outcome.h"
#include "run/probe.h"

/*
 * The 200 body of POST /execute: exactly the eight keys in contract order, plus "details"
 * when asked and "artifacts" (o->artifacts, written by artifacts_write()) when artifacts, into
 * w (any kind of writer: a reply is counted, then streamed after its length).
 */
void reply_outcome_write(struct jsonw *w, const struct run_outcome *o, size_t max_result_bytes,
                         bool details, const char *request_id, bool artifacts);

/*
 * A session's execution (session.h): the same keys, then "value" (the final expression's
 * repr, or null) and "session" ({"id", "open": false once it ended with this execution}).
 */
void reply_session_outcome_write(struct jsonw *w, const struct run_outcome *o,
                                 size_t max_result_bytes, bool details, const char *request_id,
                                 bool artifacts, const char *session_id);

/* The same as a newly allocated NUL-terminated string (caller frees), or NULL. */
char *reply_outcome(const struct run_outcome *o, size_t max_result_bytes, bool details,
                    const char *request_id, bool artifacts, size_t *len);

/*
 * {"error": error, "message": message}; error NULL: {"message": message} alone (the shape of
 * the agent-sandbox example runtime's answers, port 8888's). Caller frees; NULL when out of
 * memory.
 */
char *reply_error(const char *error, const char *message, size_t *len);

/*
 * The /capabilities document from measured versions and the enforced limits. The persistence
 * sentence claims that no file survives only when files_contained (a private mount or
 * Landlock confines writes to the working directory).
 */
char *reply_capabilities(const struct probe_info *info, const struct limits *l,
                         bool files_contained, size_t *len);

/*
 * The /isolation document: the layers in force (probed at start-up), why each missing one is
 * off, the uids runs execute as, whether this worker's runs fork from a warm interpreter
 * (details.interpreter "warm") or start one (cold), the limits /capabilities cannot carry, and
 * port 8888's workspace bounds ("workspace": {"bytes", "inodes"}, or null when workspace_bytes
 * is 0: the agent protocol is off). warm_start: how a warm run starts (details.warmStart:
 * "one-copy" or "copy", null when cold).
 */
char *reply_isolation(const struct isolation *iso, const struct limits *l, bool warm,
                      const char *warm_start, unsigned long long workspace_bytes,
                      unsigned long long workspace_inodes, json_t *sessions, size_t *len);

#endif
