/*
 * runconfig.h - where, as whom and behind which layers a worker's runs happen: the one type
 * the run (run.c), the child it makes (child.c) and the warm templates' requests (warm.c)
 * share, in a header of its own below all three.
 */
#ifndef CODEBOX_RUNCONFIG_H
#define CODEBOX_RUNCONFIG_H

#include <stdbool.h>
#include <sys/types.h>

struct cgroup_ctx;
struct seccomp_filter;

/* Where, as whom and behind which layers runs happen; fixed for the life of a worker. */
struct run_config {
	const char *python;      /* absolute path of the interpreter */
	int work_parent_fd;      /* the worker's directory of runs (0311) */
	const char *work_parent; /* its path */
	bool drop_privileges;    /* the pool is root: runs use run_uid/run_gid on the host */
	uid_t run_uid;
	gid_t run_gid;

	int clone_flags;  /* namespaces of a run; 0 = direct mode (fork, no init) */
	bool userns;      /* CLONE_NEWUSER is in clone_flags */
	bool mount_proc;  /* a private /proc in the mount namespace */
	bool cgroupns;    /* init enters a cgroup namespace rooted at the run's group */
	bool mask_proc;   /* the OCI masked and read-only /proc paths */
	bool high_pids;   /* the program's pids start near the namespace's pid_max */
	int landlock_abi; /* with a mount namespace: init builds the run's own ruleset */
	int etc_fd;       /* the sandbox's /etc (O_PATH) */
	int landlock_fd;  /* -1: none */
	const struct seccomp_filter *seccomp; /* NULL: none */
	const struct cgroup_ctx *cgroup;      /* NULL: caps by rlimits */
	bool nproc_rlimit; /* RLIMIT_NPROC counts this run alone (own uid or own userns) */
	/* a non-root pool's: each box's RLIMIT_SIGPENDING, its share of the signals the kernel
	 * queues for the pool's one host uid (0: inherited) */
	unsigned long sigpending;
	/* -1; else an agent run (port 8888): /bin/sh -c in this workspace at /app (workspace.h)
	 * instead of python3 main.py; needs a mount namespace */
	int workspace_fd;
	int worker_index;
	/* a session's box (session.h): its init serves executions on the listening socket
	 * session_fd. Set only on the copy of the config that creates one */
	bool session;
	int session_fd;
	bool warm; /* namespace mode: a warm template (warm.c) clones the run's init */
};

#endif
