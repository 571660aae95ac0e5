/*
 * util.h - small helpers shared by several modules.
 */
#ifndef CODEBOX_UTIL_H
#define CODEBOX_UTIL_H

#include <stddef.h>

/* write(2) until all n bytes are out, retrying on EINTR. Returns 0, or -1 with errno set.
 * Async-signal-safe (the sandbox's children use it between fork and execve). */
int util_write_all(int fd, const void *buf, size_t n);

/* Closes every fd from 3 up but the n in keep (those < 0 are ignored); async-signal-safe. */
int util_close_fds_except(const int *keep, int n);

/* Writes text into the existing file dir/file (a cgroup or /proc control file) in one
 * write, as the kernel wants. Returns 0, or -1 with errno set. */
int util_write_file(const char *dir, const char *file, const char *text);

/*
 * A failure carried from its site to the one place that logs it (the rule: a function that
 * takes a struct fault does not log its failure, its caller at the top does, once). err is
 * errno as it was at the site, before any clean-up could change it.
 */
struct fault {
	char what[320]; /* what failed, e.g. "mkdir(/runs/w0/run-...)" */
	int err;        /* errno at the site; 0 when none applies */
};

/* Records err and the formatted description in f (which may be NULL). */
void util_fault(struct fault *f, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "what: strerror(err)" (or just what) into buf. Returns buf. */
const char *util_fault_string(const struct fault *f, char *buf, size_t len);

#endif
