/*
 * reply.c - the only file that knows the response schema.
 *
 * Part 1 of API.md is consumed by strict clients, so keys, their order and every string are
 * fixed here and nowhere else. Every string written is valid UTF-8: captured output goes
 * through capture_utf8(), result.json's text was normalised by result_parse().
 */
#include "http/reply.h"

#include "core/files.h"
#include "core/jsonw.h"
#include "core/utf8.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *
signal_name(int sig)
{
	switch (sig) {
	case SIGHUP:
		return "SIGHUP";
	case SIGINT:
		return "SIGINT";
	case SIGQUIT:
		return "SIGQUIT";
	case SIGILL:
		return "SIGILL";
	case SIGTRAP:
		return "SIGTRAP";
	case SIGABRT:
		return "SIGABRT";
	case SIGBUS:
		return "SIGBUS";
	case SIGFPE:
		return "SIGFPE";
	case SIGKILL:
		return "SIGKILL";
	case SIGUSR1:
		return "SIGUSR1";
	case SIGSEGV:
		return "SIGSEGV";
	case SIGUSR2:
		return "SIGUSR2";
	case SIGPIPE:
		return "SIGPIPE";
	case SIGALRM:
		return "SIGALRM";
	case SIGTERM:
		return "SIGTERM";
	case SIGXCPU:
		return "SIGXCPU";
	case SIGXFSZ:
		return "SIGXFSZ";
	case SIGSYS:
		return "SIGSYS";
	default:
		return NULL;
	}
}

static void
put_capture(struct jsonw *w, const struct capture *c)
{
	size_t n;
	char *s = capture_utf8(c, &n);

	if (s == NULL) {
		w->failed = true;
		return;
	}
	jsonw_str(w, s, n);
	free(s);
}

static void
outcome_fields(struct jsonw *w, const struct run_outcome *o, size_t max_result_bytes, bool details,
               const char *request_id, bool artifacts)
{
	char errbuf[128];
	const char *result_error;

	jsonw_lit(w, "{\"status\":");
	jsonw_cstr(w, run_status_string(o->status));
	jsonw_lit(w, ",\"exitCode\":");
	if (o->has_exit_code)
		jsonw_int(w, o->exit_code);
	else
		jsonw_lit(w, "null");
	jsonw_lit(w, ",\"stdout\":");
	put_capture(w, &o->out);
	jsonw_lit(w, ",\"stderr\":");
	put_capture(w, &o->err);
	jsonw_lit(w, ",\"result\":");
	if (o->result_status == RESULT_OK && o->result_json != NULL)
		jsonw_raw(w, o->result_json, o->result_len);
	else
		jsonw_lit(w, "null");
	jsonw_lit(w, ",\"resultError\":");
	result_error =
	    result_error_string(o->result_status, max_result_bytes, errbuf, sizeof(errbuf));
	if (result_error != NULL)
		jsonw_cstr(w, result_error);
	else
		jsonw_lit(w, "null");
	jsonw_lit(w, ",\"durationMs\":");
	jsonw_int(w, o->duration_ms < 0 ? 0 : o->duration_ms);
	jsonw_lit(w, ",\"truncated\":");
	jsonw_lit(w, capture_truncated(&o->out) || capture_truncated(&o->err) ? "true" : "false");
	if (details) {
		const char *sig = o->term_signal ? signal_name(o->term_signal) : NULL;
		const char *lim = run_limit_string(o->limit_exceeded);

		jsonw_lit(w, ",\"details\":{\"requestId\":");
		jsonw_cstr(w, request_id ? request_id : "");
		jsonw_lit(w, ",\"signal\":");
		if (sig != NULL)
			jsonw_cstr(w, sig);
		else if (o->term_signal)
			jsonw_int(w, o->term_signal); /* a real-time signal has no name */
		else
			jsonw_lit(w, "null");
		jsonw_lit(w, ",\"limitExceeded\":");
		if (lim != NULL)
			jsonw_cstr(w, lim);
		else
			jsonw_lit(w, "null");
		jsonw_lit(w, ",\"cpuMs\":");
		jsonw_int(w, o->cpu_ms);
		jsonw_lit(w, ",\"maxRssBytes\":");
		jsonw_int(w, o->max_rss_bytes);
		jsonw_lit(w, ",\"stdoutBytes\":");
		jsonw_int(w, (long long)o->out.total_bytes);
		jsonw_lit(w, ",\"stderrBytes\":");
		jsonw_int(w, (long long)o->err.total_bytes);
		jsonw_lit(w, "}");
	}
	if (artifacts) {
		jsonw_lit(w, ",\"artifacts\":");
		artifacts_write(w, o->artifacts, o->artifacts_len, o->artifact_types);
	}
}

void
reply_outcome_write(struct jsonw *w, const struct run_outcome *o, size_t max_result_bytes,
                    bool details, const char *request_id, bool artifacts)
{
	outcome_fields(w, o, max_result_bytes, details, request_id, artifacts);
	jsonw_lit(w, "}");
}

void
reply_session_outcome_write(struct jsonw *w, const struct run_outcome *o, size_t max_result_bytes,
                            bool details, const char *request_id, bool artifacts,
                            const char *session_id)
{
	outcome_fields(w, o, max_result_bytes, details, request_id, artifacts);
	jsonw_lit(w, ",\"value\":");
	if (o->has_value && o->value != NULL) {
		/* the program's bytes: made valid UTF-8 (at most 3 bytes out for one in) */
		char *v = malloc(o->value_len * 3 + 1);
		if (v == NULL) {
			w->failed = true;
			return;
		}
		size_t n = utf8_sanitize((const unsigned char *)o->value, o->value_len, v);
		jsonw_str(w, v, n);
		free(v);
	} else {
		jsonw_lit(w, "null");
	}
	if (o->cell_doc != NULL) {
		jsonw_lit(w, ",");
		jsonw_raw(w, o->cell_doc, o->cell_doc_len);
	}
	jsonw_lit(w, ",\"session\":{\"id\":");
	jsonw_cstr(w, session_id);
	jsonw_lit(w, ",\"open\":");
	jsonw_lit(w, o->session_over ? "false" : "true");
	jsonw_lit(w, "}}");
}

char *
reply_outcome(const struct run_outcome *o, size_t max_result_bytes, bool details,
              const char *request_id, bool artifacts, size_t *len)
{
	struct jsonw w;

	jsonw_init(&w);
	reply_outcome_write(&w, o, max_result_bytes, details, request_id, artifacts);
	return jsonw_take(&w, len);
}

char *
reply_error(const char *error, const char *message, size_t *len)
{
	struct jsonw w;

	jsonw_init(&w);
	jsonw_lit(&w, "{");
	if (error != NULL) {
		jsonw_lit(&w, "\"error\":");
		jsonw_cstr(&w, error);
		jsonw_lit(&w, ",");
	}
	jsonw_lit(&w, "\"message\":");
	jsonw_cstr(&w, message);
	jsonw_lit(&w, "}");
	return jsonw_take(&w, len);
}

/* Dumps doc compactly and releases it (the caller's reference is stolen). */
static char *
dump_doc(json_t *doc, size_t *len)
{
	char *out;

	if (doc == NULL)
		return NULL;
	out = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	if (out != NULL && len != NULL)
		*len = strlen(out);
	return out;
}

char *
reply_capabilities(const struct probe_info *info, const struct limits *l, bool files_contained,
                   size_t *len)
{
	json_t *doc, *modules;
	char sentence[512];

	modules = json_array();
	for (size_t i = 0; i < info->n_modules; i++)
		json_array_append_new(modules,
		                      json_pack("{s:s, s:s, s:s}", "importName",
		                                info->modules[i].import_name, "distribution",
		                                info->modules[i].distribution, "version",
		                                info->modules[i].version));
	snprintf(sentence, sizeof(sentence),
	         "To return structured data, write one JSON document to result.json in the "
	         "working directory (at most %zu bytes); it comes back parsed as `result`, or "
	         "`resultError` explains why it was rejected.",
	         l->max_result_bytes);
	/* json_pack "o" steals the reference to modules */
	doc = json_pack(
	    "{s:s, s:o, s:{s:I, s:I, s:I, s:I, s:I, s:I}, s:s, s:s, s:s}", "pythonVersion",
	    info->python_version, "modules", modules, "limits", "executionTimeoutSeconds",
	    (json_int_t)l->execution_timeout_seconds, "maxCodeBytes", (json_int_t)l->max_code_bytes,
	    "maxStdoutBytes", (json_int_t)l->max_stdout_bytes, "maxStderrBytes",
	    (json_int_t)l->max_stderr_bytes, "maxResultBytes", (json_int_t)l->max_result_bytes,
	    "maxConcurrentExecutions", (json_int_t)l->max_concurrent_executions, "network",
	    "No network use is expected: do not download data, install packages or call "
	    "external services.",
	    "persistence",
	    files_contained
	        ? "Every execution starts a fresh interpreter in a fresh, empty working "
	          "directory; no files, variables or imports survive between executions."
	        : "Every execution starts a fresh interpreter in a fresh, empty working "
	          "directory that is removed afterwards; no variables or imports survive "
	          "between executions, but files written outside the working directory "
	          "may.",
	    "structuredResult", sentence);
	return dump_doc(doc, len);
}

/*
 * /isolation's uid: whether a session has a host uid of its own (a root pool's), and the
 * per-user kernel counters that runs and sessions share when they do not (the pool's one uid:
 * the user namespace counts some per namespace, but charges them to the host uid too, DESIGN.md
 * "The isolation layers").
 */
static void
reply_isolation_uids(json_t *uid, const struct isolation *iso)
{
	static const char *const shared[] = {"pipeBuffers", "pendingSignals", "processes",
	                                     "messageQueues", "lockedMemory"};
	bool own = iso->root_pool && iso->session_uid_count > 0;
	json_t *list = json_array();

	if (uid == NULL || list == NULL) {
		json_decref(list);
		return;
	}
	for (size_t i = 0; !iso->root_pool && i < sizeof(shared) / sizeof(shared[0]); i++)
		/* a box's share of them is its own limit: none takes another's */
		if (strcmp(shared[i], "pendingSignals") != 0 || iso->sigpending_share == 0)
			json_array_append_new(list, json_string(shared[i]));
	json_object_set_new(uid, "perWorker", json_boolean(iso->root_pool));
	json_object_set_new(uid, "perSession", json_boolean(own));
	json_object_set_new(uid, "sessionsFirst",
	                    own ? json_integer((json_int_t)iso->session_uid_first) : json_null());
	json_object_set_new(
	    uid, "sessionsLast",
	    own ? json_integer((json_int_t)(iso->session_uid_first + iso->session_uid_count - 1))
	        : json_null());
	json_object_set_new(uid, "sharedCounters", list);
	json_object_set_new(uid, "pendingSignalsPerBox",
	                    iso->sigpending_share > 0
	                        ? json_integer((json_int_t)iso->sigpending_share)
	                        : json_null());
}

char *
reply_isolation(const struct isolation *iso, const struct limits *l, bool warm,
                const char *warm_start, unsigned long long workspace_bytes,
                unsigned long long workspace_inodes, json_t *sessions, size_t *len)
{
	json_t *doc, *layers = json_object(), *off = json_object();
	json_t *workspace = workspace_bytes == 0
	                        ? json_null()
	                        : json_pack("{s:I, s:I}", "bytes", (json_int_t)workspace_bytes,
	                                    "inodes", (json_int_t)workspace_inodes);

	for (int i = 0; i < ISO_LAYER_COUNT; i++) {
		json_object_set_new(layers, iso_layer_name((enum iso_layer)i),
		                    json_boolean(iso->on[i]));
		if (!iso->on[i])
			json_object_set_new(off, iso_layer_name((enum iso_layer)i),
			                    json_string(iso->why_off[i]));
	}
	doc = json_pack(
	    "{s:o, s:o, s:{s:b, s:b, s:i, s:i, s:s, s:s, s:s, s:o, s:b, s:b, s:o, s:s, s:s, s:s}, "
	    "s:{s:I, s:I, s:o, s:b}, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}, s:o}",
	    "layers", layers, "off", off, "details", "readOnlySystem", iso->on[ISO_MOUNTNS],
	    "privateProc", iso->proc, "landlockAbi", iso->landlock_abi, "cgroupVersion",
	    iso->on[ISO_CGROUP] ? iso->cgroup_version : 0, "memoryLimit",
	    iso->on[ISO_CGROUP] ? "cgroup" : "rlimit-as", "processLimit", iso_process_limit(iso),
	    "diskLimit", iso->on[ISO_MOUNTNS] ? "tmpfs" : "rlimit-fsize (per file)",
	    /* the run's tmpfs holds at most this many files and directories */
	    "diskInodes",
	    iso->on[ISO_MOUNTNS] ? json_integer((json_int_t)limits_inodes(l->disk_bytes))
	                         : json_null(),
	    "noNewPrivileges", true, "highPids", iso->high_pids, "poolMemoryBytes",
	    iso->on[ISO_POOLMEMORY] ? json_integer((json_int_t)iso->pool_memory_bytes)
	                            : json_null(),
	    "cpuLimit", iso->on[ISO_CPUQUOTA] ? "cfs-quota" : "none", "unixSockets",
	    !iso->on[ISO_SECCOMP] ? "allowed"
	    : iso_deny_unix_socket(iso->on[ISO_LANDLOCK], iso->landlock_abi)
	        ? "socket() denied"
	        : "pathname connect() confined by Landlock",
	    "interpreter", warm ? "warm" : "cold", "uid", "hostFirst", (json_int_t)iso->uid_first,
	    "hostLast", (json_int_t)iso->uid_last, "inner",
	    iso->on[ISO_USERNS] ? json_integer(ISO_INNER_ID) : json_null(), "rootPool",
	    iso->root_pool, "limits", "memoryBytes", (json_int_t)l->memory_bytes, "maxProcesses",
	    (json_int_t)l->max_processes, "diskBytes", (json_int_t)l->disk_bytes, "maxStdinBytes",
	    (json_int_t)l->max_stdin_bytes, "cpuMillicores", (json_int_t)l->cpu_millicores,
	    "maxInputFiles", (json_int_t)FILES_MAX_COUNT, "maxInputBytes",
	    (json_int_t)files_max_bytes(l), "maxArtifacts", (json_int_t)ARTIFACTS_MAX_SENT,
	    "maxArtifactBytes", (json_int_t)ARTIFACTS_MAX_BYTES, "workspace", workspace);
	if (doc != NULL) {
		json_object_set_new(json_object_get(doc, "details"), "warmStart",
		                    warm && warm_start != NULL ? json_string(warm_start)
		                                               : json_null());
		json_object_set_new(doc, "sessions", sessions != NULL ? sessions : json_null());
		reply_isolation_uids(json_object_get(doc, "uid"), iso);
	} else
		json_decref(sessions);
	return dump_doc(doc, len);
}
