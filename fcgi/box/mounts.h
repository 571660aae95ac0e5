/*
 * mounts.h - the run's file-system view inside its mount namespace.
 */
#ifndef CODEBOX_MOUNTS_H
#define CODEBOX_MOUNTS_H

#include "core/isolation.h"

#include <stdbool.h>
#include <sys/types.h>

struct mounts_spec {
	const char *workdir;       /* absolute path of the run's directory (exists on the host) */
	const char *inner_workdir; /* where the run sees it: /sandbox/<name> (SANDBOX_INNER_DIR) */
	int etc_fd;                /* the sandbox's /etc (O_PATH), prepared by the supervisor:
	                            * its files are copied (no path: the host's runtime dir) */
	const char *python;        /* the interpreter; bound in when it is not under /usr */
	unsigned long long disk_bytes;
	uid_t owner_uid; /* owner of the working tmpfs, as seen inside */
	gid_t owner_gid;
	bool mount_proc;
	int workspace_fd; /* -1, or the agent workspace: attached at /app (workspace.h) */
};

/* Which step failed, for the error report. */
enum mounts_step {
	MOUNTS_PRIVATE = 1,
	MOUNTS_ROOT,
	MOUNTS_SYSTEM,
	MOUNTS_ETC,
	MOUNTS_DEV,
	MOUNTS_PROC,
	MOUNTS_WORK,
	MOUNTS_WORKSPACE,
	MOUNTS_PIVOT,
	MOUNTS_READONLY,
	MOUNTS_MASK,
};

/*
 * In a fresh mount namespace (with CAP_SYS_ADMIN in its user namespace), builds a new root
 * and pivots into it: a read-only tmpfs skeleton holding read-only binds of /usr (and /bin,
 * /lib... as on the host), a copy of the sandbox's /etc, /dev with null, zero, full, random,
 * urandom, a fresh /proc of the run's pid namespace (if mount_proc), and one tmpfs of
 * disk_bytes seen at inner_workdir, /tmp, /var/tmp and /dev/shm. Nothing of the host's file
 * system is writable afterwards, and no mount names the host's runtime directory.
 * Async-signal-safe (no allocation). Returns 0, or -1 with errno and *failed_step set.
 */
int mounts_build(const struct mounts_spec *m, enum mounts_step *failed_step);

/*
 * After mounts_build() (and whatever init still writes in /proc/sys): hides the OCI runtime
 * spec's masked /proc paths plus /proc/cmdline, /proc/config.gz and /proc/cgroups, and makes
 * /proc/sys, /proc/bus, /proc/fs, /proc/irq and /proc/sysrq-trigger read-only. Paths this
 * kernel lacks are skipped. Returns 0, or -1 with errno and *failed_step set.
 */
int mounts_mask(enum mounts_step *failed_step);

const char *mounts_step_string(enum mounts_step step);

#endif
