/*
 * sandbox.h - the child side of one run: from fork() or clone() to execve().
 */
#ifndef CODEBOX_SANDBOX_H
#define CODEBOX_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdnoreturn.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "core/files.h"
#include "box/mounts.h"
#include "core/result.h"
#include "box/seccomp.h"

/* The uid and gid a run has inside its user namespace (/etc/passwd's "sandbox"). */
#define SANDBOX_INNER_ID ISO_INNER_ID

/* In a mount namespace, the run's directory is SANDBOX_INNER_DIR/<its name>: no host path. */
#define SANDBOX_INNER_DIR "/sandbox"

/* The program's process name until it becomes python3 (init's is codebox-init). */
#define SANDBOX_PROGRAM_NAME "codebox-prog"

/* The steps, in the order they are taken (init's first, then the program's). */
enum sandbox_step {
	SANDBOX_WAIT = 1, /* waiting for the worker's go (uid maps, cgroup) */
	SANDBOX_CGROUPNS, /* init: a cgroup namespace rooted at the run's own group */
	SANDBOX_HOSTNAME, /* init: the UTS namespace's name */
	SANDBOX_MOUNTS,   /* init: the new root (detail: enum mounts_step) */
	SANDBOX_PIDS,     /* init: the program's pids allocated high (ns_last_pid) */
	SANDBOX_IDS,      /* the run's uid and gid, no supplementary groups */
	SANDBOX_CAPS,     /* init: dropping every capability */
	SANDBOX_CODE,     /* init: writing main.py into the working tmpfs */
	SANDBOX_FORK,     /* init: forking the program */
	SANDBOX_SIGNALS,  /* the program starts with default signals */
	SANDBOX_SETSID,
	SANDBOX_STDIO,
	SANDBOX_CLOSE_FDS,
	SANDBOX_CHDIR,
	SANDBOX_PARENT_DEATH,
	SANDBOX_RLIMITS,
	SANDBOX_OOM_SCORE,
	SANDBOX_NO_NEW_PRIVS,
	SANDBOX_LANDLOCK,
	SANDBOX_SECCOMP,
	SANDBOX_EXEC,
};

const char *sandbox_step_string(enum sandbox_step step);

/* What a failed child writes to the error pipe before it exits. */
struct sandbox_failure {
	int step;   /* enum sandbox_step */
	int detail; /* enum mounts_step for SANDBOX_MOUNTS */
	int err;    /* errno */
};

/*
 * What the worker sends once the request is known, after 'G': followed by code_len bytes of
 * code and stdin_len bytes of stdin. The sandbox was built before the request arrived.
 */
#define SANDBOX_REQUEST_MAGIC 0x63627232u
struct sandbox_request {
	uint32_t magic;
	uint32_t code_len;
	uint32_t stdin_len;
	uint32_t max_result_bytes;
	uint32_t files_len; /* the inputs, packed (files.h), after stdin */
	uint32_t flags;     /* SANDBOX_WANT_* */
	uint64_t nproc;     /* RLIMIT_NPROC, 0: not set */
	uint64_t fsize_bytes;
	uint64_t as_bytes; /* RLIMIT_AS, 0: not set */
	/* warm: RLIMIT_AS for a program that execs instead (a template's pages are then gone) */
	uint64_t as_exec_bytes;
	int64_t cpu_limit_seconds;
	/* a session's creation (SANDBOX_SESSION): its bounds, enforced by its init */
	uint32_t session_idle_seconds;
	uint32_t session_life_seconds;
	uint64_t sigpending; /* RLIMIT_SIGPENDING, 0: not set */
};

/* init collects the run's files (files.h) and reports them after result.json: every one, or
 * only the pictures (enum artifacts_want) */
#define SANDBOX_WANT_ARTIFACTS 1u
#define SANDBOX_WANT_IMAGES 2u
/* the request creates a session (sessions.h): no code runs; the program becomes a cell loop */
#define SANDBOX_SESSION 4u

/* Upper bounds a child accepts for code and stdin (limits.c allows at most 16 MiB each). */
#define SANDBOX_MAX_INPUT_BYTES (64U << 20)

/* What init sends the worker when the run is over, followed by result_len bytes. */
#define SANDBOX_REPORT_MAGIC 0x63627831u
struct sandbox_report {
	uint32_t magic;
	int32_t program_status; /* wait status of the program */
	int32_t program_reaped;
	int32_t stopped;       /* the worker's deadline ended the run */
	int32_t disk_full;     /* the working tmpfs had no space left */
	int32_t result_status; /* enum result_status */
	uint32_t result_len;
	uint32_t artifacts_len; /* a blob of artifacts_collect()'s, after the result */
	struct rusage children; /* everything init reaped (a session's cell: the program's use) */
	uint32_t value_len;     /* a session's cell: its final expression's repr, after the
	                         * artifacts */
	int32_t has_value;
	int32_t session_over; /* a session's cell: the session ended with it */
	uint32_t cell_len;    /* a session's cell: its JSON (sessionproto.h), after the value */
	int32_t cell_dropped; /* the program's cell JSON was larger than SESSION_CELL_MAX */
};

struct sandbox_spec {
	int stdin_fd; /* set by the child from the request */
	int stdout_fd;
	int stderr_fd;
	int error_fd;  /* close-on-exec; a struct sandbox_failure when a step fails */
	int ctl_fd;    /* read: 'G', then the request, then (init) 'S' or EOF to stop */
	int report_fd; /* init: write end for the struct sandbox_report */
	const char *workdir;
	const char *python;
	char *const *argv;
	char *const *envp;

	bool set_ids; /* become uid/gid (the program in direct mode, init in namespace mode) */
	uid_t uid;
	gid_t gid;
	pid_t parent_pid; /* the expected parent, for the parent-death race check */

	long cpu_limit_seconds;
	unsigned long long fsize_bytes;
	unsigned long nproc;              /* 0: not set */
	unsigned long sigpending;         /* 0: not set */
	unsigned long long as_bytes;      /* 0: not set */
	unsigned long long as_exec_bytes; /* warm: RLIMIT_AS once the program execs */
	unsigned long nofile;

	int landlock_fd;  /* -1: no Landlock */
	int landlock_abi; /* > 0 with mounts: init builds the run's own ruleset after them */
	const struct seccomp_filter *seccomp; /* NULL: no filter */

	/* namespace mode only */
	const struct mounts_spec *mounts; /* NULL: no mount namespace */
	bool uts;
	bool cgroupns;          /* unshare the cgroup namespace once in the run's group */
	bool high_pids;         /* set ns_last_pid near the namespace's pid_max */
	bool mask_proc;         /* mounts_mask() */
	bool ids_before_mounts; /* inside a user namespace */
	/* init is not the worker's child (a warm template's, template.c): no parent-death
	 * signal, since its parent may end first; the worker's death is the control pipe's end */
	bool orphan_init;
	/* an agent run: the request's code is a shell command, run as /bin/sh -c in /app */
	bool agent;
	const char *command;     /* warm: the agent's command, once read (enter() may run it) */
	int workspace_fd;        /* -1, or the workspace init attaches; closed before the program */
	size_t max_result_bytes; /* from the request */
	enum artifacts_want artifacts; /* from the request: SANDBOX_WANT_ARTIFACTS, _IMAGES */
	/* init's: the inputs' manifest (files_manifest()), made by whoever wrote them */
	char *manifest;
	size_t manifest_len;

	/* a session (session.h): the listening socket its init serves executions on, or -1;
	 * the program's end of the cell socket, and the bounds from the creation request */
	int session_fd;
	int cell_fd;
	long long session_idle_ms;
	long long session_life_ms;

	/*
	 * Warm mode (interp.c): called by the program in place of execve(), once every step above
	 * is in force. It returns only when it could not take over before any of the run's
	 * code executed; the program then execs the interpreter as in cold mode.
	 */
	void (*enter)(const struct sandbox_spec *s);
	/*
	 * Warm mode, with a pid namespace: init forks the program before the request arrives,
	 * and the program calls prepare once the steps that do not depend on the request are in
	 * force (everything but stdin and the rlimits), then waits for the request. Returns 0, or
	 * -1 when enter cannot take over (the program then execs as cold).
	 */
	int (*prepare)(const struct sandbox_spec *s);
	/*
	 * A session's program, once every step is in force: the cell loop on s->cell_fd
	 * (interp.c). Returns only when it could not begin.
	 */
	void (*enter_session)(const struct sandbox_spec *s);
	/*
	 * A session's init, once its program waits for cells on the cell socket (init's end
	 * cell_fd): serves executions on s->session_fd until the session ends, then ends the
	 * run (sessioninit.c). Never returns. NULL: not a session.
	 */
	void (*init_session)(struct sandbox_spec *s, pid_t prog, int cell_fd,
	                     const sigset_t *waitmask);
};

/*
 * Records the process's argument area (argv[0] up to the end of the last argument), which
 * init overwrites so that /proc/1/cmdline inside a run does not show the pool's command line.
 * Call once from main().
 */
void sandbox_set_title_area(char *start, size_t len);

/*
 * Shows argv (NULL-terminated) as this process's command line and its last component of
 * argv[0] as its name, within the area recorded above. Async-signal-safe.
 */
void sandbox_set_title(char *const *argv);

/*
 * Direct mode: the forked child waits for the go and the request, writes main.py, becomes the
 * program and execs it. Never returns; a failed step is reported on error_fd and ends in
 * _exit(127); a worker that goes away before the request ends it quietly.
 */
noreturn void sandbox_run_program(const struct sandbox_spec *s);

/*
 * Namespace mode: the clone()d child is pid 1 of the run's pid namespace. It builds the
 * run's view of the system (before the request exists: sandboxes are built ahead), then
 * waits for the request, writes main.py, forks the program, reaps everything, and when the program
 * ends or the worker says stop, kills whatever is left, reads result.json from the working tmpfs
 * (which dies with the namespace) and sends a struct sandbox_report. Never returns.
 */
noreturn void sandbox_init(const struct sandbox_spec *s);

/* Zeroes the stack below the caller's frame (host paths built there must not be copied). */
void sandbox_scrub_stack(void);

/* ---- init's phases and the program's steps, for the one-copy start (initexec.c) and a
 * session's init (sessioninit.c): each takes its steps from here, in sandbox_init()'s order ---- */

/* What the request brings into the sandbox: the code (a C string too: an agent's command),
 * stdin and the input files, packed. */
struct sandbox_input {
	char *code;
	size_t code_len;
	char *input;
	size_t input_len;
	char *files;
	size_t files_len;
};

/* A failed step: step and detail (and errno) on s->error_fd, then _exit(127). */
noreturn void sandbox_fail(const struct sandbox_spec *s, enum sandbox_step step, int detail);

/* Reads the request that follows 'G' from fd and applies its limits to s; the input's buffers
 * are malloc'd into in. Returns 0, or -1 (errno). */
int sandbox_read_request(int fd, struct sandbox_spec *s, struct sandbox_input *in);

/* stdin: a memfd holding data[0..len), rewound; -1 with errno. */
int sandbox_make_stdin(const char *data, size_t len);

/* Blocks for the worker's go ('G' on s->ctl_fd). Returns 0, or -1 (errno). */
int sandbox_wait_go(const struct sandbox_spec *s);

/* Takes s's uid and gid, with no supplementary groups. Returns 0, or -1. */
int sandbox_ids(const struct sandbox_spec *s);

/* The program's pids start high in its namespace (ns_last_pid). Returns 0, or -1. */
int sandbox_high_pids(void);

/* In a mount namespace: the run's own Landlock ruleset, applied. Returns 0, or -1. */
int sandbox_landlock(struct sandbox_spec *s);

/* The last steps of init's confinement and of the one-copy program's: ids (when ids), no
 * capability, not dumpable, the working directory; a failure ends in sandbox_fail(). */
void sandbox_settle(const struct sandbox_spec *s, bool ids);

/* Warm mode in a pid namespace: the program forked ahead of the request takes its steps,
 * prepares, takes the request, tells init through handoff_fd, and enters. Never returns. */
noreturn void sandbox_program_ahead(struct sandbox_spec *s, int handoff_fd);

/* init's SIGCHLD, taken only inside ppoll() with waitmask. */
void sandbox_init_signals(sigset_t *waitmask);

/* init shows only its own name (sandbox_set_title()). */
void sandbox_retitle(void);

/* Init's second phase: the run's view of the system, in order (sandbox.c's head comment). */
void sandbox_init_confine(struct sandbox_spec *s);

/* Init's side of the program's handoff, read from hp; rep says how a program that ended
 * before it ended. */
void sandbox_init_handoff(struct sandbox_spec *s, pid_t prog, int hp, struct sandbox_report *rep);

/* Init waits until the program is reaped, or the worker says stop. */
void sandbox_init_wait(const struct sandbox_spec *s, pid_t prog, const sigset_t *waitmask,
                       struct sandbox_report *rep);

/* Kills and reaps every other process of the namespace; rep gets the program's status (if it
 * was reaped here) and the children's usage. */
void sandbox_init_kill_all(pid_t prog, struct sandbox_report *rep);

/* Init's last phase: result.json and the artifacts into its report to the worker; _exit(0). */
noreturn void sandbox_init_report(const struct sandbox_spec *s, struct sandbox_report *rep);

#endif
