/*
 * workdir.h - a run's private working directory: created fresh, removed completely.
 */
#ifndef CODEBOX_WORKDIR_H
#define CODEBOX_WORKDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/util.h"

struct workdir {
	char name[40];   /* the entry in the runs directory */
	char path[4096]; /* absolute path */
	int fd;          /* O_DIRECTORY, or -1 */
};

/*
 * Creates an empty directory with a fresh random name under runs_fd (whose path is runs_dir),
 * mode 0700, owned by uid/gid when chown_to is set (the run writes main.py into it itself).
 * Returns 0, or -1 with what failed in f (not logged) and nothing left behind.
 */
int workdir_create(struct workdir *w, int runs_fd, const char *runs_dir, bool chown_to, uid_t uid,
                   gid_t gid, struct fault *f);

/*
 * Removes the directory and everything in it without following symlinks and without
 * recursion (a run can nest directories deeper than any stack or fd limit). Call it only when
 * nothing of the run is alive. Returns 0 or -1 (logged).
 */
int workdir_remove(struct workdir *w, int runs_fd);

/* Removes the tree at name under parent_fd; exposed for tests. */
int workdir_remove_tree(int parent_fd, const char *name);

#endif
