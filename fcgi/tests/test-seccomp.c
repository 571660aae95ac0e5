/* Unit tests for seccomp.c: the filter, loaded into a child, denies what the policy says. */
#include "box/seccomp.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* One call per entry; the child reports errno (0 on success) for each, in order. */
static const char *const calls[] = {
    "io_setup", "inotify_init1",  "fanotify_init",  "modify_ldt",    "fcntl F_NOTIFY",
    "unshare",  "socket AF_INET", "socket AF_UNIX", "fcntl F_GETFD", "getpid",
};
#define N_CALLS (sizeof(calls) / sizeof(calls[0]))

static void
child(const struct seccomp_filter *f, int out)
{
	int errs[N_CALLS];
	unsigned long ctx = 0;
	char ldt[16];
	long r;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || seccomp_apply(f) < 0)
		_exit(1);
	for (size_t i = 0; i < N_CALLS; i++) {
		errno = 0;
		switch (i) {
		case 0:
			r = syscall(SYS_io_setup, 16, &ctx);
			break;
		case 1:
			r = syscall(SYS_inotify_init1, 0);
			break;
		case 2:
			r = syscall(SYS_fanotify_init, 0, 0);
			break;
		case 3:
			r = syscall(SYS_modify_ldt, 0, ldt, sizeof(ldt));
			break;
		case 4:
			r = fcntl(out, F_NOTIFY, 0);
			break;
		case 5:
			r = syscall(SYS_unshare, 0x10000000 /* CLONE_NEWUSER */);
			break;
		case 6:
			r = socket(AF_INET, SOCK_STREAM, 0);
			break;
		case 7:
			r = socket(AF_UNIX, SOCK_STREAM, 0);
			break;
		case 8:
			r = fcntl(out, F_GETFD);
			break;
		default:
			r = getpid();
			break;
		}
		errs[i] = r < 0 ? errno : 0;
	}
	_exit(write(out, errs, sizeof(errs)) == (ssize_t)sizeof(errs) ? 0 : 1);
}

static int
run(bool deny_unix, int errs[N_CALLS])
{
	struct seccomp_filter f;
	int p[2], st;
	pid_t pid;

	if (seccomp_build(&f, deny_unix) < 0 || pipe(p) < 0)
		return -1;
	pid = fork();
	if (pid == 0)
		child(&f, p[1]);
	close(p[1]);
	ssize_t n = read(p[0], errs, sizeof(int) * N_CALLS);
	close(p[0]);
	waitpid(pid, &st, 0);
	seccomp_free(&f);
	return n == (ssize_t)(sizeof(int) * N_CALLS) ? 0 : -1;
}

int
main(void)
{
	int errs[N_CALLS];

	ok(run(true, errs) == 0,
	   "the filter loads in a child (deny AF_UNIX: below Landlock ABI 9)");
	for (size_t i = 0; i < 7; i++)
		ok(errs[i] == EPERM, "%s fails with EPERM (errno %d)", calls[i], errs[i]);
	ok(errs[7] == EPERM, "socket(AF_UNIX) fails with EPERM below Landlock ABI 9");
	ok(errs[8] == 0 && errs[9] == 0, "ordinary calls (fcntl F_GETFD, getpid) still work");

	ok(run(false, errs) == 0, "the filter loads in a child (Landlock ABI >= 9)");
	ok(errs[0] == EPERM && errs[6] == EPERM, "io_setup and AF_INET stay denied");
	ok(errs[7] == 0, "socket(AF_UNIX) is allowed once Landlock confines pathname connects");
	return tap_done();
}
