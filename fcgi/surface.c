/*
 * surface.c - what port 8080's surfaces share beyond the request itself (surface.h): whether
 * this pool serves sessions, and the documents that describe the service, /isolation and the
 * tool, each written once for GET /isolation, GET /tool and MCP alike.
 */
#include "surface.h"

#include "reply.h"
#include "warm.h"
#include "workspace.h"

#include <jansson.h>
#include <sched.h>
#include <stdlib.h>

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
