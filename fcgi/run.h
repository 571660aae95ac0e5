/*
 * run.h - one execution of a program in the sandbox, seen from the worker.
 */
#ifndef CODEBOX_RUN_H
#define CODEBOX_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "cgroup.h"
#include "files.h"
#include "outcome.h"
#include "runconfig.h"
#include "workdir.h"

/* The caps a run's sandbox is built with: its cgroup (or rlimits) and its directory's size. */
struct run_caps {
	unsigned long long memory_bytes;
	unsigned long max_processes;
	unsigned long long disk_bytes;
	unsigned long cpu_millicores; /* 0: no CPU quota */
	/* warm: the heavy tier's template, for a program that names its modules (set by
	 * run_execute() from the code, warm_wants_heavy()) */
	bool heavy;
	/* an agent's command that is a plain Python invocation (pycmd.h): it may run warm, on
	 * the tier heavy names (set by the agent's endpoint) */
	bool warm_command;
};

struct limits;

/* What one run is asked to do. */
struct run_spec {
	const char *code;
	size_t code_len;
	const char *stdin_data;
	size_t stdin_len;
	const char *files; /* the input files, packed (files.h), or NULL */
	size_t files_len;
	enum artifacts_want artifacts; /* the files the run leaves to collect (outcome.artifacts) */
	long wall_ms;
	size_t max_stdout_bytes;
	size_t max_stderr_bytes;
	size_t max_result_bytes;
	struct run_caps caps;
	/* the request's connection to nginx: a hang-up on it means the client left, and the
	 * run is killed at once (run_outcome.abandoned) */
	bool watch_client;
	int client_fd;
	/* output as it happens (stream.h): called with what each read of stdout (which 0) or
	 * stderr (1) added to the captures; NULL: none */
	void (*on_output)(void *ctx, int which, const char *p, size_t n);
	void *output_ctx;
	/* a session's creation: no code runs; the program becomes the session's cell loop,
	 * and its init ends it past these bounds */
	bool session;
	unsigned session_idle_seconds;
	unsigned session_life_seconds;
	/* a session's snapshot or restore (run_session_execute()): SESSION_OP_SNAPSHOT or
	 * SESSION_OP_RESTORE, with its memfd (borrowed) and, for a snapshot, its bound; 0: an
	 * execution of code */
	int session_op;
	int session_blob_fd;
	unsigned session_blob_max;
};

/*
 * A run of code[0..code_len) under limits (a request's, capped at the pool's ceilings): their
 * caps and output bounds, wall_ms, no stdin, no files, the client's connection client_fd
 * watched for a hang-up. Its caller sets what else the request brings.
 */
struct run_spec run_spec_from_limits(const struct limits *l, const char *code, size_t code_len,
                                     long wall_ms, int client_fd);

/*
 * A sandbox built ahead of its request: namespaces, mounts, cgroup and the run's directory
 * exist, and the child waits for the code. Only the run's caps that are fixed at build time
 * (memory, processes, disk) must match the request that uses it.
 */
struct run_box {
	bool active;
	bool ns_mode;
	struct workdir wd;
	struct cgroup_run cg;
	pid_t pid;
	int pidfd, out_r, err_r, fail_r, ctl_w, rep_r;
	struct run_caps caps; /* what it was built with */
	bool warm;            /* cloned from a warm template */
	enum run_tier tier;   /* the interpreter it runs: cold, or a copy of a tier's template */
	enum run_fallback fallback; /* why it is not on the tier its program named */
	/* init is a template's child, not the worker's: watched and killed through its pidfd,
	 * never waited for (the kernel reaps it; its report says how the program ended) */
	bool foreign;
	unsigned long long as_base_bytes; /* warm: the template's address space (RLIMIT_AS) */
	bool oom_stopped; /* the worker stopped the run at its first OOM (run_execute) */
};

/*
 * What one stream of runs keeps between requests, owned by whoever serves them (a worker has
 * one for port 8080's runs and one for the agent's; the start-up probe one of its own):
 *
 *   box    the sandbox built ahead for the next request (run_stream_build_ahead), when active
 *   last   the caps of the last request, which the next box is built with
 *   spent  the last run's emptied cgroup, removed after its reply (run_stream_finish): rmdir of a
 *          v1 memory group takes milliseconds while the kernel offlines it, and the contract
 *          only needs the processes dead and the directory gone before the reply
 *   dying  namespace mode: the last run's box once init has reported. init reports only
 *          when every other process of the run is reaped, then exits; its exit tears down a
 *          copy of the interpreter's address space and the namespaces (milliseconds in warm
 *          mode), which the reply need not wait for. run_stream_finish() reaps it and removes
 *          what is left.
 */
struct run_stream {
	struct run_box box;
	struct run_caps last;
	bool last_known;
	struct cgroup_run spent;
	struct run_box dying;
};

/* An empty run stream: no box, no caps known, nothing spent. */
void run_stream_init(struct run_stream *s);

/*
 * Builds the stream's box for the next request, with the last request's caps, while nobody
 * waits (creating the namespaces and mounts costs several milliseconds, most of it the
 * network namespace, which then is not on the request's path); does nothing before the first
 * request or while a box is ready. A failure is logged (the next request builds its own).
 */
void run_stream_build_ahead(const struct run_config *cfg, struct run_stream *s);

/* Reaps the last run's init and removes its box, and removes the last run's (empty) cgroup;
 * call it after the reply is sent. */
void run_stream_finish(const struct run_config *cfg, struct run_stream *s);

/* Kills the stream's unused box and removes its directory and cgroup, and finishes the stream. */
void run_stream_close(const struct run_config *cfg, struct run_stream *s);

/*
 * Runs spec under cfg in stream s and fills out. The stream's box, if one was built ahead with the
 * caps spec asks for, is used; otherwise (or if it died while it waited) a new one is built on
 * the spot. Returns 0 whatever the program did (its outcome is a 200), or -1 when the sandbox
 * itself failed (a 500), with the reason in why and the failing layer in out->fault. Either
 * way, when it returns nothing the run started is alive and its directory is gone; its empty
 * cgroup waits in s->spent for run_stream_finish().
 */
int run_execute(const struct run_config *cfg, const struct run_spec *spec, struct run_stream *s,
                struct run_outcome *out, char *why, size_t why_len);

/*
 * The most a run can take past its deadline until its reply is written: the one source of
 * nginx's kill-and-clean-up grace (check-config.sh reads it: codebox-pool
 * --print-kill-grace-seconds).
 */
int run_kill_grace_seconds(void);

struct isolation;

/*
 * After the start-up probe run failed with fault f (run_execute()'s out): turns off the layer
 * that failed, the namespace clone() (the pid namespace), the uid maps (the user namespace),
 * the cgroup, or the one a child's set-up step belongs to (sandbox_blame()). Returns false
 * when no layer can be blamed.
 */
bool run_blame(struct isolation *iso, const struct run_outcome *f, const char *why);

/*
 * Makes this process the reaper of every orphan its runs leave (PR_SET_CHILD_SUBREAPER), so
 * that run_execute() can find and kill them. Call once per worker. Returns 0 or -1.
 */
int run_init_reaper(void);

/* ---- sessions (session.h): a box whose init serves executions one after another ---- */

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

/* The outcome's log line, fields and text; api names the surface (execute, agent, mcp) and
 * exit_code is what the client was told (when has_exit_code). */
void run_log_outcome(const char *api, const struct run_outcome *o, bool has_exit_code,
                     int exit_code);

#endif
