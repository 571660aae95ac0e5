/* Unit tests for util.c: the bounded reader of small files. */
#include "core/util.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[] = "/tmp/codebox-test-util-XXXXXX";

static void
put(const char *name, const char *text)
{
	char path[128];

	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (f != NULL) {
		fputs(text, f);
		fclose(f);
	}
}

static void
rm(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	(void)unlink(path);
}

/* The lowest free fd: a reader that leaks one moves it. */
static int
lowest_free_fd(void)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	close(fd);
	return fd;
}

static void
on_alarm(int sig)
{
	(void)sig;
}

int
main(void)
{
	char path[128], buf[16], big[4096];
	int free_fd;
	ssize_t n;

	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	free_fd = lowest_free_fd();

	put("short", "42 abc\n");
	snprintf(path, sizeof(path), "%s/short", dir);
	memset(buf, 'x', sizeof(buf));
	n = util_read_small(path, buf, sizeof(buf));
	ok(n == 7, "a short file's length is returned (%zd)", n);
	is_str(buf, "42 abc\n", "its bytes are read, NUL-terminated");

	put("long", "0123456789abcdefghijklmnopqrstuvwxyz");
	snprintf(path, sizeof(path), "%s/long", dir);
	n = util_read_small(path, buf, sizeof(buf));
	ok(n == (ssize_t)sizeof(buf) - 1, "a longer file is cut at size - 1 bytes (%zd)", n);
	is_str(buf, "0123456789abcde", "what fits is there, NUL-terminated");

	put("empty", "");
	snprintf(path, sizeof(path), "%s/empty", dir);
	strcpy(buf, "stale");
	n = util_read_small(path, buf, sizeof(buf));
	ok(n == 0 && buf[0] == '\0', "an empty file reads as 0 bytes and \"\"");

	snprintf(path, sizeof(path), "%s/missing", dir);
	strcpy(buf, "stale");
	errno = 0;
	n = util_read_small(path, buf, sizeof(buf));
	ok(n == -1 && errno == ENOENT, "a missing file is -1 with ENOENT");
	ok(buf[0] == '\0', "and leaves the buffer \"\"");

	errno = 0;
	ok(util_read_small(path, buf, 0) == -1 && errno == EINVAL, "a buffer of 0 bytes is EINVAL");

	strcpy(buf, "stale");
	errno = 0;
	n = util_read_small(dir, buf, sizeof(buf));
	ok(n == -1 && errno == EISDIR && buf[0] == '\0', "a directory is -1 with EISDIR and \"\"");

	n = util_read_small("/proc/self/stat", big, sizeof(big));
	ok(n > 0 && (size_t)n == strlen(big) && strchr(big, ')') != NULL,
	   "a /proc file reads whole (%zd bytes)", n);

	ok(lowest_free_fd() == free_fd, "no fd is left open");

	/* a writer that writes in two pieces, with a signal (no SA_RESTART) between them */
	snprintf(path, sizeof(path), "%s/fifo", dir);
	if (mkfifo(path, 0600) == 0) {
		struct sigaction sa = {.sa_handler = on_alarm};
		struct itimerval it = {.it_value = {0, 50 * 1000}};
		int status;
		pid_t pid = fork();

		if (pid == 0) {
			int fd = open(path, O_WRONLY);
			if (fd < 0 || write(fd, "one ", 4) != 4)
				_exit(1);
			usleep(200 * 1000);
			_exit(write(fd, "two", 3) == 3 ? 0 : 1);
		}
		sigemptyset(&sa.sa_mask);
		sigaction(SIGALRM, &sa, NULL);
		setitimer(ITIMER_REAL, &it, NULL);
		n = util_read_small(path, buf, sizeof(buf));
		waitpid(pid, &status, 0);
		ok(n == 7, "a file written in pieces is read to its end (%zd)", n);
		is_str(buf, "one two", "through a signal between the pieces (EINTR)");
		rm("fifo");
	} else {
		ok(0, "mkfifo(%s): %s", path, strerror(errno));
	}

	rm("short");
	rm("long");
	rm("empty");
	(void)rmdir(dir);
	return tap_done();
}
