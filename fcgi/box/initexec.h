/*
 * initexec.h - the one-copy warm start (initexec.c): the template's stub and codebox-init.
 */
#ifndef CODEBOX_INITEXEC_H
#define CODEBOX_INITEXEC_H

#include <stdint.h>
#include <stdnoreturn.h>
#include <sys/types.h>

#include "box/child.h"
#include "core/runconfig.h"
#include "box/sandbox.h"

/*
 * The one-copy warm start (template.c, docs/DESIGN.md "The cost of a run"): the template
 * clones init sharing its memory (CLONE_VM | CLONE_VFORK, suspended until init execs); init,
 * still a stub in the template's memory, answers the worker, waits for the go, forks the
 * program (the run's one copy of the interpreter) and execs codebox-init, a small program of
 * its own (initexec.c) that builds the run's view of the system and tells the program when
 * it may confine itself. What codebox-init is told, through a pipe, is this fixed-size wire:
 * the run's configuration whole (runconfig.h), from which it derives its spec as the template
 * did (child_prepare()), and the fds it inherits.
 */
#define SANDBOX_WIRE_MAGIC 0x63626934u
struct sandbox_wire {
	uint32_t magic;
	struct run_settings run; /* the run's configuration, whole */
	uint64_t disk_bytes;
	int32_t ctl_fd, report_fd, error_fd, session_fd, workspace_fd, etc_fd;
	int32_t ready_fd;   /* write: 'R' once the run's view is built; the program waits */
	int32_t handoff_fd; /* read: the program's struct sandbox_handoff */
	int32_t cell_fd;    /* a session: init's end of the cell socket, else -1 */
	char workdir[4200]; /* the run's directory on the host (with mounts: the new root's
	                     * mount point) */
	char python[4200];
};

/* How many fds codebox-init keeps (initexec_wire_fds()): the wire's own and the run's. */
#define SANDBOX_WIRE_FDS 10

/* The fds of w that init keeps, and wire_fd (the pipe it is read from), into fds (-1 for
 * the ones this run has not): the one list the stub clears close-on-exec on and init keeps. */
void initexec_wire_fds(const struct sandbox_wire *w, int wire_fd, int fds[SANDBOX_WIRE_FDS]);

/* What the stub is given, in the template's memory (it shares it). */
struct sandbox_stub {
	struct sandbox_spec *spec; /* the run's, with its fds */
	/* the wire init reads, its host path wiped (the program is a copy of this memory) */
	const struct sandbox_wire *wire;
	int exe_fd;        /* codebox-init (a sealed memfd) */
	int wire_fd;       /* read end of the pipe holding the struct sandbox_wire */
	int ready_fd[2];   /* init -> program: the run's view is built */
	int handoff_fd[2]; /* program -> init: struct sandbox_handoff */
	int cell_fd[2];    /* a session: [0] init's end, [1] the program's; else -1 */
	/* answers the worker with init's host pid and pidfd (template.c); 0 or -1 */
	int (*answer)(void *ctx, pid_t pid, int pidfd);
	void *ctx;
	/* init's host pid, written by clone() (CLONE_PARENT_SETTID) before the stub runs */
	volatile pid_t host_pid;
	/* set by the stub: whether the worker was answered, and else why not (errno) */
	volatile int answered;
	volatile int err;
};

/* How long the stub waits for the worker's go, the template suspended meanwhile. */
#define SANDBOX_STUB_GO_MS 2000

/* Fills w for codebox-init: the run's configuration cfg whole, its directory workdir (on the
 * host) and disk_bytes, the fds of s (the template's spec, child_prepare()'s of the same) and
 * of the stub st. Returns 0, or -1 (ENAMETOOLONG) when a path does not fit. */
int initexec_wire_pack(const struct run_config *cfg, const char *workdir,
                       unsigned long long disk_bytes, const struct sandbox_spec *s,
                       const struct sandbox_stub *st, struct sandbox_wire *w);

/* codebox-init's spec from w (its strings terminated first), into c (it points into w and c,
 * which must stay where they are): child_prepare()'s, as the template's was, with init's own
 * fds, and what the stub (the high pids) and the program (its Landlock ruleset) take instead
 * of init in the one-copy start turned off. */
void initexec_wire_spec(struct sandbox_wire *w, struct child_spec *c);

/*
 * The function clone() runs in the stub (CLONE_VM | CLONE_VFORK): system calls only, on its
 * own stack, until it has forked the program; never returns.
 */
int initexec_stub_main(void *stub);

/*
 * codebox-init's body, once exec'd (initexec.c): w as read from the wire, prog the program's
 * pid. Never returns.
 */
noreturn void initexec_init(struct sandbox_wire *w, pid_t prog);

/* Makes every permitted capability inheritable and ambient, so that it survives an exec by a
 * uid that is not its user namespace's root. Returns 0, or -1 with errno. */
int initexec_ambient_caps(void);

/* codebox-init --check-caps exits with this when it holds what init needs after the exec */
#define SANDBOX_CAPS_OK 42

#endif
