/*
 * warm.h - warm interpreters, as the pool's own processes see them: the supervisor starts and
 * renews the zygote (a program image of its own: zygote.c), and a worker has a template of the
 * zygote's clone the init of its next run (template.c). Every sandbox step is still taken in C
 * before any of the run's code.
 */
#ifndef CODEBOX_WARM_H
#define CODEBOX_WARM_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "warm/warmsettings.h"

/*
 * Reads the CODEBOX_WARM* variables into s. Returns 0, or -1 with the reason in why
 * (a malformed value: start-up refuses it).
 */
int warm_parse_settings(struct warm_settings *s, char *why, size_t why_len);

struct seccomp_filter;
struct pollfd;

/*
 * Supervisor, before the first worker: makes the tiers' sockets and execs the zygote with s,
 * the interpreter python, the runs' seccomp filter f (NULL: none) and the sandbox's /etc
 * (etc_fd, kept open by the caller), and codebox-init (init_fd, a sealed memfd this keeps,
 * or -1: runs start with two copies); waits (bounded) until it is ready. Returns 0, or -1 (logged;
 * runs are cold).
 */
int warm_pool_start(const struct warm_settings *s, const char *python,
                    const struct seccomp_filter *f, int etc_fd, int init_fd);

/* Supervisor: appends to pfd (room for 2) what warm_pool_check() needs to hear. */
void warm_pool_poll_fds(struct pollfd *pfd, int *n);

/*
 * Supervisor, after every wake-up (at least once a second): a zygote's ready report, its
 * successor when its life is up, a replacement for one that died. Never blocks.
 */
void warm_pool_check(void);

/* Supervisor: pid was reaped with status; returns whether it was a zygote (logged). */
bool warm_pool_reaped(pid_t pid, int status);

/* Supervisor: kills the zygotes (at shutdown); the caller reaps them. */
void warm_pool_stop(void);

/* Worker, first thing after its fork: closes the supervisor's ends of the zygote's sockets. */
void warm_worker_init(void);

/* Worker: whether a zygote serves warm runs now. */
bool warm_serving(void);

/* Whether the serving zygote's templates start runs with one copy of the interpreter
 * (codebox-init exec'd: sandbox.h), not two. */
bool warm_one_copy(void);

/*
 * Worker: whether code needs the heavy tier: it names one of the heavy tier's modules as a
 * word (a guess from the text alone: a wrong one costs speed, never correctness, since a
 * module the template lacks is imported as in a cold run). False when there is one tier.
 */
bool warm_wants_heavy(const char *code, size_t len);

struct run_config;

/*
 * Worker: has a template of the tier (heavy or light) clone a run's init for workdir under
 * run (its settings sent whole; session_fd >= 0: a session's listening socket, else -1), with
 * the child's ends of its pipes (stdout, stderr, error, control, report). The init
 * is not this process's child: it is watched and killed through the pidfd returned in *pidfd,
 * and reaped by the kernel, waiting for the answer until deadline (util_now_ms()). Returns its
 * pid, with the template's address-space size in *as_base_bytes, or -1 with the reason in why
 * (the caller then tries the light tier, or runs cold; a tier that could not be sent the
 * request or did not answer is not asked again for a second). A tier the zygote says does not
 * serve now is not asked at all.
 */
pid_t warm_box_clone(const struct run_config *run, bool heavy, int session_fd, const char *workdir,
                     unsigned long long disk_bytes, const int fds[5], long long deadline,
                     unsigned long long *as_base_bytes, int *pidfd, char *why, size_t why_len);

#endif
