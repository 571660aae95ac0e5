/*
 * child.c - a run's first process as its parent makes it: its spec (what every sandbox step
 * is given, prepared before the clone, since between fork and execve a child may only make
 * system calls) and the clone itself. run.c makes a cold run's child here, template.c a warm
 * one's; the child then takes sandbox.c's steps.
 */
#include "box/child.h"

#include "core/log.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* An environment: PATH, HOME and TMPDIR, then what every run has (NULL-terminated; envp has
 * room for 8). */
static void
child_env(char **envp, char *path, char *home, char *tmpdir)
{
	int n = 0;

	envp[n++] = path;
	envp[n++] = home;
	envp[n++] = tmpdir;
	envp[n++] = "LANG=C.UTF-8";
	envp[n++] = "OPENBLAS_NUM_THREADS=1";
	envp[n++] = "OMP_NUM_THREADS=1";
	envp[n++] = "MKL_NUM_THREADS=1";
	envp[n] = NULL;
}

void
child_prepare(const struct run_config *cfg, int session_fd, const char *workdir,
              unsigned long long disk_bytes, struct child_spec *c)
{
	bool ns_mode = cfg->clone_flags != 0;
	bool agent = cfg->workspace_fd >= 0;
	/* in a mount namespace the run sees its directory at a path that names nothing of the host
	 */
	bool mounts = ns_mode && (cfg->clone_flags & CLONE_NEWNS);
	const char *name = strrchr(workdir, '/');

	memset(c, 0, sizeof(*c));
	snprintf(c->inner, sizeof(c->inner), "%s/%s", SANDBOX_INNER_DIR,
	         name != NULL ? name + 1 : workdir);
	const char *run_dir = mounts ? c->inner : workdir;
	snprintf(c->home, sizeof(c->home), "HOME=%s", run_dir);
	snprintf(c->tmpdir, sizeof(c->tmpdir), "TMPDIR=%s", run_dir);
	child_env(c->envp, "PATH=/usr/local/bin:/usr/bin:/bin", c->home, c->tmpdir);
	/* an agent's shell: its home is the workspace, and `python` is the sandbox's python3 */
	child_env(c->agent_envp, "PATH=/opt/codebox/bin:/usr/local/bin:/usr/bin:/bin", "HOME=/app",
	          c->tmpdir);
	c->argv[0] = (char *)cfg->python;
	c->argv[1] = "-I";
	c->argv[2] = "-u";
	c->argv[3] = "main.py";
	c->argv[4] = NULL;
	c->ms = (struct mounts_spec){
	    .workdir = workdir,
	    .inner_workdir = c->inner,
	    .etc_fd = cfg->etc_fd,
	    .python = cfg->python,
	    .disk_bytes = disk_bytes,
	    .owner_uid = cfg->userns ? SANDBOX_INNER_ID : cfg->run_uid,
	    .owner_gid = cfg->userns ? SANDBOX_INNER_ID : cfg->run_gid,
	    .mount_proc = cfg->mount_proc,
	    .workspace_fd = cfg->workspace_fd,
	};
	c->sb = (struct sandbox_spec){
	    .stdin_fd = -1,
	    .stdout_fd = -1,
	    .stderr_fd = -1,
	    .error_fd = -1,
	    .ctl_fd = -1,
	    .report_fd = -1,
	    .workdir = run_dir,
	    .python = cfg->python,
	    .argv = c->argv,
	    .envp = agent ? c->agent_envp : c->envp,
	    /* direct mode: the program switches under a root pool; namespace mode: init does */
	    .set_ids = ns_mode ? (cfg->userns || cfg->drop_privileges) : cfg->drop_privileges,
	    .uid = ns_mode && cfg->userns ? SANDBOX_INNER_ID : cfg->run_uid,
	    .gid = ns_mode && cfg->userns ? SANDBOX_INNER_ID : cfg->run_gid,
	    .parent_pid = ns_mode ? 1 : getpid(),
	    .nofile = 1024,
	    .landlock_fd = cfg->landlock_fd,
	    .landlock_abi = mounts ? cfg->landlock_abi : 0,
	    .seccomp = cfg->seccomp,
	    .mounts = mounts ? &c->ms : NULL,
	    .uts = ns_mode && (cfg->clone_flags & CLONE_NEWUTS),
	    .cgroupns = ns_mode && cfg->cgroupns,
	    .high_pids = mounts && cfg->mount_proc && cfg->high_pids,
	    .mask_proc = mounts && cfg->mount_proc && cfg->mask_proc,
	    .ids_before_mounts = cfg->userns,
	    .agent = agent,
	    .workspace_fd = agent ? cfg->workspace_fd : -1,
	    .session_fd = !agent ? session_fd : -1,
	    .cell_fd = -1,
	};
}

void
child_set_fds(struct child_spec *c, const int fds[CHILD_FD_COUNT])
{
	c->sb.stdout_fd = fds[CHILD_FD_STDOUT];
	c->sb.stderr_fd = fds[CHILD_FD_STDERR];
	c->sb.error_fd = fds[CHILD_FD_ERROR];
	c->sb.ctl_fd = fds[CHILD_FD_CONTROL];
	c->sb.report_fd = fds[CHILD_FD_REPORT];
}

/*
 * clone() of the run's namespaces as the run's own host uid: the user namespace is then owned
 * by that uid, so every per-user kernel quota charged through it (inotify, fanotify, pending
 * signals, message queues, nested namespaces...) is the run uid's, not root's. Only the
 * effective ids change, for the one call; the saved ids stay 0 and bring root back.
 */
/* Makes the effective ids the run's for a clone that creates a user namespace under a root
 * pool. Returns 1 switched, 0 nothing to switch, -1 failed (errno). */
static int
child_run_ids(const struct run_config *cfg, int flags)
{
	int err;

	if (!cfg->drop_privileges || !(flags & CLONE_NEWUSER))
		return 0;
	if (setresgid((gid_t)-1, cfg->run_gid, (gid_t)-1) < 0)
		return -1;
	if (setresuid((uid_t)-1, cfg->run_uid, (uid_t)-1) < 0) {
		err = errno;
		if (setresgid((gid_t)-1, 0, (gid_t)-1) < 0)
			_exit(1); /* cannot happen: the real gid is 0 */
		errno = err;
		return -1;
	}
	return 1;
}

/* Root again after the clone, errno kept. */
static void
child_root_again(void)
{
	int err = errno;

	if (setresuid((uid_t)-1, 0, (uid_t)-1) < 0 || setresgid((gid_t)-1, 0, (gid_t)-1) < 0) {
		log_msg(LOG_ERROR, "cannot become root again after clone(): %s", strerror(errno));
		_exit(1); /* a worker that is not root cannot serve; the pool starts another */
	}
	/* the euid change made the process non-dumpable; it was dumpable before */
	(void)prctl(PR_SET_DUMPABLE, 1);
	errno = err;
}

pid_t
child_clone(const struct run_config *cfg, int flags, int *pidfd)
{
	int switched;
	pid_t pid;

	if (pidfd != NULL) {
		*pidfd = -1;
		flags |= CLONE_PIDFD;
	}
	switched = child_run_ids(cfg, flags);
	if (switched < 0)
		return -1;
	pid = (pid_t)syscall(SYS_clone, flags | SIGCHLD, 0, pidfd, 0, 0);
	if (pid == 0)
		return 0; /* init switches all its ids once the maps exist */
	if (switched)
		child_root_again();
	return pid;
}

pid_t
child_clone_vm(const struct run_config *cfg, int flags, int (*fn)(void *), void *stack, void *arg,
               volatile pid_t *ptid)
{
	int switched = child_run_ids(cfg, flags);
	pid_t pid;

	if (switched < 0)
		return -1;
	pid = clone(fn, stack, flags | CLONE_VM | CLONE_VFORK | CLONE_PARENT_SETTID | SIGCHLD, arg,
	            (pid_t *)ptid);
	if (switched)
		child_root_again();
	return pid;
}
