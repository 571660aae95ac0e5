/*
 * run.h - one execution of a program in the sandbox, seen from the worker.
 */
#ifndef CODEBOX_RUN_H
#define CODEBOX_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "capture.h"
#include "cgroup.h"
#include "result.h"
#include "sandbox.h"
#include "workdir.h"

enum run_status {
	RUN_SUCCEEDED, /* exit code 0 */
	RUN_FAILED,    /* any other exit code, or killed by a signal */
	RUN_TIMED_OUT, /* the wall-clock limit fired */
};

enum run_limit {
	RUN_LIMIT_NONE,
	RUN_LIMIT_TIME,
	RUN_LIMIT_MEMORY,
	RUN_LIMIT_PROCESSES,
	RUN_LIMIT_DISK,
};

const char *run_status_string(enum run_status s);
const char *run_limit_string(enum run_limit l); /* NULL for RUN_LIMIT_NONE */

struct seccomp_filter;

/* Where, as whom and behind which layers runs happen; fixed for the life of a worker. */
struct run_config {
	const char *python;      /* absolute path of the interpreter */
	int work_parent_fd;      /* the worker's directory of runs (0311) */
	const char *work_parent; /* its path */
	bool drop_privileges;    /* the pool is root: runs use run_uid/run_gid on the host */
	uid_t run_uid;
	gid_t run_gid;

	int clone_flags;     /* namespaces of a run; 0 = direct mode (fork, no init) */
	bool userns;         /* CLONE_NEWUSER is in clone_flags */
	bool mount_proc;     /* a private /proc in the mount namespace */
	bool cgroupns;       /* init enters a cgroup namespace rooted at the run's group */
	bool mask_proc;      /* the OCI masked and read-only /proc paths */
	bool high_pids;      /* the program's pids start near the namespace's pid_max */
	int landlock_abi;    /* with a mount namespace: init builds the run's own ruleset */
	const char *etc_dir; /* the sandbox's /etc */
	int landlock_fd;     /* -1: none */
	const struct seccomp_filter *seccomp; /* NULL: none */
	const struct cgroup_ctx *cgroup;      /* NULL: caps by rlimits */
	bool nproc_rlimit; /* RLIMIT_NPROC counts this run alone (own uid or own userns) */
	/* -1; else an agent run (port 8888): /bin/sh -c in this workspace at /app (workspace.h)
	 * instead of python3 main.py; needs a mount namespace */
	int workspace_fd;
	int worker_index;
	bool warm; /* a warm template (warm.c) clones the run's child */
};

/* What one run is asked to do. */
struct run_spec {
	const char *code;
	size_t code_len;
	const char *stdin_data;
	size_t stdin_len;
	long wall_ms;
	size_t max_stdout_bytes;
	size_t max_stderr_bytes;
	size_t max_result_bytes;
	unsigned long long memory_bytes;
	unsigned long max_processes;
	unsigned long long disk_bytes;
	/* the request's connection to nginx: a hang-up on it means the client left, and the
	 * run is killed at once (run_outcome.abandoned) */
	bool watch_client;
	int client_fd;
	unsigned long cpu_millicores; /* 0: no CPU quota */
};

/* Why the sandbox (not the program) failed; lets start-up turn a layer off. */
enum run_fault {
	RUN_FAULT_NONE,
	RUN_FAULT_STEP,    /* a child's set-up step: fault_step, fault_detail */
	RUN_FAULT_CLONE,   /* clone() with the namespace flags */
	RUN_FAULT_UID_MAP, /* writing the user namespace's maps */
	RUN_FAULT_CGROUP,  /* creating or joining the run's cgroup */
	RUN_FAULT_OTHER,
};

/* What came of it. Free with run_outcome_free(). */
struct run_outcome {
	enum run_status status;
	bool has_exit_code; /* false iff timed out */
	int exit_code;      /* -N when killed by signal N */
	int term_signal;    /* the signal that ended the program, or 0 */
	enum run_limit limit_exceeded;
	struct capture out;
	struct capture err;
	enum result_status result_status;
	char *result_json; /* normalised JSON text when result_status is RESULT_OK */
	size_t result_len;
	long long duration_ms;
	long long cpu_ms;
	long long max_rss_bytes;
	bool abandoned;       /* killed because the client's connection closed: no reply */
	enum run_fault fault; /* when run_execute() returned -1 */
	int fault_step;       /* enum sandbox_step */
	int fault_detail;
};

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
	unsigned long long memory_bytes;
	unsigned long max_processes;
	unsigned long long disk_bytes;
	bool warm;                        /* cloned from the worker's warm template */
	unsigned long long as_base_bytes; /* warm: the template's address space (RLIMIT_AS) */
	unsigned long cpu_millicores;
	bool oom_stopped; /* the worker stopped the run at its first OOM (run_execute) */
};

/* What a run's child is given: its sandbox spec and the storage the spec points into. */
struct run_child {
	char inner[128]; /* SANDBOX_INNER_DIR/<name>: the run's directory as it sees it */
	char home[4200];
	char tmpdir[4200];
	char *envp[8];
	char *agent_envp[8];
	char *argv[5];
	struct mounts_spec ms;
	struct sandbox_spec sb;
};

/*
 * Fills c for a run in workdir under cfg: environment, argv, mounts and every sandbox step's
 * parameters; the caller sets the fds. Used by the worker (cold) and by the warm template,
 * so that both modes take exactly the same steps.
 */
void run_child_prepare(const struct run_config *cfg, const char *workdir,
                       unsigned long long disk_bytes, struct run_child *c);

/*
 * clone() with flags (SIGCHLD added) as the run's own host uid when a root pool creates a user
 * namespace, so that the namespace, and every per-user quota charged through it, is the run
 * uid's. Used by the worker (cold) and the warm template. Returns as clone().
 */
pid_t run_clone_as(const struct run_config *cfg, int flags);

/*
 * Builds a sandbox for a later run_execute(). Returns 0, or -1 with the reason in why and, in
 * fault (may be NULL), which layer failed.
 */
int run_box_build(const struct run_config *cfg, unsigned long long memory_bytes,
                  unsigned long max_processes, unsigned long long disk_bytes,
                  unsigned long cpu_millicores, struct run_box *box, struct run_outcome *fault,
                  char *why, size_t why_len);

/* Whether box was built with the caps spec asks for. */
bool run_box_fits(const struct run_box *box, const struct run_spec *spec);

/* Kills a box that will not be used, and removes its directory and cgroup. */
void run_box_discard(const struct run_config *cfg, struct run_box *box);

/*
 * Runs spec under cfg and fills out. box, if not NULL and active, is a sandbox built ahead
 * that fits spec; it is used up either way (a box that does not fit is discarded and a new
 * one built). Returns 0 whatever the program did (its outcome is a
 * 200), or -1 when the sandbox itself failed (a 500), with the reason in why. Either way,
 * when it returns nothing the run started is alive and its directory is gone.
 */
int run_execute(const struct run_config *cfg, const struct run_spec *spec, struct run_box *box,
                struct run_outcome *out, char *why, size_t why_len);

void run_outcome_free(struct run_outcome *out);

/* Removes the last run's (empty) cgroup; call it after the reply is sent. */
void run_finish_deferred(void);

/*
 * Makes this process the reaper of every orphan its runs leave (PR_SET_CHILD_SUBREAPER), so
 * that run_execute() can find and kill them. Call once per worker. Returns 0 or -1.
 */
int run_init_reaper(void);

#endif
