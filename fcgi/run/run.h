/*
 * run.h - one execution of a program in the sandbox, seen from the worker.
 */
#ifndef CODEBOX_RUN_H
#define CODEBOX_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "run/cgroup.h"
#include "core/files.h"
#include "core/outcome.h"
#include "run/report.h"
#include "box/sandbox.h"
#include "core/runconfig.h"
#include "run/workdir.h"

/* The caps a run's sandbox is built with: its cgroup (or rlimits) and its directory's size. */
struct run_caps {
	unsigned long long memory_bytes;
	unsigned long max_processes;
	unsigned long long disk_bytes;
	unsigned long cpu_millicores; /* 0: no CPU quota */
	/* warm: the heavy tier's template, for a program that names its modules. Decided once by
	 * the caller, before the run, and only when the run's configuration is warm: port 8080's
	 * from the code (warm_wants_heavy()), port 8888's from the command (agent.c); a session
	 * is always heavy */
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
 * caps spec asks for (the tier included: the caller decides it), is used; otherwise (or if it
 * died while it waited) a new one is built on the spot. Returns 0 whatever the program did (its
 * outcome is a 200), or -1 when the sandbox itself failed (a 500), with the reason in why and
 * the failing layer in out->fault. Either way, when it returns nothing of the program is alive:
 * in namespace mode, once init has reported, init alone is left, exiting (the teardown of a
 * copy of an address space), and its box (directory, cgroup) waits in s->dying; otherwise
 * every process of the run is killed and reaped, its directory is gone, and its emptied cgroup
 * waits in s->spent. run_stream_finish() reaps and removes both, after the reply.
 */
int run_execute(const struct run_config *cfg, const struct run_spec *spec, struct run_stream *s,
                struct run_outcome *out, char *why, size_t why_len);

/*
 * The most a run can take past its deadline until its reply is written: the one source of
 * nginx's kill-and-clean-up grace (check-config.sh reads it: codebox-pool
 * --print-kill-grace-seconds).
 */
int run_kill_grace_seconds(void);

/*
 * Makes this process the reaper of every orphan its runs leave (PR_SET_CHILD_SUBREAPER), so
 * that run_execute() can find and kill them. Call once per worker. Returns 0 or -1.
 */
int run_init_reaper(void);

/* ---- a run's box and its watch, shared with a session's executions (sessionrun.c) ---- */

/* One run between its start and its collection: what the watch loop learns as it goes. */
struct run_watch {
	struct run_box *box;
	struct report_buf rb;           /* namespace mode: init's report */
	struct sandbox_failure failure; /* valid when setup_failed */
	bool setup_failed;              /* a child's set-up step failed (the error pipe) */
	bool main_reaped;               /* the program (direct mode) or init was reaped */
	int main_status;
	struct rusage ru;
	bool timed_out; /* the deadline passed */
	bool stop_sent; /* namespace mode: init was told to stop ('S') */
	bool reported;  /* namespace mode: init's whole report is in, and it is exiting */
	int client_fd;  /* the request's connection, watched for a hang-up; -1: not watched */
	bool ahead;     /* the box was built ahead of the request */
	bool session;   /* a session's execution: its init serves on once it has reported */
	void (*on_output)(void *ctx, int which, const char *p, size_t n); /* run_spec's */
	void *output_ctx;
	long long t0, deadline, drain_deadline, stop_deadline;
};

/*
 * One attempt at building a box for a run with caps (run.c's box_build()); a template may
 * clone the child only when allow_warm. session_fd >= 0: the box is a session's, whose init
 * serves executions on that listening socket (a run's own fd, never the config's). On failure,
 * nothing is left of it, *warm_failed says whether a template had cloned it, and fault (may be
 * NULL) and why say which layer failed. Returns 0 or -1.
 */
int run_box_build_once(const struct run_config *cfg, const struct run_caps *caps, int session_fd,
                       struct run_box *box, bool allow_warm, bool *warm_failed,
                       struct run_outcome *fault, char *why, size_t why_len);

/* Kills what is left of an unused or failed box and removes its directory and cgroup. */
void run_box_discard(const struct run_config *cfg, struct run_box *box);

/* Closes the worker's ends of the box's pipes and its pidfd. */
void run_box_close_fds(struct run_box *box);

/* Sends spec's request to the box's child, bounded in time (the child is reading it).
 * Returns 0, or -1 (errno). */
int run_box_send(struct run_box *box, const struct run_spec *spec, const struct run_config *cfg);

/*
 * Drains the output and the report until the program (or init) is reaped and the pipes are
 * closed or their drain time is up (a session's execution: until its init has reported);
 * stops the run at the deadline or its first OOM, and at once when the client hangs up
 * (out->abandoned). Returns 0, or -1 when poll() fails.
 */
int run_watch(struct run_watch *w, struct run_outcome *out, char *why, size_t why_len);

/* The sandbox's fault: out->fault (out may be NULL), and in why what failed and errno now. */
void run_set_fault(struct run_outcome *out, enum run_fault fault, char *why, size_t why_len,
                   const char *what);

/* The outcome's log line, fields and text; api names the surface (execute, agent, mcp) and
 * exit_code is what the client was told (when has_exit_code). */
void run_log_outcome(const char *api, const struct run_outcome *o, bool has_exit_code,
                     int exit_code);

#endif
