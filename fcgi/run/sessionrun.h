/*
 * sessionrun.h - a session's parent side (session.h): its creation, a box whose init serves
 * executions one after another on a socket, each execution of code (or snapshot, or restore)
 * in it, the messages to its init, and its removal. The worker's side, as run.h is a run's.
 */
#ifndef CODEBOX_SESSIONRUN_H
#define CODEBOX_SESSIONRUN_H

#include <stdbool.h>

#include "run/cgroup.h"
#include "run/run.h"

/* run_session_execute(): the session's init did not take the execution (it is gone) */
#define RUN_SESSION_GONE (-2)
/* run_session_execute(): a cell of the session's is still ending (its client left): retry */
#define RUN_SESSION_BUSY (-3)
/* how long a session's init has to answer a worker's message */
#define RUN_SESSION_ANSWER_MS 2000
/* how long a new session has to serve */
#define RUN_SESSION_READY_MS 10000
/* how long a new session waits for its tier's template (the heavy one, renewed meanwhile) */
#define RUN_SESSION_TIER_WAIT_MS 15000

/* What of a session's box outlives the worker that built it: the rest is its init's. */
struct run_session_box {
	struct cgroup_run cg; /* oom_fd -1: nobody arms it between executions */
	char dir[40];         /* its directory, in the sessions directory */
	bool heavy;           /* cloned from the heavy tier's template */
};

enum session_op;
struct session_answer;

/*
 * Creates a session: a warm box (always; there is no cold session) whose init serves the
 * listening socket listen_fd (bound at sock_path), its directory under sb_parent_fd (path
 * sb_parent), spec's caps, bounds and limits; waits until it serves. Returns 0 with what
 * outlives the worker in sb, or -1 with why (errno ENOTSUP: this host has no warm runs).
 */
int run_session_create(const struct run_config *cfg, const struct run_spec *spec, int listen_fd,
                       const char *sock_path, int sb_parent_fd, const char *sb_parent,
                       struct run_session_box *sb, char *why, size_t why_len);

/*
 * Runs spec's code in the session whose socket conn is connected to, as run_execute() runs a
 * run: the same outcome, plus the value and whether the session ended. The deadline and a
 * client's hang-up interrupt the cell (KeyboardInterrupt); the session survives if it ends
 * within SESSION_INTERRUPT_MS. Returns 0, -1 (the fault in out and why),
 * RUN_SESSION_GONE when the session did not take it, or RUN_SESSION_BUSY when a cell of its
 * was still running.
 */
int run_session_execute(const struct run_config *cfg, const struct run_spec *spec, int conn,
                        const struct run_session_box *sb, struct run_outcome *out, char *why,
                        size_t why_len);

/* A connection to the session's socket at path, or -1 (errno). */
int run_session_connect(const char *path);

/* One message to the session at path and its answer; 0, or -1 when it does not serve. */
int run_session_ask(const char *path, enum session_op op, struct session_answer *a);

/* The same on conn, a connection of run_session_connect()'s (it stays open). */
int run_session_ask_on(int conn, enum session_op op, struct session_answer *a);

/*
 * The session at path's working directory: an O_PATH fd its init sent (SESSION_OP_WORKDIR),
 * with its answer in a, or -1 (errno EBUSY: its backlog is full). The fd is untrusted: the
 * caller checks what it is (sessionfiles.c).
 */
int run_session_workdir(const char *path, struct session_answer *a);

/* Removes an ended session's cgroup and directory. */
void run_session_remove(int sb_parent_fd, struct run_session_box *sb);

#endif
