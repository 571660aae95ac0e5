/*
 * child.h - a run's first process as its parent makes it: the spec it is given and the clone
 * that starts it. The one place both the worker (cold, run.c) and the warm templates
 * (template.c) make a run's child from, so that both take exactly the same steps.
 */
#ifndef CODEBOX_CHILD_H
#define CODEBOX_CHILD_H

#include <sys/types.h>

#include "box/mounts.h"
#include "core/runconfig.h"
#include "box/sandbox.h"

/* What a run's child is given: its sandbox spec and the storage the spec points into. */
struct child_spec {
	char inner[128]; /* SANDBOX_INNER_DIR/<name>: the run's directory as it sees it */
	char home[4200];
	char tmpdir[4200];
	char *envp[8];
	char *agent_envp[8];
	char *argv[5];
	struct mounts_spec ms;
	struct sandbox_spec sb;
};

/* The child's ends of a run's pipes, in the order child_set_fds() takes them (and warmproto.h
 * sends them in). */
enum child_fd {
	CHILD_FD_STDOUT,
	CHILD_FD_STDERR,
	CHILD_FD_ERROR,   /* the error pipe: a struct sandbox_failure */
	CHILD_FD_CONTROL, /* 'G', the request, 'S' */
	CHILD_FD_REPORT,  /* namespace mode: init's report; else -1 */
	CHILD_FD_COUNT,
};

/*
 * Fills c for a run in workdir under cfg (session_fd >= 0: a session's, whose init serves that
 * listening socket; else -1): environment, argv, mounts and every sandbox step's
 * parameters; the fds are -1 (child_set_fds()). c points into itself: it must stay where it
 * is until the child is cloned.
 */
void child_prepare(const struct run_config *cfg, int session_fd, const char *workdir,
                   unsigned long long disk_bytes, struct child_spec *c);

/* Sets the child's ends of the run's pipes in c's spec, fds[] indexed by enum child_fd. */
void child_set_fds(struct child_spec *c, const int fds[CHILD_FD_COUNT]);

/*
 * clone() with flags (SIGCHLD added) as the run's own host uid when a root pool creates a user
 * namespace, so that the namespace, and every per-user quota charged through it, is the run
 * uid's. With pidfd, CLONE_PIDFD: the child's pidfd (close-on-exec) is stored there. Returns
 * as clone().
 */
pid_t child_clone(const struct run_config *cfg, int flags, int *pidfd);

/*
 * The same clone, sharing the caller's memory and suspending it until the child execs or
 * ends (CLONE_VM | CLONE_VFORK): fn(arg) runs on stack (its top), and the child's pid is in
 * *ptid before it does. Returns the child's pid, or -1 with errno.
 */
pid_t child_clone_vm(const struct run_config *cfg, int flags, int (*fn)(void *), void *stack,
                     void *arg, volatile pid_t *ptid);

#endif
