/*
 * workdir.c - creation and removal of a run's working directory.
 *
 * The name is 128 random bits, so no run can guess another's path. Removal walks the tree
 * with at most two directory fds open at a time: it descends into the first subdirectory it
 * finds, and when a directory is empty it climbs to ".." and removes it there by inode
 * number. That is safe only because every process of the run is dead when it runs, so
 * nothing can rename or swap the tree underneath. The walk is bounded in steps.
 */
#include "run/workdir.h"

#include "core/log.h"
#include "core/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

/* Steps of the removal walk: entries unlinked plus directories entered; far beyond what a
 * run can create within its limits. */
#define WORKDIR_MAX_STEPS (50L * 1000 * 1000)

int
workdir_create(struct workdir *w, int runs_fd, const char *runs_dir, bool chown_to, uid_t uid,
               gid_t gid, struct fault *f)
{
	unsigned char rnd[16];

	w->fd = -1;
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		util_fault(f, errno, "getrandom() for the run's name");
		return -1;
	}
	snprintf(w->name, sizeof(w->name), "run-");
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(w->name + 4 + 2 * i, 3, "%02x", rnd[i]);
	if ((size_t)snprintf(w->path, sizeof(w->path), "%s/%s", runs_dir, w->name) >=
	    sizeof(w->path)) {
		util_fault(f, ENAMETOOLONG, "the runs directory's path %s", runs_dir);
		return -1;
	}
	if (mkdirat(runs_fd, w->name, 0700) < 0) {
		util_fault(f, errno, "mkdir(%s)", w->path);
		return -1;
	}
	w->fd = openat(runs_fd, w->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (w->fd < 0) {
		util_fault(f, errno, "open(%s)", w->path);
		goto fail;
	}
	if (chown_to && fchown(w->fd, uid, gid) < 0) {
		util_fault(f, errno, "chown(%s)", w->path);
		goto fail;
	}
	return 0;
fail:
	workdir_remove(w, runs_fd);
	return -1;
}

/* Finds the name of the entry of dirfd whose inode is ino; 0 or -1. */
static int
find_by_inode(int dirfd, ino_t ino, char *name, size_t name_len, long *steps)
{
	int dfd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;
	struct dirent *e;
	int rc = -1;

	if (dfd < 0)
		return -1;
	d = fdopendir(dfd);
	if (d == NULL) {
		close(dfd);
		return -1;
	}
	while ((e = readdir(d)) != NULL && ++*steps < WORKDIR_MAX_STEPS) {
		if (e->d_ino == ino && strcmp(e->d_name, ".") != 0 &&
		    strcmp(e->d_name, "..") != 0) {
			snprintf(name, name_len, "%s", e->d_name);
			rc = 0;
			break;
		}
	}
	closedir(d);
	return rc;
}

int
workdir_remove_tree(int parent_fd, const char *name)
{
	char sub[256];
	long steps = 0;
	int depth = 0;
	int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	/* the run may have made its directories unreadable or unwritable to itself */
	if (fchmod(fd, 0700) < 0) {
		/* not ours to fix; unlinking below tells */
	}
	while (steps < WORKDIR_MAX_STEPS) {
		int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		DIR *d;
		struct dirent *e;
		bool found_dir = false;

		if (dfd < 0)
			goto fail;
		d = fdopendir(dfd);
		if (d == NULL) {
			close(dfd);
			goto fail;
		}
		while ((e = readdir(d)) != NULL && ++steps < WORKDIR_MAX_STEPS) {
			if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
				continue;
			if (unlinkat(fd, e->d_name, 0) == 0)
				continue;
			if (errno == EISDIR || errno == EPERM) {
				/* a directory (unlink(2) says EISDIR on Linux, EPERM by POSIX) */
				snprintf(sub, sizeof(sub), "%s", e->d_name);
				found_dir = true;
				break;
			}
			if (errno != ENOENT) {
				closedir(d);
				goto fail;
			}
		}
		closedir(d);
		if (found_dir) {
			if (fchmodat(fd, sub, 0700, 0) < 0 && errno != EPERM) {
				/* not ours to fix; opening it below tells */
			}
			int child =
			    openat(fd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (child < 0) {
				/* maybe an empty directory we cannot enter: try removing it */
				if (unlinkat(fd, sub, AT_REMOVEDIR) < 0)
					goto fail;
				continue;
			}
			close(fd);
			fd = child;
			depth++;
			continue;
		}
		/* fd is empty now */
		if (depth == 0) {
			close(fd);
			return unlinkat(parent_fd, name, AT_REMOVEDIR);
		}
		struct stat sb;
		int up = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (up < 0 || fstat(fd, &sb) < 0 ||
		    find_by_inode(up, sb.st_ino, sub, sizeof(sub), &steps) < 0 ||
		    unlinkat(up, sub, AT_REMOVEDIR) < 0) {
			if (up >= 0)
				close(up);
			goto fail;
		}
		close(fd);
		fd = up;
		depth--;
	}
	errno = E2BIG;
fail:
	close(fd);
	return -1;
}

int
workdir_remove(struct workdir *w, int runs_fd)
{
	int rc = 0;

	if (w->fd >= 0) {
		close(w->fd);
		w->fd = -1;
	}
	if (w->name[0] == '\0')
		return 0;
	if (workdir_remove_tree(runs_fd, w->name) < 0) {
		log_msg(LOG_ERROR, "removing %s failed: %s", w->path, strerror(errno));
		rc = -1;
	}
	w->name[0] = '\0';
	return rc;
}
