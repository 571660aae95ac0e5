/*
 * landlock.h - file-system confinement of a run, best effort by the kernel's Landlock ABI.
 */
#ifndef CODEBOX_LANDLOCK_H
#define CODEBOX_LANDLOCK_H

#include "core/isolation.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The kernel's Landlock ABI version, 0 when Landlock is unavailable. */
int landlock_abi(void);

/*
 * The Landlock layer's start-up probe: records the kernel's ABI in iso and turns the layer on
 * unless disabled (CODEBOX_DISABLE) or the kernel has none, saying why it is off.
 */
void landlock_probe(struct isolation *iso, bool disabled);

/* The file-system rights the kernel of this ABI handles (0 below ABI 1); from ABI 9 they
 * include LANDLOCK_ACCESS_FS_RESOLVE_UNIX (1 << 16). Pure. */
uint64_t landlock_fs_rights(int abi);

/* The network rights handled at this ABI: TCP bind and connect from ABI 4. Pure. */
uint64_t landlock_net_rights(int abi);

/* The scopes at this ABI: abstract unix sockets and signals from ABI 6. Pure. */
uint64_t landlock_scopes(int abi);

/* What a run may do in its own directories: every handled right but making devices. Pure. */
uint64_t landlock_rw_dir_rights(int abi);

/*
 * Builds a ruleset that lets a run write only inside rw_dirs (once per worker: the worker's
 * directory of runs, so every run's directory beneath it is covered, tmpfs mounts included;
 * or, in a mount namespace, per run: its directory, /tmp, /var/tmp and /dev/shm)
 * and the devices null, zero and full. With restrict_reads (no mount namespace hides the
 * host), reading and executing are also limited to the system paths Python and its modules
 * need, the interpreter python, the devices, and rw_dir. With ABI >= 4 TCP is denied; with
 * ABI >= 6 signals and abstract unix sockets are scoped to the run; with ABI >= 9 connecting to a
 * pathname unix socket outside rw_dirs is denied.
 * Returns the ruleset fd (close-on-exec) or -1.
 */
int landlock_build(int abi, const char *const *rw_dirs, size_t n_rw_dirs, const char *python,
                   bool restrict_reads);

/* Enforces the ruleset on the calling thread; requires no_new_privs. Async-signal-safe. */
int landlock_apply(int ruleset_fd);

/* Adds to a ruleset from landlock_build() the same rights as its rw_dir on the directory that
 * dir_fd refers to (an agent run's workspace); abi and restrict_reads as given to landlock_build().
 * Returns 0 or -1 (logged). */
int landlock_allow_dir_fd(int abi, bool restrict_reads, int ruleset_fd, int dir_fd);

#endif
