/*
 * workspace.h - the agent protocol's persistent, size-bounded workspace (/app on port 8888).
 */
#ifndef CODEBOX_WORKSPACE_H
#define CODEBOX_WORKSPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The uid and gid that own the workspace inside its user namespace (as runs see them). */
#define WORKSPACE_INNER_ID 1000

/* How many files and directories a workspace of size_bytes holds (its tmpfs's nr_inodes:
 * limits_inodes()). */
unsigned long long workspace_inodes(unsigned long long size_bytes);

/*
 * Creates a tmpfs of size_bytes (and workspace_inodes(size_bytes) inodes) that is mounted nowhere:
 * a detached mount (fsopen/fsmount) whose files belong to host_uid/host_gid. Unprivileged, a
 * short-lived child creates it in a user namespace of its own that maps WORKSPACE_INNER_ID onto
 * host_uid; a root caller without user namespaces creates it directly. Returns the mount's fd
 * (close-on-exec), which keeps the file system alive and which every worker inherits, or -1 with a
 * reason in why.
 */
int workspace_create(unsigned long long size_bytes, uid_t host_uid, gid_t host_gid, char *why,
                     size_t why_len);

/*
 * Inside a run's fresh mount namespace (with CAP_SYS_ADMIN there): attaches a clone of the
 * workspace at target (an existing directory). Async-signal-safe. Returns 0 or -1 (errno).
 */
int workspace_attach(int workspace_fd, const char *target);

/* Whether path (relative to the workspace) is acceptable: not empty, not absolute, no empty,
 * "." or ".." component, no control character. */
bool workspace_path_ok(const char *path, size_t len);

/* Where a path leads, resolved by its letters alone (workspace_path_resolve()). */
enum workspace_resolved {
	WORKSPACE_INSIDE,   /* beneath the workspace, or the workspace itself */
	WORKSPACE_ESCAPES,  /* a ".." climbs above the workspace */
	WORKSPACE_TOO_LONG, /* inside, but longer than the caller's buffer */
};

/*
 * Resolves path[0..len) as a path relative to the workspace by its letters, as nginx resolves
 * a URI and Python's os.path.normpath() a path: empty and "." components are dropped (so are
 * leading slashes: "/a//b" is "a/b"), and ".." drops the component before it. Nothing is
 * looked up, so no symlink is followed (workspace_open() refuses them). On WORKSPACE_INSIDE,
 * out holds the result, NUL-terminated: "." for the workspace itself, else components
 * without any ".", ".." or empty one. WORKSPACE_ESCAPES when some ".." climbs above the
 * workspace, wherever it stands ("a/../../b"). Other bytes (control characters included) are
 * kept as they are: workspace_path_ok() judges the result.
 */
enum workspace_resolved workspace_path_resolve(const char *path, size_t len, char *out,
                                               size_t out_len);

/*
 * Opens path beneath the workspace without following any symlink (openat2 with
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV) and without
 * blocking: flags O_PATH gives a handle on whatever is there; O_RDONLY a regular file only;
 * O_RDONLY | O_DIRECTORY a directory only. Anything else (a FIFO, a socket, a device) is
 * never opened. Returns an fd (close-on-exec, blocking) or -1 with errno: ELOOP for a
 * symlink on the way, EXDEV for an escape, ENOENT, ENAMETOOLONG, EISDIR, ENOTDIR, or ENXIO for
 * what is neither a regular file nor a directory.
 */
int workspace_open(int workspace_fd, const char *path, int flags);

/* An unnamed regular file in the workspace (O_TMPFILE), open for writing, with mode: it counts
 * against the workspace's bounds and vanishes when closed unless workspace_link() names it.
 * Returns an fd (close-on-exec) or -1 with errno. */
int workspace_tmpfile(int workspace_fd, mode_t mode);

/*
 * Gives file_fd (from workspace_tmpfile()) the name path, beneath the workspace, replacing a
 * regular file of that name atomically. Missing parent directories are created (0755), none
 * followed through a symlink. Returns 0, or -1 with errno: ELOOP (a symlink on the way or at
 * path), EISDIR (a directory at path), EEXIST (a FIFO, socket or device at path), ENOTDIR,
 * ENAMETOOLONG, ENOSPC (the workspace is full), or another error of mkdirat/linkat/renameat.
 */
int workspace_link(int workspace_fd, int file_fd, const char *path);

#endif
