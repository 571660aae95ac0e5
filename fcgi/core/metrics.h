/*
 * metrics.h - counters every worker adds to, in memory the supervisor shares with them, and
 * their Prometheus text rendering for GET /metrics.
 */
#ifndef CODEBOX_METRICS_H
#define CODEBOX_METRICS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/outcome.h"

/* Which surface a run came from. */
enum metrics_port {
	METRICS_PORT_EXECUTE, /* port 8080's POST /execute */
	METRICS_PORT_AGENT,   /* port 8888's POST /execute */
	METRICS_PORT_MCP,     /* port 8080's POST /mcp, tools/call */
	METRICS_PORT_COUNT,
};

/* The most workers whose in-flight state is tracked (the pool allows 1024, plus the probe). */
#define METRICS_MAX_WORKERS 1040

/*
 * Maps the shared counters (MAP_SHARED | MAP_ANONYMOUS, zeroed): call once in the supervisor
 * before it forks, so that every worker, respawned ones too, adds to the same memory. Returns
 * 0 or -1 (errno); without it every other call does nothing and /metrics says so.
 */
int metrics_init(void);

/* A run starts or ends on worker index (its in-flight gauge is per worker, so a worker that
 * dies mid-run does not leave the gauge high: metrics_worker_exited() clears it). */
void metrics_run_begin(int worker_index);
void metrics_run_end(int worker_index);

/* Counts a finished run: its status, the limit it exceeded, its duration. */
void metrics_record_run(enum metrics_port port, const struct run_outcome *o);

/* The port label's value: execute, agent, mcp. */
const char *metrics_port_name(enum metrics_port port);

/* Counts a run the sandbox could not start (a 500 on port 8080, exit 126 on 8888). */
void metrics_record_error(enum metrics_port port);

/* The supervisor started a zygote after the first: renewal when the serving one's life was
 * up, else a replacement for one that died. */
void metrics_zygote_started(bool renewal);

/* Counts a 429 the pool answered itself (every execution slot in use, or the agent
 * workspace busy). */
void metrics_record_busy(void);
/* A 429 of the pool for a bearer token at its share (Codebox-Busy: tenant). */
void metrics_record_busy_tenant(void);

/* How a session ended: codebox_sessions_ended_total's reason (session_remove()'s why). */
enum metrics_session_end {
	METRICS_SESSION_NOT_MADE,  /* its creation failed: never counted as made, nor here */
	METRICS_SESSION_DELETED,   /* DELETE /sessions/{id}, MCP's sessions close */
	METRICS_SESSION_IDLE,      /* found ended between executions, within its lifetime */
	METRICS_SESSION_LIFETIME,  /* found ended at or past its lifetime */
	METRICS_SESSION_KILLED,    /* ended with an execution: its program died or was killed */
	METRICS_SESSION_POOL_STOP, /* the pool's stop */
	METRICS_SESSION_FAILED,    /* made, then closed unused: a failed restore, an MCP call that
	                            * did not run */
	METRICS_SESSION_END_COUNT,
};

/* A session was made (POST /sessions, MCP's "new", a restore), ended, snapshotted or
 * restored. */
void metrics_session_made(void);
void metrics_session_ended(enum metrics_session_end why);
void metrics_session_snapshot(void);
void metrics_session_restored(void);

/* The supervisor saw worker index exit; restart is whether it will be respawned. */
void metrics_worker_exited(int worker_index, bool restart);

/*
 * The Prometheus text exposition (format 0.0.4). nginx_busy_log is the file nginx appends one
 * two-byte line to for each 429 it answers itself (limit_conn), or NULL; its size counts them.
 * python_version labels the build info. Returns a newly allocated text (caller frees) or NULL.
 */
/* What the pool admits at once (codebox_execution_slots), and what its sessions hold of their
 * bounds (codebox_sessions_*: open ones, CODEBOX_MAX_SESSIONS, the memory their caps reserve
 * and the pool's memory budget, 0 when it has none; draining: SIGUSR1, pool.c) */
struct metrics_capacity {
	long execute_slots; /* port 8080's (POST /execute and MCP's tools/call) */
	long sessions_open;
	long sessions_max;
	unsigned long long sessions_memory_bytes;
	unsigned long long memory_budget_bytes;
	long background_running; /* background executions running (their slot loans) */
	bool draining;
};

char *metrics_render(const char *nginx_busy_log, const char *python_version,
                     const struct metrics_capacity *cap, size_t *len);

#endif
