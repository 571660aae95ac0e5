/*
 * util.h - small helpers shared by several modules.
 */
#ifndef CODEBOX_UTIL_H
#define CODEBOX_UTIL_H

#include <stddef.h>

/* write(2) until all n bytes are out, retrying on EINTR. Returns 0, or -1 with errno set.
 * Async-signal-safe (the sandbox's children use it between fork and execve). */
int util_write_all(int fd, const void *buf, size_t n);

/* Writes text into the existing file dir/file (a cgroup or /proc control file) in one
 * write, as the kernel wants. Returns 0, or -1 with errno set. */
int util_write_file(const char *dir, const char *file, const char *text);

#endif
