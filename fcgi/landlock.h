/*
 * landlock.h - file-system confinement of a run, best effort by the kernel's Landlock ABI.
 */
#ifndef CODEBOX_LANDLOCK_H
#define CODEBOX_LANDLOCK_H

#include <stdbool.h>

/* The kernel's Landlock ABI version, 0 when Landlock is unavailable. */
int landlock_abi(void);

/*
 * Builds, once per worker, a ruleset that lets a run write only inside rw_dir (the worker's
 * directory of runs, so every run's directory beneath it is covered, tmpfs mounts included)
 * and the devices null, zero and full. With restrict_reads (no mount namespace hides the
 * host), reading and executing are also limited to the system paths Python and its modules
 * need, the interpreter python, the devices, and rw_dir. With ABI >= 4 TCP is denied; with
 * ABI >= 6 signals and abstract unix sockets are scoped to the run.
 * Returns the ruleset fd (close-on-exec) or -1.
 */
int landlock_build(int abi, const char *rw_dir, const char *python, bool restrict_reads);

/* Enforces the ruleset on the calling thread; requires no_new_privs. Async-signal-safe. */
int landlock_apply(int ruleset_fd);

/* Adds to a ruleset from landlock_build() the same rights as its rw_dir on the directory that
 * dir_fd refers to (an agent run's workspace); abi and restrict_reads as given to landlock_build().
 * Returns 0 or -1 (logged). */
int landlock_allow_dir_fd(int abi, bool restrict_reads, int ruleset_fd, int dir_fd);

#endif
