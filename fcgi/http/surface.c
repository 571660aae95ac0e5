/*
 * surface.c - what port 8080's surfaces share beyond the request itself (surface.h): whether
 * this pool serves sessions, and the documents that describe the service, /isolation and the
 * tool, each written once for GET /isolation, GET /tool and MCP alike.
 */
#include "http/surface.h"

#include "core/log.h"
#include "http/reply.h"
#include "core/slots.h"
#include "warm/warm.h"
#include "core/workspace.h"

#include <jansson.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>

unsigned
surface_tag(const char *s)
{
	uint32_t h = 0x811c9dc5u;

	if (s == NULL || *s == '\0')
		return 0;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x01000193u;
	return h | 1;
}

/* The tag of a run of the request's token in the execution slots: 0 without one, and never
 * 1, which is an untagged run's (slots_acquire()). */
static unsigned
surface_run_tag(const struct worker_request *w)
{
	unsigned t = surface_tag(w->token_id);

	return t == 1 ? 3 : t;
}

enum slots_admit
surface_slot_take(const struct worker_request *w, bool *tenant)
{
	const unsigned tag[2] = {surface_run_tag(w), 0};
	const long limit[2] = {w->sl.max_executions_per_token, 0};
	enum slots_admit a;
	int which = 0;

	*tenant = false;
	if (tag[0] == 0)
		return slots_acquire(w->wc->slots, w->wc->index, w->l.max_concurrent_executions);
	a = slots_acquire_tagged(w->wc->slots, w->wc->index, w->l.max_concurrent_executions, tag,
	                         limit, &which);
	if (a == SLOTS_FULL && which == 1) {
		*tenant = true;
		log_msg(LOG_INFO, "this token runs its %ld executions at once: 429 (tenant)",
		        limit[0]);
	}
	return a;
}

int
surface_slot_lend(const struct worker_request *w, pid_t pid)
{
	int loan = slots_lend_tagged(w->wc->slots, w->l.max_concurrent_executions, pid,
	                             surface_run_tag(w), w->sl.max_executions_per_token);

	if (loan == SLOTS_LOAN_TENANT)
		log_msg(LOG_INFO, "this token runs its %ld executions at once: 429 (tenant)",
		        w->sl.max_executions_per_token);
	return loan;
}

bool
surface_sessions_on(const struct worker_request *w)
{
	/* a session's files must be out of every other's reach: its own mount namespace */
	return w->wc->sessions_fd >= 0 && w->sl.max_sessions > 0 && w->run->warm &&
	       (w->run->clone_flags & CLONE_NEWNS);
}

char *
surface_isolation_doc(const struct worker_request *w, size_t *len)
{
	const struct worker_config *wc = w->wc;
	bool agent_on = wc->agent.workspace_fd >= 0;
	unsigned long long ws_bytes = agent_on ? wc->agent.workspace_bytes : 0;

	/* sessions' bounds (session.h): /capabilities' keys are the lab contract's, fixed */
	json_t *sessions =
	    surface_sessions_on(w)
	        ? json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s}",
	                    "maxSessions", (json_int_t)w->sl.max_sessions, "maxSessionsPerToken",
	                    (json_int_t)w->sl.max_per_token, "maxStreams",
	                    (json_int_t)w->sl.max_streams, "idleTimeoutSeconds",
	                    (json_int_t)w->sl.idle_seconds, "maxLifetimeSeconds",
	                    (json_int_t)w->sl.max_life_seconds, "executionTimeoutSeconds",
	                    (json_int_t)w->l.execution_timeout_seconds, "maxExecutionSeconds",
	                    (json_int_t)w->sl.max_execution_seconds, "memoryBytes",
	                    (json_int_t)w->l.memory_bytes, "diskBytes", (json_int_t)w->l.disk_bytes,
	                    "snapshotMaxBytes", (json_int_t)w->sl.snapshot_max_bytes,
	                    /* whose key signs the snapshots: where they restore (snapshot.h) */
	                    "snapshotKey", wc->snapshot_key.fleet ? "fleet" : "pod")
	        : NULL;

	return reply_isolation(wc->iso, &w->l, w->run->warm && warm_serving(),
	                       warm_one_copy() ? "one-copy" : "copy", ws_bytes,
	                       agent_on ? workspace_inodes(ws_bytes) : 0, sessions, len);
}

char *
surface_tool_doc(const struct worker_request *w, enum tool_format format, size_t *len)
{
	size_t caps_len, iso_len;
	char *caps = reply_capabilities(w->wc->probe, &w->l, w->wc->files_contained, &caps_len);
	char *iso = surface_isolation_doc(w, &iso_len);
	char *doc = NULL;

	*len = 0;
	if (caps != NULL && iso != NULL)
		doc = tool_render(caps, caps_len, iso, iso_len, format, len);
	free(caps);
	free(iso);
	return doc;
}
