/*
 * util.c - helpers shared by several modules.
 */
#include "util.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int
util_write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int
util_write_file(const char *dir, const char *file, const char *text)
{
	char path[700];
	size_t n = strlen(text);
	int fd, rc;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, file) >= sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	rc = write(fd, text, n) == (ssize_t)n ? 0 : -1;
	close(fd);
	return rc;
}

void
util_fault(struct fault *f, int err, const char *fmt, ...)
{
	va_list ap;

	if (f == NULL)
		return;
	f->err = err;
	va_start(ap, fmt);
	vsnprintf(f->what, sizeof(f->what), fmt, ap);
	va_end(ap);
}

const char *
util_fault_string(const struct fault *f, char *buf, size_t len)
{
	if (f->err != 0)
		snprintf(buf, len, "%s: %s", f->what, strerror(f->err));
	else
		snprintf(buf, len, "%s", f->what);
	return buf;
}

int
util_close_fds_except(const int *keep, int n)
{
	unsigned from = 3;

	for (;;) {
		unsigned next = ~0u; /* the smallest kept fd >= from */
		for (int i = 0; i < n; i++)
			if (keep[i] >= 0 && (unsigned)keep[i] >= from && (unsigned)keep[i] < next)
				next = (unsigned)keep[i];
		if (next == ~0u)
			return (int)syscall(SYS_close_range, from, ~0u, 0u);
		if (next > from && syscall(SYS_close_range, from, next - 1, 0u) < 0)
			return -1;
		from = next + 1;
	}
}
