/*
 * sandbox.h - the child side of one run: from fork() to execve().
 */
#ifndef CODEBOX_SANDBOX_H
#define CODEBOX_SANDBOX_H

#include <stdbool.h>
#include <stdnoreturn.h>
#include <sys/types.h>

/* The steps, in the order sandbox_enter() takes them. */
enum sandbox_step {
	SANDBOX_SIGNALS = 1,
	SANDBOX_SETSID,
	SANDBOX_STDIO,
	SANDBOX_CLOSE_FDS,
	SANDBOX_CHDIR,
	SANDBOX_PRIVILEGES,
	SANDBOX_PARENT_DEATH,
	SANDBOX_RLIMITS,
	SANDBOX_NO_NEW_PRIVS,
	SANDBOX_EXEC,
};

const char *sandbox_step_string(enum sandbox_step step);

/* What a failed child writes to the error pipe before _exit(127). */
struct sandbox_failure {
	int step; /* enum sandbox_step */
	int err;  /* errno */
};

struct sandbox_spec {
	int stdin_fd;
	int stdout_fd;
	int stderr_fd;
	int error_fd; /* close-on-exec: EOF on it means execve() succeeded */
	const char *workdir;
	const char *python;
	char *const *argv;
	char *const *envp;
	bool drop_privileges;
	uid_t uid;
	gid_t gid;
	pid_t parent_pid;       /* the worker, for the parent-death race check */
	long cpu_limit_seconds; /* RLIMIT_CPU backstop, 0 for none */
};

/*
 * Turns the freshly forked child into the run and execs the interpreter. Never returns: on
 * failure it reports the step and errno on error_fd and calls _exit(127). Only
 * async-signal-safe calls happen here; everything it needs was prepared before fork().
 */
noreturn void sandbox_enter(const struct sandbox_spec *s);

#endif
