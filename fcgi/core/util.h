/*
 * util.h - small helpers shared by several modules.
 */
#ifndef CODEBOX_UTIL_H
#define CODEBOX_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* write(2) until all n bytes are out, retrying on EINTR. Returns 0, or -1 with errno set.
 * Async-signal-safe (the sandbox's children use it between fork and execve). */
int util_write_all(int fd, const void *buf, size_t n);

/* Closes *fd if it is open, and leaves it -1. */
void util_close_fd(int *fd);

/* Closes every fd from 3 up but the n in keep (those < 0 are ignored); async-signal-safe. */
int util_close_fds_except(const int *keep, int n);

/*
 * A sealed memfd named name holding the regular file open at src (at most max bytes): a copy
 * of a program that no change to the file reaches. exec: ask for an executable memfd
 * (MFD_EXEC, where the kernel has it). Returns the fd (close-on-exec), or -1 with errno;
 * src stays open.
 */
int util_sealed_copy(int src, const char *name, long long max, bool exec);

/*
 * Reads the small file at path (a /proc or sysfs file, a cgroup's control file) into buf: at
 * most size - 1 bytes, in as many reads as it takes (EINTR retried), through a close-on-exec fd
 * closed before it returns; buf is NUL-terminated whatever happens. Returns the length read (0:
 * an empty file), or -1 with errno set. A file longer than size - 1 is cut there. Async-signal-
 * safe (a run's init reads /proc with it).
 */
ssize_t util_read_small(const char *path, char *buf, size_t size);

/* Reads fd from its offset into buf until EOF, an error or max bytes (EINTR retried). Returns
 * the length read, or -1 with errno set when an error came before any byte. */
ssize_t util_read_max(int fd, char *buf, size_t max);

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

/*
 * Memory shared by the pool's own processes (the supervisor and its workers): admission,
 * metrics, the audit trail's totals. A MAP_SHARED mapping of len bytes (zeroed): anonymous,
 * or with name a memfd of that name (so /proc/PID/maps names it; no fd is kept), recorded so
 * that util_unmap_shared() can take every one of them out of a process that becomes part of a
 * run. Returns NULL with errno set.
 */
void *util_map_shared(const char *name, size_t len);

/* Forgets (and unmaps) one mapping util_map_shared() made. */
void util_unmap_shared_one(void *p);

/* Unmaps every mapping util_map_shared() made, in this process only: a run's first process
 * calls it before anything else, so no page of the pool's is mapped in any run.
 * Async-signal-safe. */
void util_unmap_shared(void);

/* Milliseconds on CLOCK_MONOTONIC. */
long long util_now_ms(void);

/* Waits until fd is readable, at most ms. Returns 1, 0 on timeout, -1 on error. */
int util_wait_readable(int fd, long long ms);

/*
 * Sends one message of len bytes with the fds among fds[0..n) that are >= 0 (at most 8) as
 * SCM_RIGHTS; flags are added to MSG_NOSIGNAL (MSG_DONTWAIT: EAGAIN when full). Returns 0,
 * or -1 with errno set.
 */
int util_send_fds(int sock, const void *buf, size_t len, const int *fds, int n, int flags);

/*
 * Receives one message of exactly len bytes with up to max fds (close-on-exec; more are
 * closed). Returns the number of fds, or -1 with errno set (EPIPE at EOF, EPROTO for a
 * message of another size), with no fd left open.
 */
int util_recv_fds(int sock, void *buf, size_t len, int *fds, int max, int flags);

#endif
