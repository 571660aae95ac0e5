/*
 * runconfig.h - where, as whom and behind which layers a worker's runs happen: the one type
 * the run (run.c), the child it makes (child.c) and the warm templates' requests (warm.c)
 * share, in a header of its own below all three.
 */
#ifndef CODEBOX_RUNCONFIG_H
#define CODEBOX_RUNCONFIG_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct cgroup_ctx;
struct seccomp_filter;

/*
 * The part of a run's configuration that crosses process boundaries: a fixed-size record
 * without pointers, fds or padding, copied whole from the worker to a warm template
 * (warmproto.h's struct warm_box_request) and from the template to codebox-init (initexec.h's
 * struct sandbox_wire), each of which derives the run's sandbox spec from it (child_prepare()).
 * A field added here reaches every side with no code of its own. Declared once, seen twice
 * (as the kernel's struct_group() does): as struct run_settings, run_config.set, and as
 * run_config's own members (cfg->clone_flags). Widest first: no padding.
 */
#define RUN_SETTINGS_MEMBERS                                                                       \
	/* a non-root pool's: each box's RLIMIT_SIGPENDING, its share of the signals the kernel    \
	 * queues for the pool's one host uid (0: inherited) */                                    \
	uint64_t sigpending;                                                                       \
	uint32_t run_uid;                                                                          \
	uint32_t run_gid;                                                                          \
	int32_t clone_flags;     /* namespaces of a run; 0 = direct mode (fork, no init) */        \
	int32_t landlock_abi;    /* with a mount namespace: init builds the run's own ruleset */   \
	uint8_t drop_privileges; /* the pool is root: runs use run_uid/run_gid on the host */      \
	uint8_t userns;          /* CLONE_NEWUSER is in clone_flags */                             \
	uint8_t mount_proc;      /* a private /proc in the mount namespace */                      \
	uint8_t cgroupns;        /* init enters a cgroup namespace rooted at the run's group */    \
	uint8_t mask_proc;       /* the OCI masked and read-only /proc paths */                    \
	uint8_t high_pids;       /* the program's pids start near the namespace's pid_max */       \
	uint8_t nproc_rlimit;    /* RLIMIT_NPROC counts this run alone (own uid or own userns) */  \
	uint8_t warm; /* namespace mode: a warm template (warm.c) clones the run's init */

struct run_settings {
	RUN_SETTINGS_MEMBERS
};

/* No padding: every byte that crosses is a field's (nothing of a process's stack leaks). */
static_assert(sizeof(struct run_settings) ==
                  offsetof(struct run_settings, warm) + sizeof(((struct run_settings *)0)->warm),
              "struct run_settings has padding");
static_assert(sizeof(struct run_settings) == 32, "struct run_settings changed: see runconfig.h");

/* Where, as whom and behind which layers runs happen; fixed for the life of a worker. */
struct run_config {
	union {
		struct {
			RUN_SETTINGS_MEMBERS
		};
		struct run_settings set; /* the record that crosses */
	};
	/* what stays in this process: pointers, and fds (sent as SCM_RIGHTS where they cross) */
	const char *python;                   /* absolute path of the interpreter */
	int work_parent_fd;                   /* the worker's directory of runs (0311) */
	const char *work_parent;              /* its path */
	int etc_fd;                           /* the sandbox's /etc (O_PATH) */
	int landlock_fd;                      /* -1: none */
	const struct seccomp_filter *seccomp; /* NULL: none */
	const struct cgroup_ctx *cgroup;      /* NULL: caps by rlimits */
	/* -1; else an agent run (port 8888): /bin/sh -c in this workspace at /app (workspace.h)
	 * instead of python3 main.py; needs a mount namespace. The agent's stream's, for its
	 * worker's life */
	int workspace_fd;
	int worker_index;
};

#endif
