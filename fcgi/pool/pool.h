/*
 * pool.h - the supervisor: forks the workers, respawns them, drains them on SIGTERM.
 */
#ifndef CODEBOX_POOL_H
#define CODEBOX_POOL_H

#include "warm/warm.h"
#include "http/worker.h"

struct pool_config {
	int workers;       /* N >= the admitted concurrency */
	int drain_seconds; /* how long in-flight runs may take to finish on shutdown */
	bool drop_privileges;
	uid_t run_uid_base; /* worker i runs programs as run_uid_base + i */
	int max_sessions;   /* --max-sessions: root, a host uid each; else a share of signals */
	const char *socket_path;     /* removed when stopping starts, so nothing new connects */
	struct worker_config worker; /* template; index and run uid are set per worker */
	struct warm_settings warm;   /* warm interpreters (warm.c; the zygote: zygote.c) */
	int init_fd; /* codebox-init, a sealed memfd (warm_pool_start()); -1: not found */
};

/*
 * Runs the pool until SIGTERM or SIGINT, then stops accepting, lets in-flight requests finish
 * within drain_seconds, kills whatever is left and returns 0. Expects SIGCHLD, SIGTERM,
 * SIGINT and SIGALRM blocked on entry.
 */
int pool_run(struct pool_config *pc);

#endif
