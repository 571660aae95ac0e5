/*
 * workspace.c - the agent protocol's persistent workspace.
 *
 * An agent-sandbox pod keeps its files in /app between commands; codebox runs each command
 * in a fresh sandbox, so the files must live outside every run yet be bounded in size and
 * reachable only by the runs of port 8888. They live in a tmpfs that is mounted nowhere on
 * the host: fsopen() + fsmount() give a detached mount, held by an fd the supervisor opens
 * before it forks the workers. Who holds what:
 *
 *   supervisor   creates the workspace once (a child in a user namespace of its own does
 *                the mounting, since mounting needs CAP_SYS_ADMIN) and keeps its fd;
 *   worker       serves /upload, /download, /list and /exists through openat2() beneath
 *                that fd, never following a symlink;
 *   run's init   in its own new mount namespace, clones the detached mount (open_tree with
 *                OPEN_TREE_CLONE) and moves the clone onto /app, before it drops its
 *                capabilities; the program never holds the fd.
 *
 * The tmpfs's size and nr_inodes options are the bound: a command that fills it, with bytes
 * or with empty files, gets ENOSPC (every inode costs the host about 1 KiB of kernel memory
 * that no run's cgroup keeps once the run is gone, so the count is bounded as well as the
 * bytes). The workspace lives as long as the pool, like a pod's own filesystem.
 *
 * The worker never blocks on what a command left there: every open resolves beneath the
 * workspace to an O_PATH handle first, checks its type with fstat(), and only then opens a
 * regular file or a directory for real (through /proc/self/fd, which reopens exactly that
 * inode). A FIFO, a socket or a device is refused without ever being opened. Uploads are
 * written to an unnamed file (O_TMPFILE) that is linked into place only once it is whole.
 */
#include "core/workspace.h"

#include "core/limits.h"

#include "core/userns.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

unsigned long long
workspace_inodes(unsigned long long size_bytes)
{
	return limits_inodes(size_bytes);
}

static int
fs_config(int fs, const char *key, const char *value)
{
	return (int)syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, key, value, 0);
}

/* The detached tmpfs, owned by uid/gid as this process's user namespace sees them. */
static int
workspace_mount(unsigned long long size_bytes, unsigned uid, unsigned gid)
{
	char size[32], id[16];
	int fs, m;

	fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
	if (fs < 0)
		return -1;
	snprintf(size, sizeof(size), "%llu", size_bytes);
	if (fs_config(fs, "size", size) < 0 || fs_config(fs, "mode", "0700") < 0)
		goto fail;
	snprintf(size, sizeof(size), "%llu", workspace_inodes(size_bytes));
	if (fs_config(fs, "nr_inodes", size) < 0)
		goto fail;
	snprintf(id, sizeof(id), "%u", uid);
	if (fs_config(fs, "uid", id) < 0)
		goto fail;
	snprintf(id, sizeof(id), "%u", gid);
	if (fs_config(fs, "gid", id) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		goto fail;
	m = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	close(fs);
	return m;
fail:
	close(fs);
	return -1;
}

static int
send_fd(int sock, int fd)
{
	char byte = 'w', ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {&byte, 1};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

	memset(ctl, 0, sizeof(ctl));
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &mh, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

/* The helper sends either the fd (one byte with SCM_RIGHTS) or its errno (an int). */
static int
recv_fd(int sock)
{
	int byte = 0;
	char ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {&byte, sizeof(byte)};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	struct cmsghdr *c;
	int fd;

	ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);

	if (n < 0)
		return -1;
	c = CMSG_FIRSTHDR(&mh);
	if (c == NULL || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int))) {
		errno = n == (ssize_t)sizeof(byte) && byte > 0 ? byte : EPIPE;
		return -1;
	}
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

int
workspace_create(unsigned long long size_bytes, uid_t host_uid, gid_t host_gid, char *why,
                 size_t why_len)
{
	int sv[2], ready[2] = {-1, -1}, go[2] = {-1, -1}, fd = -1, st;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(why, why_len, "socketpair() failed: %s", strerror(errno));
		return -1;
	}
	if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0) {
		snprintf(why, why_len, "pipe2() failed: %s", strerror(errno));
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(why, why_len, "fork() failed: %s", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		/* 'u': in a user namespace, waiting for the maps; 'r': root, no namespace */
		char mode = unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0 ? 'u' : 'r', c;
		int m;

		if (mode == 'r' && geteuid() != 0)
			_exit(2);
		if (write(ready[1], &mode, 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(3);
		m = mode == 'u'
		        ? workspace_mount(size_bytes, WORKSPACE_INNER_ID, WORKSPACE_INNER_ID)
		        : workspace_mount(size_bytes, host_uid, host_gid);
		if (m < 0) {
			/* the reason, for the supervisor's log */
			int e = errno;
			if (write(sv[1], &e, sizeof(e)) < 0)
				_exit(6);
			_exit(4);
		}
		_exit(send_fd(sv[1], m) == 0 ? 0 : 5);
	}
	/* only the child holds its ends: EOF, not a hang, if it dies */
	close(ready[1]);
	ready[1] = -1;
	close(sv[1]);
	sv[1] = -1;
	{
		char c = 0;
		if (read(ready[0], &c, 1) != 1) {
			snprintf(why, why_len,
			         "no user namespace and not root: cannot mount a tmpfs");
			goto reap;
		}
		if (c == 'u' && userns_write_maps(pid, WORKSPACE_INNER_ID, host_uid, host_gid) < 0)
			goto maps_failed;
		if (write(go[1], "g", 1) != 1) {
			snprintf(why, why_len, "the workspace's helper died: %s", strerror(errno));
			goto reap;
		}
		fd = recv_fd(sv[0]);
		if (fd < 0)
			snprintf(why, why_len,
			         "mounting the workspace tmpfs failed (fsopen/fsmount): %s",
			         strerror(errno));
		goto reap;
	maps_failed:
		snprintf(why, why_len, "writing the workspace's user namespace maps failed: %s",
		         strerror(errno));
	}
reap:
	close(go[1]);
	go[1] = -1;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
out:
	close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	for (int i = 0; i < 2; i++) {
		if (ready[i] >= 0)
			close(ready[i]);
		if (go[i] >= 0)
			close(go[i]);
	}
	return fd;
}

int
workspace_attach(int workspace_fd, const char *target)
{
	int clone = (int)syscall(SYS_open_tree, workspace_fd, "",
	                         OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	int rc;

	if (clone < 0)
		return -1;
	rc = (int)syscall(SYS_move_mount, clone, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH);
	close(clone);
	return rc;
}

bool
workspace_path_ok(const char *path, size_t len)
{
	size_t start = 0;

	if (len == 0 || path[0] == '/')
		return false;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && ((unsigned char)path[i] < 0x20 || path[i] == 0x7f))
			return false;
		if (i < len && path[i] != '/')
			continue;
		/* a component is path[start..i) */
		if (i == start || (i - start == 1 && path[start] == '.') ||
		    (i - start == 2 && path[start] == '.' && path[start + 1] == '.'))
			return false;
		start = i + 1;
	}
	return true;
}

enum workspace_resolved
workspace_path_resolve(const char *path, size_t len, char *out, size_t out_len)
{
	size_t depth = 0, o = 0, i, j, n;

	/* first whether it climbs out at any point: a later name cannot make that good */
	for (i = 0; i <= len; i = j + 1) {
		for (j = i; j < len && path[j] != '/'; j++)
			;
		n = j - i;
		if (n == 2 && path[i] == '.' && path[i + 1] == '.') {
			if (depth == 0)
				return WORKSPACE_ESCAPES;
			depth--;
		} else if (n > 1 || (n == 1 && path[i] != '.')) {
			depth++;
		}
	}
	for (i = 0; i <= len; i = j + 1) {
		for (j = i; j < len && path[j] != '/'; j++)
			;
		n = j - i;
		if (n == 2 && path[i] == '.' && path[i + 1] == '.') {
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--; /* and the '/' before the dropped name */
		} else if (n > 1 || (n == 1 && path[i] != '.')) {
			if (o + (o > 0) + n >= out_len)
				return WORKSPACE_TOO_LONG;
			if (o > 0)
				out[o++] = '/';
			memcpy(out + o, path + i, n);
			o += n;
		}
	}
	if (o == 0) {
		if (out_len < 2)
			return WORKSPACE_TOO_LONG;
		out[o++] = '.';
	}
	out[o] = '\0';
	return WORKSPACE_INSIDE;
}

static int
open_beneath(int dirfd, const char *path, int flags, mode_t mode)
{
	struct open_how how = {
	    .flags = (unsigned long long)(flags | O_CLOEXEC | O_NOFOLLOW),
	    .mode = (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? mode : 0,
	    .resolve =
	        RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};

	return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

/* The same inode as the O_PATH handle fd, opened for real with flags. */
static int
reopen(int fd, int flags)
{
	char proc[32];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return open(proc, (flags & ~O_CREAT & ~O_TRUNC & ~O_EXCL) | O_CLOEXEC | O_NONBLOCK);
}

int
workspace_open(int workspace_fd, const char *path, int flags)
{
	struct stat sb;
	int h, fd, saved;

	h = open_beneath(workspace_fd, path, O_PATH, 0);
	if (h < 0 || flags == O_PATH)
		return h;
	if (fstat(h, &sb) < 0)
		goto fail;
	if ((flags & O_DIRECTORY) ? !S_ISDIR(sb.st_mode) : !S_ISREG(sb.st_mode)) {
		errno = S_ISLNK(sb.st_mode)     ? ELOOP
		        : S_ISDIR(sb.st_mode)   ? EISDIR
		        : (flags & O_DIRECTORY) ? ENOTDIR
		                                : ENXIO;
		goto fail;
	}
	fd = reopen(h, flags);
	saved = errno;
	close(h);
	if (fd >= 0) /* only the open must not block; reads of a regular file never do */
		(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	errno = saved;
	return fd;
fail:
	saved = errno;
	close(h);
	errno = saved;
	return -1;
}

int
workspace_tmpfile(int workspace_fd, mode_t mode)
{
	return open_beneath(workspace_fd, ".", O_TMPFILE | O_WRONLY, mode);
}

/* Creates the parents of path beneath the workspace (mode 0755), one component at a time,
 * each made and then opened beneath the last without following a symlink (mkdirat() on a
 * single name never follows one either). Returns an O_PATH fd of the last parent and points
 * *name at path's last component (inside buf), or -1 with errno. */
static int
make_parents(int workspace_fd, const char *path, char *buf, size_t buf_len, char **name)
{
	size_t len = strlen(path);
	char *slash;
	int parent, saved;

	if (len >= buf_len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, path, len + 1);
	*name = buf;
	parent = open_beneath(workspace_fd, ".", O_PATH | O_DIRECTORY, 0);
	if (parent < 0)
		return -1;
	while ((slash = strchr(*name, '/')) != NULL) {
		int d;
		*slash = '\0';
		if (mkdirat(parent, *name, 0755) < 0 && errno != EEXIST)
			goto fail;
		d = open_beneath(parent, *name, O_PATH | O_DIRECTORY, 0);
		if (d < 0) {
			struct stat sb;
			/* O_NOFOLLOW | O_DIRECTORY says ENOTDIR for a symlink: say what it is */
			if (errno == ENOTDIR &&
			    fstatat(parent, *name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISLNK(sb.st_mode))
				errno = ELOOP;
			goto fail;
		}
		close(parent);
		parent = d;
		*name = slash + 1;
	}
	return parent;
fail:
	saved = errno;
	close(parent);
	errno = saved;
	return -1;
}

int
workspace_link(int workspace_fd, int file_fd, const char *path)
{
	static unsigned long serial;
	char buf[4096], proc[32], tmp[64], *name;
	struct stat sb;
	int parent, rc = -1, saved;

	parent = make_parents(workspace_fd, path, buf, sizeof(buf), &name);
	if (parent < 0)
		return -1;
	/* what is in the way is refused, never replaced: a symlink, a directory, a FIFO... */
	if (fstatat(parent, name, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
		if (!S_ISREG(sb.st_mode)) {
			errno = S_ISLNK(sb.st_mode) ? ELOOP : S_ISDIR(sb.st_mode) ? EISDIR : EEXIST;
			goto out;
		}
	} else if (errno != ENOENT) {
		goto out;
	}
	/* linked under a name of our own first: rename() then replaces a file atomically */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", file_fd);
	snprintf(tmp, sizeof(tmp), ".codebox-upload-%d-%lu", (int)getpid(), ++serial);
	if (linkat(AT_FDCWD, proc, parent, tmp, AT_SYMLINK_FOLLOW) < 0)
		goto out;
	rc = renameat(parent, tmp, parent, name);
	if (rc < 0) {
		saved = errno;
		(void)unlinkat(parent, tmp, 0);
		errno = saved;
	}
out:
	saved = errno;
	close(parent);
	errno = saved;
	return rc;
}
