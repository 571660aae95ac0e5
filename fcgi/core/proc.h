/*
 * proc.h - killing and reaping processes: the one place that sends SIGKILL.
 */
#ifndef CODEBOX_PROC_H
#define CODEBOX_PROC_H

#include <stdbool.h>
#include <sys/resource.h>
#include <sys/types.h>

/* kill(target, sig) that treats ESRCH (already gone) as success and logs anything else. */
int proc_kill(pid_t target, int sig, const char *what);

/*
 * Kills every descendant of this process: the process group pgid first, then, round after
 * round, every direct child (orphans of a run are reparented here because the caller is a
 * child subreaper), reaping as it goes, until this process has no child left or deadline_ms
 * (CLOCK_MONOTONIC) passes. If main_pid is reaped on the way, its wait status and rusage are
 * stored and *main_reaped set. Returns 0 when no child is left, -1 otherwise.
 */
int proc_kill_all_children(pid_t pgid, pid_t main_pid, bool *main_reaped, int *main_status,
                           struct rusage *main_ru, long long deadline_ms);

/* Reads up to max pids of pid's children (its main thread's; 0: this thread's), one bounded
 * read. Returns the count, or -1 when the kernel has no /proc/<pid>/task/<tid>/children
 * (CONFIG_PROC_CHILDREN). */
int proc_children_of(pid_t pid, pid_t *pids, int max);

#endif
