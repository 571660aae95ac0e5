/*
 * seccomp.h - the run's system-call filter: built once per worker, loaded last before execve.
 */
#ifndef CODEBOX_SECCOMP_H
#define CODEBOX_SECCOMP_H

#include "core/isolation.h"

#include <linux/filter.h>
#include <stdbool.h>

struct seccomp_filter {
	struct sock_fprog prog; /* owned; prog.filter is NULL when not built */
	bool denies_unix;       /* it also denies socket(AF_UNIX) */
};

/*
 * Builds the filter with libseccomp and exports it as classic BPF, so that loading it in the
 * forked child is one prctl() and no library call. deny_unix_socket also denies socket(AF_UNIX)
 * (for Landlock ABIs that cannot scope pathname sockets). Returns 0 or -1 (logged).
 */
int seccomp_build(struct seccomp_filter *f, bool deny_unix_socket);

/*
 * The seccomp layer's start-up probe: builds f (denying AF_UNIX sockets where the Landlock
 * in force in iso cannot confine them) and turns the layer on unless disabled or the build
 * failed, saying why it is off.
 */
void seccomp_probe(struct isolation *iso, bool disabled, struct seccomp_filter *f);

/*
 * After the start-up probe run: a filter built to allow AF_UNIX while Landlock was on is
 * rebuilt to deny it if the probe turned Landlock off. Returns 0 or -1 (logged).
 */
int seccomp_reconcile(const struct isolation *iso, struct seccomp_filter *f);

/* Loads the filter into the calling thread; requires no_new_privs. Async-signal-safe. */
int seccomp_apply(const struct seccomp_filter *f);

void seccomp_free(struct seccomp_filter *f);

#endif
