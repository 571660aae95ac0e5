/*
 * sessionsnap.c - a session's snapshots and restores (sessionsnap.h). Each is a cell of the
 * session's own program without code (SESSION_OP_SNAPSHOT, SESSION_OP_RESTORE), run as any
 * execution is (execute_run(): an execution slot, the session's execution timeout), with a
 * memfd as its fd 0: the snapshot's, read back within the bound and sealed; the restore's,
 * sealed against writes, holding a payload whose seal was checked before anything was made.
 * The program's account of it (a JSON object) is untrusted: parsed, and only its members go
 * into the answer.
 */
#include "http/sessionsnap.h"

#include "http/execute.h"
#include "http/http.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/sessionproto.h"
#include "core/snapshot.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

size_t
sessionsnap_max(const struct worker_request *w, unsigned long long memory_bytes)
{
	unsigned long long max = (unsigned long long)w->sl.snapshot_max_bytes;

	return (size_t)(memory_bytes > 0 && memory_bytes < max ? memory_bytes : max);
}

/* A session's snapshot or restore (op), run as execute_run() runs a cell: no code, its memfd
 * blob_fd as the program's fd 0, the session's execution timeout as its deadline. */
static enum serve_ran
sessionsnap_run(const struct worker_request *w, FCGX_Request *req, const struct session_rec *rec,
                int op, int blob_fd, size_t blob_max, struct run_outcome *o)
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
	ran = execute_run(w, req, &r, ARTIFACTS_NONE, METRICS_PORT_EXECUTE, &ses, NULL, o);
	close(ses.conn);
	return ran;
}

static void
sessionsnap_refuse(struct sessionsnap_refusal *f, int status, const char *error,
                   const char *message)
{
	f->status = status;
	f->error = error;
	f->extra_header = status == 429 ? HTTP_BUSY_POOL : NULL;
	snprintf(f->message, sizeof(f->message), "%s", message);
}

static void
sessionsnap_refusal_send(FCGX_Request *req, const struct sessionsnap_refusal *f)
{
	if (f->status != 0)
		http_send_message(req, f->status, f->extra_header, f->error, f->message);
}

/* A cell that came to no outcome (ran), as a refusal. */
static void
sessionsnap_refuse_not_run(struct sessionsnap_refusal *f, enum serve_ran ran)
{
	switch (ran) {
	case SERVE_BUSY:
		sessionsnap_refuse(f, 429, "sandbox_busy",
		                   "all execution slots are in use; retry shortly");
		return;
	case SERVE_BUSY_TENANT:
		sessionsnap_refuse(f, 429, "sandbox_busy", SURFACE_TENANT_BUSY);
		f->extra_header = HTTP_BUSY_TENANT;
		return;
	case SERVE_STUCK:
		sessionsnap_refuse(f, 503, "sandbox_unavailable",
		                   "the sandbox cannot admit runs right now; retry shortly");
		return;
	case SERVE_GONE:
		sessionsnap_refuse(f, 404, "not_found", EXECUTE_SESSION_UNKNOWN);
		return;
	case SERVE_LOST:
		sessionsnap_refuse(f, 503, "sandbox_unavailable", EXECUTE_SESSION_LOST);
		return;
	case SERVE_SESSION_BUSY:
		sessionsnap_refuse(
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
	sessionsnap_refuse(f, 500, "sandbox_error",
	                   "the sandbox could not run it; see the service log");
}

/*
 * What a snapshot's or a restore's cell (what: "snapshot", "restore") came to: 0 with its
 * summary (the program's JSON object, untrusted: parsed, and only as members of the answer's
 * object; free() it) in *members, or -1 with the refusal in f. *over: the session ended.
 */
static int
sessionsnap_outcome(enum serve_ran ran, const struct run_outcome *o, const char *what,
                    long timeout_s, char **members, bool *over, struct sessionsnap_refusal *f)
{
	json_error_t err;
	json_t *sum = NULL;
	const char *said = NULL;
	char message[512];
	bool snap = strcmp(what, "snapshot") == 0;

	*members = NULL;
	*over = ran == SERVE_RAN && o->session_over;
	if (ran != SERVE_RAN) {
		sessionsnap_refuse_not_run(f, ran);
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
		sessionsnap_refuse(f, 503, "sandbox_unavailable", message);
	} else if (o->status == RUN_TIMED_OUT) {
		snprintf(
		    message, sizeof(message),
		    "the %s did not finish within %ld s (the session's timeoutSeconds) and was "
		    "interrupted; the session lives on",
		    what, timeout_s);
		sessionsnap_refuse(f, 504, "timed_out", message);
	} else if (o->exit_code == 2 && snap) {
		sessionsnap_refuse(f, 413, "snapshot_too_large",
		                   said ? said : "the session is larger than the snapshot bound");
	} else if (o->exit_code != 0 || !json_is_object(sum)) {
		snprintf(message, sizeof(message), "the %s failed: %s", what,
		         said ? said : "the session's program gave no account of it");
		sessionsnap_refuse(f, 422, snap ? "snapshot_failed" : "restore_failed", message);
	} else {
		/* the answer's own keys are the worker's */
		json_object_del(sum, "snapshot");
		json_object_del(sum, "bytes");
		json_object_del(sum, "payloadBytes");
		*members = json_dumps(sum, JSON_COMPACT);
		json_decref(sum);
		if (*members == NULL) {
			sessionsnap_refuse(f, 500, "sandbox_error", "the worker is out of memory");
			return -1;
		}
		return 0;
	}
	json_decref(sum);
	return -1;
}

static void
write_snapshot_reply(struct jsonw *jw, const void *ctx)
{
	const struct sessionsnap_reply *e = ctx;
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
sessionsnap_read(int fd, size_t max, size_t *len)
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
sessionsnap_seal(const struct worker_request *w, int fd, size_t max, struct sessionsnap_reply *sr,
                 struct sessionsnap_refusal *f)
{
	size_t len = 0;
	unsigned char *payload = sessionsnap_read(fd, max, &len);
	char message[256];

	if (payload != NULL && len > max) {
		free(payload);
		snprintf(message, sizeof(message),
		         "the session is larger than the snapshot bound of %zu bytes", max);
		sessionsnap_refuse(f, 413, "snapshot_too_large", message);
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
		sessionsnap_refuse(f, 500, "sandbox_error",
		                   "the snapshot could not be made; see the service log");
		return -1;
	}
	sr->bytes = len;
	return 0;
}

int
sessionsnap_take(const struct worker_request *w, FCGX_Request *req, struct session_rec *rec,
                 struct sessionsnap_reply *sr, struct sessionsnap_refusal *f)
{
	size_t max = sessionsnap_max(w, rec->memory_bytes);
	char name[SESSION_LOG_NAME_LEN + 1];
	struct run_outcome o;
	enum serve_ran ran;
	bool over = false;
	int fd, rc = -1;

	memset(sr, 0, sizeof(*sr));
	fd = memfd_create("codebox-snapshot", MFD_CLOEXEC);
	if (fd < 0) {
		log_msg(LOG_ERROR, "snapshot: memfd_create() failed: %s", strerror(errno));
		sessionsnap_refuse(f, 503, "sandbox_unavailable",
		                   "the snapshot could not be made; retry shortly");
		return -1;
	}
	ran = sessionsnap_run(w, req, rec, SESSION_OP_SNAPSHOT, fd, max, &o);
	session_log_name(rec->id, name);
	if (sessionsnap_outcome(ran, &o, "snapshot", w->l.execution_timeout_seconds, &sr->members,
	                        &over, f) == 0 &&
	    sessionsnap_seal(w, fd, max, sr, f) == 0) {
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

void
sessionsnap_snapshot(const struct worker_request *w, FCGX_Request *req, struct session_rec *rec,
                     int lock_fd)
{
	char *body = NULL;
	long n;
	struct sessionsnap_reply sr;
	struct sessionsnap_refusal f;

	if (lock_fd < 0) {
		http_send_message(req, 409, NULL, "session_busy",
		                  "an execution is running in this session; a snapshot waits "
		                  "for it to end (or interrupt it: POST "
		                  "/sessions/{id}/interrupt)");
		return;
	}
	n = http_read_body(req, 4096, &body);
	free(body);
	if (n < 0) {
		http_send_message(req, n == HTTP_BODY_TOO_LARGE ? 413 : 400, NULL,
		                  n == HTTP_BODY_TOO_LARGE ? "request_too_large"
		                                           : "invalid_request",
		                  "POST /sessions/{id}/snapshot takes no body (or an empty one)");
		return;
	}
	if (sessionsnap_take(w, req, rec, &sr, &f) < 0) {
		sessionsnap_refusal_send(req, &f);
		return;
	}
	if (http_send_written(req, write_snapshot_reply, &sr) < 0)
		http_send_message(req, 500, NULL, "sandbox_error", "the worker is out of memory");
	free(sr.b64);
	free(sr.members);
}

/* A memfd of p[0..n), sealed: the restore's program can only read it. -1 on failure. */
static int
sessionsnap_memfd(const unsigned char *p, size_t n)
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

int
sessionsnap_restore(const struct worker_request *w, FCGX_Request *req, struct session_rec *rec,
                    const char *auth, const unsigned char *payload, size_t len, char **members)
{
	struct session_answer a;
	struct run_outcome o;
	enum serve_ran ran = SERVE_FAILED;
	char path[128], name[SESSION_LOG_NAME_LEN + 1];
	int fd = sessionsnap_memfd(payload, len), lock_fd = -1, rc;
	bool over = false;
	struct sessionsnap_refusal f;

	*members = NULL;
	if (fd < 0)
		log_msg(LOG_ERROR, "restore: the snapshot's memfd: %s", strerror(errno));
	else if (session_find(w->wc->sessions_fd, rec->id, auth, rec, true, &lock_fd) < 0 ||
	         lock_fd < 0)
		ran = SERVE_GONE;
	else
		ran = sessionsnap_run(w, req, rec, SESSION_OP_RESTORE, fd, 0, &o);
	if (fd >= 0)
		close(fd);
	rc = sessionsnap_outcome(ran, &o, "restore", w->l.execution_timeout_seconds, members, &over,
	                         &f);
	if (rc < 0)
		sessionsnap_refusal_send(req, &f);
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

int
sessionsnap_check(const struct worker_request *w, FCGX_Request *req, json_t *snap, size_t max,
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