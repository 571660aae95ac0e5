/* Unit tests for workdir.c: creation, and removal of trees a program could leave. */
#include "run/workdir.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int
main(void)
{
	char tmpl[] = "/tmp/codebox-test-workdir.XXXXXX";
	struct workdir a, b;
	int runs, fd;
	struct stat sb;
	struct fault f = {"", 0};

	if (mkdtemp(tmpl) == NULL)
		abort();
	runs = open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ok(workdir_create(&a, runs, tmpl, false, 0, 0, &f) == 0, "create");
	ok(workdir_create(&b, runs, tmpl, false, 0, 0, &f) == 0 && strcmp(a.name, b.name) != 0,
	   "two runs get different paths");
	ok(fstatat(a.fd, "main.py", &sb, 0) < 0 && errno == ENOENT,
	   "the directory is empty (the run writes main.py)");
	ok(fstat(a.fd, &sb) == 0 && (sb.st_mode & 0777) == 0700, "the directory is 0700");

	/* a tree deeper than any fd limit, with an unwritable level and a dangling symlink */
	fd = dup(a.fd);
	for (int i = 0; i < 3000; i++) {
		int next;
		if (mkdirat(fd, "d", 0700) < 0)
			abort();
		next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (i % 100 == 0) {
			close(openat(fd, "f", O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
			if (symlinkat("/etc/passwd", fd, "link") < 0)
				abort();
		}
		if (i == 1500)
			fchmod(fd, 0500);
		close(fd);
		fd = next;
	}
	close(fd);
	ok(workdir_remove(&a, runs) == 0, "a 3000-level tree is removed");
	ok(fstatat(runs, a.name, &sb, AT_SYMLINK_NOFOLLOW) < 0, "nothing of it is left");
	ok(access("/etc/passwd", F_OK) == 0, "a symlink's target is never touched");
	ok(workdir_remove(&b, runs) == 0, "the other run is removed");
	ok(unlinkat(runs, ".", AT_REMOVEDIR) < 0 && rmdir(tmpl) == 0, "the runs dir is empty");
	close(runs);
	ok(workdir_create(&a, -1, "/nonexistent", false, 0, 0, &f) < 0 && f.err == EBADF &&
	       strstr(f.what, "mkdir(/nonexistent/run-") == f.what,
	   "a failure names its step and keeps its errno");
	return tap_done();
}
