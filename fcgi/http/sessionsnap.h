/*
 * sessionsnap.h - a session's snapshots: POST /sessions/{id}/snapshot (its state, serialized
 * by its own interpreter, sealed with the pod's or the fleet's key: snapshot.h), and the
 * restore of one into a new session (POST /sessions {"snapshot": ...}); MCP's tools/call
 * takes them as well ("snapshot": true).
 */
#ifndef CODEBOX_SESSIONSNAP_H
#define CODEBOX_SESSIONSNAP_H

#include <fcgiapp.h>
#include <jansson.h>
#include <stddef.h>

#include "run/session.h"
#include "http/surface.h"

/* Why a snapshot or a restore was not made: an HTTP status (0: the client left, no answer),
 * its error and sentence; a tool error's text over MCP. */
struct sessionsnap_refusal {
	int status;
	const char *error;
	const char *extra_header;
	char message[512];
};

/* A snapshot taken (sessionsnap_take()): {"snapshot", "bytes", the summary's members}. */
struct sessionsnap_reply {
	char *b64;
	size_t b64_len;
	size_t bytes;
	char *members; /* a JSON object's text, "{...}" */
	char uri[96];  /* MCP's resource's */
};

/* A snapshot's bound for a session of memory_bytes: CODEBOX_SNAPSHOT_MAX_BYTES, and never
 * more than its memory (which holds its state, and the memfd the program writes). */
size_t sessionsnap_max(const struct worker_request *w, unsigned long long memory_bytes);

/*
 * A snapshot of session rec (its lock held): its state, serialized by its own interpreter into
 * a memfd, read within the bound, sealed (snapshot.h): 0 with sr filled (free its b64 and
 * members), or -1 with the refusal in f (the session removed if it ended meanwhile).
 */
int sessionsnap_take(const struct worker_request *w, FCGX_Request *req, struct session_rec *rec,
                     struct sessionsnap_reply *sr, struct sessionsnap_refusal *f);

/* POST /sessions/{id}/snapshot under the session's lock (lock_fd; -1: it was not free, a cell
 * runs: answered 409 session_busy, the body unread): sessionsnap_take(), answered. */
void sessionsnap_snapshot(const struct worker_request *w, FCGX_Request *req,
                          struct session_rec *rec, int lock_fd);

/*
 * A new session (rec, just made: no one knows its id) loads payload, a checked snapshot:
 * 0 with the restore's summary (free() it) in *members, or -1 answered, the session closed
 * and removed (nothing of it left).
 */
int sessionsnap_restore(const struct worker_request *w, FCGX_Request *req, struct session_rec *rec,
                        const char *auth, const unsigned char *payload, size_t len, char **members);

/* POST /sessions' "snapshot": checked whole (snapshot_open()) before anything is made; 0 with
 * its payload (free() it), or -1 answered (400, 413, 422). */
int sessionsnap_check(const struct worker_request *w, FCGX_Request *req, json_t *snap, size_t max,
                      unsigned char **payload, size_t *len);

#endif
