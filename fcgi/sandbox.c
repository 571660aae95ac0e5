/*
 * sandbox.c - the child side of a run, one fixed, commented order of steps.
 *
 * Between fork() and execve() the child may not allocate or take locks (the worker's malloc
 * arena may be mid-update in the copied image), so it only makes system calls on data the
 * parent prepared. Each step can fail cleanly: the child writes {step, errno} to the
 * close-on-exec error pipe and _exit(127)s; the parent turns that into a 500 sandbox_error,
 * because a run that could not be set up is the sandbox's fault, not the program's.
 *
 * The order matters:
 *   1. signals      - the worker blocks SIGTERM and ignores SIGPIPE; a program must start
 *                     with the defaults.
 *   2. setsid       - a session and process group of its own, so the parent can kill the
 *                     whole group (and no terminal can signal it).
 *   3. stdio        - the memfd holding stdin and the two capture pipes become 0, 1 and 2.
 *   4. close fds    - nothing of the worker (the FastCGI connection, the listen socket,
 *                     logs) reaches the program; the error pipe stays, close-on-exec.
 *   5. chdir        - into the run's fresh directory.
 *   6. privileges   - a root worker becomes the run's unprivileged uid and gid, with no
 *                     supplementary groups; after this the program cannot touch other runs'
 *                     directories (0700, other uids) or signal the worker.
 *   7. parent death - PR_SET_PDEATHSIG after the uid change (which clears it), then a check
 *                     that the worker did not die in between.
 *   8. rlimits      - no core files; CPU time as a backstop behind the wall-clock deadline.
 *   9. no_new_privs - a setuid binary cannot give the run privileges back.
 *  10. execve       - with the environment built by the parent, nothing inherited.
 */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

const char *
sandbox_step_string(enum sandbox_step step)
{
	switch (step) {
	case SANDBOX_SIGNALS:
		return "resetting signals";
	case SANDBOX_SETSID:
		return "setsid()";
	case SANDBOX_STDIO:
		return "setting up stdin, stdout and stderr";
	case SANDBOX_CLOSE_FDS:
		return "closing inherited descriptors";
	case SANDBOX_CHDIR:
		return "entering the working directory";
	case SANDBOX_PRIVILEGES:
		return "dropping privileges";
	case SANDBOX_PARENT_DEATH:
		return "arming the parent-death signal";
	case SANDBOX_RLIMITS:
		return "setting rlimits";
	case SANDBOX_NO_NEW_PRIVS:
		return "setting no_new_privs";
	case SANDBOX_EXEC:
		return "execve() of the interpreter";
	}
	return "an unknown step";
}

static noreturn void
sandbox_fail(const struct sandbox_spec *s, enum sandbox_step step)
{
	struct sandbox_failure f = {.step = step, .err = errno};
	ssize_t unused = write(s->error_fd, &f, sizeof(f));

	(void)unused;
	_exit(127);
}

static int
sandbox_signals(void)
{
	struct sigaction sa = {.sa_handler = SIG_DFL};
	sigset_t none;

	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			(void)sigaction(sig, &sa, NULL); /* EINVAL for reserved signals */
	sigemptyset(&none);
	return sigprocmask(SIG_SETMASK, &none, NULL);
}

static int
sandbox_stdio(const struct sandbox_spec *s)
{
	/* the sources are all >= 3 (the worker keeps 0..2 open), so no dup2 clobbers another */
	if (dup2(s->stdin_fd, 0) < 0 || dup2(s->stdout_fd, 1) < 0 || dup2(s->stderr_fd, 2) < 0)
		return -1;
	return 0;
}

static int
sandbox_close_fds(const struct sandbox_spec *s)
{
	unsigned efd = (unsigned)s->error_fd;

	if (efd > 3 && syscall(SYS_close_range, 3u, efd - 1, 0u) < 0)
		return -1;
	return (int)syscall(SYS_close_range, efd + 1, ~0u, 0u);
}

static int
sandbox_privileges(const struct sandbox_spec *s)
{
	if (!s->drop_privileges)
		return 0;
	if (setgroups(0, NULL) < 0 || setresgid(s->gid, s->gid, s->gid) < 0 ||
	    setresuid(s->uid, s->uid, s->uid) < 0)
		return -1;
	return 0;
}

static int
sandbox_parent_death(const struct sandbox_spec *s)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		return -1;
	/* the worker died before the signal was armed: nobody will reap us, so stop here */
	if (getppid() != s->parent_pid) {
		errno = ESRCH;
		return -1;
	}
	return 0;
}

static int
sandbox_rlimits(const struct sandbox_spec *s)
{
	struct rlimit core = {0, 0};

	if (setrlimit(RLIMIT_CORE, &core) < 0)
		return -1;
	if (s->cpu_limit_seconds > 0) {
		struct rlimit cpu = {(rlim_t)s->cpu_limit_seconds,
		                     (rlim_t)s->cpu_limit_seconds + 1};
		if (setrlimit(RLIMIT_CPU, &cpu) < 0)
			return -1;
	}
	return 0;
}

noreturn void
sandbox_enter(const struct sandbox_spec *s)
{
	if (sandbox_signals() < 0)
		sandbox_fail(s, SANDBOX_SIGNALS);
	if (setsid() < 0)
		sandbox_fail(s, SANDBOX_SETSID);
	if (sandbox_stdio(s) < 0)
		sandbox_fail(s, SANDBOX_STDIO);
	if (sandbox_close_fds(s) < 0)
		sandbox_fail(s, SANDBOX_CLOSE_FDS);
	if (chdir(s->workdir) < 0)
		sandbox_fail(s, SANDBOX_CHDIR);
	if (sandbox_privileges(s) < 0)
		sandbox_fail(s, SANDBOX_PRIVILEGES);
	if (sandbox_parent_death(s) < 0)
		sandbox_fail(s, SANDBOX_PARENT_DEATH);
	if (sandbox_rlimits(s) < 0)
		sandbox_fail(s, SANDBOX_RLIMITS);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		sandbox_fail(s, SANDBOX_NO_NEW_PRIVS);
	execve(s->python, s->argv, s->envp);
	sandbox_fail(s, SANDBOX_EXEC);
}
