/*
 * agent.c - port 8888: what Kubernetes agent-sandbox's python-runtime answers, with every
 * command in a fresh sandbox.
 *
 * The official client (k8s_agent_sandbox) retries a POST on 500, 502, 503 and 504, so a
 * command that fails, times out or cannot start is still a 200 with an exit_code: a 5xx
 * would run it again. Commands and uploads on the workspace take its lock (flock on a file
 * every worker opens for itself): one at a time, and a second one while the first runs is
 * answered 429 at once, as port 8080 answers when its slots are full. Reads (/download,
 * /list, /exists) do not wait for it.
 *
 * Admission is the pool's, as on port 8080: nginx hands a request over only once its whole
 * body is buffered, and the worker then takes one of CODEBOX_AGENT_SLOTS agent slots (an
 * exclusive flock on a file of the runs directory; a worker that dies drops it with its fds)
 * for as long as it serves the request; with every slot held it answers 429 at once. So a
 * slow client costs nginx a connection, never a worker, a slot or the workspace.
 *
 * Every path is relative to the workspace. Its dot segments are resolved by its letters first
 * (workspace_path_resolve(), from the path as the client sent it, never from nginx's $uri): one
 * that climbs out of /app is answered 403 {"message": "Access denied"}, as the example runtime
 * answers it. Then workspace_open() resolves it beneath the workspace, never following a
 * symlink (a symlink on the way is refused with the same 403: it could lead anywhere) and
 * never opening what is not a regular file or a directory (a FIFO would block the worker);
 * the worker touches the workspace only through its fd. Uploads are streamed through a 64 KiB
 * window into an unnamed file in the workspace (its bounds are the upload's), without the
 * workspace lock; the lock is taken only to give the finished file its name. A command's
 * client that hangs up has the command killed at once (run.c watches the FastCGI connection)
 * and the workspace freed. Under a root pool, file operations run with the workspace owner's
 * fsuid, so uploads belong to the same uid as files the commands create.
 */
#include "http/agent.h"

#include "core/buf.h"
#include "core/capture.h"
#include "http/http.h"
#include "core/jsonw.h"
#include "box/landlock.h"
#include "core/log.h"
#include "core/metrics.h"
#include "http/multipart.h"
#include "core/pycmd.h"
#include "run/serve.h"
#include "core/utf8.h"
#include "warm/warm.h"
#include "core/workspace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

/* A command's exit code when the timeout killed it (as coreutils' timeout(1) reports). */
#define AGENT_TIMED_OUT_EXIT 124
/* A command the sandbox could not start (as a shell reports "cannot execute"). */
#define AGENT_NOT_STARTED_EXIT 126
#define AGENT_LOST_EXIT 125
/* The longest listing returned; more entries are cut (logged). */
#define AGENT_MAX_LIST_ENTRIES 10000
/* The largest /execute body read: a command of the default maxCodeBytes (64 KiB), escaped,
 * fits many times over; a larger body is a 413 whatever CODEBOX_MAX_CODE_BYTES says. */
#define AGENT_MAX_JSON_BODY (4UL << 20)
/* Agent slots when nginx passes no CODEBOX_AGENT_SLOTS (check-config.sh assumes the same), and
 * the most a request may ask for. */
#define AGENT_DEFAULT_SLOTS 4
#define AGENT_MAX_SLOTS 64
/* The longest {path} read from a request URI: nginx's longest request line (8 KiB). */
#define AGENT_MAX_URI_PATH 8192

long
agent_timeout_ms(const char *value, char *warning, size_t warning_len)
{
	char *end;
	double s;

	warning[0] = '\0';
	if (value == NULL || *value == '\0')
		return AGENT_DEFAULT_TIMEOUT_SECONDS * 1000L;
	errno = 0;
	s = strtod(value, &end);
	if (errno != 0 || end == value || *end != '\0' || !isfinite(s) || s <= 0 || s > 86400) {
		snprintf(warning, warning_len,
		         "SANDBOX_EXEC_TIMEOUT_SECONDS=%.40s is not a finite number of seconds > 0 "
		         "(at most 86400); using the default %d",
		         value, AGENT_DEFAULT_TIMEOUT_SECONDS);
		return AGENT_DEFAULT_TIMEOUT_SECONDS * 1000L;
	}
	return s * 1000 < 1 ? 1 : (long)(s * 1000);
}

/* One request of port 8888's, as its endpoints see it (their port argument, http.h). */
struct agent_request {
	const struct agent_config *ac;
	const struct run_config *run; /* the worker's; agent_run_config() makes an agent run's */
	struct run_stream *stream;    /* the worker's run stream for agent runs */
	int lock_fd;                  /* the worker's handle on the workspace's lock */
	const struct limits *l;
};

/* A path that climbs out of the workspace, or through a symlink: the example runtime's 403. */
static void
agent_denied(FCGX_Request *req)
{
	http_send_message(req, 403, NULL, NULL, "Access denied");
}

static void
agent_busy_reply(FCGX_Request *req)
{
	http_send_message(req, 429, HTTP_BUSY_WORKSPACE, "sandbox_busy",
	                  "another command or upload is using the workspace; retry shortly");
}

/* The workspace is busy: the pool's own 429, counted. */
static void
agent_busy(FCGX_Request *req)
{
	metrics_record_busy();
	agent_busy_reply(req);
}

/*
 * Takes one of the pool's n agent slots: an exclusive, non-blocking flock on
 * <runs dir>/agent-slot-<i>, held until agent_release(). Each slot's file is opened once by a
 * worker and kept open (close-on-exec; the sandbox's children close it), so a runtime
 * directory that later runs out of space or inodes cannot make a free slot look taken.
 * Returns the slot's fd, -1 when all n are held, or -2 when none was free and some could not
 * be opened (logged): the service's fault, not a busy workspace.
 */
static int agent_slot_fds[AGENT_MAX_SLOTS] = {[0 ... AGENT_MAX_SLOTS - 1] = -1};

static int
agent_admit(int dir_fd, long n)
{
	bool failed = false;

	for (long i = 0; i < n; i++) {
		int *fd = &agent_slot_fds[i];

		if (*fd < 0) {
			char name[32];
			snprintf(name, sizeof(name), "agent-slot-%ld", i);
			*fd = openat(dir_fd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
			if (*fd < 0) {
				log_msg(LOG_ERROR, "opening the agent slot %s failed: %s", name,
				        strerror(errno));
				failed = true;
				continue;
			}
		}
		if (flock(*fd, LOCK_EX | LOCK_NB) == 0)
			return *fd;
	}
	return failed ? -2 : -1;
}

/* Gives a slot of agent_admit()'s back (its file stays open for the next request). */
static void
agent_release(int slot_fd)
{
	(void)flock(slot_fd, LOCK_UN);
}

/* File operations as the workspace's owner (a root pool creates files for that uid). */
static void
agent_as_owner(const struct agent_config *ac, bool on)
{
	if (geteuid() != 0)
		return;
	(void)setfsgid(on ? ac->gid : 0);
	(void)setfsuid(on ? ac->uid : 0);
}

/* The worker's run configuration, turned into an agent run's: the workspace at /app, the
 * workspace owner's uid, and a Landlock ruleset that also lets it write there. */
static int
agent_run_config(const struct agent_config *ac, const struct run_config *run,
                 struct run_config *out)
{
	static int landlock_fd = -2; /* built once per worker */

	*out = *run;
	out->workspace_fd = ac->workspace_fd;
	out->run_uid = ac->uid;
	out->run_gid = ac->gid;
	/* none, or (in a mount namespace) init builds the run's own, /app included */
	if (run->landlock_fd < 0) {
		out->landlock_fd = -1;
		return 0;
	}
	if (landlock_fd == -2) {
		bool restrict_reads = !ac->iso->on[ISO_MOUNTNS];
		const char *rw[] = {run->work_parent};
		landlock_fd =
		    landlock_build(ac->iso->landlock_abi, rw, 1, run->python, restrict_reads);
		if (landlock_fd >= 0 && landlock_allow_dir_fd(ac->iso->landlock_abi, restrict_reads,
		                                              landlock_fd, ac->workspace_fd) < 0) {
			close(landlock_fd);
			landlock_fd = -1;
		}
		if (landlock_fd < 0) {
			landlock_fd = -2;
			return -1;
		}
	}
	out->landlock_fd = landlock_fd;
	return 0;
}

/*
 * Whether a command runs from a warm template, and on which tier: -1 cold (under /bin/sh, as
 * any command), 0 light, 1 heavy. A plain Python invocation (pycmd.h) qualifies: its code,
 * or a script that is a regular file of the workspace reached without a symlink (its first
 * 64 KiB name the modules; a compiled or zipped one runs cold). So does nothing that would
 * make a plain interpreter's start differ from a template's: a user site directory.
 */
static int
agent_warm_tier(const struct agent_config *ac, const char *cmd, size_t len)
{
	static char head[64 * 1024];
	struct pycmd pc;
	const char *script;
	ssize_t n;
	int fd, tier = -1;

	if (pycmd_parse(cmd, len, &pc) < 0)
		return -1;
	fd = workspace_open(ac->workspace_fd, ".local/lib", O_PATH);
	if (fd >= 0) {
		close(fd);
		goto out;
	}
	if (pc.kind == PYCMD_CODE) {
		tier = warm_wants_heavy(pc.argv[2], strlen(pc.argv[2]));
		goto out;
	}
	script = pc.argv[1];
	if (strncmp(script, "/app/", 5) == 0)
		script += 5;
	else if (script[0] == '/')
		goto out;
	len = strlen(script);
	if (len >= 4 && strcmp(script + len - 4, ".pyc") == 0)
		goto out;
	fd = workspace_open(ac->workspace_fd, script, O_RDONLY);
	if (fd < 0)
		goto out;
	do
		n = read(fd, head, sizeof(head));
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n < 0 || (n >= 4 && memcmp(head, "PK\003\004", 4) == 0))
		goto out;
	tier = warm_wants_heavy(head, (size_t)n);
out:
	pycmd_free(&pc);
	return tier;
}

static void
agent_reply_run(FCGX_Request *req, const char *out, size_t out_len, const char *err, size_t err_len,
                int exit_code)
{
	struct jsonw w;
	char *body;
	size_t len;

	jsonw_init(&w);
	jsonw_lit(&w, "{\"stdout\":");
	jsonw_str(&w, out, out_len);
	jsonw_lit(&w, ",\"stderr\":");
	jsonw_str(&w, err, err_len);
	jsonw_lit(&w, ",\"exit_code\":");
	jsonw_int(&w, exit_code);
	jsonw_lit(&w, "}");
	body = jsonw_take(&w, &len);
	http_send_doc(req, HTTP_JSON, body, len);
}

/* A command that did not run, told on stderr with its exit code (a 200: see the top). */
static void
agent_reply_not_run(FCGX_Request *req, const char *msg, int exit_code)
{
	agent_reply_run(req, "", 0, msg, strlen(msg), exit_code);
}

/*
 * The command of POST /execute's body {"command": "..."}: 0 with *root holding it (json_decref()
 * it), or -1 answered. A command that cannot run is a failed execution, as the example runtime
 * answers one its shlex.split() or subprocess refuses (200, exit_code 1), not a request error
 * the client would raise.
 */
static int
agent_command(FCGX_Request *req, const struct limits *l, json_t **root, const json_t **cmd)
{
	json_error_t jerr;
	char *body = NULL, msg[160];
	size_t len;
	long n;

	*root = NULL;
	n = http_read_body(req, AGENT_MAX_JSON_BODY, &body);
	if (n == HTTP_BODY_TOO_LARGE) {
		http_send_message(req, 413, NULL, "request_too_large",
		                  "the request body is too large");
		return -1;
	}
	if (n >= 0)
		*root = json_loadb(body, (size_t)n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
	free(body);
	*cmd = json_is_object(*root) ? json_object_get(*root, "command") : NULL;
	if (!json_is_string(*cmd)) {
		http_send_message(req, 400, NULL, "invalid_request",
		                  "body must be {\"command\": \"<shell command>\"}");
		goto refused;
	}
	len = json_string_length(*cmd);
	if (len == 0)
		snprintf(msg, sizeof(msg), "codebox: the command is empty; nothing ran\n");
	else if (len > l->max_code_bytes)
		snprintf(msg, sizeof(msg),
		         "codebox: the command is longer than %zu bytes; it did not run\n",
		         l->max_code_bytes);
	else if (strlen(json_string_value(*cmd)) != len)
		snprintf(msg, sizeof(msg),
		         "codebox: the command contains a NUL byte; it did not run\n");
	else
		return 0;
	agent_reply_not_run(req, msg, 1);
refused:
	json_decref(*root);
	*root = NULL;
	return -1;
}

/* Appends to err what the command cannot say itself: truncation and the timeout. */
static void
agent_notes(const struct agent_config *ac, const struct limits *l, const struct run_outcome *o,
            char **err, size_t *err_len)
{
	/* the notes begin on a line of their own */
	const char *nl = *err_len && (*err)[*err_len - 1] != '\n' ? "\n" : "";
	char note[512];
	int lead = snprintf(note, sizeof(note), "%s", nl), k = lead;

	if (capture_truncated(&o->out))
		k += snprintf(note + k, sizeof(note) - (size_t)k,
		              "codebox: stdout was truncated to its first %zu bytes (of %llu)\n",
		              l->max_stdout_bytes, (unsigned long long)o->out.total_bytes);
	if (capture_truncated(&o->err))
		k += snprintf(note + k, sizeof(note) - (size_t)k,
		              "codebox: stderr was truncated to its first %zu bytes (of %llu)\n",
		              l->max_stderr_bytes, (unsigned long long)o->err.total_bytes);
	if (o->status == RUN_TIMED_OUT)
		k += snprintf(
		    note + k, sizeof(note) - (size_t)k,
		    "codebox: the command timed out after %.3g seconds and was killed with "
		    "everything it started\n",
		    (double)ac->timeout_ms / 1000);
	if (k > lead) {
		struct buf e = {*err, *err_len, *err_len};
		/* out of memory: the command's own stderr, without them */
		(void)buf_put(&e, note, (size_t)k);
		*err = e.p;
		*err_len = e.len;
	}
}

/* Port 8888's admission (serve.h): the workspace's lock, one command or upload at a time. */
static enum serve_ran
agent_lock_take(const void *ctx)
{
	return flock(*(const int *)ctx, LOCK_EX | LOCK_NB) == 0 ? SERVE_RAN : SERVE_BUSY;
}

static void
agent_lock_give(const void *ctx)
{
	flock(*(const int *)ctx, LOCK_UN);
}

/* POST /execute: {"command": "..."} run in a fresh sandbox on the workspace (serve_run()). */
static void
agent_execute(void *port, FCGX_Request *req)
{
	const struct agent_request *a = port;
	const struct agent_config *ac = a->ac;
	const struct limits *l = a->l;
	int lock_fd = a->lock_fd;
	/* a command reports an exit code whatever came of it (see the top) */
	const struct serve_port p = {METRICS_PORT_AGENT, ac->history, AGENT_TIMED_OUT_EXIT,
	                             AGENT_LOST_EXIT, AGENT_NOT_STARTED_EXIT};
	const struct serve_admission admit = {agent_lock_take, agent_lock_give, &lock_fd};
	struct run_config cfg;
	struct serve_req q = {.admit = &admit,
	                      .run = &cfg,
	                      .stream = a->stream,
	                      .session_conn = -1,
	                      .request_id = FCGX_GetParam("CODEBOX_REQUEST_ID", req->envp),
	                      .in_flight = true};
	struct run_outcome o;
	json_t *root;
	const json_t *cmd;
	char *out = NULL, *err = NULL;
	size_t out_len = 0, err_len = 0;
	int exit_code;

	if (agent_command(req, l, &root, &cmd) < 0)
		return;
	if (http_client_gone(req)) {
		log_msg(LOG_INFO, "the client left before the command started; not running it");
		goto done;
	}
	if (agent_run_config(ac, a->run, &cfg) < 0) {
		log_msg(LOG_ERROR, "agent: building the run's Landlock ruleset failed");
		metrics_record_error(METRICS_PORT_AGENT);
		agent_reply_not_run(req,
		                    "codebox: the sandbox could not start the command; see the "
		                    "service log\n",
		                    AGENT_NOT_STARTED_EXIT);
		goto done;
	}
	/* a client that hangs up has its command killed at once, and the workspace freed */
	struct run_spec spec = run_spec_from_limits(
	    l, json_string_value(cmd), json_string_length(cmd), ac->timeout_ms, req->ipcFd);
	if (a->run->warm) {
		int tier = agent_warm_tier(ac, spec.code, spec.code_len);
		spec.caps.warm_command = tier >= 0;
		spec.caps.heavy = tier == 1;
	}
	switch (serve_run(&p, &q, &spec, &o)) {
	case SERVE_RAN:
		break;
	case SERVE_BUSY:
	case SERVE_BUSY_TENANT: /* never: port 8888 is one tenant's */
	case SERVE_STUCK:
		agent_busy_reply(req);
		goto done;
	case SERVE_LOST: /* as a container runtime says it failed (125): not the command's doing */
		agent_reply_not_run(
		    req,
		    "codebox: the command's sandbox was killed from outside while it "
		    "ran; see the service log\n",
		    AGENT_LOST_EXIT);
		goto done;
	case SERVE_FAILED:
	case SERVE_GONE:
	case SERVE_SESSION_BUSY:
		agent_reply_not_run(req,
		                    "codebox: the sandbox could not start the command; see the "
		                    "service log\n",
		                    AGENT_NOT_STARTED_EXIT);
		goto done;
	case SERVE_ABANDONED:
		goto done;
	}
	out = capture_utf8(&o.out, &out_len);
	err = capture_utf8(&o.err, &err_len);
	if (out == NULL || err == NULL) {
		http_send_message(req, 500, NULL, "sandbox_error", "out of memory");
	} else {
		agent_notes(ac, l, &o, &err, &err_len);
		if (!serve_exit_code(&p, &o, &exit_code))
			exit_code = AGENT_LOST_EXIT; /* none: not the command's doing */
		agent_reply_run(req, out, out_len, err, err_len, exit_code);
	}
	free(out);
	free(err);
	run_outcome_free(&o);
done:
	json_decref(root);
}

/* How the {path} of a request was received (agent_target()). */
enum agent_target {
	AGENT_TARGET_OK,       /* rel names it beneath the workspace */
	AGENT_TARGET_REFUSED,  /* a name codebox never opens (a control character, too long) */
	AGENT_TARGET_ANSWERED, /* malformed (400) or out of the workspace (403): answered */
};

/*
 * The {path} of /download/{path}, /list/{path} or /exists/{path} as the client sent it, into
 * path: the request URI as received (REQUEST_URI, nginx's $request_uri) after prefix and before
 * any query, percent-decoded once, as the example runtime receives it. Not nginx's $uri: that
 * has its dot segments resolved already, so "a/../../x" would arrive as "x", a path the client
 * never named. Then where it leads, into rel (workspace_path_resolve(); "." for /app itself).
 * Answers a path that climbs out of /app (403) and a malformed URI (400) itself.
 */
static enum agent_target
agent_target(FCGX_Request *req, const char *prefix, char *path, char *rel, size_t rel_len)
{
	const char *uri = FCGX_GetParam("REQUEST_URI", req->envp);
	size_t n = strlen(prefix);
	long o;

	/* nginx chose this location by its $uri: a request URI that does not start with the same
	 * prefix had dot segments that climbed out of the one it named (nginx.conf answers those
	 * itself; this is the pool's own check) */
	if (uri == NULL || strncmp(uri, prefix, n) != 0) {
		agent_denied(req);
		return AGENT_TARGET_ANSWERED;
	}
	o = http_uri_decode(uri + n, path, AGENT_MAX_URI_PATH);
	if (o < 0) {
		http_send_message(req, 400, NULL, "invalid_request",
		                  o == HTTP_URI_TOO_LONG
		                      ? "the path is too long"
		                      : "the path is not a well-formed percent-encoded path");
		return AGENT_TARGET_ANSWERED;
	}
	switch (workspace_path_resolve(path, (size_t)o, rel, rel_len)) {
	case WORKSPACE_ESCAPES:
		agent_denied(req);
		return AGENT_TARGET_ANSWERED;
	case WORKSPACE_TOO_LONG:
		return AGENT_TARGET_REFUSED;
	case WORKSPACE_INSIDE:
		break;
	}
	if (strcmp(rel, ".") != 0 && !workspace_path_ok(rel, strlen(rel)))
		return AGENT_TARGET_REFUSED;
	return AGENT_TARGET_OK;
}

/* agent_open_target(): the request is answered already */
#define AGENT_ANSWERED -2

/*
 * Opens the {path} of a request to prefix (agent_target(): path and rel as it fills them)
 * beneath the workspace, as the workspace's owner, with flags (workspace_open()). Returns the
 * fd; -1 when nothing can be opened there (a name codebox never opens included);
 * AGENT_ANSWERED when the request is answered: a malformed path (400), one out of the workspace
 * or through a symlink (403).
 */
static int
agent_open_target(const struct agent_config *ac, FCGX_Request *req, const char *prefix, char *path,
                  char *rel, size_t rel_len, int flags)
{
	int fd, err;

	switch (agent_target(req, prefix, path, rel, rel_len)) {
	case AGENT_TARGET_ANSWERED:
		return AGENT_ANSWERED;
	case AGENT_TARGET_REFUSED:
		return -1;
	case AGENT_TARGET_OK:
		break;
	}
	agent_as_owner(ac, true);
	fd = workspace_open(ac->workspace_fd, rel, flags);
	err = errno;
	agent_as_owner(ac, false);
	if (fd < 0 && (err == ELOOP || err == EXDEV)) {
		agent_denied(req);
		return AGENT_ANSWERED;
	}
	return fd;
}

/* The request body as a multipart reader sees it: at most CONTENT_LENGTH bytes. */
struct agent_body {
	FCGX_Request *req;
	unsigned long long left;
};

static long
agent_body_read(void *ctx, char *buf, size_t len)
{
	struct agent_body *b = ctx;
	int r;

	if (b->left == 0)
		return 0;
	if (len > b->left)
		len = (size_t)b->left;
	if (len > INT_MAX)
		len = INT_MAX;
	r = FCGX_GetStr(buf, (int)len, b->req->in);
	if (r <= 0)
		return -1; /* shorter than its CONTENT_LENGTH: nginx gave up on it */
	b->left -= (unsigned long long)r;
	return r;
}

/* An upload's failure to write or name its file, as the client's answer. */
static void
agent_upload_failed(FCGX_Request *req, const char *name, int e)
{
	char msg[4200];

	switch (e) {
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
		http_send_message(req, 413, NULL, "request_too_large",
		                  "the workspace is full: its size or file-count limit leaves no "
		                  "room for this file");
		return;
	case EIO:
	case ENOMEM:
	case EMFILE:
	case ENFILE:
		log_msg(LOG_ERROR, "upload of %s failed: %s", name, strerror(e));
		http_send_message(req, 500, NULL, "sandbox_error",
		                  "the upload failed; see the service log");
		return;
	case ENAMETOOLONG:
		snprintf(msg, sizeof(msg),
		         "cannot write '%s': a name in the path is longer than 255 bytes", name);
		break;
	case ELOOP:
	case EXDEV:
		/* a symlink on the way, or at the name: it could lead out of the workspace */
		agent_denied(req);
		return;
	case ENOTDIR:
	case EISDIR:
	case EEXIST:
		snprintf(
		    msg, sizeof(msg),
		    "cannot write '%s': a file, a directory or a special file is in the way (%s)",
		    name, strerror(e));
		break;
	default:
		snprintf(msg, sizeof(msg), "cannot write '%s': %s", name, strerror(e));
		break;
	}
	http_send_message(req, 400, NULL, "invalid_request", msg);
}

/* The file's data, from the body into fd: 0, an errno (writing failed: ENOSPC when the
 * workspace is full), or -1 with *why (the body is not a well-formed form). */
static int
agent_upload_data(struct multipart_stream *ms, int fd, const char **why)
{
	const char *data;
	long n;

	while ((n = multipart_stream_data(ms, &data, why)) > 0) {
		for (size_t done = 0; done < (size_t)n;) {
			ssize_t w = write(fd, data + done, (size_t)n - done);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return w < 0 ? errno : ENOSPC;
			done += (size_t)w;
		}
	}
	return n < 0 ? -1 : 0;
}

/* POST /upload: one multipart file into the workspace. */
static void
agent_upload(void *port, FCGX_Request *req)
{
	static struct multipart_stream ms; /* a 64 KiB window: not on the stack */
	static struct multipart_file f;    /* 4 KiB of name */
	const struct agent_request *a = port;
	const struct agent_config *ac = a->ac;
	int lock_fd = a->lock_fd;
	char boundary[MULTIPART_MAX_BOUNDARY + 1], msg[4200];
	const char *why = NULL;
	struct agent_body body = {.req = req};
	int fd, e = 0;

	if (multipart_boundary(FCGX_GetParam("CONTENT_TYPE", req->envp), boundary) < 0) {
		http_send_message(req, 400, NULL, "invalid_request",
		                  "the body must be multipart/form-data with a boundary");
		return;
	}
	if (http_content_length(req, &body.left) < 0) {
		http_send_message(req, 400, NULL, "invalid_request",
		                  "the Content-Length is malformed");
		return;
	}
	if (body.left > ac->workspace_bytes + (1ULL << 20)) {
		http_send_message(req, 413, NULL, "request_too_large",
		                  "the file is larger than the workspace");
		return;
	}
	/* busy now: say so before reading the body (it is checked again before the file is
	 * named; a command may start meanwhile) */
	if (flock(lock_fd, LOCK_EX | LOCK_NB) < 0) {
		agent_busy(req);
		return;
	}
	flock(lock_fd, LOCK_UN);
	multipart_stream_init(&ms, boundary, agent_body_read, &body);
	if (multipart_stream_file(&ms, "file", &f, &why) < 0) {
		http_send_message(req, 400, NULL, "invalid_request", why);
		return;
	}
	if (!workspace_path_ok(f.filename, f.filename_len)) {
		static char rel[PATH_MAX];
		/* refused either way; one that climbs out of /app in the example runtime's 403 */
		if (workspace_path_resolve(f.filename, f.filename_len, rel, sizeof(rel)) ==
		    WORKSPACE_ESCAPES) {
			agent_denied(req);
			return;
		}
		http_send_message(req, 400, NULL, "invalid_request",
		                  "the file name must be a relative path under /app: no leading "
		                  "'/', no '.' or '..' or empty component, no control character");
		return;
	}
	/* streamed into an unnamed file of the workspace, in pieces of the window's size: the
	 * workspace's bounds are the upload's, and a failed upload leaves nothing behind */
	agent_as_owner(ac, true);
	fd = workspace_tmpfile(ac->workspace_fd, 0644);
	agent_as_owner(ac, false);
	if (fd < 0) {
		agent_upload_failed(req, f.filename, errno);
		return;
	}
	e = agent_upload_data(&ms, fd, &why);
	if (e != 0) {
		close(fd);
		if (e > 0)
			agent_upload_failed(req, f.filename, e);
		else
			http_send_message(req, 400, NULL, "invalid_request", why);
		return;
	}
	/* the file is whole: name it, with the workspace to itself for that moment only */
	if (flock(lock_fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		agent_busy(req);
		return;
	}
	agent_as_owner(ac, true);
	if (workspace_link(ac->workspace_fd, fd, f.filename) < 0)
		e = errno;
	agent_as_owner(ac, false);
	flock(lock_fd, LOCK_UN);
	close(fd);
	if (e != 0) {
		agent_upload_failed(req, f.filename, e);
		return;
	}
	snprintf(msg, sizeof(msg), "File '%s' uploaded successfully.", f.filename);
	http_send_message(req, 200, NULL, NULL, msg);
}

/* GET /download/{path}: a regular file of the workspace, streamed. */
static void
agent_download(void *port, FCGX_Request *req)
{
	const struct agent_config *ac = ((const struct agent_request *)port)->ac;
	static char path[AGENT_MAX_URI_PATH], rel[PATH_MAX];
	struct stat sb;
	int fd;

	fd = agent_open_target(ac, req, "/download/", path, rel, sizeof(rel), O_RDONLY);
	if (fd == AGENT_ANSWERED)
		return;
	/* a regular file only: a FIFO, socket or device is never opened (workspace_open) */
	if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		if (fd >= 0)
			close(fd);
		http_send_message(req, 404, NULL, NULL, "File not found");
		return;
	}
	{
		/* as the example runtime's FileResponse names it: filename="<path>" when the path
		 * needs no percent-encoding (Python's quote(), '/' kept), else filename*=utf-8'' */
		static char disposition[3 * 4096 + 64];
		static const char unreserved[] =
		    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		    "0123456789_.-~/";
		char enc[3 * 4096 + 1];
		size_t e = 0;
		bool plain = true;
		for (const unsigned char *c = (const unsigned char *)path;
		     *c && e + 3 < sizeof(enc); c++) {
			if (strchr(unreserved, *c) != NULL) {
				enc[e++] = (char)*c;
			} else {
				e += (size_t)snprintf(enc + e, 4, "%%%02X", *c);
				plain = false;
			}
		}
		enc[e] = '\0';
		snprintf(disposition, sizeof(disposition),
		         "Content-Disposition: attachment; %s%s%s",
		         plain ? "filename=\"" : "filename*=utf-8''", enc, plain ? "\"" : "");
		http_send_file(req, "application/octet-stream", disposition, fd,
		               (unsigned long long)sb.st_size);
	}
	close(fd);
}

static int
agent_cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* GET /list/{path}: a directory's regular files and directories. */
static void
agent_list(void *port, FCGX_Request *req)
{
	const struct agent_config *ac = ((const struct agent_request *)port)->ac;
	static char path[AGENT_MAX_URI_PATH], rel[PATH_MAX];
	struct jsonw w;
	char **names = NULL, *body;
	size_t count = 0, len;
	int fd;
	DIR *d;
	struct dirent *e;

	fd = agent_open_target(ac, req, "/list/", path, rel, sizeof(rel), O_RDONLY | O_DIRECTORY);
	if (fd == AGENT_ANSWERED)
		return;
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (d == NULL) {
		if (fd >= 0)
			close(fd);
		/* the example runtime's answer for anything that is not a directory */
		http_send_message(req, 404, NULL, NULL, "Path is not a directory");
		return;
	}
	while ((e = readdir(d)) != NULL && count < AGENT_MAX_LIST_ENTRIES) {
		char **more;
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		more = realloc(names, (count + 1) * sizeof(*names));
		if (more == NULL)
			break;
		names = more;
		names[count] = strdup(e->d_name);
		if (names[count] == NULL)
			break;
		count++;
	}
	if (count == AGENT_MAX_LIST_ENTRIES)
		log_msg(LOG_WARN, "listing %s: cut at %d entries", rel, AGENT_MAX_LIST_ENTRIES);
	if (names != NULL)
		qsort(names, count, sizeof(*names), agent_cmp_names);
	jsonw_init(&w);
	jsonw_lit(&w, "[");
	for (size_t i = 0; i < count; i++) {
		struct stat sb;
		char num[64];
		/* only what the protocol has a word for: a symlink, FIFO, socket or device is
		 * not a "file" (and the client's FileEntry knows no other type): left out */
		if (fstatat(dirfd(d), names[i], &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !(S_ISREG(sb.st_mode) || S_ISDIR(sb.st_mode)))
			continue;
		if (w.b.len > 1)
			jsonw_lit(&w, ",");
		jsonw_lit(&w, "{\"name\":");
		jsonw_cstr(&w, names[i]);
		jsonw_lit(&w, ",\"size\":");
		jsonw_int(&w, (long long)sb.st_size);
		jsonw_lit(&w,
		          S_ISDIR(sb.st_mode) ? ",\"type\":\"directory\"" : ",\"type\":\"file\"");
		snprintf(num, sizeof(num), ",\"mod_time\":%lld.%06ld}",
		         (long long)sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec / 1000);
		jsonw_lit(&w, num);
	}
	jsonw_lit(&w, "]");
	closedir(d);
	for (size_t i = 0; i < count; i++)
		free(names[i]);
	free(names);
	body = jsonw_take(&w, &len);
	http_send_doc(req, HTTP_JSON, body, len);
}

/* GET /exists/{path}: whether anything is there. */
static void
agent_exists(void *port, FCGX_Request *req)
{
	const struct agent_config *ac = ((const struct agent_request *)port)->ac;
	static char path[AGENT_MAX_URI_PATH], rel[PATH_MAX], echo[3 * AGENT_MAX_URI_PATH];
	struct jsonw w;
	bool exists = false;
	char *body;
	size_t len;
	int fd;

	/* of any type, a symlink itself included; a symlink on the way is refused */
	fd = agent_open_target(ac, req, "/exists/", path, rel, sizeof(rel), O_PATH);
	if (fd == AGENT_ANSWERED)
		return;
	if (fd >= 0) {
		exists = true;
		close(fd);
	}
	/* the example runtime's {"path": <the path as received>, "exists": bool}, the path
	 * decoded as its server decodes it: bytes that are not UTF-8 become U+FFFD */
	len = utf8_sanitize((const unsigned char *)path, strlen(path), echo);
	jsonw_init(&w);
	jsonw_lit(&w, "{\"path\":");
	jsonw_str(&w, echo, len);
	jsonw_lit(&w, exists ? ",\"exists\":true}" : ",\"exists\":false}");
	body = jsonw_take(&w, &len);
	http_send_doc(req, HTTP_JSON, body, len);
}

/* Port 8888's endpoints, by nginx.conf's CODEBOX_ENDPOINT. nginx.conf refuses a wrong method
 * (codebox-405-post.conf); /download/, /list/ and /exists/ answer any. */
static const struct http_endpoint agent_endpoints[] = {
    {"agent_execute", NULL, NULL, agent_execute, false},
    {"agent_upload", NULL, NULL, agent_upload, false},
    {"agent_download", NULL, NULL, agent_download, false},
    {"agent_list", NULL, NULL, agent_list, false},
    {"agent_exists", NULL, NULL, agent_exists, false},
    {NULL, NULL, NULL, NULL, false},
};

void
agent_handle(const struct agent_config *ac, const struct run_config *run, struct run_stream *stream,
             int lock_fd, int slots_dir_fd, FCGX_Request *req, const char *endpoint,
             const struct limits *l)
{
	const struct http_endpoint *e = http_endpoint_find(agent_endpoints, endpoint);
	struct agent_request a = {
	    .ac = ac, .run = run, .stream = stream, .lock_fd = lock_fd, .l = l};
	const char *v = FCGX_GetParam("CODEBOX_AGENT_SLOTS", req->envp);
	long slots = AGENT_DEFAULT_SLOTS;
	int held;

	if (!http_route(req, e))
		return;
	if (ac->workspace_fd < 0 || lock_fd < 0) {
		char msg[300];
		snprintf(msg, sizeof(msg), "the agent protocol is off on this host: %s",
		         ac->off_reason ? ac->off_reason : "no workspace");
		http_send_message(req, 503, NULL, "sandbox_unavailable", msg);
		return;
	}
	if (v != NULL) {
		char *end;
		errno = 0;
		slots = strtol(v, &end, 10);
		if (errno != 0 || end == v || *end != '\0' || slots < 1 ||
		    slots > AGENT_MAX_SLOTS) {
			log_msg(
			    LOG_ERROR,
			    "misconfigured: fastcgi_param CODEBOX_AGENT_SLOTS must be an integer "
			    "from 1 to %d",
			    AGENT_MAX_SLOTS);
			http_send_message(req, 500, NULL, "misconfigured",
			                  "the service is misconfigured; see the service log");
			return;
		}
	}
	/* the pool's admission: the body is in (nginx buffered it), so a slot is held only
	 * while the request is served */
	held = agent_admit(slots_dir_fd, slots);
	if (held == -2) {
		http_send_message(req, 503, NULL, "sandbox_unavailable",
		                  "the service cannot admit commands right now (its runtime "
		                  "directory could not be written); retry shortly");
		return;
	}
	if (held < 0) {
		log_msg(LOG_INFO, "all %ld agent slots are in use: 429", slots);
		metrics_record_busy();
		http_send_message(req, 429, HTTP_BUSY_POOL, "sandbox_busy",
		                  "all agent slots are in use; retry shortly");
		return;
	}
	e->handle(&a, req);
	agent_release(held);
}
