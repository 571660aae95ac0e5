/*
 * sessionapi.c - the /sessions surface (sessionapi.h): a session's life (its start, its state,
 * the list of the caller's, its restart into a fresh interpreter, its close) and the routing
 * of /sessions/{id}/{sub} by two tables of sub-paths (http.h's endpoints): those served under
 * the session's lock, taken with its record (an execution, a restart, a snapshot: one at a
 * time, never beside a running cell), and those served without it (an interrupt, a poll, the
 * notebook, the files). A session's executions are sessionexec.c's, its snapshots
 * sessionsnap.c's, its files sessionfiles.c's.
 */
#include "http/sessionapi.h"

#include "http/execute.h"
#include "http/http.h"
#include "core/jsonw.h"
#include "core/log.h"
#include "core/metrics.h"
#include "http/sessionexec.h"
#include "http/sessionfiles.h"
#include "core/sessionproto.h"
#include "http/sessionsnap.h"
#include "core/slots.h"
#include "core/snapshot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The session's state and bounds, as GET answers them, into jw; with restored (a restore's
 * 201), what it loaded. */
static void
sessionapi_state_write(struct jsonw *jw, const struct session_rec *rec,
                       const struct session_answer *a, bool busy, const struct limits *l,
                       const char *restored)
{
	jsonw_lit(jw, "{\"id\":");
	jsonw_cstr(jw, rec->id);
	jsonw_lit(jw, ",\"state\":");
	jsonw_cstr(jw, busy ? "busy" : "idle");
	jsonw_lit(jw, ",\"executions\":");
	jsonw_int(jw, a ? (long long)a->executions : 0);
	jsonw_lit(jw, ",\"ageSeconds\":");
	/* its age since it was made, across restarts (each a new box, which counts from 0) */
	jsonw_int(jw, ((a ? a->age_ms : 0) + rec->age_before_ms) / 1000);
	jsonw_lit(jw, ",\"idleSeconds\":");
	jsonw_int(jw, a ? a->idle_ms / 1000 : 0);
	jsonw_lit(jw, ",\"idleTimeoutSeconds\":");
	jsonw_int(jw, rec->idle_seconds);
	jsonw_lit(jw, ",\"maxLifetimeSeconds\":");
	jsonw_int(jw, rec->life_seconds);
	jsonw_lit(jw, ",\"timeoutSeconds\":");
	jsonw_int(jw, l->execution_timeout_seconds);
	jsonw_lit(jw, ",\"memoryBytes\":");
	jsonw_int(jw, (long long)rec->memory_bytes);
	jsonw_lit(jw, ",\"diskBytes\":");
	jsonw_int(jw, (long long)rec->disk_bytes);
	if (restored != NULL) {
		/* what a restore loaded (sessionsnap_restore(): checked JSON) */
		jsonw_lit(jw, ",\"restored\":");
		jsonw_raw(jw, restored, strlen(restored));
	}
	jsonw_lit(jw, "}");
}

/* The session's state and bounds, as GET answers and POST /sessions' 201 says. */
static void
sessionapi_state(FCGX_Request *req, int status, const struct session_rec *rec,
                 const struct session_answer *a, bool busy, const struct limits *l,
                 const char *restored)
{
	struct jsonw jw;
	size_t len;
	char *doc;

	jsonw_init(&jw);
	sessionapi_state_write(&jw, rec, a, busy, l, restored);
	doc = jsonw_take(&jw, &len);
	if (doc == NULL) {
		http_send_message(req, 500, NULL, "sandbox_error", "the worker is out of memory");
		return;
	}
	http_send(req, status, NULL, doc, len);
	free(doc);
}

/* A bound from POST /sessions' body: absent (the pod's), or an integer from 1 to max. */
static int
sessionapi_bound(json_t *root, const char *key, long max, unsigned *out, char *why, size_t why_len)
{
	json_t *v = json_object_get(root, key);

	*out = (unsigned)max;
	if (v == NULL)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > max) {
		snprintf(why, why_len, "%s must be an integer from 1 to %ld", key, max);
		return -1;
	}
	*out = (unsigned)json_integer_value(v);
	return 0;
}

/* POST /sessions' "memoryBytes": an integer from 16 MiB to the runs' own cap max, into *out
 * (absent: 0, the runs' own). Returns 0, or -1 with why. */
static int
sessionapi_memory(json_t *root, unsigned long long max, unsigned long long *out, char *why,
                  size_t why_len)
{
	const unsigned long long min = 16ULL << 20;
	json_t *v = json_object_get(root, "memoryBytes");

	*out = 0;
	if (v == NULL)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < (json_int_t)min ||
	    (unsigned long long)json_integer_value(v) > max) {
		snprintf(why, why_len, "memoryBytes must be an integer from %llu to %llu", min,
		         max);
		return -1;
	}
	*out = (unsigned long long)json_integer_value(v);
	return 0;
}

enum sessionapi_started
sessionapi_start(const struct worker_request *w, unsigned idle, unsigned life,
                 unsigned long long memory_bytes, const char *auth, struct session_rec *rec)
{
	const struct worker_config *wc = w->wc;
	char why[512], path[128];
	struct run_spec spec;
	struct run_config scfg;
	int listen_fd, rc;
	bool tenant;
	const struct session_ask ask = {
	    .max = w->sl.max_sessions,
	    .per_token = w->sl.max_per_token,
	    .auth = auth,
	    .uids = &wc->session_uids,
	    .memory_bytes = memory_bytes > 0 ? memory_bytes : w->l.memory_bytes,
	    .budget_bytes = wc->iso->on[ISO_POOLMEMORY] ? wc->iso->pool_memory_bytes : 0,
	    .ordinal = wc->pod_ordinal};

	if (!surface_sessions_on(w))
		return SESSIONAPI_START_OFF;
	/* its sessions go on answering; new ones are another pod's (the router retries a 429) */
	if (session_draining(wc->sessions_fd))
		return SESSIONAPI_START_DRAINING;
	switch (surface_slot_take(w, &tenant)) {
	case SLOTS_TAKEN:
		break;
	case SLOTS_FULL:
		if (tenant) {
			metrics_record_busy_tenant();
			return SESSIONAPI_START_TENANT_RUNS;
		}
		metrics_record_busy();
		return SESSIONAPI_START_BUSY;
	case SLOTS_STUCK:
		return SESSIONAPI_START_STUCK;
	}
	why[0] = '\0';
	rc = session_reserve(wc->sessions_fd, &ask, rec, &listen_fd, why, sizeof(why));
	if (rc != 0) {
		slots_release(wc->slots, wc->index);
		if (rc < 0)
			log_msg(LOG_ERROR, "session: %s", why);
		else if (why[0] != '\0' && wc->session_uids.count < (uint32_t)w->sl.max_sessions)
			log_msg(LOG_WARN, "session refused: %s", why); /* the operator's to fix */
		return rc == SESSION_FULL          ? SESSIONAPI_START_FULL
		       : rc == SESSION_FULL_TENANT ? SESSIONAPI_START_TENANT
		       : rc == SESSION_FULL_MEMORY ? SESSIONAPI_START_MEMORY
		                                   : SESSIONAPI_START_FAILED;
	}
	/* its box, directory, tmpfs and cells under its own host uid (a root pool's) */
	scfg = *w->run;
	if (rec->uid != 0) {
		scfg.run_uid = rec->uid;
		scfg.run_gid = (gid_t)rec->uid;
	}
	spec = run_spec_from_limits(&w->l, "", 0, w->l.execution_timeout_seconds * 1000L, -1);
	spec.caps.memory_bytes = ask.memory_bytes;
	spec.session = true;
	/* a session outlives many imports: the heavy tier's template has them all (the light
	 * one takes it when the heavy one cannot) */
	spec.caps.heavy = true;
	spec.session_idle_seconds = idle;
	spec.session_life_seconds = life;
	rec->idle_seconds = idle;
	rec->life_seconds = life;
	rec->disk_bytes = w->l.disk_bytes;
	session_sock_path(wc->sessions_fd, rec->id, path, sizeof(path));
	rc = run_session_create(&scfg, &spec, listen_fd, path, wc->sessions_fd, wc->sessions_dir,
	                        &rec->sb, why, sizeof(why));
	close(listen_fd);
	slots_release(wc->slots, wc->index);
	if (rc == 0 && session_commit(wc->sessions_fd, rec) < 0) {
		struct session_answer a;
		(void)run_session_ask(path, SESSION_OP_CLOSE, &a);
		snprintf(why, sizeof(why), "writing its record: %s", strerror(errno));
		rc = -1;
	}
	if (rc < 0) {
		session_remove(wc->sessions_fd, rec, METRICS_SESSION_NOT_MADE);
		log_msg(LOG_ERROR, "session: %s", why);
		return SESSIONAPI_START_FAILED;
	}
	session_log_name(rec->id, why);
	log_msg(LOG_INFO, "session %s made (idle %u s, life %u s)", why, idle, life);
	metrics_session_made();
	return SESSIONAPI_STARTED;
}

const char *
sessionapi_start_message(enum sessionapi_started st, int *status, const char **error,
                         const char **extra)
{
	*error = "sandbox_unavailable";
	*status = 503;
	*extra = NULL;
	switch (st) {
	case SESSIONAPI_STARTED:
		return "";
	case SESSIONAPI_START_OFF:
		return "sessions are off on this server (they need warm interpreters and "
		       "CODEBOX_MAX_SESSIONS above 0)";
	case SESSIONAPI_START_BUSY:
		*status = 429;
		*error = "sandbox_busy";
		*extra = HTTP_BUSY_POOL;
		return "all execution slots are in use; retry shortly";
	case SESSIONAPI_START_STUCK:
		return "the sandbox cannot admit runs right now; retry shortly";
	case SESSIONAPI_START_FULL:
		*status = 429;
		*error = "sandbox_busy";
		*extra = HTTP_BUSY_SESSIONS;
		return "this server holds as many sessions as it may; close one (DELETE "
		       "/sessions/{id}) or retry later";
	case SESSIONAPI_START_TENANT:
		*status = 429;
		*error = "sandbox_busy";
		*extra = HTTP_BUSY_TENANT;
		return "this token holds as many sessions as one token may on this server; close "
		       "one of them (DELETE /sessions/{id}) first";
	case SESSIONAPI_START_TENANT_RUNS:
		*status = 429;
		*error = "sandbox_busy";
		*extra = HTTP_BUSY_TENANT;
		return SURFACE_TENANT_BUSY;
	case SESSIONAPI_START_MEMORY:
		*status = 429;
		*error = "sandbox_busy";
		*extra = HTTP_BUSY_MEMORY;
		return "the open sessions hold the server's memory budget; close one, ask for less "
		       "(memoryBytes), or retry later";
	case SESSIONAPI_START_DRAINING:
		*status = 429;
		*error = "sandbox_busy";
		*extra = HTTP_BUSY_DRAINING;
		return "this server is draining: it makes no new session (its open sessions go on "
		       "until it stops); retry, and another server takes it";
	case SESSIONAPI_START_FAILED:
		break;
	}
	return "the session could not be started; retry shortly";
}

/* POST /sessions' body: its bounds (the pod's when absent) and, for a restore, its snapshot
 * checked whole (*payload; NULL: none). Returns 0, or -1 answered. */
static int
sessionapi_create_body(const struct worker_request *w, FCGX_Request *req, unsigned *idle,
                       unsigned *life, unsigned long long *memory, unsigned char **payload,
                       size_t *len)
{
	/* a restore's body holds a snapshot of the bound, as base64 */
	size_t max_body = 4096 + snapshot_b64_max((size_t)w->sl.snapshot_max_bytes);
	char *body = NULL, why[512];
	long n = http_read_body(req, max_body, &body);
	json_t *root = NULL, *snap;
	json_error_t err;
	const char *key;
	json_t *v;

	*payload = NULL;
	if (n < 0) {
		snprintf(why, sizeof(why),
		         "the body of POST /sessions is at most %zu bytes of JSON (a snapshot of "
		         "CODEBOX_SNAPSHOT_MAX_BYTES, %ld bytes, as base64)",
		         max_body, w->sl.snapshot_max_bytes);
		http_send_message(
		    req, n == HTTP_BODY_TOO_LARGE ? 413 : 400, NULL,
		    n == HTTP_BODY_TOO_LARGE ? "request_too_large" : "invalid_request", why);
		return -1;
	}
	root = n > 0 ? json_loadb(body, (size_t)n, JSON_REJECT_DUPLICATES, &err) : json_object();
	free(body);
	if (root == NULL || !json_is_object(root)) {
		json_decref(root);
		http_send_message(req, 400, NULL, "invalid_request",
		                  "the body must be a JSON object (or empty)");
		return -1;
	}
	json_object_foreach(root, key, v)
	{
		if (strcmp(key, "idleTimeoutSeconds") != 0 &&
		    strcmp(key, "maxLifetimeSeconds") != 0 && strcmp(key, "memoryBytes") != 0 &&
		    strcmp(key, "snapshot") != 0) {
			json_decref(root);
			http_send_message(req, 400, NULL, "invalid_request",
			                  "unknown field; allowed: idleTimeoutSeconds, "
			                  "maxLifetimeSeconds, memoryBytes, snapshot");
			return -1;
		}
	}
	if (sessionapi_bound(root, "idleTimeoutSeconds", w->sl.idle_seconds, idle, why,
	                     sizeof(why)) < 0 ||
	    sessionapi_bound(root, "maxLifetimeSeconds", w->sl.max_life_seconds, life, why,
	                     sizeof(why)) < 0 ||
	    sessionapi_memory(root, w->l.memory_bytes, memory, why, sizeof(why)) < 0) {
		json_decref(root);
		http_send_message(req, 400, NULL, "invalid_request", why);
		return -1;
	}
	snap = json_object_get(root, "snapshot");
	if (snap != NULL &&
	    sessionsnap_check(w, req, snap,
	                      sessionsnap_max(w, *memory ? *memory : w->l.memory_bytes), payload,
	                      len) < 0) {
		json_decref(root);
		return -1;
	}
	json_decref(root);
	return 0;
}

static void
sessionapi_create(const struct worker_request *w, FCGX_Request *req, const char *auth)
{
	unsigned idle, life;
	unsigned long long memory;
	unsigned char *payload = NULL;
	size_t len = 0;
	char *restored = NULL;
	struct session_rec rec;
	enum sessionapi_started st;
	const char *message, *error, *extra;
	int status;

	if (sessionapi_create_body(w, req, &idle, &life, &memory, &payload, &len) < 0)
		return;
	st = sessionapi_start(w, idle, life, memory, auth, &rec);
	if (st != SESSIONAPI_STARTED) {
		free(payload);
		message = sessionapi_start_message(st, &status, &error, &extra);
		http_send_message(req, status, extra, error, message);
		return;
	}
	if (payload != NULL) {
		int rc = sessionsnap_restore(w, req, &rec, auth, payload, len, &restored);
		free(payload);
		if (rc < 0)
			return;
	}
	if (restored != NULL)
		metrics_session_restored();
	sessionapi_state(req, 201, &rec, NULL, false, &w->l, restored);
	free(restored);
}

/*
 * DELETE /sessions/{id}: the session's init kills it, a cell running or not; what it leaves is
 * removed now, or (an execution still reporting) by whoever finds it ended. *lock_fd is the
 * session's lock when it was free (-1 if not); it may be taken here. The caller closes it.
 */
static void
sessionapi_close(const struct worker_request *w, FCGX_Request *req, const char *id,
                 const char *auth, struct session_rec *rec, const char *path, int *lock_fd)
{
	struct session_answer a;

	if (run_session_ask(path, SESSION_OP_CLOSE, &a) < 0 && *lock_fd >= 0 && errno == EBUSY) {
		/* not answered, not gone (a full backlog): left for its bounds to end */
		http_send_message(req, 409, NULL, "session_busy",
		                  "the session did not answer; retry in a moment");
		return;
	}
	for (int i = 0; *lock_fd < 0 && i < 250; i++) {
		struct timespec ms = {0, 20 * 1000 * 1000};
		nanosleep(&ms, NULL);
		if (session_find(w->wc->sessions_fd, id, auth, rec, true, lock_fd) < 0)
			break; /* ended: removed by session_find(), or being reported */
	}
	if (*lock_fd >= 0)
		session_remove(w->wc->sessions_fd, rec, METRICS_SESSION_DELETED);
	{
		char name[SESSION_LOG_NAME_LEN + 1];
		session_log_name(id, name);
		log_msg(LOG_INFO, "session %s closed", name);
	}
	http_send(req, 204, NULL, "", 0);
}

int
sessionapi_each(const struct worker_request *w, const char *auth,
                void (*each)(const struct session_rec *rec, const struct session_answer *a,
                             void *ctx),
                void *ctx)
{
	size_t max = w->sl.max_sessions > 0 ? (size_t)w->sl.max_sessions : 0, n = 0;
	struct session_rec *recs = max > 0 ? calloc(max, sizeof(*recs)) : NULL;

	if (max > 0 && recs == NULL)
		return -1;
	if (w->wc->sessions_fd >= 0 && max > 0)
		n = session_list(w->wc->sessions_fd, auth, recs, max);
	for (size_t i = 0; i < n; i++) {
		struct session_answer a;
		char path[128];
		int rc;
		session_sock_path(w->wc->sessions_fd, recs[i].id, path, sizeof(path));
		rc = run_session_ask(path, SESSION_OP_PING, &a);
		/* one that ended since it was listed is left out; one whose backlog is full is
		 * busy, with no word of its use */
		if (rc < 0 && errno != EBUSY)
			continue;
		each(&recs[i], rc == 0 ? &a : NULL, ctx);
	}
	free(recs);
	return 0;
}

/* GET /sessions' list as it is written: each session as GET /sessions/{id} answers it */
struct sessionapi_lister {
	struct jsonw *jw;
	size_t shown;
	const struct limits *l;
};

static void
sessionapi_list_one(const struct session_rec *rec, const struct session_answer *a, void *ctx)
{
	struct sessionapi_lister *ls = ctx;

	if (ls->shown++ > 0)
		jsonw_lit(ls->jw, ",");
	sessionapi_state_write(ls->jw, rec, a, a == NULL || a->busy != 0, ls->l, NULL);
}

/* GET /sessions: the caller's own sessions (its token's; all of them where tokens are off),
 * each as GET /sessions/{id} answers it, at most CODEBOX_MAX_SESSIONS of them. */
static void
sessionapi_list(const struct worker_request *w, FCGX_Request *req, const char *auth)
{
	struct jsonw jw;
	struct sessionapi_lister ls = {&jw, 0, &w->l};
	size_t len;
	char *doc;

	jsonw_init(&jw);
	jsonw_lit(&jw, "{\"sessions\":[");
	if (sessionapi_each(w, auth, sessionapi_list_one, &ls) < 0) {
		jsonw_free(&jw);
		http_send_message(req, 500, NULL, "sandbox_error", "the worker is out of memory");
		return;
	}
	jsonw_lit(&jw, "]}");
	doc = jsonw_take(&jw, &len);
	http_send_doc(req, HTTP_JSON, doc, len);
}

/* What came of renewing a session's box (sessionapi_renew()). */
enum sessionapi_renewed {
	SESSIONAPI_RENEWED,
	SESSIONAPI_RENEW_GONE,   /* the session ended meanwhile: 404 */
	SESSIONAPI_RENEW_OLD,    /* its lifetime is (nearly) over: 409 */
	SESSIONAPI_RENEW_BUSY,   /* no execution slot: 429 */
	SESSIONAPI_RENEW_TENANT, /* the token holds its share of the slots: 429 (tenant) */
	SESSIONAPI_RENEW_FAILED, /* 503, logged; the session is as it was */
};

/* Renewal's new box, for rec's session: bound to a socket beside its own (next, its path),
 * with rec's bounds and life_s of lifetime left. Holds an execution slot while it is built, as
 * a session's creation does. */
static enum sessionapi_renewed
sessionapi_box(const struct worker_request *w, const struct session_rec *rec, long life_s,
               struct session_rec *next, char *next_path, size_t next_len)
{
	const struct worker_config *wc = w->wc;
	struct run_config scfg = *w->run;
	struct run_spec spec;
	char why[512];
	int listen_fd, rc;

	bool tenant;

	switch (surface_slot_take(w, &tenant)) {
	case SLOTS_TAKEN:
		break;
	case SLOTS_FULL:
		if (tenant) {
			metrics_record_busy_tenant();
			return SESSIONAPI_RENEW_TENANT;
		}
		metrics_record_busy();
		return SESSIONAPI_RENEW_BUSY;
	case SLOTS_STUCK:
		return SESSIONAPI_RENEW_FAILED;
	}
	listen_fd = session_rebind(wc->sessions_fd, rec->id, next_path, next_len);
	if (listen_fd < 0) {
		slots_release(wc->slots, wc->index);
		log_msg(LOG_ERROR, "session restart: its new socket: %s", strerror(errno));
		return SESSIONAPI_RENEW_FAILED;
	}
	/* exactly the session's own: its uid, caps and bounds, as sessionapi_start() */
	if (rec->uid != 0) {
		scfg.run_uid = rec->uid;
		scfg.run_gid = (gid_t)rec->uid;
	}
	spec = run_spec_from_limits(&w->l, "", 0, w->l.execution_timeout_seconds * 1000L, -1);
	spec.caps.memory_bytes = rec->memory_bytes;
	spec.caps.disk_bytes = rec->disk_bytes;
	spec.session = true;
	spec.caps.heavy = true;
	spec.session_idle_seconds = rec->idle_seconds;
	spec.session_life_seconds = (unsigned)life_s;
	*next = *rec;
	rc = run_session_create(&scfg, &spec, listen_fd, next_path, wc->sessions_fd,
	                        wc->sessions_dir, &next->sb, why, sizeof(why));
	close(listen_fd);
	slots_release(wc->slots, wc->index);
	if (rc < 0) {
		log_msg(LOG_ERROR, "session restart: %s", why);
		return SESSIONAPI_RENEW_FAILED;
	}
	return SESSIONAPI_RENEWED;
}

/*
 * A restart's work, under the session's lock: a new box for the session (a fresh interpreter
 * from the heavy template, every step of a session's start), its working directory's files
 * copied into it from the old one's, then the new box put in the old one's place (its socket,
 * its record) and the old one closed and removed. Until the switch the session is as it was:
 * any failure before it leaves it so. Its lifetime goes on (the new box gets what is left of
 * it); its idle time and executions start again. rec becomes the new one's.
 */
static enum sessionapi_renewed
sessionapi_renew(const struct worker_request *w, struct session_rec *rec, const char *path)
{
	int sdir = w->wc->sessions_fd, old_dir, new_dir = -1, old_conn = -1;
	struct session_answer a, b;
	struct session_rec next;
	char next_path[128];
	enum sessionapi_renewed r;
	long long age_ms;

	old_dir = run_session_workdir(path, &a);
	if (old_dir < 0)
		return SESSIONAPI_RENEW_GONE;
	age_ms = rec->age_before_ms + a.age_ms;
	if (sessionfiles_check_dir(old_dir, rec) < 0) {
		close(old_dir);
		session_log_name(rec->id, next_path);
		log_msg(LOG_ERROR,
		        "session %s: its init sent a working directory that is not its tmpfs",
		        next_path);
		return SESSIONAPI_RENEW_FAILED;
	}
	if ((long long)rec->life_seconds * 1000 - age_ms < 2000) {
		close(old_dir);
		return SESSIONAPI_RENEW_OLD;
	}
	r = sessionapi_box(w, rec, ((long long)rec->life_seconds * 1000 - age_ms) / 1000, &next,
	                   next_path, sizeof(next_path));
	if (r != SESSIONAPI_RENEWED) {
		close(old_dir);
		return r;
	}
	new_dir = run_session_workdir(next_path, &b);
	if (new_dir < 0 || sessionfiles_check_dir(new_dir, &next) < 0 ||
	    sessionfiles_copy(old_dir, new_dir, rec->uid) < 0) {
		log_msg(LOG_ERROR, "session restart: its files could not be carried over: %s",
		        strerror(errno));
		r = SESSIONAPI_RENEW_FAILED;
	}
	/* connected before the switch: the old init is told to close once the new one serves */
	if (r == SESSIONAPI_RENEWED && (old_conn = run_session_connect(path)) < 0)
		r = SESSIONAPI_RENEW_GONE;
	next.age_before_ms = age_ms;
	if (r == SESSIONAPI_RENEWED && session_switch(sdir, &next) < 0) {
		log_msg(LOG_ERROR, "session restart: the switch: %s", strerror(errno));
		r = SESSIONAPI_RENEW_FAILED;
	}
	close(old_dir);
	if (new_dir >= 0)
		close(new_dir);
	if (r != SESSIONAPI_RENEWED) {
		/* the session stays as it was; the new box goes */
		(void)run_session_ask(next_path, SESSION_OP_CLOSE, &b);
		run_session_remove(sdir, &next.sb);
		(void)unlinkat(sdir, strrchr(next_path, '/') + 1, 0);
		if (old_conn >= 0)
			close(old_conn);
		return r;
	}
	(void)run_session_ask_on(old_conn, SESSION_OP_CLOSE, &a);
	close(old_conn);
	run_session_remove(sdir, &rec->sb);
	*rec = next;
	return SESSIONAPI_RENEWED;
}

/*
 * POST /sessions/{id}/restart: a fresh interpreter in the same session (id, token, bounds,
 * files), as Jupyter restarts a kernel. A running cell is interrupted first (KeyboardInterrupt)
 * and waited for, a bounded time (then 409). Answers the session's state, as GET does.
 */
static void
sessionapi_restart(const struct worker_request *w, FCGX_Request *req, const char *auth,
                   struct session_rec *rec, const char *path, int *lock_fd)
{
	struct session_answer a;
	char name[SESSION_LOG_NAME_LEN + 1], id[SESSION_ID_LEN + 1];
	enum sessionapi_renewed r;

	memcpy(id, rec->id, sizeof(id));
	if (*lock_fd < 0)
		(void)run_session_ask(path, SESSION_OP_INTERRUPT, &a);
	/* the cell's worker answers its client and lets go of the lock */
	for (int i = 0; *lock_fd < 0 && i < 200; i++) {
		struct timespec ms = {0, 20 * 1000 * 1000};
		nanosleep(&ms, NULL);
		if (session_find(w->wc->sessions_fd, id, auth, rec, true, lock_fd) < 0) {
			execute_session_unknown(req);
			return;
		}
	}
	if (*lock_fd < 0) {
		http_send_message(req, 409, NULL, "session_busy",
		                  "the running cell did not end when interrupted; retry, or close "
		                  "the session (DELETE /sessions/{id})");
		return;
	}
	r = sessionapi_renew(w, rec, path);
	session_log_name(id, name);
	if (r == SESSIONAPI_RENEWED)
		log_msg(LOG_INFO, "session %s restarted", name);
	switch (r) {
	case SESSIONAPI_RENEWED:
		if (run_session_ask(path, SESSION_OP_PING, &a) < 0)
			execute_session_unknown(req);
		else
			sessionapi_state(req, 200, rec, &a, false, &w->l, NULL);
		return;
	case SESSIONAPI_RENEW_GONE:
		execute_session_unknown(req);
		return;
	case SESSIONAPI_RENEW_OLD:
		http_send_message(req, 409, NULL, "session_ending",
		                  "the session's lifetime is (nearly) over: make a new session");
		return;
	case SESSIONAPI_RENEW_BUSY:
		http_send_message(req, 429, HTTP_BUSY_POOL, "sandbox_busy",
		                  "all execution slots are in use; retry shortly");
		return;
	case SESSIONAPI_RENEW_TENANT:
		http_send_message(req, 429, HTTP_BUSY_TENANT, "sandbox_busy", SURFACE_TENANT_BUSY);
		return;
	case SESSIONAPI_RENEW_FAILED:
		break;
	}
	http_send_message(req, 503, NULL, "sandbox_unavailable",
	                  "the session could not be restarted; it is as it was");
}
/* One request to /sessions/{id}[/{sub}]: the session found for the caller, as its handlers
 * (the tables' port argument) see it. */
struct sessionapi_call {
	const struct worker_request *w;
	const char *method;
	const char *auth; /* the token's id, or NULL */
	char id[SESSION_ID_LEN + 1];
	const char *sub; /* what follows /sessions/{id}/, or NULL */
	struct session_rec rec;
	char path[128]; /* its init's socket */
	int lock_fd;    /* the record's lock: taken when the endpoint is served under it and it was
	                 * free, else -1 */
};

/* POST /sessions/{id}/execute */
static void
sessionapi_execute(void *port, FCGX_Request *req)
{
	struct sessionapi_call *c = port;

	sessionexec_execute(c->w, req, &c->rec, c->lock_fd);
}

/* POST /sessions/{id}/restart (sessionapi_restart()) */
static void
sessionapi_restart_one(void *port, FCGX_Request *req)
{
	struct sessionapi_call *c = port;

	sessionapi_restart(c->w, req, c->auth, &c->rec, c->path, &c->lock_fd);
}

/* POST /sessions/{id}/snapshot */
static void
sessionapi_snapshot(void *port, FCGX_Request *req)
{
	struct sessionapi_call *c = port;

	sessionsnap_snapshot(c->w, req, &c->rec, c->lock_fd);
}

/* POST /sessions/{id}/interrupt: KeyboardInterrupt into the running cell; the session keeps
 * its state */
static void
sessionapi_interrupt(void *port, FCGX_Request *req)
{
	struct sessionapi_call *c = port;
	struct session_answer a;
	char body[64];
	int n;

	if (run_session_ask(c->path, SESSION_OP_INTERRUPT, &a) < 0) {
		execute_session_unknown(req);
		return;
	}
	n = snprintf(body, sizeof(body), "{\"interrupted\":%s}", a.interrupted ? "true" : "false");
	http_send(req, 200, NULL, body, (size_t)n);
}

/* GET /sessions/{id}/notebook */
static void
sessionapi_notebook(void *port, FCGX_Request *req)
{
	struct sessionapi_call *c = port;

	sessionexec_notebook(c->w, req, c->id);
}

/* GET /sessions/{id}/executions/{eid} */
static void
sessionapi_execution(void *port, FCGX_Request *req)
{
	struct sessionapi_call *c = port;
	const char *eid = c->sub + strlen("executions/");

	if (strlen(eid) != 16 || strspn(eid, "0123456789abcdef") != 16)
		http_send_message(req, 404, NULL, "not_found", "no such execution");
	else
		sessionexec_poll(c->w, req, &c->rec, eid);
}

/* /sessions/{id}/files[/{path}]: its methods are sessionfiles_handle()'s to check */
static void
sessionapi_files(void *port, FCGX_Request *req)
{
	struct sessionapi_call *c = port;

	sessionfiles_handle(req, c->method, &c->rec, c->path);
}

#define SESSIONAPI_WRONG_METHOD                                                                    \
	"use POST /sessions/{id}/execute, /interrupt, /restart or /snapshot, GET "                 \
	"/sessions/{id}/executions/{execution} or /notebook"

/* /sessions/{id}/{sub} served under the session's lock, taken with its record: one at a time,
 * and never beside a running cell (a 409 then, but for a restart, which interrupts it) */
static const struct http_endpoint sessionapi_locked[] = {
    {"execute", "POST", SESSIONAPI_WRONG_METHOD, sessionapi_execute, false},
    {"restart", "POST", SESSIONAPI_WRONG_METHOD, sessionapi_restart_one, false},
    {"snapshot", "POST", SESSIONAPI_WRONG_METHOD, sessionapi_snapshot, false},
    {NULL, NULL, NULL, NULL, false},
};

/* ...and those served without it: reading the session, its files, interrupting its cell */
static const struct http_endpoint sessionapi_unlocked[] = {
    {"interrupt", "POST", SESSIONAPI_WRONG_METHOD, sessionapi_interrupt, false},
    {"notebook", "GET", SESSIONAPI_WRONG_METHOD, sessionapi_notebook, false},
    {"executions/*", "GET", SESSIONAPI_WRONG_METHOD, sessionapi_execution, false},
    {"files", NULL, NULL, sessionapi_files, false},
    {"files/*", NULL, NULL, sessionapi_files, false},
    {NULL, NULL, NULL, NULL, false},
};

/* /sessions/{id}[/{sub}] (rest: past "/sessions/"): the id checked, the endpoint found in the
 * tables (or GET or DELETE of the session itself), the session found for the caller (its lock
 * taken where the endpoint is served under it), and the endpoint served. */
static void
sessionapi_one(const struct worker_request *w, FCGX_Request *req, const char *method,
               const char *auth, const char *rest)
{
	struct sessionapi_call c = {.w = w, .method = method, .auth = auth, .lock_fd = -1};
	const struct http_endpoint *e = NULL;
	const char *slash = strchr(rest, '/');
	size_t idlen = slash ? (size_t)(slash - rest) : strlen(rest);
	struct session_answer a;
	bool take;

	if (!session_id_valid(rest, idlen)) {
		execute_session_unknown(req);
		return;
	}
	memcpy(c.id, rest, idlen);
	c.id[idlen] = '\0';
	if (slash != NULL) {
		c.sub = slash + 1;
		e = http_endpoint_find(sessionapi_locked, c.sub);
		take = e != NULL;
		if (e == NULL)
			e = http_endpoint_find(sessionapi_unlocked, c.sub);
		if (!http_route(req, e))
			return;
	} else if (strcmp(method, "GET") != 0 && strcmp(method, "DELETE") != 0) {
		http_send_message(req, 405, "Allow: GET, DELETE", "method_not_allowed",
		                  "use GET or DELETE /sessions/{id}");
		return;
	} else {
		take = strcmp(method, "DELETE") == 0;
	}
	if (session_find(w->wc->sessions_fd, c.id, auth, &c.rec, take, &c.lock_fd) < 0) {
		execute_session_unknown(req);
		return;
	}
	session_sock_path(w->wc->sessions_fd, c.id, c.path, sizeof(c.path));
	if (e != NULL)
		e->handle(&c, req);
	else if (strcmp(method, "DELETE") == 0)
		sessionapi_close(w, req, c.id, auth, &c.rec, c.path, &c.lock_fd);
	else if (run_session_ask(c.path, SESSION_OP_PING, &a) < 0)
		execute_session_unknown(req);
	else
		sessionapi_state(req, 200, &c.rec, &a, a.busy != 0, &w->l, NULL);
	if (c.lock_fd >= 0)
		close(c.lock_fd);
}

void
sessionapi_handle(void *port, FCGX_Request *req)
{
	const struct worker_request *w = port;
	const char *method = FCGX_GetParam("REQUEST_METHOD", req->envp);
	const char *uri = FCGX_GetParam("SCRIPT_NAME", req->envp);
	const char *auth = w->token_id;
	const char *rest;

	method = method ? method : "";
	if (uri == NULL || strncmp(uri, "/sessions", 9) != 0) {
		http_send_message(req, 404, NULL, "not_found", "no such endpoint");
		return;
	}
	rest = uri + 9;
	if (*rest != '\0' && strcmp(rest, "/") != 0)
		sessionapi_one(w, req, method, auth, rest + 1);
	else if (strcmp(method, "GET") == 0)
		sessionapi_list(w, req, auth);
	else if (strcmp(method, "POST") == 0)
		sessionapi_create(w, req, auth);
	else
		http_send_message(req, 405, "Allow: GET, POST", "method_not_allowed",
		                  "use POST /sessions to make a session, GET /sessions to list "
		                  "yours");
}
