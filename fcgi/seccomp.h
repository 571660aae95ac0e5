/*
 * seccomp.h - the run's system-call filter: built once per worker, loaded last before execve.
 */
#ifndef CODEBOX_SECCOMP_H
#define CODEBOX_SECCOMP_H

#include <linux/filter.h>
#include <stdbool.h>

struct seccomp_filter {
	struct sock_fprog prog; /* owned; prog.filter is NULL when not built */
};

/*
 * Builds the filter with libseccomp and exports it as classic BPF, so that loading it in the
 * forked child is one prctl() and no library call. deny_unix_socket also denies socket(AF_UNIX)
 * (for Landlock ABIs that cannot scope pathname sockets). Returns 0 or -1 (logged).
 */
int seccomp_build(struct seccomp_filter *f, bool deny_unix_socket);

/* Loads the filter into the calling thread; requires no_new_privs. Async-signal-safe. */
int seccomp_apply(const struct seccomp_filter *f);

void seccomp_free(struct seccomp_filter *f);

#endif
