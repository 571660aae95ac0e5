/*
 * worker.h - one FastCGI worker: accept, handle one request, repeat.
 */
#ifndef CODEBOX_WORKER_H
#define CODEBOX_WORKER_H

#include <stdnoreturn.h>

#include "agent.h"
#include "history.h"
#include "isolation.h"
#include "limits.h"
#include "probe.h"
#include "run.h"
#include "session.h"
#include "snapshot.h"

struct slots;

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

/*
 * Completes wc->run with this worker's own part: its directory of runs, runs_dir/w<index>
 * (created 0311: runs can reach their own directory in it but not list it), and its Landlock
 * ruleset, built once per worker rather than once per run. Returns 0 or -1 (logged).
 */
int worker_prepare_run(const struct worker_config *wc, struct run_config *run);

/*
 * Serves requests until SIGTERM, then finishes the request in hand and exits 0. Expects
 * SIGTERM and SIGINT to be blocked on entry. A failed request never ends the worker.
 */
noreturn void worker_main(const struct worker_config *wc);

#endif
