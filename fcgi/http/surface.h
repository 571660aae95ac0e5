/*
 * surface.h - what port 8080's surfaces share (worker.c's meta endpoints, execute.c's
 * /execute, sessionapi.c's /sessions, mcpapi.c's /mcp) and port 9090's /metrics: the worker's
 * configuration, one request as their endpoints see it, whether this pool serves sessions,
 * and the documents the service describes itself with (/isolation, the tool).
 */
#ifndef CODEBOX_SURFACE_H
#define CODEBOX_SURFACE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "http/agent.h"
#include "run/history.h"
#include "core/isolation.h"
#include "core/limits.h"
#include "run/probe.h"
#include "run/run.h"
#include "run/session.h"
#include "core/snapshot.h"
#include "http/tool.h"

struct slots;
enum slots_admit;

struct worker_config {
	int listen_fd;                  /* non-blocking, shared by every worker */
	int index;                      /* 0..N-1, stable across respawns */
	struct run_config run;          /* per worker: its own run uid */
	const struct probe_info *probe; /* measured at start-up */
	bool files_contained;           /* runs cannot leave files outside their directory */
	const struct isolation *iso;    /* the layers in force */
	const char *runs_dir;           /* holds one directory per worker: w<index> */
	int runs_dir_fd;
	struct agent_config agent;     /* port 8888 */
	const char *nginx_busy_log;    /* nginx's log of its own 429s (metrics.h), or NULL */
	struct history_config history; /* the audit trail; dir_fd -1: off */
	struct slots *slots;           /* the execution slots, shared by every worker */
	struct slots *streams;         /* the event streams of background executions (one each) */
	const struct limits *ceilings; /* every request's limits are capped at these */
	size_t max_body_bytes;         /* nginx's client_max_body_size */
	bool warm_enabled; /* CODEBOX_WARM: runs are cloned from a warm template when one is up */
	int sessions_fd;   /* the sessions directory (session.h), or -1: no sessions */
	char sessions_dir[4200];
	struct session_uids session_uids; /* a root pool's: a host uid per session */
	int pod_ordinal; /* CODEBOX_POD_ORDINAL: new sessions' ids name it; -1: none */
	struct snapshot_key snapshot_key; /* sessions' snapshots' HMAC key (snapshot.h) */
};

/* What a worker owns across requests: one run stream per port (run.h). */
struct worker_streams {
	struct run_stream execute; /* port 8080's runs, with a box built ahead for the next */
	struct run_stream agent;   /* port 8888's commands (another run config: the workspace) */
};

/* One request, as the worker's endpoints see it (their port argument, http.h). */
struct worker_request {
	const struct worker_config *wc;
	const struct run_config *run;
	struct worker_streams *streams;
	const char *endpoint;   /* CODEBOX_ENDPOINT */
	const char *request_id; /* CODEBOX_REQUEST_ID */
	const char *token_id;   /* CODEBOX_TOKEN_ID: the bearer token's id; NULL or "": none */
	struct limits l;        /* the request's, capped at the pool's ceilings (all but readyz) */
	struct session_limits sl; /* the sessions' bounds (all but readyz) */
};

/* A session's execution: where its init listens, and what of its box the worker needs. */
struct worker_session {
	int conn; /* connected to its init's socket */
	const struct run_session_box *sb;
	int op;            /* 0: code; SESSION_OP_SNAPSHOT or SESSION_OP_RESTORE (snapshots) */
	int blob_fd;       /* their memfd */
	unsigned blob_max; /* a snapshot's bound */
};

/* A 32-bit tag of s (FNV-1a), never 0; 0 for NULL or "" (no token). */
unsigned surface_tag(const char *s);

/*
 * Takes an execution slot for this worker (slots.h): at most CODEBOX_MAX_CONCURRENT_EXECUTIONS
 * in the pod and, for a request with a bearer token, CODEBOX_MAX_EXECUTIONS_PER_TOKEN (0: no
 * share) of its token's, counting its loans (background executions). *tenant is set when the
 * token's share is what refused it (SLOTS_FULL).
 */
enum slots_admit surface_slot_take(const struct worker_request *w, bool *tenant);

/* Lends an execution slot to pid for this request's token, as surface_slot_take() counts:
 * the loan, or SLOTS_LOAN_FULL, SLOTS_LOAN_TENANT (the token's share) or SLOTS_LOAN_STUCK. */
int surface_slot_lend(const struct worker_request *w, pid_t pid);

/* A 429's words for a token at its share of the execution slots (Codebox-Busy: tenant). */
#define SURFACE_TENANT_BUSY                                                                        \
	"this token runs as many executions at once as its share allows; retry shortly"

/* Whether this pool serves sessions (for this request's bounds). */
bool surface_sessions_on(const struct worker_request *w);

/* The /isolation document (reply_isolation()) for this request's limits: GET /isolation's
 * answer, and what /tool and MCP's tool are written from. Newly allocated, or NULL. */
char *surface_isolation_doc(const struct worker_request *w, size_t *len);

/* The tool in format (tool.h), written from /capabilities and /isolation for this request's
 * limits: GET /tool's answer and MCP's tool. Newly allocated, or NULL (out of memory). */
char *surface_tool_doc(const struct worker_request *w, enum tool_format format, size_t *len);

#endif
